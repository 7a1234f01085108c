"""The write path over plain HTTP: every verb, its strategy on the stored object, and its errors
(each a Kubernetes Status; a failed request stores nothing)."""
from __future__ import annotations

import pytest

from tests.cluster_state.helpers import node, podgroup, queue
from tests.kube_api.write_helpers import (JSON_PATCH, MERGE, PG, POD, QUEUES, SMP, assert_status, call, pod_json,
                                          snapshot)


@pytest.fixture
def front(kube_front):
    return kube_front


def test_create_then_already_exists(front):
    code, body = call(front.url, "POST", POD, pod_json("p1", phase="Running", nominatedNodeName="n9"))
    assert code == 201, body
    assert body["metadata"]["resourceVersion"].isdigit() and body["metadata"]["uid"]
    assert body["status"] == {"phase": "Pending"}          # a created pod's status is the server's
    stored = front.api.get("Pod", "p1", "default")
    assert stored["spec"]["containers"][0]["image"] == "busybox"       # unmodelled fields kept
    assert stored["status"] == {"phase": "Pending"}
    before = snapshot(front.redis_url, front.prefix)
    code, body = call(front.url, "POST", POD, pod_json("p1"))
    assert code == 409
    assert_status(body, 409, "AlreadyExists")
    assert body["details"] == {"name": "p1", "kind": "pods"}
    assert snapshot(front.redis_url, front.prefix) == before


def test_volcano_creates_queues_and_gets_already_exists(front):
    q = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
         "metadata": {"name": "default"}, "spec": {"weight": 1, "reclaimable": True}}
    code, body = call(front.url, "POST", QUEUES, q)
    assert code == 201 and body["status"] == {"state": "Open"}, body
    code, body = call(front.url, "POST", QUEUES, q)
    assert_status(body, 409, "AlreadyExists")


def test_put_respects_resource_version_and_keeps_status(front):
    p = pod_json("p1")
    p["spec"]["volumes"] = [{"name": "data", "emptyDir": {}}]      # fields the store does not model
    p["spec"]["dnsPolicy"] = "ClusterFirst"
    front.api.create(p)
    front.api.update_status({**front.api.get("Pod", "p1", "default"), "status": {"phase": "Running"}})
    _, got = call(front.url, "GET", POD + "/p1")
    got["metadata"]["labels"]["new"] = "1"
    got["spec"]["containers"][0]["image"] = "busybox:2"          # a mutable spec field
    got["status"]["phase"] = "Failed"             # ignored by a PUT of the main resource
    code, body = call(front.url, "PUT", POD + "/p1", got)
    assert code == 200, body
    stored = front.api.get("Pod", "p1", "default")
    assert stored["metadata"]["labels"]["new"] == "1" and stored["spec"]["containers"][0]["image"] == "busybox:2"
    assert stored["spec"]["volumes"] == [{"name": "data", "emptyDir": {}}] and stored["spec"]["dnsPolicy"] == "ClusterFirst"
    assert stored["status"]["phase"] == "Running"
    before = snapshot(front.redis_url, front.prefix)
    for field, value in [("nodeName", "n1"), ("schedulerName", "other"), ("volumes", [])]:
        code, body = call(front.url, "PUT", POD + "/p1", {**body, "spec": {**body["spec"], field: value}})
        assert_status(body, 422, "Invalid")                      # ValidatePodUpdate: spec is immutable
        assert body["details"]["causes"][0]["field"] == "spec" and field in body["message"], body
        _, body = call(front.url, "GET", POD + "/p1")
    assert snapshot(front.redis_url, front.prefix) == before
    before = snapshot(front.redis_url, front.prefix)
    code, body = call(front.url, "PUT", POD + "/p1", got)          # got's RV is stale now
    assert_status(body, 409, "Conflict")
    assert "the object has been modified" in body["message"]
    assert snapshot(front.redis_url, front.prefix) == before


def test_put_status_keeps_spec_takes_labels(front):
    front.api.create(pod_json("p1"))
    _, got = call(front.url, "GET", POD + "/p1")
    got["spec"]["nodeName"] = "sneaky"
    got["status"]["nominatedNodeName"] = "n2"
    got["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                    "lastTransitionTime": "2026-11-27T19:00:00Z"}]
    code, body = call(front.url, "PUT", POD + "/p1/status", got)
    assert code == 200, body
    stored = front.api.get("Pod", "p1", "default")
    assert stored["spec"]["nodeName"] == "" and stored["status"]["nominatedNodeName"] == "n2"
    assert body["status"]["conditions"][0]["lastTransitionTime"] == "2026-11-27T19:00:00Z"
    got = body
    got["metadata"]["labels"] = {"app": "b"}
    got["status"]["nominatedNodeName"] = ""
    code, body = call(front.url, "PUT", POD + "/p1/status", got)
    assert code == 200, body
    stored = front.api.get("Pod", "p1", "default")
    assert stored["metadata"]["labels"] == {"app": "b"} and stored["status"]["nominatedNodeName"] == ""
    assert stored["spec"]["nodeName"] == ""


def test_podgroup_put_writes_status_and_annotations_together(front):
    front.api.create(podgroup("pg1"))
    _, got = call(front.url, "GET", PG + "/pg1")
    got["status"] = {"phase": "Running", "running": 3}
    got["metadata"]["annotations"] = {"volcano.sh/job-allocated-hypernode": "hn1"}
    rv = int(got["metadata"]["resourceVersion"])
    code, body = call(front.url, "PUT", PG + "/pg1", got)
    assert code == 200, body
    stored = front.api.get("PodGroup", "pg1", "default")
    assert stored["status"]["phase"] == "Running" and stored["status"]["running"] == 3
    assert stored["metadata"]["annotations"] == {"volcano.sh/job-allocated-hypernode": "hn1"}
    assert stored["metadata"]["resourceVersion"] == rv + 1               # one write
    del got["metadata"]["resourceVersion"]
    code, body = call(front.url, "PUT", PG + "/pg1", got)
    assert_status(body, 422, "Invalid")
    assert body["details"]["causes"][0]["field"] == "metadata.resourceVersion"


def test_queue_status_subresource(front):
    front.api.create(queue("q1"))
    _, got = call(front.url, "GET", QUEUES + "/q1")
    got["status"] = {"state": "Closed"}
    got["spec"]["weight"] = 9             # ignored: /status writes only status
    code, body = call(front.url, "PUT", QUEUES + "/q1/status", got)
    assert code == 200, body
    stored = front.api.get("Queue", "q1")
    assert stored["status"]["state"] == "Closed" and stored["spec"]["weight"] == 1


def test_patches_of_all_three_types(front):
    front.api.create(pod_json("p1"))
    code, body = call(front.url, "PATCH", POD + "/p1", {"metadata": {"labels": {"x": "1", "app": None}}}, ctype=MERGE)
    assert code == 200, body
    assert front.api.get("Pod", "p1", "default")["metadata"]["labels"] == {"x": "1"}
    code, body = call(front.url, "PATCH", POD + "/p1",
                      [{"op": "add", "path": "/metadata/annotations/a", "value": "b"}], ctype=JSON_PATCH)
    assert code == 200, body
    assert front.api.get("Pod", "p1", "default")["metadata"]["annotations"]["a"] == "b"
    # kube-scheduler's status patch: condition by type, order directive, NNN
    patch = {"status": {"$setElementOrder/conditions": [{"type": "PodScheduled"}],
                        "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                        "message": "0/3 nodes", "lastTransitionTime": "2026-11-27T19:00:00Z"}],
                        "nominatedNodeName": "n1"}}
    code, body = call(front.url, "PATCH", POD + "/p1/status", patch, ctype=SMP)
    assert code == 200, body
    st = front.api.get("Pod", "p1", "default")["status"]
    assert st["nominatedNodeName"] == "n1" and st["conditions"][0]["reason"] == "Unschedulable"
    code, body = call(front.url, "PATCH", POD + "/p1/status", {"status": {"nominatedNodeName": None}}, ctype=SMP)
    assert code == 200, body
    st = front.api.get("Pod", "p1", "default")["status"]
    assert "nominatedNodeName" not in st and st["conditions"][0]["type"] == "PodScheduled"
    # a patch of the main resource does not change status
    code, body = call(front.url, "PATCH", POD + "/p1", {"status": {"phase": "Failed"}}, ctype=MERGE)
    assert code == 200 and front.api.get("Pod", "p1", "default")["status"]["phase"] == "Pending"


def test_patch_errors_store_nothing(front):
    front.api.create(pod_json("p1"))
    front.api.create(podgroup("pg1"))
    before = snapshot(front.redis_url, front.prefix)
    cases = [
        (POD + "/p1", "application/apply-patch+yaml", b"metadata: {}", 415),
        (POD + "/p1", "application/json", b"{}", 415),
        (POD + "/p1", MERGE, b"{not json", 400),
        (POD + "/p1", JSON_PATCH, b'[{"op": "test", "path": "/status/phase", "value": "Running"}]', 422),
        (POD + "/p1", JSON_PATCH, b'{"op": "add"}', 400),
        (POD + "/p1/status", SMP, b'{"status": {"conditions": [{"status": "True"}]}}', 422),
        (POD + "/p1/status", SMP, b'{"status": {"$patch": "frob"}}', 400),
        (POD + "/p1", MERGE, b'{"metadata": {"resourceVersion": "12345"}}', 409),
        (POD + "/p1", MERGE, b'{"metadata": {"name": "other"}}', 400),
        (POD + "/p1", MERGE, b'{"status": {"phase": "Sleeping"}}', 200),     # main resource: status ignored
        (POD + "/p1/status", MERGE, b'{"status": {"phase": "Sleeping"}}', 422),
        (POD + "/missing", MERGE, b"{}", 404),
        (PG + "/pg1", SMP, b'{"spec": {"minMember": 2}}', 415),
        (PG + "/pg1", MERGE, b'{"spec": {"minMember": -2}}', 422),
        ("/api/v1/namespaces/default/events/nope", SMP, b'{"count": 2}', 404),
    ]
    for path, ctype, raw, want in cases:
        code, body = call(front.url, "PATCH", path, ctype=ctype, raw=raw)
        assert code == want, (path, raw, body)
        if code >= 400:
            assert_status(body, want)
            if want == 422:
                assert body["details"]["causes"][0]["field"], body
    after = snapshot(front.redis_url, front.prefix)
    changed = {k for k in set(before) | set(after) if before.get(k) != after.get(k)}
    assert all(b":obj:Pod" in k or b":ev:Pod" in k or k.endswith(b":rv") for k in changed), changed  # the one 200


def test_delete_grace_and_preconditions(front):
    front.api.create(pod_json("bound", node="n1"))
    front.api.create(pod_json("unbound"))
    code, body = call(front.url, "DELETE", POD + "/unbound", {"kind": "DeleteOptions", "apiVersion": "v1",
                                                             "gracePeriodSeconds": 30})
    assert code == 200, body                      # not bound: deleted at once
    with pytest.raises(Exception):
        front.api.get("Pod", "unbound", "default")
    stored = front.api.get("Pod", "bound", "default")
    before = snapshot(front.redis_url, front.prefix)
    code, body = call(front.url, "DELETE", POD + "/bound", {"preconditions": {"uid": "not-the-uid"}})
    assert_status(body, 409, "Conflict")
    assert "Precondition failed: UID in precondition: not-the-uid" in body["message"]
    code, body = call(front.url, "DELETE", POD + "/bound", {"preconditions": {"resourceVersion": "999"}})
    assert_status(body, 409, "Conflict")
    code, body = call(front.url, "DELETE", POD + "/bound", {"gracePeriodSeconds": -3})
    assert_status(body, 422, "Invalid")
    code, body = call(front.url, "DELETE", POD + "/bound?dryRun=All", {})
    assert code == 200
    assert snapshot(front.redis_url, front.prefix) == before
    code, body = call(front.url, "DELETE", POD + "/bound?gracePeriodSeconds=20",
                      {"preconditions": {"uid": stored["metadata"]["uid"],
                                         "resourceVersion": str(stored["metadata"]["resourceVersion"])}})
    assert code == 200 and body["metadata"]["deletionTimestamp"], body
    st = front.api.get("Pod", "bound", "default")
    assert st["metadata"]["deletionGracePeriodSeconds"] == 20
    front.api.create(node("n1"))
    code, body = call(front.url, "DELETE", "/api/v1/nodes/n1")
    assert code == 200 and body["kind"] == "Status" and body["status"] == "Success", body


def test_binding_and_eviction(front):
    p = front.api.create(pod_json("p1", nominatedNodeName="n1"))
    front.api.create(pod_json("p2"))
    uid = p["metadata"]["uid"]
    binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p1", "namespace": "default", "uid": "x"},
               "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"}}
    code, body = call(front.url, "POST", POD + "/p1/binding", binding)
    assert_status(body, 409, "Conflict")                               # uid precondition
    binding["metadata"]["uid"] = uid
    binding["metadata"]["annotations"] = {"scheduling.k8s.io/group-name": "pg1", "bound-by": "test"}
    code, body = call(front.url, "POST", POD + "/p1/binding", binding)
    assert code == 201, body
    assert body == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
    st = front.api.get("Pod", "p1", "default")
    assert st["spec"]["nodeName"] == "n1" and st["metadata"]["annotations"]["bound-by"] == "test"
    assert [c["type"] for c in st["status"]["conditions"]] == ["PodScheduled"]
    code, body = call(front.url, "POST", POD + "/p1/binding", binding)
    assert_status(body, 409, "Conflict")
    assert "already assigned" in body["message"]
    for bad, want in [({**binding, "target": {"kind": "Pod", "name": "n1"}}, 422),
                      ({**binding, "target": {"kind": "Node"}}, 422),
                      ({**binding, "metadata": {"name": "other"}}, 400),
                      ({**binding, "kind": "Pod"}, 400)]:
        code, body = call(front.url, "POST", POD + "/p2/binding", {**bad, "metadata": bad["metadata"] | {"name": "p2", "uid": None}} if want == 422 else bad)
        assert code == want, body
    ev = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p1", "namespace": "default"},
          "deleteOptions": {"gracePeriodSeconds": 15}}
    code, body = call(front.url, "POST", POD + "/p1/eviction", ev)
    assert code == 201 and body["status"] == "Success", body
    st = front.api.get("Pod", "p1", "default")
    assert st["metadata"]["deletionGracePeriodSeconds"] == 15 and st["metadata"]["deletionTimestamp"]
    code, body = call(front.url, "POST", POD + "/missing/eviction", {**ev, "metadata": {"name": "missing"}})
    assert_status(body, 404, "NotFound")


def test_methods_and_content_types_not_allowed(front):
    front.api.create(pod_json("p1"))
    before = snapshot(front.redis_url, front.prefix)
    for method, path, ctype, want in [
        ("POST", POD + "/p1", "application/json", 405),
        ("POST", "/api/v1/namespaces/default/services", "application/json", 405),
        ("PUT", "/api/v1/namespaces/default/configmaps/c", "application/json", 405),
        ("DELETE", "/api/v1/pods", "application/json", 405),
        ("PUT", POD, "application/json", 405),
        ("POST", POD, "text/plain", 415),
        ("PUT", POD + "/p1", MERGE, 415),
        ("POST", "/api/v1/namespaces/default/widgets", "application/json", 404),
    ]:
        code, body = call(front.url, method, path, {"kind": "Pod", "metadata": {"name": "p1"}}, ctype=ctype)
        assert code == want, (method, path, body)
        assert_status(body, want)
    assert snapshot(front.redis_url, front.prefix) == before


def test_create_validation_errors(front):
    before = snapshot(front.redis_url, front.prefix)
    for body, want, field in [
        ({**pod_json("Bad_Name")}, 422, "metadata.name"),
        ({**pod_json("p1"), "apiVersion": "v2"}, 400, "apiVersion"),
        ({**pod_json("p1"), "kind": "Node"}, 400, "kind"),
        ({**pod_json("p1"), "metadata": {"name": "p1", "namespace": "other"}}, 400, "metadata.namespace"),
        ({**pod_json("p1"), "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "-1"}}}]}},
         422, None),
        ({**pod_json("p1"), "metadata": {"name": "p1", "resourceVersion": "5"}}, 400, "metadata.resourceVersion"),
        ({"kind": "Pod", "metadata": {}}, 422, "metadata.name"),
    ]:
        code, got = call(front.url, "POST", POD, body)
        assert code == want, (body, got)
        assert_status(got, want)
        if field:
            assert got["details"]["causes"][0]["field"] == field, got
    assert snapshot(front.redis_url, front.prefix) == before
    code, got = call(front.url, "POST", POD + "?dryRun=All", pod_json("p1"))
    assert code == 201 and got["metadata"]["name"] == "p1"
    assert snapshot(front.redis_url, front.prefix) == before
    code, got = call(front.url, "POST", POD, {**pod_json("x"), "metadata": {"generateName": "job-"}})
    assert code == 201 and got["metadata"]["name"].startswith("job-") and len(got["metadata"]["name"]) == 9


def test_events_post_patch_and_namespaces(front):
    ev = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "p1.abc", "namespace": "default"},
          "involvedObject": {"kind": "Pod", "name": "p1", "namespace": "default"}, "reason": "Scheduled",
          "message": "Successfully assigned default/p1 to n1", "source": {"component": "volcano"},
          "firstTimestamp": "2026-11-27T19:00:00Z", "lastTimestamp": "2026-11-27T19:00:00Z", "count": 1,
          "type": "Normal", "eventTime": None, "reportingComponent": "volcano", "reportingInstance": "h"}
    code, body = call(front.url, "POST", "/api/v1/namespaces/default/events", ev)
    assert code == 201, body
    assert body["reason"] == "Scheduled" and "spec" not in body
    code, body = call(front.url, "PATCH", "/api/v1/namespaces/default/events/p1.abc",
                      {"count": 2, "lastTimestamp": "2026-11-27T19:01:00Z"}, ctype=SMP)
    assert code == 200 and body["count"] == 2, body
    code, body = call(front.url, "POST", "/api/v1/namespaces", {"kind": "Namespace", "metadata": {"name": "team-a"}})
    assert code == 201 and body["status"] == {"phase": "Active"}, body
    code, body = call(front.url, "POST", "/api/v1/namespaces", {"kind": "Namespace", "metadata": {"name": "a.b"}})
    assert_status(body, 422, "Invalid")


def test_podgroup_status_subresource_and_ignored_query_options(front):
    front.api.create(podgroup("pg1"))
    _, got = call(front.url, "GET", PG + "/pg1")
    got["status"] = {"phase": "Inqueue"}
    got["spec"]["minMember"] = 7                      # ignored: /status writes only status
    code, body = call(front.url, "PUT", PG + "/pg1/status?fieldManager=vc-scheduler&fieldValidation=Strict", got)
    assert code == 200, body
    stored = front.api.get("PodGroup", "pg1", "default")
    assert stored["status"]["phase"] == "Inqueue" and stored["spec"]["minMember"] == 1
    code, body = call(front.url, "POST", POD + "?fieldManager=kubectl-create&fieldValidation=Ignore", pod_json("p9"))
    assert code == 201, body


def test_event_put_creates_a_missing_event(front):
    ev = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e1", "namespace": "default"},
          "involvedObject": {"kind": "Pod", "name": "p1"}, "reason": "Evict", "count": 1, "type": "Warning"}
    code, body = call(front.url, "PUT", "/api/v1/namespaces/default/events/e1", ev)
    assert code == 201 and body["reason"] == "Evict", body
    stored = front.api.get("Event", "e1", "default")
    assert stored["spec"]["reason"] == "Evict"            # stored folded (docs/object-shapes.md)


def test_uid_is_a_precondition_of_status_writes(front):
    front.api.create(pod_json("p1"))
    before = snapshot(front.redis_url, front.prefix)
    _, got = call(front.url, "GET", POD + "/p1")
    got["metadata"]["uid"] = "0000-not-it"
    got["status"]["nominatedNodeName"] = "n1"
    code, body = call(front.url, "PUT", POD + "/p1/status", got)
    assert_status(body, 409, "Conflict")
    assert "UID in precondition: 0000-not-it" in body["message"]
    code, body = call(front.url, "PUT", POD + "/p1", got)
    assert_status(body, 409, "Conflict")
    assert snapshot(front.redis_url, front.prefix) == before


def test_delete_collection_with_selectors(front):
    for name, app, node_name in [("a1", "a", ""), ("a2", "a", "n1"), ("b1", "b", "")]:
        p = pod_json(name, node=node_name)
        p["metadata"]["labels"] = {"app": app}
        front.api.create(p)
    code, body = call(front.url, "DELETE", POD + "?labelSelector=app%3Da", {"gracePeriodSeconds": 10})
    assert code == 200 and body["kind"] == "PodList", body
    assert [i["metadata"]["name"] for i in body["items"]] == ["a1", "a2"]
    names = sorted(o["metadata"]["name"] for o in front.api.list("Pod", "default").items)
    assert names == ["a2", "b1"]                      # a2 is bound: it stays for its grace period
    assert front.api.get("Pod", "a2", "default")["metadata"]["deletionGracePeriodSeconds"] == 10
    code, body = call(front.url, "DELETE", POD + "?labelSelector=app%3D%3D%3D")
    assert_status(body, 400, "BadRequest")
    code, body = call(front.url, "DELETE", "/api/v1/pods")
    assert code == 405, body
