"""ApiServerIO (the scheduler cache's binder/evictor/status updater) against the real API server."""
from __future__ import annotations

import pytest

from cluster_state.client import ApiClient
from ha.runtime.scheduler_io import ApiServerIO, SchedulerIOError
from ha.scheduler.api import TaskInfo
from ha.scheduler.interfaces import Binder, Evictor, IOError_, PodGetter, StatusUpdater

NS = "default"


def make_pod(name, ns=NS, **ann):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns,
                         "annotations": {"scheduling.k8s.io/group-name": "pg1", **ann}},
            "spec": {"schedulerName": "volcano", "nodeName": "",
                     "containers": [{"name": "c", "resources": {"requests": {"cpu": "1",
                                                                             "memory": "1Gi"}}}]},
            "status": {"phase": "Pending"}}


def make_pg(name, ns=NS):
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"minMember": 2, "queue": "default"},
            "status": {"phase": "Pending"}}


@pytest.fixture
def api(redis_url, key_prefix):
    c = ApiClient.from_url(redis_url, prefix=key_prefix)
    yield c
    c.close()


def task_for(api, name, node):
    t = TaskInfo(api.get("Pod", name, NS))
    t.node_name = node
    return t


def test_implements_the_protocols(api):
    io = ApiServerIO(api)
    for proto in (Binder, Evictor, StatusUpdater, PodGetter):
        assert isinstance(io, proto)


def test_bind_batch_returns_conflicts_instead_of_raising(api):
    for n in ("a", "b", "c", "d", "e"):
        api.create(make_pod(n))
    seen = []
    io = ApiServerIO(api, on_result=lambda op, key, d: seen.append((op, key, d["ok"])))
    assert io.bind([task_for(api, "a", "n1"), task_for(api, "b", "n2")]) == {}
    assert api.get("Pod", "a", NS)["spec"]["nodeName"] == "n1"
    assert api.get("Pod", "b", NS)["spec"]["nodeName"] == "n2"
    cond = [c for c in api.get("Pod", "a", NS)["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert cond and cond[0]["status"] == "True"

    again = task_for(api, "a", "n3")                  # already bound -> 409
    stale = task_for(api, "c", "n1")
    api.delete("Pod", "c", NS, grace_period_seconds=0)
    api.create(make_pod("c"))                         # same name, new uid -> precondition fails
    deleting = task_for(api, "d", "n1")
    api.delete("Pod", "d", NS, grace_period_seconds=30)   # being deleted -> 409
    ok = task_for(api, "e", "n2")
    missing = task_for(api, "e", "n2")
    missing.name, missing.uid = "nope", "uid-nope"
    errs = io.bind([again, stale, deleting, ok, missing])
    assert set(errs) == {again.uid, stale.uid, deleting.uid, "uid-nope"}
    assert "409" in errs[again.uid] and "already assigned" in errs[again.uid]
    assert "409" in errs[stale.uid] and "uid" in errs[stale.uid]
    assert "409" in errs[deleting.uid] and "being deleted" in errs[deleting.uid]
    assert "404" in errs["uid-nope"]
    assert api.get("Pod", "e", NS)["spec"]["nodeName"] == "n2"
    assert api.get("Pod", "a", NS)["spec"]["nodeName"] == "n1"
    assert api.get("Pod", "c", NS)["spec"].get("nodeName", "") == ""
    assert io.stats["binds"] == 3 and io.stats["bind_conflicts"] == 3 and io.stats["bind_errors"] == 1
    assert ("bind", "default/e", True) in seen and ("bind", "default/a", False) in seen


def test_evict_writes_conditions_then_deletes_gracefully(api):
    api.create(make_pod("v"))
    io = ApiServerIO(api)
    pod = api.get("Pod", "v", NS)
    io.evict(pod, "preempt")
    live = api.get("Pod", "v", NS)
    assert live["metadata"].get("deletionTimestamp") is not None      # grace period running
    conds = {c["type"]: c for c in live["status"]["conditions"]}
    assert conds["Ready"]["status"] == "False" and conds["Ready"]["reason"] == "Evict"
    assert "preempt" in conds["Ready"]["message"]
    assert conds["DisruptionTarget"]["status"] == "True"
    assert conds["DisruptionTarget"]["reason"] == "PreemptionByScheduler"
    assert io.stats["evictions"] == 1


def test_evict_with_stale_cache_raises_conflict_and_touches_nothing(api):
    api.create(make_pod("v"))
    io = ApiServerIO(api)
    stale = api.get("Pod", "v", NS)
    api.patch_annotations("Pod", "v", NS, {"moved": "on"})
    with pytest.raises(IOError_) as ei:
        io.evict(stale, "reclaim")
    assert isinstance(ei.value, SchedulerIOError) and ei.value.code == 409
    live = api.get("Pod", "v", NS)
    assert live["metadata"].get("deletionTimestamp") is None
    assert not any(c["type"] == "DisruptionTarget" for c in live["status"].get("conditions") or [])
    assert io.stats["evict_errors"] == 1


def test_update_pod_status_nominated_node_and_conflict(api):
    api.create(make_pod("p"))
    io = ApiServerIO(api)
    pod = api.get("Pod", "p", NS)
    pod["status"] = dict(pod["status"], nominatedNodeName="n7")
    out = io.update_pod_status(pod)
    assert out["status"]["nominatedNodeName"] == "n7"
    assert api.get("Pod", "p", NS)["status"]["nominatedNodeName"] == "n7"
    pod["status"]["nominatedNodeName"] = "n8"          # pod still carries the old RV
    with pytest.raises(IOError_, match="409"):
        io.update_pod_status(pod)
    assert api.get("Pod", "p", NS)["status"]["nominatedNodeName"] == "n7"
    assert io.stats["status_writes"] == 1 and io.stats["status_conflicts"] == 1


def test_update_pod_group_and_annotations_and_get(api):
    api.create(make_pg("pg1"))
    api.create(make_pod("p"))
    io = ApiServerIO(api)
    pg = api.get("PodGroup", "pg1", NS)
    pg["status"] = {"phase": "Inqueue", "conditions": []}
    pg["metadata"]["annotations"] = {"volcano.sh/allocated-hyper-node": "s1"}
    out = io.update_pod_group(pg)
    live = api.get("PodGroup", "pg1", NS)
    assert live["status"]["phase"] == "Inqueue" and out["status"]["phase"] == "Inqueue"
    assert live["metadata"]["annotations"]["volcano.sh/allocated-hyper-node"] == "s1"
    assert out["metadata"]["resourceVersion"] == live["metadata"]["resourceVersion"]

    io.patch_pod_annotations(NS, "p", {"volcano.sh/pipelined-node": "n1"})
    assert api.get("Pod", "p", NS)["metadata"]["annotations"]["volcano.sh/pipelined-node"] == "n1"
    io.patch_pod_annotations(NS, "p", {"volcano.sh/pipelined-node": None})
    assert "volcano.sh/pipelined-node" not in api.get("Pod", "p", NS)["metadata"]["annotations"]
    with pytest.raises(IOError_, match="404"):
        io.patch_pod_annotations(NS, "absent", {"a": "b"})
    assert io.get_pod(NS, "p")["metadata"]["name"] == "p"
    assert io.get_pod(NS, "absent") is None


def test_scheduler_cache_binds_through_the_api_server(api):
    from ha.scheduler.cache import SchedulerCache
    api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
                "spec": {"unschedulable": False},
                "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                           "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"}}})
    api.create(make_pg("pg1"))
    api.create(make_pod("p"))
    io = ApiServerIO(api)
    cache = SchedulerCache(binder=io, evictor=io, status_updater=io)
    cache.add_node(api.get("Node", "n1"))
    cache.add_pod_group(api.get("PodGroup", "pg1", NS))
    cache.add_pod(api.get("Pod", "p", NS))
    job = cache.jobs["default/pg1"]
    task = next(iter(job.tasks.values()))
    task = task.clone() if hasattr(task, "clone") else task
    task.node_name = "n1"
    cache.add_bind_task(task)
    assert api.get("Pod", "p", NS)["spec"]["nodeName"] == "n1"
    assert io.stats["binds"] == 1
