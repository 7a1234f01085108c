"""Discovery, health and the always-empty collections of the front (real Redis, plain HTTP)."""
from __future__ import annotations

import time

from kube_api.resources import RESOURCES
from kube_api.server import ThreadedFront

from .read_helpers import WatchReader, get


def test_version_is_numeric_and_settable(kube_front, redis_url, key_prefix):
    code, v = get(kube_front.url, "/version")
    assert code == 200 and (v["major"], v["minor"]) == ("1", "34")
    f = ThreadedFront(redis_url, key_prefix, version=("1", "33")).start()
    try:
        ep = f.add_endpoint("observer")
        assert get(ep.url, "/version")[1]["minor"] == "33"
    finally:
        f.stop()


def test_health(kube_front):
    for p in ("/healthz", "/readyz", "/livez"):
        assert get(kube_front.url, p) == (200, "ok")



def test_api_resource_lists(kube_front):
    code, core = get(kube_front.url, "/api")
    assert code == 200 and core["kind"] == "APIVersions" and core["versions"] == ["v1"]
    code, v1 = get(kube_front.url, "/api/v1")
    by = {r["name"]: r for r in v1["resources"]}
    assert by["pods"]["kind"] == "Pod" and by["pods"]["namespaced"] is True
    assert set(by["pods"]["verbs"]) >= {"get", "list", "watch", "create", "update", "patch", "delete"}
    assert by["nodes"]["namespaced"] is False
    assert by["pods/binding"]["kind"] == "Binding" and by["pods/binding"]["verbs"] == ["create"]
    assert by["pods/eviction"]["kind"] == "Eviction" and by["pods/eviction"]["group"] == "policy"
    assert by["pods/status"]["kind"] == "Pod"
    _, vc = get(kube_front.url, "/apis/scheduling.volcano.sh/v1beta1")
    names = {r["name"]: r for r in vc["resources"]}
    assert {"podgroups", "podgroups/status", "queues", "queues/status"} <= set(names)
    assert names["queues"]["namespaced"] is False and names["podgroups"]["namespaced"] is True
    _, groups = get(kube_front.url, "/apis")
    gnames = {g["name"]: g for g in groups["groups"]}
    assert {"scheduling.volcano.sh", "coordination.k8s.io", "scheduling.k8s.io", "storage.k8s.io",
            "resource.k8s.io", "topology.volcano.sh", "apps", "policy"} <= set(gnames)
    # storage.k8s.io serves v1 and v1beta1 (csistoragecapacities); GA is preferred
    assert gnames["storage.k8s.io"]["preferredVersion"]["version"] == "v1"
    assert [v["version"] for v in gnames["storage.k8s.io"]["versions"]] == ["v1", "v1beta1"]
    code, g = get(kube_front.url, "/apis/coordination.k8s.io")
    assert code == 200 and g["kind"] == "APIGroup" and g["preferredVersion"]["groupVersion"] == "coordination.k8s.io/v1"


def test_events_k8s_io_is_404_on_purpose(kube_front):
    # kube-scheduler falls back to core/v1 events on this 404 (docs/kube-api.md)
    for p in ("/apis/events.k8s.io", "/apis/events.k8s.io/v1", "/apis/events.k8s.io/v1/events", "/nope",
              "/api/v2", "/api/v1/widgets", "/api/v1/namespaces/default/nodes"):
        code, body = get(kube_front.url, p)
        assert code == 404, p
        assert body["kind"] == "Status" and body["reason"] == "NotFound" and body["code"] == 404


def test_aggregated_discovery_accept_gets_legacy_json(kube_front):
    accept = ("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
              "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json")
    code, body = get(kube_front.url, "/apis", accept=accept)
    assert code == 200 and body["kind"] == "APIGroupList"


def test_every_resource_lists_a_typed_list_at_the_global_rv(kube_front):
    kube_front.api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}, "spec": {},
                           "status": {"allocatable": {"cpu": "1"}}})
    rv = kube_front.api.current_resource_version()
    for r in RESOURCES:
        base = "/api/v1" if not r.group else f"/apis/{r.group}/{r.version}"
        code, body = get(kube_front.url, f"{base}/{r.plural}")
        assert code == 200, (r.plural, body)
        assert body["kind"] == f"{r.kind}List" and body["apiVersion"] == r.api_version
        assert body["metadata"]["resourceVersion"] == str(rv)
        if r.namespaced:
            code, body = get(kube_front.url, f"{base}/namespaces/default/{r.plural}")
            assert code == 200 and body["kind"] == f"{r.kind}List"


def test_unmodelled_watch_sends_only_bookmarks_until_its_timeout(kube_front):
    rv = kube_front.api.current_resource_version()
    t0 = time.monotonic()
    with WatchReader(kube_front.url, f"/apis/storage.k8s.io/v1/csinodes?watch=true&resourceVersion={rv}"
                     f"&allowWatchBookmarks=true&timeoutSeconds=3") as w:
        assert w.status == 200
        events = []
        while (ev := w.next(10)) is not None:
            events.append(ev[1])
    took = time.monotonic() - t0
    assert 2.5 <= took < 6, took
    assert events and all(e["type"] == "BOOKMARK" for e in events)
    assert events[0]["object"] == {"kind": "CSINode", "apiVersion": "storage.k8s.io/v1",
                                   "metadata": {"resourceVersion": str(rv)}}


def test_unmodelled_watch_list_ends_its_initial_events_at_once(kube_front):
    with WatchReader(kube_front.url, "/apis/resource.k8s.io/v1/resourceslices?watch=true&sendInitialEvents=true"
                     "&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=5") as w:
        _, ev = w.next(5)
    assert ev["type"] == "BOOKMARK"
    assert ev["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
