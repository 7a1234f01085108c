"""list with limit / continue (every page consistent at the first page's resourceVersion, 410 with
a fresh-list hint once that RV is compacted) and the resourceVersion / resourceVersionMatch
options (Kubernetes' api-concepts table; ValidateListOptions' errors)."""
from __future__ import annotations

import random
import threading
import time

import pytest
import redis

from cluster_state.client import ApiClient
from cluster_state.errors import BadRequest, CorruptObject, Gone, Invalid, TooLargeResourceVersion

from .helpers import api, dump, node, pod  # noqa: F401


def _key(o: dict) -> str:
    md = o["metadata"]
    return f"{md['namespace']}/{md['name']}" if md.get("namespace") else md["name"]


def _all_pages(api, kind, namespace=None, limit=3, **kw):
    pages = [api.list(kind, namespace, limit=limit, **kw)]
    while pages[-1].continue_:
        pages.append(api.list(kind, namespace, limit=limit, continue_=pages[-1].continue_))
    return pages


def _snap_keys(redis_url, prefix):
    r = redis.Redis.from_url(redis_url)
    try:
        return list(r.scan_iter(match=f"{prefix}:snap:*"))
    finally:
        r.close()


def test_pages_cover_everything_once_in_key_order(api, redis_url, key_prefix):
    for i in range(25):
        api.create(pod(f"p{i:02d}", ns="a" if i % 3 else "b"))
    api.create(node("n1"))
    pages = _all_pages(api, "Pod", limit=7)
    assert [len(p.items) for p in pages] == [7, 7, 7, 4]
    keys = [_key(o) for p in pages for o in p.items]
    assert keys == sorted(keys) and len(set(keys)) == 25
    assert {p.resource_version for p in pages} == {26}
    assert [p.remaining_item_count for p in pages] == [18, 11, 4, None]
    assert pages[-1].continue_ is None
    # the last page dropped the snapshot
    assert _snap_keys(redis_url, key_prefix) == []
    # a limit that covers everything: one page, no token, no snapshot
    one = api.list("Pod", limit=25)
    assert len(one.items) == 25 and one.continue_ is None and one.remaining_item_count is None
    assert [_key(o) for o in one.items] == keys
    assert _snap_keys(redis_url, key_prefix) == []


def test_namespace_paging_and_cluster_scoped_kinds(api):
    for i in range(10):
        api.create(pod(f"p{i}", ns="a" if i % 2 else "b"))
        api.create(node(f"n{i}"))
    pages = _all_pages(api, "Pod", "a", limit=2)
    assert [o["metadata"]["name"] for p in pages for o in p.items] == ["p1", "p3", "p5", "p7", "p9"]
    assert all(o["metadata"]["namespace"] == "a" for p in pages for o in p.items)
    nodes = _all_pages(api, "Node", limit=4)
    assert [o["metadata"]["name"] for p in nodes for o in p.items] == [f"n{i}" for i in range(10)]
    # a token only continues the list it came from
    with pytest.raises(BadRequest) as ei:
        api.list("Pod", "b", limit=2, continue_=pages[0].continue_)
    assert ei.value.field == "continue" and "continues a list of Pod in namespace 'a'" in ei.value.message
    with pytest.raises(BadRequest):
        api.list("Node", limit=2, continue_=pages[0].continue_)


def test_pages_are_consistent_at_the_first_rv_while_writes_happen(redis_url, key_prefix):
    """A writer creates, updates and deletes pods between every two pages; every page shows the
    state at the first page's RV, which the writer's own log (each write returns its RV) says."""
    api = ApiClient.from_url(redis_url, key_prefix)
    writer = ApiClient.from_url(redis_url, key_prefix)
    log: list[tuple[int, str, dict | None]] = []      # (rv, key, object or None when deleted)
    for i in range(40):
        o = api.create(pod(f"p{i:02d}"))
        log.append((o["metadata"]["resourceVersion"], _key(o), o))
    stop = threading.Event()
    errors: list[BaseException] = []

    def write():
        rnd = random.Random(7)
        n = 40
        try:
            while not stop.is_set():
                choice = rnd.random()
                if choice < 0.4:
                    o = writer.create(pod(f"p{n:02d}"))
                    n += 1
                    log.append((o["metadata"]["resourceVersion"], _key(o), o))
                else:
                    current = {k: o for _, k, o in log}
                    live = [k for k, o in current.items() if o is not None]
                    k = rnd.choice(live)
                    name = k.split("/")[1]
                    if choice < 0.7:
                        o = writer.update(dict(current[k], spec=dict(current[k]["spec"], priority=n)))
                        n += 1
                        log.append((o["metadata"]["resourceVersion"], k, o))
                    else:
                        last = writer.delete("Pod", name, "default", grace_period_seconds=0)
                        log.append((last["metadata"]["resourceVersion"], k, None))
        except BaseException as e:  # noqa: BLE001 -- reported by the test thread
            errors.append(e)

    t = threading.Thread(target=write, daemon=True)
    t.start()
    try:
        pages = [api.list("Pod", limit=4)]
        while pages[-1].continue_:
            seen = api.current_resource_version()
            deadline = time.monotonic() + 30
            while api.current_resource_version() < seen + 3 and time.monotonic() < deadline:
                time.sleep(0.001)     # let the writer move on before the next page
            pages.append(api.list("Pod", limit=4, continue_=pages[-1].continue_))
    finally:
        stop.set()
        t.join(30)
    assert not errors, errors
    rv = pages[0].resource_version
    assert all(p.resource_version == rv for p in pages)
    assert api.current_resource_version() > rv + 10        # writes did happen during the pages
    want: dict[str, dict] = {}
    for wrv, k, o in sorted(log, key=lambda x: x[0]):
        if wrv > rv:
            break
        if o is None:
            want.pop(k, None)
        else:
            want[k] = o
    got = [o for p in pages for o in p.items]
    assert [_key(o) for o in got] == sorted(want)
    assert {_key(o): o for o in got} == want
    api.close()
    writer.close()


def test_continue_after_compaction_is_gone_with_a_fresh_list_hint(api):
    for i in range(10):
        api.create(pod(f"p{i}"))
    first = api.list("Pod", limit=4)
    api.create(pod("p99"))                                   # after the last key of the next pages
    api.delete("Pod", "p5", "default", grace_period_seconds=0)
    api.compact("Pod", api.current_resource_version())
    with pytest.raises(Gone) as ei:
        api.list("Pod", limit=4, continue_=first.continue_)
    e = ei.value
    assert e.code == 410 and e.reason == "Expired" and e.field == "continue"
    assert "too old to display a consistent list result" in e.message
    assert "compacted up to 12" in e.message
    # the hint continues after the last key served, at the current RV: an inconsistent remainder
    rest = _all_pages(api, "Pod", limit=4, continue_=e.details["continue"])
    names = [o["metadata"]["name"] for p in rest for o in p.items]
    assert names == ["p4", "p6", "p7", "p8", "p9", "p99"]
    assert {p.resource_version for p in rest} == {12}


def test_continue_after_the_snapshot_expired_is_gone(api, redis_url, key_prefix):
    for i in range(6):
        api.create(pod(f"p{i}"))
    api.store.continue_ttl = 1
    first = api.list("Pod", limit=2)
    assert len(_snap_keys(redis_url, key_prefix)) == 2
    deadline = time.monotonic() + 30
    while _snap_keys(redis_url, key_prefix) and time.monotonic() < deadline:
        time.sleep(0.05)
    with pytest.raises(Gone) as ei:
        api.list("Pod", limit=2, continue_=first.continue_)
    assert "snapshot was dropped" in ei.value.message and ei.value.details["continue"]


def test_corrupt_stored_value_in_a_page_is_reported_not_raised(api, redis_url, key_prefix):
    for i in range(5):
        api.create(pod(f"p{i}"))
    r = redis.Redis.from_url(redis_url)
    r.hset(api.keys.obj("Pod"), "default/p2", b"\xc1garbage")
    r.close()
    pages = _all_pages(api, "Pod", limit=2)
    assert [o["metadata"]["name"] for p in pages for o in p.items] == ["p0", "p1", "p3", "p4"]
    corrupt = [c for p in pages for c in p.corrupt]
    assert len(corrupt) == 1 and corrupt[0][0] == "default/p2"


# --- resourceVersion / resourceVersionMatch ----------------------------------------------------

def test_not_older_than_and_any(api):
    for i in range(3):
        api.create(pod(f"p{i}"))
    for kw in ({"resource_version": 0}, {"resource_version": 2}, {"resource_version": 3},
               {"resource_version": 2, "resource_version_match": "NotOlderThan"},
               {"resource_version": "3"}):
        res = api.list("Pod", **kw)
        assert res.resource_version == 3 and len(res.items) == 3, kw
    with pytest.raises(TooLargeResourceVersion) as ei:
        api.list("Pod", resource_version=4)
    e = ei.value
    assert e.code == 504 and e.reason == "Timeout" and e.details["retry_after_seconds"] == 1
    assert "Too large resource version: 4, current: 3" in e.message
    with pytest.raises(TooLargeResourceVersion):
        api.list("Pod", resource_version=9, resource_version_match="Exact")
    with pytest.raises(TooLargeResourceVersion):
        api.list("Pod", resource_version=9, limit=2)


def _replay(log, rv):
    state = {}
    for wrv, k, o in log:
        if wrv <= rv:
            if o is None:
                state.pop(k, None)
            else:
                state[k] = o
    return state


def test_exact_reads_rebuild_every_older_state(api):
    """Random creates, updates, status updates, binds and deletes; an exact list at each RV equals
    the state recorded after that write (the stored objects, RVs included)."""
    rnd = random.Random(3)
    log = []
    live: dict[str, dict] = {}
    for step in range(120):
        c = rnd.random()
        if c < 0.3 or len(live) < 3:
            o = api.create(pod(f"p{step}", ns=rnd.choice(["a", "b"])))
        else:
            k = rnd.choice(sorted(live))
            ns, name = k.split("/")
            if c < 0.5:
                o = api.update(dict(live[k], spec=dict(live[k]["spec"], priority=step)))
            elif c < 0.65:
                o = api.update_status(dict(live[k], status={"phase": "Running"}))
            elif c < 0.8 and not live[k]["spec"].get("nodeName"):
                o = api.bind(ns, name, f"n{step}")
            else:
                last = api.delete("Pod", name, ns, grace_period_seconds=0)
                live.pop(k)
                log.append((last["metadata"]["resourceVersion"], k, None))
                continue
        if rnd.random() < 0.2:
            api.create(node(f"node{step}"))                   # other kinds' RVs in between
        live[_key(o)] = o
        log.append((o["metadata"]["resourceVersion"], _key(o), o))
    cur = api.current_resource_version()
    for rv in sorted(set(rnd.sample(range(1, cur + 1), 40)) | {1, cur}):
        want = _replay(log, rv)
        res = api.list("Pod", resource_version=rv, resource_version_match="Exact")
        assert res.resource_version == rv
        assert {_key(o): o for o in res.items} == want, rv
        ns_a = api.list("Pod", "a", resource_version=rv, resource_version_match="Exact")
        assert {_key(o) for o in ns_a.items} == {k for k in want if k.startswith("a/")}
    # exact + limit: the pages of an older state, consistent at it
    rv = cur // 2
    pages = _all_pages(api, "Pod", limit=5, resource_version=rv)
    assert {p.resource_version for p in pages} == {rv}
    assert {_key(o): o for p in pages for o in p.items} == _replay(log, rv)


def test_exact_read_older_than_the_history_is_gone(redis_url, key_prefix):
    api = ApiClient.from_url(redis_url, key_prefix, history=10)
    for i in range(5):
        api.create(pod(f"p{i}"))                             # rv 1..5
    for j in range(30):
        api.update(dict(api.get("Pod", "p0", "default"), spec={"priority": j}))
    with pytest.raises(Gone) as ei:
        api.list("Pod", resource_version=3, resource_version_match="Exact")
    assert ei.value.code == 410 and "too old" in ei.value.message
    # compact() makes every exact read below the compacted point Gone
    api2 = ApiClient.from_url(redis_url, key_prefix + "x")
    for i in range(3):
        api2.create(pod(f"p{i}"))
    api2.compact("Pod", 2)
    with pytest.raises(Gone) as ei:
        api2.list("Pod", resource_version=1, resource_version_match="Exact")
    assert "compacted up to 2" in ei.value.message
    assert len(api2.list("Pod", resource_version=2, resource_version_match="Exact").items) == 2
    api.close()
    api2.close()


def test_exact_read_across_a_corrupt_history_entry_is_an_error(api, redis_url):
    api.create(pod("p0"))
    api.create(pod("p1"))
    r = redis.Redis.from_url(redis_url)
    r.xadd(api.stream_key("Pod"), {"t": "MODIFIED", "o": b"\xc1"}, id="3-0")
    r.set(api.keys.rv, 3)
    r.close()
    with pytest.raises(CorruptObject) as ei:
        api.list("Pod", resource_version=2, resource_version_match="Exact")
    assert "undecodable" in ei.value.message


@pytest.mark.parametrize("kw, err, field, words", [
    ({"limit": -1}, BadRequest, "limit", "limit must be an integer >= 0"),
    ({"limit": "3"}, BadRequest, "limit", "limit must be an integer >= 0"),
    ({"limit": True}, BadRequest, "limit", "limit must be an integer >= 0"),
    ({"resource_version": -2}, BadRequest, "resourceVersion", "resourceVersion must be an integer"),
    ({"resource_version": "abc"}, BadRequest, "resourceVersion", "resourceVersion must be an integer"),
    ({"resource_version_match": "Exact"}, Invalid, "resourceVersionMatch",
     "resourceVersionMatch is forbidden unless resourceVersion is provided"),
    ({"resource_version": 1, "resource_version_match": "Newest"}, Invalid, "resourceVersionMatch",
     'supported values: "Exact", "NotOlderThan", ""'),
    ({"resource_version": 0, "resource_version_match": "Exact"}, Invalid, "resourceVersionMatch",
     'resourceVersionMatch "exact" is forbidden for resourceVersion "0"'),
    ({"continue_": "not-a-token"}, BadRequest, "continue", "invalid continue token"),
    ({"continue_": "eyJ2IjoyfQ"}, BadRequest, "continue", "invalid continue token"),
    ({"continue_": 5}, BadRequest, "continue", "continue must be a token string"),
])
def test_bad_list_options(api, redis_url, key_prefix, kw, err, field, words):
    api.create(pod("p1"))
    before = dump(redis_url, key_prefix)
    with pytest.raises(err) as ei:
        api.list("Pod", **kw)
    assert ei.value.field == field and words in ei.value.message, ei.value
    assert type(ei.value) is err
    assert dump(redis_url, key_prefix) == before


def test_continue_with_options_that_do_not_go_with_it(api):
    for i in range(4):
        api.create(pod(f"p{i}"))
    tok = api.list("Pod", limit=2).continue_
    with pytest.raises(BadRequest) as ei:
        api.list("Pod", limit=2, continue_=tok, resource_version=3)
    assert ei.value.message == "specifying resource version is not allowed when using continue"
    with pytest.raises(Invalid) as ei:
        api.list("Pod", continue_=tok, resource_version=3, resource_version_match="NotOlderThan")
    assert "resourceVersionMatch is forbidden when continue is provided" in ei.value.message
    # resourceVersion "0" is tolerated with a token (as in Kubernetes), and the limit may change
    rest = api.list("Pod", limit=5, continue_=tok, resource_version=0)
    assert [o["metadata"]["name"] for o in rest.items] == ["p2", "p3"] and rest.continue_ is None


async def test_async_paging_and_exact(redis_url, key_prefix):
    from cluster_state.aio import AsyncApiClient
    a = AsyncApiClient.from_url(redis_url, key_prefix)
    try:
        for i in range(7):
            await a.create(pod(f"p{i}"))
        await a.delete("Pod", "p3", "default", grace_period_seconds=0)
        res = await a.list("Pod", limit=3)
        names = [o["metadata"]["name"] for o in res.items]
        while res.continue_:
            res = await a.list("Pod", limit=3, continue_=res.continue_)
            names += [o["metadata"]["name"] for o in res.items]
        assert names == ["p0", "p1", "p2", "p4", "p5", "p6"]
        old = await a.list("Pod", resource_version=7, resource_version_match="Exact")
        assert sorted(o["metadata"]["name"] for o in old.items) == [f"p{i}" for i in range(7)]
        with pytest.raises(TooLargeResourceVersion):
            await a.list("Pod", resource_version=99)
    finally:
        await a.close()
