"""The write path against the official ``kubernetes`` Python client (from PyPI): create, replace,
the three patch types, status replace / patch, delete with grace period and preconditions,
binding (both paths), eviction, a stale resourceVersion and a second create. Each asserts what
the store holds afterwards."""
from __future__ import annotations

import json

import pytest

kubernetes = pytest.importorskip("kubernetes")
from kubernetes import client as k  # noqa: E402
from kubernetes.client.rest import ApiException  # noqa: E402

from cluster_state.errors import NotFound  # noqa: E402

NS = "default"


@pytest.fixture
def core(kube_front):
    api = kube_front.kubernetes_client()
    yield k.CoreV1Api(api), kube_front
    api.close()


def new_pod(name: str, node: str | None = None) -> k.V1Pod:
    return k.V1Pod(
        metadata=k.V1ObjectMeta(name=name, labels={"app": "demo"},
                                annotations={"scheduling.k8s.io/group-name": "pg1"}),
        spec=k.V1PodSpec(scheduler_name="volcano", node_name=node, termination_grace_period_seconds=30,
                         containers=[k.V1Container(name="main", image="busybox:1.36",
                                                   resources=k.V1ResourceRequirements(requests={"cpu": "500m",
                                                                                               "memory": "1Gi"}))]))


def test_create_replace_conflict_and_already_exists(core):
    v1, front = core
    created = v1.create_namespaced_pod(NS, new_pod("p1"))
    assert created.metadata.uid and created.status.phase == "Pending"
    with pytest.raises(ApiException) as e:
        v1.create_namespaced_pod(NS, new_pod("p1"))
    assert e.value.status == 409 and json.loads(e.value.body)["reason"] == "AlreadyExists"
    got = v1.read_namespaced_pod("p1", NS)
    got.metadata.labels["tier"] = "web"
    got.spec.containers[0].image = "busybox:1.37"
    replaced = v1.replace_namespaced_pod("p1", NS, got)
    assert int(replaced.metadata.resource_version) > int(got.metadata.resource_version)
    stored = front.api.get("Pod", "p1", NS)
    assert stored["metadata"]["labels"] == {"app": "demo", "tier": "web"}
    assert stored["spec"]["containers"][0]["image"] == "busybox:1.37"
    assert stored["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "500m"
    with pytest.raises(ApiException) as e:       # got's resourceVersion is stale now
        v1.replace_namespaced_pod("p1", NS, got)
    assert e.value.status == 409 and json.loads(e.value.body)["reason"] == "Conflict"
    assert front.api.get("Pod", "p1", NS) == stored


def test_patch_types_and_status(core):
    v1, front = core
    v1.create_namespaced_pod(NS, new_pod("p1"))
    v1.patch_namespaced_pod("p1", NS, {"metadata": {"labels": {"merge": "yes"}}},
                            _content_type="application/merge-patch+json")
    v1.patch_namespaced_pod("p1", NS, [{"op": "add", "path": "/metadata/annotations/jp", "value": "1"}],
                            _content_type="application/json-patch+json")
    v1.patch_namespaced_pod("p1", NS, {"metadata": {"labels": {"smp": "yes"}}},
                            _content_type="application/strategic-merge-patch+json")
    stored = front.api.get("Pod", "p1", NS)
    assert stored["metadata"]["labels"] == {"app": "demo", "merge": "yes", "smp": "yes"}
    assert stored["metadata"]["annotations"]["jp"] == "1"
    v1.patch_namespaced_pod_status("p1", NS, {"status": {
        "$setElementOrder/conditions": [{"type": "PodScheduled"}],
        "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "no fit"}],
        "nominatedNodeName": "n2"}}, _content_type="application/strategic-merge-patch+json")
    st = front.api.get("Pod", "p1", NS)["status"]
    assert st["nominatedNodeName"] == "n2" and st["conditions"][0]["reason"] == "Unschedulable"
    got = v1.read_namespaced_pod_status("p1", NS)
    got.status.phase = "Running"
    got.spec.node_name = "ignored"
    out = v1.replace_namespaced_pod_status("p1", NS, got)
    assert out.status.phase == "Running" and not out.spec.node_name
    stored = front.api.get("Pod", "p1", NS)
    assert stored["status"]["phase"] == "Running" and stored["spec"]["nodeName"] == ""


def test_delete_with_grace_and_preconditions(core):
    v1, front = core
    p = v1.create_namespaced_pod(NS, new_pod("p1", node="n1"))
    with pytest.raises(ApiException) as e:
        v1.delete_namespaced_pod("p1", NS, body=k.V1DeleteOptions(preconditions=k.V1Preconditions(uid="wrong")))
    assert e.value.status == 409
    assert front.api.get("Pod", "p1", NS)["metadata"].get("deletionTimestamp") is None
    v1.delete_namespaced_pod("p1", NS, body=k.V1DeleteOptions(
        grace_period_seconds=45, preconditions=k.V1Preconditions(uid=p.metadata.uid,
                                                                 resource_version=p.metadata.resource_version)))
    md = front.api.get("Pod", "p1", NS)["metadata"]
    assert md["deletionGracePeriodSeconds"] == 45 and md["deletionTimestamp"] > md["creationTimestamp"]
    v1.delete_namespaced_pod("p1", NS, grace_period_seconds=0)
    with pytest.raises(NotFound):
        front.api.get("Pod", "p1", NS)


def test_binding_both_paths_and_eviction(core):
    v1, front = core
    p1 = v1.create_namespaced_pod(NS, new_pod("p1"))
    v1.create_namespaced_pod(NS, new_pod("p2"))
    front.api.update_status({**front.api.get("Pod", "p1", NS), "status": {"phase": "Pending",
                                                                          "nominatedNodeName": "n1"}})
    body = k.V1Binding(metadata=k.V1ObjectMeta(name="p1", uid=p1.metadata.uid),
                       target=k.V1ObjectReference(kind="Node", name="n1"))
    # the client cannot read the Status it gets back as a V1Binding: read the raw response
    resp = v1.create_namespaced_pod_binding("p1", NS, body, _preload_content=False)
    assert resp.status == 201 and json.loads(resp.data)["status"] == "Success"
    stored = front.api.get("Pod", "p1", NS)
    assert stored["spec"]["nodeName"] == "n1"
    assert stored["status"]["conditions"][-1]["type"] == "PodScheduled"
    with pytest.raises(ApiException) as e:
        v1.create_namespaced_pod_binding("p1", NS, body, _preload_content=False)
    assert e.value.status == 409
    legacy = k.V1Binding(metadata=k.V1ObjectMeta(name="p2"), target=k.V1ObjectReference(kind="Node", name="n2"))
    resp = v1.create_namespaced_binding(NS, legacy, _preload_content=False)
    assert resp.status == 201
    assert front.api.get("Pod", "p2", NS)["spec"]["nodeName"] == "n2"
    ev = k.V1Eviction(metadata=k.V1ObjectMeta(name="p1", namespace=NS),
                      delete_options=k.V1DeleteOptions(grace_period_seconds=12))
    resp = v1.create_namespaced_pod_eviction("p1", NS, ev, _preload_content=False)
    assert resp.status == 201
    md = front.api.get("Pod", "p1", NS)["metadata"]
    assert md["deletionGracePeriodSeconds"] == 12 and md["deletionTimestamp"]


def test_custom_objects_queue_and_podgroup(core):
    _v1, front = core
    co = k.CustomObjectsApi(_v1.api_client)
    q = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "root"},
         "spec": {"weight": 1}}
    co.create_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", q)
    with pytest.raises(ApiException) as e:
        co.create_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", q)
    assert e.value.status == 409 and json.loads(e.value.body)["reason"] == "AlreadyExists"
    got = co.get_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", "root")
    got["status"] = {"state": "Closed"}
    co.replace_cluster_custom_object_status("scheduling.volcano.sh", "v1beta1", "queues", "root", got)
    assert front.api.get("Queue", "root")["status"]["state"] == "Closed"
    pg = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
          "metadata": {"name": "pg1", "namespace": NS}, "spec": {"minMember": 2, "queue": "root"}}
    co.create_namespaced_custom_object("scheduling.volcano.sh", "v1beta1", NS, "podgroups", pg)
    got = co.get_namespaced_custom_object("scheduling.volcano.sh", "v1beta1", NS, "podgroups", "pg1")
    got["status"] = {"phase": "Inqueue"}
    co.replace_namespaced_custom_object("scheduling.volcano.sh", "v1beta1", NS, "podgroups", "pg1", got)
    assert front.api.get("PodGroup", "pg1", NS)["status"]["phase"] == "Inqueue"
    co.patch_namespaced_custom_object("scheduling.volcano.sh", "v1beta1", NS, "podgroups", "pg1",
                                      {"spec": {"minMember": 3}}, _content_type="application/merge-patch+json")
    assert front.api.get("PodGroup", "pg1", NS)["spec"]["minMember"] == 3
    co.delete_namespaced_custom_object("scheduling.volcano.sh", "v1beta1", NS, "podgroups", "pg1")
    with pytest.raises(NotFound):
        front.api.get("PodGroup", "pg1", NS)


def test_delete_collection(core):
    v1, front = core
    for i in range(3):
        v1.create_namespaced_pod(NS, new_pod(f"c{i}"))
    v1.delete_collection_namespaced_pod(NS, label_selector="app=demo", _preload_content=False)
    assert front.api.list("Pod", NS).items == []


def test_a_rich_pod_round_trips_through_read_and_replace(core):
    """Fields the store does not model (volumes, probes, env, ports, affinity, security context)
    survive create -> read -> replace with the typed client, and the replace is not taken for a
    change of the immutable spec."""
    v1, front = core
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "rich"},
           "spec": {"schedulerName": "volcano", "priorityClassName": "high", "dnsPolicy": "ClusterFirst",
                    "volumes": [{"name": "cfg", "configMap": {"name": "app-cfg", "defaultMode": 420}}],
                    "securityContext": {"runAsUser": 1000, "fsGroup": 2000},
                    "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule",
                                     "tolerationSeconds": 30}],
                    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In",
                                                                     "values": ["a", "b"]}]}]}}},
                    "containers": [{"name": "main", "image": "app:1", "args": ["--port", "8080"],
                                    "env": [{"name": "MODE", "value": "prod"}],
                                    "ports": [{"containerPort": 8080, "name": "http", "protocol": "TCP"}],
                                    "readinessProbe": {"httpGet": {"path": "/ready", "port": "http"},
                                                       "periodSeconds": 5},
                                    "volumeMounts": [{"name": "cfg", "mountPath": "/etc/app"}],
                                    "resources": {"requests": {"cpu": "250m", "memory": "512Mi"},
                                                  "limits": {"cpu": "1", "memory": "1Gi"}}}]}}
    v1.create_namespaced_pod(NS, pod)
    got = v1.read_namespaced_pod("rich", NS)
    got.metadata.labels = {"rev": "2"}
    got.spec.containers[0].image = "app:2"
    v1.replace_namespaced_pod("rich", NS, got)
    spec = front.api.get("Pod", "rich", NS)["spec"]
    c = spec["containers"][0]
    assert c["image"] == "app:2" and c["readinessProbe"]["httpGet"]["port"] == "http"
    assert c["env"] == [{"name": "MODE", "value": "prod"}] and c["volumeMounts"][0]["mountPath"] == "/etc/app"
    assert spec["volumes"][0]["configMap"] == {"name": "app-cfg", "defaultMode": 420}
    assert spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == ["a", "b"]
    assert spec["securityContext"] == {"runAsUser": 1000, "fsGroup": 2000}
    assert front.api.get("Pod", "rich", NS)["metadata"]["labels"] == {"rev": "2"}
