"""Informer against the real API server (a real redis-server, one key prefix per test)."""
from __future__ import annotations

import asyncio
import random
import time

import msgpack
import pytest

from cluster_state.aio import AsyncApiClient
from cluster_state.client import ApiClient
from cluster_state.delivery import (ADDED, DELETED, LIST, MODIFIED, WRITE_TIME_ANNOTATION,
                                    DelayHook, DeliveryLog, read_delivery_log, replay)
from cluster_state.errors import Invalid, TooLargeResourceVersion
from cluster_state.informer import Informer, ThreadedInformer
from cluster_state.reflector import Backoff

NS = "default"


def make_pod(name: str, ns: str = NS, **ann) -> dict:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "annotations": dict(ann)},
        "spec": {"schedulerName": "volcano", "nodeName": "",
                 "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m",
                                                                         "memory": "1Gi"}}}]},
        "status": {"phase": "Pending"},
    }


def make_node(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "spec": {"unschedulable": False},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                       "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}


class Recorder:
    """Handler that records every notification."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def on_add(self, obj, is_initial_list):
        self.calls.append(("add", obj["metadata"]["name"], obj["metadata"]["resourceVersion"],
                           is_initial_list, obj["metadata"]["uid"]))

    def on_update(self, old, new):
        self.calls.append(("update", new["metadata"]["name"], new["metadata"]["resourceVersion"],
                           old["metadata"]["resourceVersion"], new["metadata"]["uid"]))

    def on_delete(self, obj, tombstone=False):
        self.calls.append(("delete", obj["metadata"]["name"], obj["metadata"]["resourceVersion"],
                           tombstone, obj["metadata"]["uid"]))

    def of(self, kind):
        return [c for c in self.calls if c[0] == kind]


async def eventually(cond, timeout=30.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def api(redis_url, key_prefix):
    c = ApiClient.from_url(redis_url, prefix=key_prefix)
    yield c
    close = getattr(c, "close", None)
    if close:
        close()


@pytest.fixture
async def aapi(redis_url, key_prefix):
    c = AsyncApiClient.from_url(redis_url, prefix=key_prefix)
    yield c
    close = getattr(c, "aclose", None) or getattr(c, "close", None)
    if close:
        r = close()
        if asyncio.iscoroutine(r):
            await r


def informer(aapi, kind="Pod", **kw) -> Informer:
    kw.setdefault("backoff", Backoff.fast(seed=1))
    kw.setdefault("block_ms", 100)
    return Informer(aapi, kind, **kw)


async def caught_up(inf: Informer, api: ApiClient, timeout=30.0):
    target = api.current_resource_version()
    await eventually(lambda: inf.last_synced_rv >= target and inf.pending() == 0,
                     timeout, f"{inf.name} to reach rv {target}")


def server_state(api, kind="Pod"):
    return {(o["metadata"].get("namespace") or "", o["metadata"]["name"]):
            (o["metadata"]["uid"], o["metadata"]["resourceVersion"]) for o in api.list(kind).items}


def informer_state(inf):
    return {k: (o["metadata"]["uid"], o["metadata"]["resourceVersion"])
            for k, o in inf.store._items.items()}


# (re)lists done as lists, or as watch-lists (sendInitialEvents, client-go's WatchListClient): the
# informer contract is the same
LIST_MODES = pytest.mark.parametrize("watch_list", [False, True], ids=["list", "watch-list"])


@LIST_MODES
async def test_initial_list_then_watch_in_order(api, aapi, watch_list):
    for i in range(5):
        api.create(make_pod(f"p{i}"))
    rec = Recorder()
    inf = informer(aapi, watch_list=watch_list)
    inf.add_event_handler(rec)
    assert not inf.has_synced()
    async with inf:
        assert await inf.wait_for_sync(30)
        assert sorted(c[1] for c in rec.of("add")) == [f"p{i}" for i in range(5)]
        assert all(c[3] is True for c in rec.calls)
        n0 = len(rec.calls)
        p = api.create(make_pod("new"))
        p = api.patch_annotations("Pod", "new", NS, {"x": "1"})
        api.delete("Pod", "p0", NS, grace_period_seconds=0)
        await caught_up(inf, api)
        tail = rec.calls[n0:]
        assert [(c[0], c[1]) for c in tail] == [("add", "new"), ("update", "new"), ("delete", "p0")]
        assert tail[0][3] is False                       # not part of the initial list
        assert tail[1][2] == p["metadata"]["resourceVersion"]
        assert informer_state(inf) == server_state(api)
    assert inf.stats.lists == 1 and inf.stats.relists == 0 and inf.stats.handler_errors == 0
    assert inf.stats.watch_lists == int(watch_list) and inf.stats.watch_list_fallbacks == 0


async def test_per_object_order_under_concurrent_writes(api, aapi, redis_url, key_prefix):
    names = [f"p{i}" for i in range(12)]
    for n in names:
        api.create(make_pod(n))
    rec = Recorder()
    inf = informer(aapi)
    inf.add_event_handler(rec)
    await inf.start()
    try:
        assert await inf.wait_for_sync(30)

        async def writer(seed):
            c = AsyncApiClient.from_url(redis_url, prefix=key_prefix)
            rng = random.Random(seed)
            for i in range(40):
                await c.patch_annotations("Pod", rng.choice(names), NS, {"w": f"{seed}-{i}"})

        await asyncio.gather(*(writer(s) for s in range(6)))
        await caught_up(inf, api)
    finally:
        await inf.stop()
    updates = rec.of("update")
    assert len(updates) == 240
    all_rvs = [c[2] for c in rec.calls if c[0] != "add" or not c[3]]
    assert all_rvs == sorted(all_rvs) and len(set(all_rvs)) == len(all_rvs)   # watch order
    for n in names:
        seq = [c[2] for c in updates if c[1] == n]
        assert seq == sorted(seq)
        olds = [c[3] for c in updates if c[1] == n]
        assert olds[1:] == seq[:-1]                     # old of each update = previous new
    assert informer_state(inf) == server_state(api)


@LIST_MODES
async def test_relist_after_410_with_tombstones_and_uid_change(api, aapi, watch_list):
    for i in range(6):
        api.create(make_pod(f"p{i}"))
    rec = Recorder()
    inf = informer(aapi, watch_list=watch_list)
    inf.add_event_handler(rec)
    await inf.start()
    assert await inf.wait_for_sync(30)
    old_uid = inf.store.get("p1", NS)["metadata"]["uid"]
    await inf.stop()                                   # the watch connection breaks
    n0 = len(rec.calls)
    api.delete("Pod", "p0", NS, grace_period_seconds=0)                 # gone for good
    api.delete("Pod", "p1", NS, grace_period_seconds=0)                 # deleted ...
    api.create(make_pod("p1"))                                          # ... and re-created
    api.patch_annotations("Pod", "p2", NS, {"changed": "yes"})
    api.create(make_pod("brand-new"))
    api.compact("Pod", api.current_resource_version())                  # history gone -> 410
    await inf.start()
    try:
        await eventually(lambda: inf.stats.relists == 1 and inf.pending() == 0, 30, "relist")
        await caught_up(inf, api)
    finally:
        await inf.stop()
    assert inf.stats.gone >= 1
    tail = rec.calls[n0:]
    deletes = {(c[1], c[3]) for c in tail if c[0] == "delete"}
    assert deletes == {("p0", True), ("p1", True)}
    p1_calls = [c for c in tail if c[1] == "p1"]
    assert [c[0] for c in p1_calls] == ["delete", "add"]
    assert p1_calls[0][4] == old_uid and p1_calls[1][4] != old_uid
    assert {c[1] for c in tail if c[0] == "add"} == {"p1", "brand-new"}
    assert [c[1] for c in tail if c[0] == "update"] == ["p2"]      # unchanged objects: no update
    assert inf.stats.tombstones == 2
    assert informer_state(inf) == server_state(api)
    assert inf.stats.watch_lists == 2 * int(watch_list) and inf.stats.watch_list_fallbacks == 0


async def test_forced_expiry_relists_without_spurious_events(api, aapi):
    for i in range(3):
        api.create(make_pod(f"p{i}"))
    rec = Recorder()
    inf = informer(aapi)
    inf.add_event_handler(rec)
    async with inf:
        assert await inf.wait_for_sync(30)
        n0 = len(rec.calls)
        inf.request_relist()
        await eventually(lambda: inf.stats.relists == 1, 30, "relist")
        api.create(make_pod("after"))
        await caught_up(inf, api)
    assert inf.stats.gone == 1
    assert [(c[0], c[1]) for c in rec.calls[n0:]] == [("add", "after")]


async def test_bookmarks_advance_rv_without_events(api, aapi):
    api.create(make_pod("p"))
    rec = Recorder()
    inf = informer(aapi, block_ms=50)
    inf.add_event_handler(rec)
    async with inf:
        assert await inf.wait_for_sync(30)
        rv0 = inf.last_synced_rv
        for i in range(5):
            api.create(make_node(f"n{i}"))             # other kind: global RV moves on
        target = api.current_resource_version()
        assert target > rv0
        await eventually(lambda: inf.last_synced_rv >= target, 30, "a bookmark to the new rv")
    assert inf.stats.bookmarks >= 1
    assert inf.stats.events == 0 and len(rec.calls) == 1


async def test_handler_exceptions_are_counted_and_do_not_stop_the_loop(api, aapi):
    seen = []

    def bad_add(obj, initial):
        if obj["metadata"]["name"].startswith("bad"):
            raise RuntimeError("boom")
        seen.append(obj["metadata"]["name"])

    inf = informer(aapi)
    inf.add_event_handler(on_add=bad_add)
    async with inf:
        assert await inf.wait_for_sync(30)
        api.create(make_pod("bad1"))
        api.create(make_pod("good"))
        api.create(make_pod("bad2"))
        api.create(make_pod("good2"))
        await caught_up(inf, api)
    assert seen == ["good", "good2"] and inf.stats.handler_errors == 2
    assert len(inf.store) == 4


async def test_delta_fifo_coalesces_per_key(api, aapi):
    start = api.current_resource_version()
    for n in ("a", "b", "c"):
        api.create(make_pod(n))
    for i in range(3):
        for n in ("a", "b", "c"):
            api.patch_annotations("Pod", n, NS, {"i": str(i)})
    results = {}
    for mode in ("real", "delta"):
        rec = Recorder()
        inf = informer(aapi, fifo=mode, start_rv=start)   # replay the history in one batch
        inf.add_event_handler(rec)
        async with inf:
            await caught_up(inf, api)
        results[mode] = rec.calls
    real = [(c[0], c[1]) for c in results["real"]]
    delta = [(c[0], c[1]) for c in results["delta"]]
    assert real[:3] == [("add", "a"), ("add", "b"), ("add", "c")]
    assert real[3:6] == [("update", "a"), ("update", "b"), ("update", "c")]      # watch order
    assert delta == [("add", "a")] + [("update", "a")] * 3 + [("add", "b")] + \
        [("update", "b")] * 3 + [("add", "c")] + [("update", "c")] * 3         # per key
    for mode in ("real", "delta"):
        for n in ("a", "b", "c"):
            rvs = [c[2] for c in results[mode] if c[1] == n]
            assert rvs == sorted(rvs) and len(rvs) == 4


async def test_an_informer_started_from_an_rv_is_synced_at_once(api, aapi):
    """No list to wait for: a waiter right after start() is released, not timed out."""
    api.create(make_pod("a"))
    inf = informer(aapi, start_rv=api.current_resource_version())
    async with inf:
        assert inf.has_synced()
        assert await inf.wait_for_sync(timeout=2.0)
        api.create(make_pod("b"))                 # and it watches from there
        await caught_up(inf, api)
        assert sorted(informer_state(inf)) == [(NS, "b")]


async def test_delta_fifo_relist_tombstones(api, aapi):
    for i in range(4):
        api.create(make_pod(f"p{i}"))
    rec = Recorder()
    inf = informer(aapi, fifo="delta")
    inf.add_event_handler(rec)
    await inf.start()
    assert await inf.wait_for_sync(30)
    await inf.stop()
    api.delete("Pod", "p3", NS, grace_period_seconds=0)
    api.compact("Pod", api.current_resource_version())
    await inf.start()
    try:
        await eventually(lambda: inf.stats.relists == 1 and inf.pending() == 0, 30, "relist")
    finally:
        await inf.stop()
    assert [c for c in rec.calls if c[0] == "delete"][0][1:4:2] == ("p3", True)
    assert informer_state(inf) == server_state(api)


async def test_delay_hook_delays_but_keeps_per_object_order(api, aapi):
    names = [f"p{i}" for i in range(6)]
    for n in names:
        api.create(make_pod(n))
    rng = random.Random(7)
    rec = Recorder()
    arrivals = []
    hook = DelayHook(lambda d: rng.uniform(0.0, 0.08), reorder_across_objects=True)
    inf = informer(aapi, hook=hook)
    inf.add_event_handler(rec)
    inf.add_event_handler(on_update=lambda o, n: arrivals.append(time.monotonic()))
    async with inf:
        assert await inf.wait_for_sync(30)
        t_write = []
        for i in range(60):
            t_write.append(time.monotonic())
            api.patch_annotations("Pod", names[i % len(names)], NS, {"i": str(i)})
        await caught_up(inf, api)
    updates = rec.of("update")
    assert len(updates) == 60
    for n in names:
        seq = [c[2] for c in updates if c[1] == n]
        assert seq == sorted(seq)
    rvs = [c[2] for c in updates]
    assert rvs != sorted(rvs), "random per-event delays with reordering allowed reorder something"
    assert informer_state(inf) == server_state(api)
    assert hook.emitted >= 61 and hook.held() == 0


async def test_delivery_log_round_trip_and_replay(api, aapi, tmp_path):
    for i in range(4):
        api.create(make_pod(f"p{i}"))
    lg = DeliveryLog.for_instance(tmp_path, "scheduler-1")
    inf = informer(aapi, log=lg)
    await inf.start()
    assert await inf.wait_for_sync(30)
    api.patch_annotations("Pod", "p0", NS, {"a": "1"})
    api.delete("Pod", "p1", NS, grace_period_seconds=0)
    await caught_up(inf, api)
    await inf.stop()
    api.delete("Pod", "p2", NS, grace_period_seconds=0)
    api.create(make_pod("p9"))
    api.compact("Pod", api.current_resource_version())
    await inf.start()
    try:
        await eventually(lambda: inf.stats.relists == 1 and inf.pending() == 0, 30, "relist")
    finally:
        await inf.stop()
    lg.close()
    header, recs = read_delivery_log(tmp_path / "delivery" / "scheduler-1.log")
    assert header["instance"] == "scheduler-1"
    assert [r["seq"] for r in recs] == list(range(1, len(recs) + 1))
    lists = [r for r in recs if r["type"] == LIST]
    assert [r["relist"] for r in lists] == [False, True]
    assert lists[1]["rv"] >= lists[0]["rv"]
    tomb = [r for r in recs if r["type"] == DELETED and r["tombstone"]]
    assert [r["name"] for r in tomb] == ["p2"]
    assert all(r["delivered"] >= r["recv"] for r in recs)
    for r in recs:
        if r["type"] in (ADDED, MODIFIED):
            assert r["object"]["metadata"]["name"] == r["name"]
            assert r["uid"] == r["object"]["metadata"]["uid"]
    stores = replay(recs, {})
    assert {k: (o["metadata"]["uid"], o["metadata"]["resourceVersion"])
            for k, o in stores["Pod"].items()} == server_state(api)


async def test_corrupt_stream_entries_are_counted_and_skipped(api, aapi, redis_url, key_prefix):
    import redis
    api.create(make_pod("before"))
    rec = Recorder()
    inf = informer(aapi)
    inf.add_event_handler(rec)
    async with inf:
        assert await inf.wait_for_sync(30)
        r = redis.Redis.from_url(redis_url)
        try:
            # the server's layout: stream <prefix>:ev:<Kind>, entry id "<rv>-0", fields t, o
            for junk in ([b"t", b"ADDED", b"o", b"\xc1\xc1 not msgpack"],
                         [b"t", b"EXPLODED", b"o", msgpack.packb({"metadata": {"name": "x"}})],
                         [b"t", b"ADDED", b"o", msgpack.packb([1, 2, 3])]):
                rv = int(r.incr(api.keys.rv))
                r.xadd(api.stream_key("Pod"), dict(zip(junk[::2], junk[1::2])), id=f"{rv}-0")
        finally:
            r.close()
        api.create(make_pod("after"))
        await caught_up(inf, api)
        await eventually(lambda: "after" in [c[1] for c in rec.calls], 30, "event after garbage")
    assert inf.stats.corrupt == 3
    assert [c[1] for c in rec.calls] == ["before", "after"]


async def test_staleness_samples_from_write_time_annotation(api, aapi):
    inf = informer(aapi)
    async with inf:
        assert await inf.wait_for_sync(30)
        for i in range(20):
            api.create(make_pod(f"p{i}", **{WRITE_TIME_ANNOTATION: repr(time.time())}))
        await caught_up(inf, api)
    assert len(inf.staleness_ms) == 20
    assert all(0 <= s < 60_000 for s in inf.staleness_ms)


async def test_namespace_filter_and_late_handler(api, aapi):
    api.create(make_pod("mine", ns="a"))
    api.create(make_pod("other", ns="b"))
    inf = informer(aapi, namespace="a")
    async with inf:
        assert await inf.wait_for_sync(30)
        api.create(make_pod("mine2", ns="a"))
        api.create(make_pod("other2", ns="b"))
        await caught_up(inf, api)
        late = Recorder()
        inf.add_event_handler(late)                    # gets the store as initial adds
    assert sorted(k[1] for k in inf.store.keys()) == ["mine", "mine2"]
    assert sorted((c[1], c[3]) for c in late.calls) == [("mine", True), ("mine2", True)]


def test_threaded_informer(api, redis_url, key_prefix):
    api.create(make_pod("x"))
    rec = Recorder()
    ti = ThreadedInformer(lambda: AsyncApiClient.from_url(redis_url, prefix=key_prefix), "Pod",
                          block_ms=100, backoff=Backoff.fast())
    ti.add_event_handler(rec)
    ti.start()
    try:
        assert ti.wait_for_sync(30)
        api.create(make_pod("y"))
        deadline = time.monotonic() + 30
        while len(rec.calls) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        ti.stop()
    assert [(c[0], c[1], c[3]) for c in rec.calls] == [("add", "x", True), ("add", "y", False)]


@LIST_MODES
async def test_corrupt_stored_objects_are_skipped_by_the_list(api, aapi, redis_url, watch_list):
    import redis
    api.create(make_pod("good"))
    r = redis.Redis.from_url(redis_url)
    try:
        r.hset(api.keys.obj("Pod"), f"{NS}/bad", b"\xc1 garbage")   # the server's object hash
    finally:
        r.close()
    rec = Recorder()
    inf = informer(aapi, watch_list=watch_list)
    inf.add_event_handler(rec)
    async with inf:
        assert await inf.wait_for_sync(30)
    assert inf.stats.corrupt == 1 and inf.stats.watch_lists == int(watch_list)
    assert [c[1] for c in rec.calls] == ["good"]


class _NoWatchList(AsyncApiClient):
    """A server without watch-list (the options rejected, 422), or one that cannot serve it now
    (410 / 504)."""

    fail_with: Exception | None = None

    async def watch(self, kind, resource_version, **kw):
        if kw.get("send_initial_events"):
            raise self.fail_with
        return await super().watch(kind, resource_version, **kw)


@pytest.mark.parametrize("error,keeps_trying", [
    (Invalid("sendInitialEvents is not supported", field="sendInitialEvents"), False),
    (TooLargeResourceVersion("Too large resource version", current=1), True)], ids=["422", "504"])
async def test_a_failed_watch_list_falls_back_to_a_list(api, redis_url, key_prefix, error, keeps_trying):
    """A watch-list that fails is redone as a plain list (client-go does the same); a server
    that rejects the options has none, and the reflector stops asking."""
    for i in range(3):
        api.create(make_pod(f"p{i}", "a"))
    api.create(make_pod("other", "b"))
    c = _NoWatchList.from_url(redis_url, prefix=key_prefix)
    c.fail_with = error
    try:
        inf = informer(c, watch_list=True, namespace="a")
        async with inf:
            assert await inf.wait_for_sync(30)
            inf.request_relist()
            await eventually(lambda: inf.stats.relists == 1 and inf.pending() == 0, 30, "relist")
        assert sorted(k[1] for k in inf.store._items) == ["p0", "p1", "p2"]
        assert inf.stats.lists == 2 and inf.stats.watch_lists == 0
        assert inf.stats.watch_list_fallbacks == (2 if keeps_trying else 1)
        assert inf.reflector.watch_list is keeps_trying
    finally:
        await c.close()


async def test_watch_list_filters_the_namespace(api, aapi):
    for ns in ("a", "b"):
        for i in range(2):
            api.create(make_pod(f"p{i}", ns))
    inf = informer(aapi, watch_list=True, namespace="b")
    async with inf:
        assert await inf.wait_for_sync(30)
        api.create(make_pod("late", "b"))
        api.create(make_pod("late", "a"))
        await caught_up(inf, api)
    assert sorted(inf.store._items) == [("b", "late"), ("b", "p0"), ("b", "p1")]
    assert inf.stats.watch_lists == 1 and inf.stats.filtered == 3


async def test_stateful_write_time_sees_listed_objects(api, aapi):
    """A write_time that reports a stamp only when it is new for the object (the instances use
    one: bindings and /status writes keep the creator's stamp) must see the initial list too;
    otherwise the first later event of a listed object is measured against its creation and the
    sample is the object's age, not the watch's staleness."""
    from ha.runtime.incarnation import _FreshStamp
    api.create(make_pod("old", **{WRITE_TIME_ANNOTATION: str(time.time() - 3600)}))
    inf = Informer(aapi, "Pod", write_time=_FreshStamp(), block_ms=100,
                   backoff=Backoff(initial=0.01, cap=0.05, jitter=0.0))
    async with inf:
        assert await inf.wait_for_sync(30)
        api.patch_annotations("Pod", "old", NS, {"x": "1"})          # the stamp stays an hour old
        api.create(make_pod("new", **{WRITE_TIME_ANNOTATION: str(time.time())}))
        await caught_up(inf, api)
        samples = list(inf.staleness_ms)
    assert len(samples) == 1 and samples[0] < 60_000, samples    # only "new", and not an hour
