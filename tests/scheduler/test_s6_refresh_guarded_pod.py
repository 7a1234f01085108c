"""The S6 fix (switch ``refresh_guarded_pod``, profile ``pr5045-s6fixed``; docs/volcano-semantics.md S6):
an update the informer guard ignores still replaces the task's pod copy, on the job and on the
node, while status, node and reservation stay the cache's. Without it the copy stays at what the
pod was before the guard began ignoring it (tests/cluster_state/test_guard_refresh.py shows the
409s that follows against the real API server)."""
from __future__ import annotations

import copy

import pytest

from ha.scheduler.api import TaskStatus
from ha.scheduler.cache import SchedulerCache
from ha.scheduler.interfaces import RecordingIO
from ha.scheduler.profiles import profile

from .cachekit import make_node, make_pod, make_pod_group, make_queue

S = TaskStatus


def _cache(switches) -> tuple[SchedulerCache, RecordingIO]:
    io = RecordingIO()
    c = SchedulerCache(switches, binder=io, evictor=io, status_updater=io, bind_mode="queued")
    c.add_queue(make_queue("default"))
    c.add_node(make_node("n1"))
    c.add_pod_group(make_pod_group("g1", min_member=1))
    return c, io


def _update(c, old: dict, **status) -> dict:
    new = copy.deepcopy(old)
    new["metadata"]["resourceVersion"] += 1
    new["status"].update(status)
    c.update_pod(old, new)
    return new


@pytest.mark.parametrize("name,refreshed", [("pr5045-s4fixed", False), ("pr5045-s6fixed", True)])
def test_a_pipelined_tasks_copy_follows_the_informer_only_with_the_fix(name, refreshed):
    c, _ = _cache(profile(name))
    listed = make_pod("p1", group="g1")
    c.add_pod(listed)
    task = c.jobs["ns/g1"].tasks["ns-p1"]
    c.pipeline(task.clone(), "n1")
    node = c.nodes["n1"]
    before = (task.status, task.node_name, task.nominated_node_name, node.pipelined.milli_cpu)
    assert before == (S.PIPELINED, "n1", "n1", 1000)
    nominated = _update(c, listed, nominatedNodeName="n1")
    latest = _update(c, nominated, conditions=[{"type": "PodScheduled", "status": "False"}])
    assert c.stats["ignored_updates"] == 2 and c.jobs["ns/g1"].tasks["ns-p1"] is task
    assert (task.pod is latest) is refreshed and (node.tasks["ns/p1"].pod is latest) is refreshed
    assert task.pod is (latest if refreshed else listed)
    assert c.stats["refreshed_pods"] == (2 if refreshed else 0)
    assert (task.status, task.node_name, task.nominated_node_name, node.pipelined.milli_cpu) == before


def test_a_binding_tasks_copy_follows_too():
    """The guard's other half (v1.14.0's own: allocated tasks, e.g. Binding while the bind is in
    flight) ignores the same updates; with the switch their copy follows as well."""
    c, _ = _cache(profile("v1.14", refresh_guarded_pod=True))
    listed = make_pod("p1", group="g1")
    c.add_pod(listed)
    task = c.jobs["ns/g1"].tasks["ns-p1"]
    bind = task.clone()
    bind.node_name = "n1"
    c.add_bind_task(bind)   # queued: Binding in the cache, the bind not yet sent
    assert task.status == S.BINDING and c.nodes["n1"].used.milli_cpu == 1000
    latest = _update(c, listed, conditions=[{"type": "PodScheduled", "status": "False"}])
    assert task.pod is latest and c.nodes["n1"].tasks["ns/p1"].pod is latest
    assert task.status == S.BINDING and c.nodes["n1"].used.milli_cpu == 1000
