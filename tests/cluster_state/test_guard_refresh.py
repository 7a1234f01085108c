"""S6 (docs/volcano-semantics.md): under PR #5045's informer guard the cache ignores every update of a
Pipelined task's pod without nodeName, so its pod copy stays at the resourceVersion it had before
the instance's own nomination write — and every later write built from that copy (a condition,
clearing the nomination) fails with 409 against the real API server. The switch
``refresh_guarded_pod`` (profile ``pr5045-s6fixed``) lets the copy follow the informer while the
cache keeps its status, node and reservation."""
from __future__ import annotations

import pytest

from cluster_state.client import ApiClient
from ha.runtime.scheduler_io import ApiServerIO, SchedulerIOError
from ha.scheduler.api import TaskStatus
from ha.scheduler.cache import SchedulerCache
from ha.scheduler.profiles import profile
from tests.scheduler.cachekit import make_node, make_pod, make_pod_group, make_queue


def _fresh(obj: dict) -> dict:
    md = obj["metadata"]
    md.pop("uid", None)
    md.pop("resourceVersion", None)
    return obj


@pytest.fixture
def api(redis_url, key_prefix):
    c = ApiClient.from_url(redis_url, prefix=key_prefix)
    yield c
    c.close()


def _pipelined(api, switches):
    """A cache fed from the API server whose task ns/p1 it pipelined on n1 (the nomination
    written through ApiServerIO); then the informer's update carrying that nomination."""
    for obj in (make_node("n1"), make_queue("default"), make_pod_group("g1", min_member=1),
                make_pod("p1", group="g1")):
        api.create(_fresh(obj))
    io = ApiServerIO(api)
    cache = SchedulerCache(switches, binder=io, evictor=io, status_updater=io)
    cache.add_node(api.get("Node", "n1"))
    cache.add_queue(api.get("Queue", "default"))
    cache.add_pod_group(api.get("PodGroup", "g1", "ns"))
    listed = api.get("Pod", "p1", "ns")
    cache.add_pod(listed)
    job = cache.jobs["ns/g1"]
    task = next(iter(job.tasks.values()))
    cache.pipeline(task.clone(), "n1")
    nominated = api.get("Pod", "p1", "ns")
    assert nominated["status"]["nominatedNodeName"] == "n1"
    cache.update_pod(listed, nominated)          # the informer delivers the nomination
    return cache, job.tasks[task.uid], nominated, io


def test_without_the_fix_the_guarded_copy_goes_stale_and_writes_conflict(api):
    cache, task, nominated, io = _pipelined(api, profile("pr5045-s4fixed"))
    assert task.status == TaskStatus.PIPELINED and task.pod is not nominated
    assert cache.stats["ignored_updates"] == 1 and cache.stats["refreshed_pods"] == 0
    with pytest.raises(SchedulerIOError):
        cache.task_unschedulable(task, "Unschedulable", "0/1 nodes are available")
    assert io.stats["status_errors"] == 1


def test_with_the_fix_the_copy_follows_and_the_reservation_stays(api):
    cache, task, nominated, io = _pipelined(api, profile("pr5045-s6fixed"))
    assert task.pod is nominated and cache.stats["refreshed_pods"] == 1
    assert (task.status, task.node_name, task.nominated_node_name) == (TaskStatus.PIPELINED, "n1", "n1")
    node = cache.nodes["n1"]
    assert node.tasks["ns/p1"].pod is nominated
    assert node.pipelined.milli_cpu == 1000 and node.idle.milli_cpu == 4000   # reserved, not used
    assert cache.task_unschedulable(task, "Unschedulable", "0/1 nodes are available")
    assert io.stats["status_errors"] == 0 and io.stats["status_writes"] == 2
    cond = api.get("Pod", "p1", "ns")["status"]["conditions"]
    assert [c["reason"] for c in cond if c["type"] == "PodScheduled"] == ["Unschedulable"]
