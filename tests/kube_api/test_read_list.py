"""GET and LIST through the front: paging, resourceVersion semantics, selectors, codec, Status
errors (real Redis, plain HTTP)."""
from __future__ import annotations

import calendar
import time
from datetime import datetime, timezone

from .read_helpers import NS, get, node, pod, podgroup


def _seed(api, n=5):
    api.create(node("n1", labels={"zone": "a"}))
    api.create(node("n2", labels={"zone": "b"}))
    for i in range(n):
        api.create(pod(f"p{i}", labels={"app": "web" if i % 2 else "db", "idx": str(i)}))
    api.create(pod("other", "kube-system", labels={"app": "web"}))


def test_list_all_namespaces_and_one_namespace(kube_front):
    api = kube_front.api
    _seed(api)
    rv = api.current_resource_version()
    code, body = get(kube_front.url, "/api/v1/pods")
    assert code == 200 and body["kind"] == "PodList" and body["apiVersion"] == "v1"
    assert body["metadata"]["resourceVersion"] == str(rv)
    assert len(body["items"]) == 6
    for it in body["items"]:
        assert "kind" not in it and "apiVersion" not in it       # as kube-apiserver: the list says them
        assert isinstance(it["metadata"]["resourceVersion"], str)
    _, ns = get(kube_front.url, f"/api/v1/namespaces/{NS}/pods")
    assert sorted(i["metadata"]["name"] for i in ns["items"]) == [f"p{i}" for i in range(5)]
    _, nodes = get(kube_front.url, "/api/v1/nodes")
    assert nodes["kind"] == "NodeList" and [n["metadata"]["name"] for n in nodes["items"]] == ["n1", "n2"]


def test_get_one_object_and_not_found(kube_front):
    api = kube_front.api
    api.create(pod("a"))
    api.create(podgroup("pg"))
    code, p = get(kube_front.url, f"/api/v1/namespaces/{NS}/pods/a")
    assert code == 200 and p["metadata"]["name"] == "a" and p["kind"] == "Pod"
    code, g = get(kube_front.url, f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{NS}/podgroups/pg")
    assert code == 200 and g["apiVersion"] == "scheduling.volcano.sh/v1beta1" and g["kind"] == "PodGroup"
    code, st = get(kube_front.url, f"/api/v1/namespaces/{NS}/pods/zz")
    assert code == 404
    assert st == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                  "message": 'pods "zz" not found', "reason": "NotFound",
                  "details": {"name": "zz", "kind": "pods"}, "code": 404}
    code, st = get(kube_front.url, f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{NS}/podgroups/zz")
    assert code == 404 and st["message"] == 'podgroups.scheduling.volcano.sh "zz" not found'
    assert st["details"]["group"] == "scheduling.volcano.sh"


def test_codec_turns_rv_and_times_into_kubernetes_json(kube_front):
    api = kube_front.api
    api.create(node("n1"))
    api.create(pod("a"))
    before = time.time()
    api.bind(NS, "a", "n1")
    _, p = get(kube_front.url, f"/api/v1/namespaces/{NS}/pods/a")
    stored = api.get("Pod", "a", NS)
    assert p["metadata"]["resourceVersion"] == str(stored["metadata"]["resourceVersion"])
    ts = p["metadata"]["creationTimestamp"]
    assert ts.endswith("Z") and len(ts) == 20
    assert calendar.timegm(time.strptime(ts, "%Y-%m-%dT%H:%M:%SZ")) == int(stored["metadata"]["creationTimestamp"])
    cond = p["status"]["conditions"][0]
    assert cond["type"] == "PodScheduled"
    t = calendar.timegm(time.strptime(cond["lastTransitionTime"], "%Y-%m-%dT%H:%M:%SZ"))
    assert int(before) <= t <= time.time()
    # untouched otherwise: the stored spec comes back as stored
    assert p["spec"] == stored["spec"]


def test_lease_times_are_micro_times(kube_front):
    api = kube_front.api
    api.create({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": "volcano", "namespace": "volcano-system"},
                "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15, "acquireTime": 1795000000.25,
                         "renewTime": 1795000001.5, "leaseTransitions": 0}})
    _, lease = get(kube_front.url, "/apis/coordination.k8s.io/v1/namespaces/volcano-system/leases/volcano")
    want = datetime.fromtimestamp(1795000000, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    assert lease["spec"]["acquireTime"] == want + ".250000Z"
    assert lease["spec"]["renewTime"][:-8] == want[:-1] + "1"
    assert lease["spec"]["renewTime"].endswith(".500000Z")


def test_paging_is_consistent_at_the_first_pages_rv(kube_front):
    api = kube_front.api
    _seed(api)
    code, p1 = get(kube_front.url, f"/api/v1/namespaces/{NS}/pods?limit=2")
    assert code == 200 and len(p1["items"]) == 2
    assert p1["metadata"]["remainingItemCount"] == 3
    rv = p1["metadata"]["resourceVersion"]
    api.create(pod("p9"))                           # written between pages: not seen
    names = [i["metadata"]["name"] for i in p1["items"]]
    tok = p1["metadata"]["continue"]
    while tok:
        code, page = get(kube_front.url, f"/api/v1/namespaces/{NS}/pods?limit=2&continue={tok}")
        assert code == 200 and page["metadata"]["resourceVersion"] == rv
        names += [i["metadata"]["name"] for i in page["items"]]
        tok = page["metadata"].get("continue")
    assert names == [f"p{i}" for i in range(5)]


def test_resource_version_semantics(kube_front):
    api = kube_front.api
    api.create(pod("a", labels={"v": "1"}))
    rv1 = api.current_resource_version()
    cur = api.get("Pod", "a", NS)
    cur["metadata"]["labels"] = {"v": "2"}
    api.update(cur)
    # Exact at an older RV: the state then
    _, old = get(kube_front.url, f"/api/v1/pods?resourceVersion={rv1}&resourceVersionMatch=Exact")
    assert old["metadata"]["resourceVersion"] == str(rv1)
    assert old["items"][0]["metadata"]["labels"] == {"v": "1"}
    # NotOlderThan / "0": the current state
    for q in (f"resourceVersion={rv1}&resourceVersionMatch=NotOlderThan", "resourceVersion=0", ""):
        _, now = get(kube_front.url, f"/api/v1/pods?{q}")
        assert now["items"][0]["metadata"]["labels"] == {"v": "2"}, q
    # a future RV: 504 Timeout with retryAfterSeconds
    code, st = get(kube_front.url, "/api/v1/pods?resourceVersion=999999&resourceVersionMatch=NotOlderThan")
    assert code == 504 and st["reason"] == "Timeout" and st["details"]["retryAfterSeconds"] == 1
    # an RV older than the kept history: 410 Expired
    api.compact("Pod", api.current_resource_version())
    code, st = get(kube_front.url, f"/api/v1/pods?resourceVersion={rv1}&resourceVersionMatch=Exact")
    assert code == 410 and st["reason"] == "Expired" and st["kind"] == "Status"
    # match without an RV: 422 Invalid; a bad match value: 422
    code, st = get(kube_front.url, "/api/v1/pods?resourceVersionMatch=Exact")
    assert code == 422 and st["reason"] == "Invalid"
    code, st = get(kube_front.url, f"/api/v1/pods?resourceVersion={rv1}&resourceVersionMatch=Sometimes")
    assert code == 422 and st["reason"] == "Invalid"


def test_malformed_options_are_400_naming_the_option(kube_front):
    for q, field in (("limit=x", "limit"), ("resourceVersion=abc", "resourceVersion"),
                     ("continue=garbage!", "continue"), ("labelSelector=a%20b", "labelSelector"),
                     ("fieldSelector=spec.foo%3Dx", "spec.foo")):
        code, st = get(kube_front.url, f"/api/v1/pods?{q}")
        assert code == 400, q
        assert st["kind"] == "Status" and st["reason"] == "BadRequest" and field in st["message"], (q, st)


def test_label_selectors(kube_front):
    api = kube_front.api
    _seed(api)

    def names(sel):
        code, body = get(kube_front.url, f"/api/v1/namespaces/{NS}/pods?labelSelector={sel}")
        assert code == 200, (sel, body)
        return sorted(i["metadata"]["name"] for i in body["items"])

    assert names("app%3Dweb") == ["p1", "p3"]
    assert names("app%3D%3Dweb") == ["p1", "p3"]
    assert names("app!%3Dweb") == ["p0", "p2", "p4"]
    assert names("idx%20in%20(0,4,9)") == ["p0", "p4"]
    assert names("idx%20notin%20(0,4)") == ["p1", "p2", "p3"]
    assert names("app,idx%3D2") == ["p2"]
    assert names("!app") == []
    assert names("missing") == []
    assert names("!missing") == [f"p{i}" for i in range(5)]


def test_field_selectors(kube_front):
    api = kube_front.api
    _seed(api)
    api.bind(NS, "p1", "n1")
    api.bind(NS, "p2", "n2")
    st = api.get("Pod", "p2", NS)
    st["status"]["phase"] = "Succeeded"
    api.update_status(st)

    def names(sel, path=f"/api/v1/namespaces/{NS}/pods"):
        code, body = get(kube_front.url, f"{path}?fieldSelector={sel}")
        assert code == 200, (sel, body)
        return sorted(i["metadata"]["name"] for i in body["items"])

    assert names("spec.nodeName%3Dn1") == ["p1"]
    assert names("spec.nodeName%3D") == ["p0", "p3", "p4"]
    assert names("spec.nodeName!%3D") == ["p1", "p2"]
    assert names("status.phase!%3DSucceeded,status.phase!%3DFailed") == ["p0", "p1", "p3", "p4"]
    assert names("metadata.name%3D%3Dp3") == ["p3"]
    assert names("metadata.namespace%3Dkube-system", "/api/v1/pods") == ["other"]
    assert names("spec.schedulerName%3Dvolcano", "/api/v1/pods") == ["other"] + [f"p{i}" for i in range(5)]
    code, st = get(kube_front.url, "/api/v1/nodes?fieldSelector=spec.nodeName%3Dx")
    assert code == 400 and "field label not supported: spec.nodeName" in st["message"]


def test_selectors_with_paging_fill_each_page(kube_front):
    api = kube_front.api
    for i in range(12):
        api.create(pod(f"p{i:02d}", labels={"odd": str(i % 2)}))
    got, tok, pages = [], None, 0
    while True:
        q = "labelSelector=odd%3D1&limit=2" + (f"&continue={tok}" if tok else "")
        code, body = get(kube_front.url, f"/api/v1/namespaces/{NS}/pods?{q}")
        assert code == 200 and "remainingItemCount" not in body["metadata"]
        got += [i["metadata"]["name"] for i in body["items"]]
        pages += 1
        tok = body["metadata"].get("continue")
        if not tok:
            break
        assert len(body["items"]) == 2
    assert got == [f"p{i:02d}" for i in range(1, 12, 2)]
    assert pages in (3, 4)


def test_large_list_is_streamed_whole(kube_front):
    api = kube_front.api
    for i in range(2500):
        api.create(pod(f"p{i:05d}"))
    code, body = get(kube_front.url, "/api/v1/pods")
    assert code == 200 and len(body["items"]) == 2500
    assert [i["metadata"]["name"] for i in body["items"][:2]] == ["p00000", "p00001"]
    assert body["items"][-1]["metadata"]["name"] == "p02499"


def test_requests_are_logged_on_the_endpoint(kube_front):
    kube_front.api.create(pod("a"))
    get(kube_front.url, "/api/v1/pods?limit=5")
    get(kube_front.url, f"/api/v1/namespaces/{NS}/pods/missing")
    reqs = kube_front.endpoint.requests
    lst = [r for r in reqs if r["verb"] == "list"][-1]
    assert lst["resource"] == "pods" and lst["code"] == 200 and lst["count"] == 1 and lst["endpoint"] == "observer"
    miss = [r for r in reqs if r["verb"] == "get"][-1]
    assert (miss["name"], miss["namespace"], miss["code"]) == ("missing", NS, 404)
    lists = [r for r in kube_front.endpoint.delivery_log.records if r["type"] == "LIST"]
    assert lists and lists[-1]["kind"] == "Pod" and lists[-1]["count"] == 1


def test_informer_list_at_rv_zero_is_whole(kube_front):
    """client-go's first list is ?limit=500&resourceVersion=0: answered whole, no continue token."""
    api = kube_front.api
    for i in range(7):
        api.create(pod(f"p{i}"))
    code, body = get(kube_front.url, "/api/v1/pods?limit=3&resourceVersion=0")
    assert code == 200 and len(body["items"]) == 7
    assert "continue" not in body["metadata"]
    assert body["metadata"]["resourceVersion"] == str(api.current_resource_version())
    code, body = get(kube_front.url, "/api/v1/pods?limit=3")          # RV unset: paged
    assert len(body["items"]) == 3 and body["metadata"]["continue"]
