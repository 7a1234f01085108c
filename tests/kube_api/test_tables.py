"""kube_api.tables: the server-side Tables kubectl prints, as pure functions on Kubernetes JSON."""
from __future__ import annotations

import pytest

from kube_api.resources import lookup
from kube_api.status import KubeError
from kube_api.tables import human_duration, pod_status_reason, table

NOW = 1_800_000_000.0
PODS = lookup("", "v1", "pods")


def ts(ago: float) -> str:
    import time
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(NOW - ago))


@pytest.mark.parametrize("s, want", [
    (-5, "<invalid>"), (-1, "0s"), (0, "0s"), (5, "5s"), (119, "119s"), (120, "2m"), (182, "3m2s"),
    (600, "10m"), (179 * 60 + 59, "179m"), (3 * 3600, "3h"), (3 * 3600 + 120, "3h2m"), (8 * 3600, "8h"),
    (47 * 3600, "47h"), (48 * 3600, "2d"), (50 * 3600, "2d2h"), (8 * 86400, "8d"), (400 * 86400, "400d"),
    (730 * 86400, "2y"), (731 * 86400, "2y1d"), (9 * 365 * 86400, "9y"),
])
def test_human_duration(s, want):
    assert human_duration(s) == want


def pod(name="p1", **status):
    return {"kind": "Pod", "apiVersion": "v1",
            "metadata": {"name": name, "namespace": "default", "creationTimestamp": ts(182), "resourceVersion": "7"},
            "spec": {"containers": [{"name": "main"}], "nodeName": ""},
            "status": {"phase": "Pending", **status}}


def test_pod_table_columns_cells_and_partial_object_metadata():
    p = pod(nominatedNodeName="node-3")
    t = table(PODS, [p], list_meta={"resourceVersion": "9"}, now=NOW)
    assert t["kind"] == "Table" and t["apiVersion"] == "meta.k8s.io/v1"
    assert t["metadata"] == {"resourceVersion": "9"}
    assert [(c["name"], c["priority"]) for c in t["columnDefinitions"]] == [
        ("Name", 0), ("Ready", 0), ("Status", 0), ("Restarts", 0), ("Age", 0), ("IP", 1), ("Node", 1),
        ("Nominated Node", 1), ("Readiness Gates", 1)]
    row = t["rows"][0]
    assert row["cells"] == ["p1", "0/1", "Pending", "0", "3m2s", "<none>", "<none>", "node-3", "<none>"]
    assert row["object"] == {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                             "metadata": p["metadata"]}
    assert table(PODS, [p], list_meta=None, include_object="Object", now=NOW)["rows"][0]["object"] == p
    assert "object" not in table(PODS, [p], list_meta=None, include_object="None", now=NOW)["rows"][0]
    assert table(PODS, [p], list_meta=None, include_columns=False, now=NOW)["columnDefinitions"] is None
    with pytest.raises(KubeError) as e:
        table(PODS, [p], list_meta=None, include_object="All")
    assert e.value.code == 400


def test_pod_status_follows_the_printer():
    running = pod(phase="Running", podIPs=[{"ip": "10.0.0.5"}],
                  containerStatuses=[{"name": "main", "ready": True, "restartCount": 2,
                                      "state": {"running": {}},
                                      "lastState": {"terminated": {"finishedAt": ts(65)}}}])
    running["spec"]["nodeName"] = "node-1"
    row = table(PODS, [running], list_meta=None, now=NOW)["rows"][0]["cells"]
    assert row[:5] == ["p1", "1/1", "Running", "2 (65s ago)", "3m2s"] and row[5:7] == ["10.0.0.5", "node-1"]
    gated = pod(conditions=[{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}])
    assert pod_status_reason(gated)[0] == "SchedulingGated"
    evicted = pod(phase="Failed", reason="Evicted")
    assert pod_status_reason(evicted)[0] == "Evicted"
    assert table(PODS, [evicted], list_meta=None, now=NOW)["rows"][0]["conditions"][0]["reason"] == "Failed"
    waiting = pod(containerStatuses=[{"name": "main", "state": {"waiting": {"reason": "ContainerCreating"}}}])
    assert pod_status_reason(waiting)[0] == "ContainerCreating"
    crashed = pod(phase="Running", containerStatuses=[{"name": "main", "state": {"terminated": {"exitCode": 3}}}])
    assert pod_status_reason(crashed)[0] == "ExitCode:3"
    init = pod(initContainerStatuses=[{"name": "i", "state": {"waiting": {"reason": "PodInitializing"}}}])
    init["spec"]["initContainers"] = [{"name": "i"}]
    assert pod_status_reason(init)[0] == "Init:0/1"
    deleting = pod(phase="Running")
    deleting["metadata"]["deletionTimestamp"] = ts(-30)
    assert pod_status_reason(deleting)[0] == "Terminating"
    done = pod(phase="Succeeded")
    done["metadata"]["deletionTimestamp"] = ts(-30)
    assert pod_status_reason(done)[0] == "Succeeded"
    gates = pod(conditions=[{"type": "example.com/ok", "status": "True"}])
    gates["spec"]["readinessGates"] = [{"conditionType": "example.com/ok"}, {"conditionType": "example.com/no"}]
    assert table(PODS, [gates], list_meta=None, now=NOW)["rows"][0]["cells"][8] == "1/2"


def test_node_podgroup_queue_and_generic_tables():
    node = {"metadata": {"name": "n1", "creationTimestamp": ts(3 * 86400),
                         "labels": {"node-role.kubernetes.io/control-plane": "", "kubernetes.io/role": "gpu"}},
            "spec": {"unschedulable": True},
            "status": {"conditions": [{"type": "Ready", "status": "False"}], "nodeInfo": {"kubeletVersion": "v1.34.1"},
                       "addresses": [{"type": "InternalIP", "address": "10.1.1.1"}]}}
    t = table(lookup("", "v1", "nodes"), [node], list_meta=None, now=NOW)
    assert t["rows"][0]["cells"] == ["n1", "NotReady,SchedulingDisabled", "control-plane,gpu", "3d", "v1.34.1",
                                     "10.1.1.1", "<none>", "<unknown>", "<unknown>", "<unknown>"]
    pg = {"metadata": {"name": "pg1", "namespace": "d", "creationTimestamp": ts(5)},
          "spec": {"minMember": 3, "queue": "q1"}, "status": {"phase": "Inqueue"}}
    t = table(lookup("scheduling.volcano.sh", "v1beta1", "podgroups"), [pg], list_meta=None, now=NOW)
    assert [c["name"] for c in t["columnDefinitions"]] == ["Name", "STATUS", "minMember", "RUNNINGS", "AGE", "QUEUE"]
    assert t["rows"][0]["cells"] == ["pg1", "Inqueue", 3, None, "5s", "q1"]
    q = {"metadata": {"name": "q1", "creationTimestamp": ts(5)}, "spec": {"parent": "root"}}
    t = table(lookup("scheduling.volcano.sh", "v1beta1", "queues"), [q], list_meta=None, now=NOW)
    assert t["rows"][0]["cells"] == ["q1", "root"]
    lease = {"metadata": {"name": "l1", "creationTimestamp": ts(70)}, "spec": {}}
    t = table(lookup("coordination.k8s.io", "v1", "leases"), [lease], list_meta=None, now=NOW)
    assert t["rows"][0]["cells"] == ["l1", "", "70s"]
    svc = {"metadata": {"name": "s1"}}
    t = table(lookup("", "v1", "services"), [svc], list_meta=None, now=NOW)
    assert [c["name"] for c in t["columnDefinitions"]] == ["Name", "Age"]
    assert t["rows"][0]["cells"] == ["s1", "<unknown>"]


def test_hypernode_columns_print_string_columns_as_text():
    hn = {"metadata": {"name": "s0", "creationTimestamp": ts(600)},
          "spec": {"tier": 1, "tierName": "leaf", "members": []}, "status": {"nodeCount": 4}}
    t = table(lookup("topology.volcano.sh", "v1alpha1", "hypernodes"), [hn], list_meta=None, now=NOW)
    assert [c["name"] for c in t["columnDefinitions"]] == ["Name", "Tier", "TierName", "NodeCount", "Age"]
    assert t["rows"][0]["cells"] == ["s0", "1", "leaf", 4, "10m"]
