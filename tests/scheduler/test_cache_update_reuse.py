"""SchedulerCache.update_pod reuses the previous task's parsed resource request only when the pod
asks for exactly the same resources; the result equals a task built from scratch."""
from __future__ import annotations

import copy

from ha.scheduler.api import TaskInfo
from ha.scheduler.cache import _same_request

from .fw_helpers import make_cache, node, pod, podgroup


def _task(cache, p):
    md = p["metadata"]
    return cache.jobs[f"{md['namespace']}/{md['annotations']['scheduling.k8s.io/group-name']}"].tasks[md["uid"]]


def test_update_with_same_containers_reuses_a_clone_of_the_request():
    old = pod("p1", "pg1", 500, node_name="n1", phase="Running")
    cache, _ = make_cache(nodes=[node("n1", 4000)], podgroups=[podgroup("pg1", 1)], pods=[old])
    before = _task(cache, old)
    new = copy.deepcopy(old)
    # a change the task reads (so it is rebuilt, not kept in place), containers unchanged
    new["metadata"]["annotations"]["volcano.sh/task-spec"] = "other-role"
    new["metadata"]["resourceVersion"] = 2
    assert _same_request(before, new) is not None
    cache.update_pod(old, new)
    after = _task(cache, new)
    assert after is not before and after.pod is new and after.task_role == "other-role"
    assert after.resreq is not before.resreq and after.resreq.milli_cpu == 500 == before.resreq.milli_cpu
    assert after.resreq is after.init_resreq            # as Volcano: one object at construction
    fresh = TaskInfo(new, cache.switches)
    assert (after.resreq.milli_cpu, after.resreq.memory, after.resreq.scalar_resources) == \
        (fresh.resreq.milli_cpu, fresh.resreq.memory, fresh.resreq.scalar_resources)
    assert cache.nodes["n1"].used.milli_cpu == 500


def test_update_with_changed_requests_parses_again():
    old = pod("p1", "pg1", 500, node_name="n1", phase="Running")
    cache, _ = make_cache(nodes=[node("n1", 4000)], podgroups=[podgroup("pg1", 1)], pods=[old])
    before = _task(cache, old)
    new = copy.deepcopy(old)
    new["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1500m"
    assert _same_request(before, new) is None
    new2 = copy.deepcopy(old)
    new2["spec"]["initContainers"] = [{"name": "init", "resources": {"requests": {"cpu": "3000m"}}}]
    assert _same_request(before, new2) is None
    cache.update_pod(old, new)
    assert _task(cache, new).resreq.milli_cpu == 1500
    assert cache.nodes["n1"].used.milli_cpu == 1500
