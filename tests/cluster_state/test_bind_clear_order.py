"""AddBindTask's order of the nomination clear and the bind, against the real API server. PR #5045's
head clears the nomination with a synchronous write under the cache lock before queueing the bind,
so the bind worker (Volcano: processBindTask every 20 ms) can never write the bind first. The switch
``bind_before_nomination_clear`` brings back the order before: the bind is queued, the lock
released, then the clear is written — a bind worker that takes the bind meanwhile bumps the pod's
resourceVersion, the clear (built from the pod copy the bind outdated) gets a 409, and the bound pod
keeps its nomination until a resync.

The race is made deterministic: the bind worker (a thread of its own, as in the live engine) is let
go exactly when the clear is about to be written; the cache lock decides whether it can bind."""
from __future__ import annotations

import threading

import pytest

from cluster_state.client import ApiClient
from ha.runtime.scheduler_io import ApiServerIO
from ha.scheduler.cache import SchedulerCache
from ha.scheduler.profiles import profile
from tests.scheduler.cachekit import make_node, make_pod, make_pod_group, make_queue


@pytest.fixture
def api(redis_url, key_prefix):
    c = ApiClient.from_url(redis_url, prefix=key_prefix)
    yield c
    c.close()


class _BindWorkerRacesTheClear(ApiServerIO):
    """The real API server IO; a status write first starts the bind worker's tick in its own thread
    and gives it 0.5 s to take the lock and write what is queued."""
    cache: SchedulerCache
    worker: threading.Thread | None = None

    def update_pod_status(self, pod):
        if self.worker is None:
            self.worker = threading.Thread(target=self.cache.process_bind_task, name="bind-worker")
            self.worker.start()
            self.worker.join(0.5)
        return super().update_pod_status(pod)


def _fresh(obj: dict) -> dict:
    obj["metadata"].pop("uid", None)
    obj["metadata"].pop("resourceVersion", None)
    return obj


@pytest.mark.parametrize("bind_first", [False, True])
def test_the_clear_conflicts_only_when_the_bind_is_queued_first(api, bind_first):
    for obj in (make_node("n1"), make_queue("default"), make_pod_group("g1", min_member=1),
                make_pod("p1", group="g1")):
        api.create(_fresh(obj))
    setup = ApiServerIO(api)
    # pr5045-s6fixed: the pod copy follows the informer (S6's stale copy would 409 either way)
    switches = profile("pr5045-s6fixed", bind_before_nomination_clear=bind_first)
    cache = SchedulerCache(switches, binder=setup, evictor=setup, status_updater=setup, bind_mode="queued")
    cache.add_node(api.get("Node", "n1"))
    cache.add_queue(api.get("Queue", "default"))
    cache.add_pod_group(api.get("PodGroup", "g1", "ns"))
    listed = api.get("Pod", "p1", "ns")
    cache.add_pod(listed)
    task = next(iter(cache.jobs["ns/g1"].tasks.values()))
    cache.pipeline(task.clone(), "n1")                        # writes nominatedNodeName=n1
    nominated = api.get("Pod", "p1", "ns")
    cache.update_pod(listed, nominated)                       # the informer delivers it
    assert nominated["status"]["nominatedNodeName"] == "n1"

    io = _BindWorkerRacesTheClear(api)
    io.cache = cache
    cache.binder = cache.status_updater = io
    bind = cache.jobs["ns/g1"].tasks[task.uid].clone()
    bind.node_name = "n1"
    cache.add_bind_task(bind)
    io.worker.join(10)
    assert not io.worker.is_alive()
    live = api.get("Pod", "p1", "ns")
    assert io.stats["binds"] == 1 and live["spec"]["nodeName"] == "n1"
    if bind_first:
        # the worker bound while the clear was on its way: 409, the nomination stays, resync queued
        assert io.stats["status_conflicts"] == 1 and cache.stats["status_write_errors"] == 1
        assert live["status"]["nominatedNodeName"] == "n1"
        assert cache.err_tasks
    else:
        # the worker waited for the lock: the clear was written first, the bind after it
        assert io.stats["status_conflicts"] == 0 and io.stats["status_writes"] == 1
        assert live["status"].get("nominatedNodeName", "") == ""
        assert not cache.err_tasks
