"""Write-path semantics beyond one request: concurrent patches of one object all land (the
read-patch-write loop retries on a race, as GuaranteedUpdate does), dry runs store nothing, every
write is in the endpoint's request log once, and a pod being deleted cannot be bound."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from tests.cluster_state.helpers import podgroup
from tests.kube_api.write_helpers import MERGE, PG, POD, SMP, assert_status, call, pod_json, snapshot


def test_concurrent_patches_all_land(kube_front):
    kube_front.api.create(pod_json("p1"))
    n = 24

    def patch(i: int) -> int:
        code, _ = call(kube_front.url, "PATCH", POD + "/p1", {"metadata": {"labels": {f"l{i}": str(i)}}},
                       ctype=MERGE if i % 2 else SMP)
        return code

    with ThreadPoolExecutor(8) as pool:
        codes = list(pool.map(patch, range(n)))
    assert codes == [200] * n
    labels = kube_front.api.get("Pod", "p1", "default")["metadata"]["labels"]
    assert all(labels.get(f"l{i}") == str(i) for i in range(n)), labels


def test_dry_run_update_patch_create_store_nothing(kube_front):
    kube_front.api.create(pod_json("p1"))
    kube_front.api.create(podgroup("pg1"))
    before = snapshot(kube_front.redis_url, kube_front.prefix)
    _, got = call(kube_front.url, "GET", POD + "/p1")
    got["metadata"]["labels"]["dry"] = "1"
    code, body = call(kube_front.url, "PUT", POD + "/p1?dryRun=All", got)
    assert code == 200 and body["metadata"]["labels"]["dry"] == "1", body
    code, body = call(kube_front.url, "PATCH", POD + "/p1/status?dryRun=All",
                      {"status": {"nominatedNodeName": "n1"}}, ctype=MERGE)
    assert code == 200 and body["status"]["nominatedNodeName"] == "n1", body
    code, body = call(kube_front.url, "PATCH", PG + "/pg1?dryRun=All", {"status": {"phase": "Running"}}, ctype=MERGE)
    assert code == 200 and body["status"]["phase"] == "Running", body
    code, body = call(kube_front.url, "POST", POD + "?dryRun=All", pod_json("p1"))
    assert_status(body, 409, "AlreadyExists")
    code, body = call(kube_front.url, "PATCH", POD + "/p1?dryRun=All", {"status": {"phase": "x"}}, ctype=MERGE)
    assert code == 200                                  # the main resource ignores status
    code, body = call(kube_front.url, "PATCH", POD + "/p1/status?dryRun=All", {"status": {"phase": "x"}},
                      ctype=MERGE)
    assert_status(body, 422, "Invalid")
    code, body = call(kube_front.url, "PUT", POD + "/p1?dryRun=Some", got)
    assert_status(body, 400, "BadRequest")
    assert snapshot(kube_front.redis_url, kube_front.prefix) == before


def test_every_write_is_logged_once_with_its_store_operation(kube_front):
    ep = kube_front.endpoint
    start = len(ep.requests)
    call(kube_front.url, "POST", POD, pod_json("p1"))
    call(kube_front.url, "PATCH", POD + "/p1/status", {"status": {"nominatedNodeName": "n1"}}, ctype=SMP)
    call(kube_front.url, "POST", POD + "/p1/binding", {"metadata": {"name": "p1"}, "target": {"name": "n1"}})
    call(kube_front.url, "POST", POD + "/p1/binding", {"metadata": {"name": "p1"}, "target": {"name": "n1"}})
    call(kube_front.url, "DELETE", POD + "/p1")
    recs = ep.requests[start:]
    assert [(r["verb"], r["subresource"], r["code"], r.get("op")) for r in recs] == [
        ("create", None, 201, "create"), ("patch", "status", 200, "update_status"),
        ("create", "binding", 201, "bind"), ("create", "binding", 409, "bind"), ("delete", None, 200, "delete")]
    assert all(r["resource"] == "pods" and r["name"] in ("p1", None) for r in recs)


def test_a_terminating_pod_cannot_be_bound(kube_front):
    kube_front.api.create(pod_json("p1", node=""))
    p = kube_front.api.get("Pod", "p1", "default")
    kube_front.api.update({**p, "metadata": {**p["metadata"], "finalizers": ["example.com/hold"]}})
    code, _ = call(kube_front.url, "DELETE", POD + "/p1")
    assert code == 200
    assert kube_front.api.get("Pod", "p1", "default")["metadata"]["deletionTimestamp"]
    code, body = call(kube_front.url, "POST", POD + "/p1/binding", {"metadata": {"name": "p1"},
                                                                   "target": {"name": "n1"}})
    assert_status(body, 409, "Conflict")
    assert "being deleted" in body["message"]


def test_binding_clears_the_nominated_node_under_the_kep_5278_switch(redis_url, key_prefix):
    from cluster_state.apiserver import ApiServerConfig
    from cluster_state.client import ApiClient
    from kube_api.server import ThreadedFront

    for clear in (False, True):
        prefix = f"{key_prefix}-{int(clear)}"
        front = ThreadedFront(redis_url, prefix, api_server=ApiServerConfig(clear_nnn_on_binding=clear)).start()
        api = ApiClient.from_url(redis_url, prefix)
        try:
            url = front.add_endpoint("observer").url
            api.create(pod_json("p1"))
            api.update_status({**api.get("Pod", "p1", "default"), "status": {"phase": "Pending",
                                                                             "nominatedNodeName": "n1"}})
            code, body = call(url, "POST", POD + "/p1/binding", {"metadata": {"name": "p1"},
                                                                  "target": {"kind": "Node", "name": "n1"}})
            assert code == 201, body
            st = api.get("Pod", "p1", "default")
            assert st["spec"]["nodeName"] == "n1"
            assert st["status"]["nominatedNodeName"] == ("" if clear else "n1"), (clear, st["status"])
        finally:
            front.stop()
            api.close()


def test_deeply_nested_bodies_are_400(kube_front):
    kube_front.api.create(pod_json("p1"))
    before = snapshot(kube_front.redis_url, kube_front.prefix)
    deep = "{}"
    for _ in range(1000):
        deep = '{"a": ' + deep + "}"
    raw = ('{"metadata": {"name": "deep", "labels": {"x": "1"}}, "spec": ' + deep + "}").encode()
    for method, path, ctype in [("PATCH", POD + "/p1", MERGE), ("PATCH", POD + "/p1", SMP),
                                ("POST", POD, "application/json")]:
        code, body = call(kube_front.url, method, path, ctype=ctype, raw=raw)
        assert 400 <= code < 500, (method, code, body)
        assert body["kind"] == "Status", body
    assert snapshot(kube_front.redis_url, kube_front.prefix) == before


def test_podgroup_put_uses_the_narrowest_store_operation(kube_front):
    """Volcano PUTs whole PodGroups; a status-only change is an update_status (what API chaos and
    the request log name), a spec-only change an update, both together one replace."""
    from tests.kube_api.write_helpers import PG
    kube_front.api.create(podgroup("pg1"))
    ep = kube_front.endpoint
    ops = []
    for change in ("status", "spec", "both"):
        _, got = call(kube_front.url, "GET", PG + "/pg1")
        if change in ("status", "both"):
            got["status"]["running"] = (got["status"].get("running") or 0) + 1
        if change in ("spec", "both"):
            got["spec"]["minMember"] += 1
        code, body = call(kube_front.url, "PUT", PG + "/pg1", got)
        assert code == 200, body
        ops.append(ep.requests[-1]["op"])
    assert ops == ["update_status", "update", "replace"]
    st = kube_front.api.get("PodGroup", "pg1", "default")
    assert st["status"]["running"] == 2 and st["spec"]["minMember"] == 3
