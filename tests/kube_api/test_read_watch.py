"""WATCH through the front: events after a resourceVersion, bookmarks, timeouts, 410, watch-list,
selector transitions, disconnects (real Redis, raw HTTP streams)."""
from __future__ import annotations

import time

from .read_helpers import NS, WatchReader, get, node, pod


def _wait(cond, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.05)
    return False


def test_watch_from_rv_delivers_later_events_with_kind_and_bookmarks(kube_front):
    api = kube_front.api
    api.create(pod("before"))
    rv = api.current_resource_version()
    with WatchReader(kube_front.url, f"/api/v1/namespaces/{NS}/pods?watch=true&resourceVersion={rv}"
                     "&allowWatchBookmarks=true&timeoutSeconds=20") as w:
        assert w.status == 200
        assert w.resp.getheader("Content-Type") == "application/json"
        api.create(pod("a"))
        api.create(pod("x", "elsewhere"))          # another namespace: not on this stream
        cur = api.get("Pod", "a", NS)
        cur["metadata"]["labels"] = {"k": "v"}
        api.update(cur)
        api.delete("Pod", "a", NS, grace_period_seconds=0)
        evs = []
        while len([e for e in evs if e["type"] != "BOOKMARK"]) < 3:
            evs.append(w.next(10)[1])
        kinds = [(e["type"], e["object"]["metadata"]["name"]) for e in evs if e["type"] != "BOOKMARK"]
        assert kinds == [("ADDED", "a"), ("MODIFIED", "a"), ("DELETED", "a")]
        for e in evs:
            assert e["object"]["kind"] == "Pod" and e["object"]["apiVersion"] == "v1"
            assert isinstance(e["object"]["metadata"]["resourceVersion"], str)
        # a periodic bookmark (the fixture's interval is 1 s): only kind, apiVersion and the RV
        end = time.monotonic() + 5
        while time.monotonic() < end:
            e = w.next(5)[1]
            if e["type"] == "BOOKMARK":
                assert set(e["object"]) == {"kind", "apiVersion", "metadata"}
                assert set(e["object"]["metadata"]) == {"resourceVersion"}
                assert int(e["object"]["metadata"]["resourceVersion"]) >= int(evs[-1]["object"]["metadata"]["resourceVersion"])
                break
        else:
            raise AssertionError("no bookmark")


def test_no_bookmarks_unless_asked(kube_front):
    rv = kube_front.api.current_resource_version()
    with WatchReader(kube_front.url, f"/api/v1/pods?watch=true&resourceVersion={rv}&timeoutSeconds=3") as w:
        t0 = time.monotonic()
        assert w.next(10) is None                   # nothing, then the end at the timeout
        assert 2.5 <= time.monotonic() - t0 < 6


def test_too_old_rv_is_an_error_event_410(kube_front):
    api = kube_front.api
    api.create(pod("a"))
    old = api.current_resource_version()
    api.create(pod("b"))
    api.compact("Pod", api.current_resource_version())
    with WatchReader(kube_front.url, f"/api/v1/pods?watch=true&resourceVersion={old}") as w:
        assert w.status == 200
        _, ev = w.next(10)
        assert ev["type"] == "ERROR"
        assert ev["object"]["kind"] == "Status" and ev["object"]["code"] == 410
        assert ev["object"]["reason"] == "Expired"
        assert w.next(10) is None                   # and the stream ends


def test_legacy_watch_from_zero_starts_with_the_current_state(kube_front):
    api = kube_front.api
    api.create(pod("a"))
    api.create(pod("b"))
    with WatchReader(kube_front.url, "/api/v1/pods?watch=true&resourceVersion=0&timeoutSeconds=10") as w:
        evs = w.take(2)
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in evs] == [("ADDED", "a"), ("ADDED", "b")]
        api.create(pod("c"))
        _, ev = w.next(10)
        assert (ev["type"], ev["object"]["metadata"]["name"]) == ("ADDED", "c")


def test_watch_list_initial_events_then_the_end_bookmark(kube_front):
    api = kube_front.api
    api.create(pod("a"))
    api.create(pod("b"))
    rv = api.current_resource_version()
    with WatchReader(kube_front.url, "/api/v1/pods?watch=true&sendInitialEvents=true&allowWatchBookmarks=true"
                     "&resourceVersionMatch=NotOlderThan&timeoutSeconds=10") as w:
        evs = w.take(3)
        assert [e["type"] for e in evs] == ["ADDED", "ADDED", "BOOKMARK"]
        bm = evs[2]["object"]
        assert bm["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
        assert bm["metadata"]["resourceVersion"] == str(rv)
        api.create(pod("c"))
        while True:
            _, ev = w.next(10)
            if ev["type"] != "BOOKMARK":
                break
        assert (ev["type"], ev["object"]["metadata"]["name"]) == ("ADDED", "c")


def test_watch_list_option_errors_are_422_before_the_stream(kube_front):
    for q in ("sendInitialEvents=true&allowWatchBookmarks=true",
              "sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=Exact",
              "resourceVersionMatch=NotOlderThan",
              "sendInitialEvents=true&resourceVersionMatch=NotOlderThan"):
        code, st = get(kube_front.url, f"/api/v1/pods?watch=true&{q}")
        assert code == 422, q
        assert st["reason"] == "Invalid" and st["kind"] == "Status", q


def test_field_selector_transitions_are_added_and_deleted(kube_front):
    """kube-scheduler's pod informer: an object that stops matching is DELETED for the watcher."""
    api = kube_front.api
    api.create(node("n1"))
    api.create(pod("a"))
    api.create(pod("b"))
    rv = api.current_resource_version()
    sel = "status.phase!%3DSucceeded,status.phase!%3DFailed"
    with WatchReader(kube_front.url, f"/api/v1/namespaces/{NS}/pods?watch=true&resourceVersion={rv}"
                     f"&fieldSelector={sel}&timeoutSeconds=20") as w:
        api.bind(NS, "a", "n1")                                     # still matching: MODIFIED
        a = api.get("Pod", "a", NS)
        a["status"]["phase"] = "Succeeded"
        api.update_status(a)                                        # stops matching: DELETED
        a = api.get("Pod", "a", NS)
        a["metadata"]["labels"] = {"x": "y"}
        api.update(a)                                               # still not matching: nothing
        a = api.get("Pod", "a", NS)
        a["status"]["phase"] = "Running"
        api.update_status(a)                                        # matches again: ADDED
        api.delete("Pod", "b", NS, grace_period_seconds=0)          # held: DELETED
        evs = w.take(4)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in evs] == [
        ("MODIFIED", "a"), ("DELETED", "a"), ("ADDED", "a"), ("DELETED", "b")]
    assert evs[2]["object"]["status"]["phase"] == "Running"


def test_label_selector_watch_from_zero(kube_front):
    api = kube_front.api
    api.create(pod("a", labels={"app": "web"}))
    api.create(pod("b", labels={"app": "db"}))
    with WatchReader(kube_front.url, "/api/v1/pods?watch=true&labelSelector=app%3Dweb&timeoutSeconds=20") as w:
        _, ev = w.next(10)
        assert (ev["type"], ev["object"]["metadata"]["name"]) == ("ADDED", "a")
        b = api.get("Pod", "b", NS)
        b["metadata"]["labels"] = {"app": "web"}
        api.update(b)
        a = api.get("Pod", "a", NS)
        a["metadata"]["labels"] = {"app": "db"}
        api.update(a)
        evs = w.take(2)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in evs] == [("ADDED", "b"), ("DELETED", "a")]


def test_client_disconnect_ends_the_stream_and_its_tasks(kube_front):
    import asyncio
    ep = kube_front.endpoint

    async def watch_tasks():
        return [t for t in asyncio.all_tasks() if t.get_name().startswith("kube-watch-") and not t.done()]

    w = WatchReader(kube_front.url, "/api/v1/pods?watch=true&resourceVersion=0&timeoutSeconds=300")
    w2 = WatchReader(kube_front.url, "/apis/storage.k8s.io/v1/csinodes?watch=true&timeoutSeconds=300")
    assert _wait(lambda: len(ep.open_watches) == 2)
    assert len(kube_front.front.run(watch_tasks())) == 2
    w.close()
    w2.close()
    assert _wait(lambda: not ep.open_watches, 5), ep.open_watches
    assert _wait(lambda: not kube_front.front.run(watch_tasks()), 5)
    watches = [r for r in ep.requests if r["verb"] == "watch"]
    assert len(watches) == 2 and all(r["code"] == 200 for r in watches)


def test_watch_events_are_in_the_delivery_log(kube_front):
    api = kube_front.api
    rv = api.current_resource_version()
    with WatchReader(kube_front.url, f"/api/v1/pods?watch=true&resourceVersion={rv}&timeoutSeconds=10") as w:
        api.create(pod("a"))
        w.take(1)
    recs = [r for r in kube_front.endpoint.delivery_log.records if r["type"] != "LIST"]
    assert len(recs) == 1
    r = recs[0]
    assert (r["kind"], r["type"], r["ns"], r["name"]) == ("Pod", "ADDED", NS, "a")
    assert r["rv"] == api.get("Pod", "a", NS)["metadata"]["resourceVersion"]
    assert r["delivered"] >= r["recv"] and isinstance(r["object"]["metadata"]["resourceVersion"], int)


def test_table_watch_sends_one_row_tables(kube_front):
    import pytest
    from kube_api.lists import table_module
    from kube_api.resources import lookup
    if table_module(lookup("", "v1", "pods")) is None:
        pytest.skip("kube_api.tables renders no pod Tables (the plain objects are sent then)")
    accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
    api = kube_front.api
    api.create(pod("a"))
    with WatchReader(kube_front.url, "/api/v1/namespaces/default/pods?watch=true&resourceVersion=0&timeoutSeconds=10",
                     accept=accept) as w:
        _, first = w.next(10)
        api.create(pod("b"))
        _, second = w.next(10)
    for ev in (first, second):
        assert ev["type"] == "ADDED" and ev["object"]["kind"] == "Table"
        assert ev["object"]["apiVersion"] == "meta.k8s.io/v1" and len(ev["object"]["rows"]) == 1
    assert first["object"]["columnDefinitions"]
    assert not second["object"].get("columnDefinitions")
    assert [e["object"]["rows"][0]["cells"][0] for e in (first, second)] == ["a", "b"]
