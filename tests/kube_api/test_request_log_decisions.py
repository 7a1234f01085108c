"""The request log of a write carries what a scheduler's decisions are read from
(ha/runtime/external/observe/request_log.py): the written pod's uid, resourceVersion, node,
nomination and conditions. Driven with the official ``kubernetes`` client in Volcano's order: a
nomination (status write), a bind, the evictor's DisruptionTarget status write, then the DELETE."""
from __future__ import annotations

import pytest

kubernetes = pytest.importorskip("kubernetes")
from kubernetes import client as k  # noqa: E402

from ha.runtime.external.observe.request_log import DecisionExtractor  # noqa: E402

NS = "default"


def _volcano_pod(v1, name: str):
    return v1.create_namespaced_pod(NS, k.V1Pod(
        metadata=k.V1ObjectMeta(name=name),
        spec=k.V1PodSpec(scheduler_name="volcano", containers=[k.V1Container(name="main", image="busybox")])))


def test_pod_writes_log_what_decisions_need(kube_front):
    api = kube_front.kubernetes_client()
    try:
        v1 = k.CoreV1Api(api)
        pod = _volcano_pod(v1, "p1")
        uid = pod.metadata.uid
        ep = kube_front.endpoint
        start = len(ep.requests)
        # 1. the nomination of a Pipelined task
        pod.status.nominated_node_name = "n2"
        pod.status.conditions = [k.V1PodCondition(type="PodScheduled", status="False", reason="Unschedulable")]
        pod = v1.replace_namespaced_pod_status("p1", NS, pod)
        # 2. the bind
        v1.create_namespaced_pod_binding("p1", NS, k.V1Binding(
            metadata=k.V1ObjectMeta(name="p1", uid=uid), target=k.V1ObjectReference(kind="Node", name="n2")),
            _preload_content=False)
        # 3. the evictor: DisruptionTarget, then DELETE
        pod = v1.read_namespaced_pod("p1", NS)
        pod.status.conditions = (pod.status.conditions or []) + [
            k.V1PodCondition(type="DisruptionTarget", status="True", reason="PreemptionByScheduler")]
        pod = v1.replace_namespaced_pod_status("p1", NS, pod)
        stored = kube_front.api.get("Pod", "p1", NS)
        v1.delete_namespaced_pod("p1", NS)
        recs = ep.requests[start:]
    finally:
        api.close()
    writes = [r for r in recs if r["verb"] in ("update", "create", "delete")]
    assert [(r["verb"], r["subresource"]) for r in writes] == [("update", "status"), ("create", "binding"),
                                                              ("update", "status"), ("delete", None)]
    nom, bind, disrupt, delete = writes
    assert nom["uid"] == bind["uid"] == disrupt["uid"] == delete["uid"] == uid
    assert nom["nominatedNodeName"] == "n2" and nom["nodeName"] == ""
    assert nom["conditions"] == {"PodScheduled": "False/Unschedulable"}
    assert bind["node"] == bind["nodeName"] == "n2"
    assert disrupt["conditions"]["DisruptionTarget"] == "True/PreemptionByScheduler"
    assert int(disrupt["rv"]) == stored["metadata"]["resourceVersion"]
    assert delete["nodeName"] == "n2" and int(delete["rv"]) > int(disrupt["rv"])
    assert int(nom["rv"]) < int(bind["rv"]) < int(disrupt["rv"])
    ds = DecisionExtractor("observer").feed(recs)
    assert [(d["op"], d["node"], d["uid"], d["ok"]) for d in ds] == [
        ("pipeline", "n2", uid, True), ("bind", "n2", uid, True), ("evict", "n2", uid, True)]
    assert ds[2]["reason"] == "PreemptionByScheduler"


def test_a_refused_status_write_logs_the_nomination_it_asked_for(kube_front):
    """A status write on a stale copy of the pod is refused with 409 and stores nothing; the
    request log still says which nomination it asked for, so the session's pipeline decision is
    read from it (a ``pipeline`` decision followed by the failed ``status``)."""
    api = kube_front.kubernetes_client()
    try:
        v1 = k.CoreV1Api(api)
        stale = _volcano_pod(v1, "p2")
        fresh = v1.read_namespaced_pod("p2", NS)
        fresh.metadata.labels = {"touched": "yes"}
        v1.replace_namespaced_pod("p2", NS, fresh)       # the copy the scheduler holds is now stale
        ep = kube_front.endpoint
        start = len(ep.requests)
        stale.status.nominated_node_name = "n3"
        with pytest.raises(k.rest.ApiException) as e:
            v1.replace_namespaced_pod_status("p2", NS, stale)
        recs = ep.requests[start:]
    finally:
        api.close()
    assert e.value.status == 409
    (w,) = [r for r in recs if r["verb"] == "update"]
    assert w["code"] == 409 and w["sentNominatedNodeName"] == "n3" and "nominatedNodeName" not in w
    assert kube_front.api.get("Pod", "p2", NS)["status"].get("nominatedNodeName") in (None, "")
    ds = DecisionExtractor("observer").feed(recs)
    assert [(d["op"], d["node"], d["ok"]) for d in ds] == [("pipeline", "n3", True), ("status", None, False)]
