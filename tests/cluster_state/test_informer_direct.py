"""The informer's fast paths deliver exactly what the plain event path delivers.

* ``watch(..., decode=fn)`` (both clients) returns ``fn(kind, entries)`` where the plain watch
  returns ``events_from_entries(kind, entries)``, and the same bookmarks, ``[]`` and Gone;
* an informer whose client hands over raw pages (``WATCH_DECODE``) decodes them straight into its
  deliveries -- applied by the reflector at once with a pass-through hook (in GC chunks with the
  instance GC settings), or queued for the processor behind any other hook -- and must notify
  its handlers exactly as the event path (``WatchEvent`` -> ``Delivery`` -> FIFO -> processor)
  does: same calls in the same order, same store, stats, delivered RV and staleness samples,
  over a random history with deletes, re-creates, a uid change the informer never saw deleted,
  entries in another field order, corrupt entries and a namespace filter.
"""
from __future__ import annotations

import asyncio
import gc
import random

import msgpack
import pytest
import redis

from cluster_state.aio import AsyncApiClient
from cluster_state.client import ApiClient
from cluster_state.delivery import WRITE_TIME_ANNOTATION, DelayHook, DeliveryLog
from cluster_state.errors import Gone, NotFound
from cluster_state.informer import Informer
from cluster_state.watch import events_from_entries

from .helpers import api, pod  # noqa: F401 -- api is a fixture


def _ev(e) -> tuple:
    return (e.type, e.kind, e.resource_version, e.object, e.error)


def _history(api: ApiClient, redis_url: str, seed: int) -> None:
    """Random creates / updates / status writes / deletes / re-creates in two namespaces, plus
    hand-written stream entries: corrupt ones, one in another field order, and an ADDED for a
    live name with a new uid (a delete the informer never saw)."""
    rnd = random.Random(seed)
    live: dict[tuple[str, str], dict] = {}
    r = redis.Redis.from_url(redis_url)
    stream = api.stream_key("Pod")

    def raw(fields: list) -> None:
        rv = int(r.incr(api.keys.rv))
        r.xadd(stream, dict(zip(fields[::2], fields[1::2])), id=f"{rv}-0")

    try:
        for step in range(160):
            ns = rnd.choice(["a", "b"])
            name = f"p{rnd.randrange(12)}"
            key = (ns, name)
            roll = rnd.random()
            if step in (40, 90, 130):     # garbage and oddities in the stream
                raw([b"t", b"ADDED", b"o", b"\xc1\xc1 not msgpack"])
                raw([b"t", b"EXPLODED", b"o", msgpack.packb({"metadata": {"name": "x"}})])
                raw([b"t", b"MODIFIED", b"o", msgpack.packb({"metadata": {"namespace": "a"}})])
                raw([b"t", b"ADDED", b"o", msgpack.packb([1, 2, 3])])
                if live:
                    k = rnd.choice(sorted(live))
                    obj = dict(live[k], metadata=dict(live[k]["metadata"]))
                    obj["metadata"]["resourceVersion"] = int(r.get(api.keys.rv)) + 1
                    raw([b"o", msgpack.packb(obj), b"t", b"MODIFIED"])          # field order
                    obj = dict(obj, metadata=dict(obj["metadata"], uid=f"other-{step}"))
                    obj["metadata"]["resourceVersion"] += 1
                    raw([b"t", b"ADDED", b"o", msgpack.packb(obj)])             # a new uid
            if key not in live or roll < 0.1:
                if key in live:
                    try:
                        api.delete("Pod", name, ns, grace_period_seconds=0)
                    except NotFound:
                        pass
                p = pod(name, ns=ns, cpu=rnd.choice(["1", "500m"]))
                if rnd.random() < 0.5:
                    p["metadata"].setdefault("annotations", {})[WRITE_TIME_ANNOTATION] = "1.5"
                live[key] = api.create(p)
            elif roll < 0.6:
                live[key] = api.patch_annotations("Pod", name, ns, {"k": str(step)})
            elif roll < 0.8:
                obj = dict(live[key])
                obj["status"] = {"phase": rnd.choice(["Pending", "Running"])}
                live[key] = api.update_status(obj)
            else:
                api.delete("Pod", name, ns, grace_period_seconds=0)
                del live[key]
    finally:
        r.close()


async def test_watch_decode_returns_what_the_plain_watch_returns(api, redis_url, key_prefix):
    _history(api, redis_url, seed=3)
    end = api.current_resource_version()
    aapi = AsyncApiClient.from_url(redis_url, key_prefix)
    rnd = random.Random(4)
    checked = 0
    try:
        for rv in sorted({0, end - 1, end, end + 5, *(rnd.randrange(end) for _ in range(25))}):
            count = rnd.choice([1, 3, 50, 1000])
            plain = api.watch("Pod", rv, block_ms=0, count=count)
            got = api.watch("Pod", rv, block_ms=0, count=count, decode=events_from_entries)
            assert [_ev(e) for e in got] == [_ev(e) for e in plain], (rv, count)
            a_plain = await aapi.watch("Pod", rv, block_ms=0, count=count)
            a_got = await aapi.watch("Pod", rv, block_ms=0, count=count, decode=events_from_entries)
            assert [_ev(e) for e in a_got] == [_ev(e) for e in a_plain] == [_ev(e) for e in plain]
            checked += bool(plain and plain[0].type != "BOOKMARK")
        assert checked > 10
        # what decode returns is passed through as is; no entries -> bookmark / [] as before
        assert api.watch("Pod", 0, block_ms=0, count=5, decode=lambda k, es: ("raw", k, len(es))) == \
            ("raw", "Pod", 5)
        assert await aapi.watch("Pod", 0, block_ms=0, count=5, decode=lambda k, es: len(es)) == 5
        assert api.watch("Pod", end, block_ms=0, decode=lambda k, es: 1 / 0) == []
        # blocking: the decode path wakes up for a write made while it waits
        waiting = asyncio.ensure_future(aapi.watch("Pod", end, block_ms=20_000,
                                                   decode=lambda k, es: [e[0] for e in es]))
        await asyncio.sleep(0.2)
        api.create(pod("late", ns="a"))
        assert len(await asyncio.wait_for(waiting, 30)) == 1
        # Gone after compaction, from both paths of both clients
        api.compact("Pod", end // 2)
        for kw in ({}, {"decode": events_from_entries}):
            with pytest.raises(Gone):
                api.watch("Pod", 1, block_ms=0, **kw)
            with pytest.raises(Gone):
                await aapi.watch("Pod", 1, block_ms=0, **kw)
    finally:
        await aapi.close()


class _EventsOnly:
    """The client without ``WATCH_DECODE``: the reflector takes the plain event path."""

    WATCH_DECODE = False

    def __init__(self, inner):
        self.inner = inner

    def __getattr__(self, name):
        return getattr(self.inner, name)


class _Rec:
    def __init__(self):
        self.calls: list[tuple] = []

    @staticmethod
    def _k(o):
        md = o["metadata"]
        return (md.get("namespace"), md["name"], md.get("uid"), md["resourceVersion"])

    def on_add(self, obj, initial):
        self.calls.append(("add", *self._k(obj), initial))

    def on_update(self, old, new):
        self.calls.append(("update", *self._k(old), *self._k(new)))

    def on_delete(self, obj, tombstone=False):
        self.calls.append(("delete", *self._k(obj), tombstone))


async def _replay(redis_url, key_prefix, variant: str, namespace, watch_count: int, tmp_path):
    aapi = AsyncApiClient.from_url(redis_url, key_prefix)
    kw: dict = {"start_rv": 0, "block_ms": 50, "watch_count": watch_count, "namespace": namespace}
    client = aapi
    log = None
    if variant == "events":
        client = _EventsOnly(aapi)
    elif variant == "queued":
        kw["hook"] = DelayHook(lambda d: 0.0)
    elif variant == "direct+gc":
        kw.update(freeze_gc_on_sync=True, gc_refreeze_every=3)
    elif variant == "direct+log":
        log = kw["log"] = DeliveryLog(tmp_path / f"{variant}-{namespace}.log", keep=True)
    inf = Informer(client, "Pod", **kw)
    rec = _Rec()
    inf.add_event_handler(rec)
    end = await aapi.current_resource_version()
    try:
        await inf.start()
        for _ in range(2000):
            if inf.last_synced_rv >= end and inf.pending() == 0:
                break
            await asyncio.sleep(0.01)
        await inf.stop()
    finally:
        await aapi.close()
        gc.unfreeze()
    assert inf.last_synced_rv >= end
    stats = inf.stats.as_dict()
    store = {k: o for k, o in inf.store._items.items()}
    logged = [(r["type"], r["ns"], r["name"], r["rv"], r["tombstone"]) for r in log.records] if log else None
    return rec.calls, stats, store, inf.delivered_rv, len(inf.staleness_ms), logged


@pytest.mark.parametrize("namespace", [None, "a"])
async def test_direct_and_queued_pages_deliver_what_the_event_path_delivers(
        redis_url, key_prefix, namespace, tmp_path):
    api = ApiClient.from_url(redis_url, key_prefix)
    try:
        _history(api, redis_url, seed=11)
    finally:
        api.close()
    ref = await _replay(redis_url, key_prefix, "events", namespace, 7, tmp_path)
    calls, stats = ref[0], ref[1]
    assert stats["corrupt"] >= 9 and stats["delivered"] > 100 and stats["tombstones"] >= 1
    assert any(c[0] == "delete" and c[-1] is True for c in calls)   # the unseen delete
    assert (stats["filtered"] > 0) == (namespace is not None)
    for variant in ("direct", "direct+gc", "queued", "direct+log"):
        for count in (7, 1000):
            got = await _replay(redis_url, key_prefix, variant, namespace, count, tmp_path)
            assert got[0] == ref[0], (variant, count)
            assert got[1:5] == ref[1:5], (variant, count)
            if variant == "direct+log":
                assert [x[:3] for x in got[5]] == [(
                    {"add": "ADDED", "update": "MODIFIED", "delete": "DELETED"}[c[0]], c[1] or "", c[2])
                    for c in ref[0]]


async def test_an_error_mid_page_neither_stops_nor_repeats_deliveries(redis_url, key_prefix):
    """Something raising while a page is applied at once (not a handler: those are caught; here
    a write_time) is a failed watch: counted, backed off, and the watch resumes after the entry
    it was at -- nothing delivered twice, nothing after it lost."""
    from cluster_state.reflector import Backoff
    api = ApiClient.from_url(redis_url, key_prefix)
    aapi = AsyncApiClient.from_url(redis_url, key_prefix)
    try:
        for i in range(8):
            api.create(pod(f"p{i}", ns="a"))
        raised = []

        def write_time(obj):
            if obj["metadata"]["name"] == "p3" and not raised:
                raised.append(1)
                raise RuntimeError("boom")
            return None

        inf = Informer(aapi, "Pod", start_rv=0, block_ms=50, write_time=write_time,
                       backoff=Backoff.fast(seed=1))
        rec = _Rec()
        inf.add_event_handler(rec)
        await inf.start()
        for _ in range(1000):
            if len(rec.calls) >= 8:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)
        await inf.stop()
        assert [c[2] for c in rec.calls] == [f"p{i}" for i in range(8)]
        assert inf.stats.watch_errors == 1 and inf.stats.delivered == 8
    finally:
        api.close()
        await aapi.close()
