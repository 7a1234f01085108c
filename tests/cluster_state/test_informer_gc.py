"""Informer(gc_threshold=...) applies the process's GC thresholds at start (and only then)."""
from __future__ import annotations

import asyncio
import gc

from cluster_state.aio import AsyncApiClient
from cluster_state.delivery import DelayHook
from cluster_state.informer import INSTANCE_GC_THRESHOLD, Informer, instance_gc_options

from .helpers import pod


async def _store_reaches(inf: Informer, n: int) -> None:
    """Poll (up to ~10 s) until the informer's store holds ``n`` objects."""
    for _ in range(400):
        if len(inf.store.list()) == n:
            return
        await asyncio.sleep(0.025)


def test_gc_threshold_option(redis_url, key_prefix):
    saved = gc.get_threshold()

    async def main():
        c = AsyncApiClient.from_url(redis_url, key_prefix)
        await c.create(pod("p1"))
        inf = Informer(c, "Pod", gc_threshold=(12_345, 11, 12), block_ms=100)
        assert gc.get_threshold() == saved          # nothing happens before start()
        await inf.start()
        try:
            assert await inf.wait_for_sync(30)
            assert gc.get_threshold() == (12_345, 11, 12)
            assert [o["metadata"]["name"] for o in inf.store.list()] == ["p1"]
        finally:
            await inf.stop()
            await c.close()

    try:
        asyncio.run(main())
    finally:
        gc.set_threshold(*saved)
    assert len(INSTANCE_GC_THRESHOLD) == 3 and INSTANCE_GC_THRESHOLD[0] > saved[0]


def test_gc_refreeze_every_on_the_queued_path(redis_url, key_prefix, monkeypatch):
    """Deliveries through the FIFO and a hook: with freeze_gc_on_sync + gc_refreeze_every=N the
    informer re-freezes after every N delivered events (and not before it synced); without
    freeze_gc_on_sync it never does."""
    saved = gc.get_threshold()
    calls: list[int] = []
    monkeypatch.setattr(Informer, "_refreeze", staticmethod(lambda: calls.append(1)))
    opts = instance_gc_options()
    assert opts["freeze_gc_on_sync"] and opts["gc_refreeze_every"] > 0

    async def main():
        c = AsyncApiClient.from_url(redis_url, key_prefix)
        try:
            # a (zero-delay) hook: pages are queued and delivered by the processor
            inf = Informer(c, "Pod", freeze_gc_on_sync=True, gc_refreeze_every=5, block_ms=50,
                           watch_count=3, hook=DelayHook(lambda d: 0.0))
            idle = Informer(c, "Pod", gc_refreeze_every=5, block_ms=50)   # no freeze: ignored
            assert idle.gc_refreeze_every is None
            await inf.start()
            assert await inf.wait_for_sync(30)
            for i in range(12):
                await c.create(pod(f"p{i}"))
            await _store_reaches(inf, 12)
            await inf.stop()
            return len(inf.store.list())
        finally:
            await c.close()

    try:
        n = asyncio.run(main())
    finally:
        gc.set_threshold(*saved)
        gc.unfreeze()
    assert n == 12
    assert len(calls) == 2        # 12 events (+ the empty list): at >= 5 and >= 10


def test_gc_chunks_on_the_direct_path(redis_url, key_prefix, monkeypatch):
    """Pages applied by the reflector at once (pass-through hook): with the instance GC settings
    a page goes in chunks of at most gc_refreeze_every entries, each after a collection of the
    young generations, the automatic GC paused while its handlers run, the heap frozen after
    it; before the informer synced nothing is frozen; without the settings GC is left alone."""
    saved = gc.get_threshold()
    log: list = []
    monkeypatch.setattr(Informer, "_collect_young", staticmethod(lambda: log.append("collect")))
    monkeypatch.setattr(Informer, "_freeze", staticmethod(lambda: log.append("freeze")))

    def on_add(obj, initial):
        log.append(("add", obj["metadata"]["name"], gc.isenabled()))

    async def main(tag, **kw):
        c = AsyncApiClient.from_url(redis_url, f"{key_prefix}-{tag}")
        try:
            inf = Informer(c, "Pod", block_ms=50, watch_count=1000, **kw)
            inf.add_event_handler(on_add=on_add)
            await inf.start()
            assert await inf.wait_for_sync(30)
            del log[:]
            # 7 pods in one page (written before the watch reads them)
            await inf.stop()
            for i in range(7):
                await c.create(pod(f"{tag}{i}"))
            await inf.start()
            await _store_reaches(inf, 7)
            await inf.stop()
            return len(inf.store.list())
        finally:
            await c.close()

    try:
        assert gc.isenabled()
        n = asyncio.run(main("p", freeze_gc_on_sync=True, gc_refreeze_every=3))
        assert gc.isenabled()
    finally:
        gc.set_threshold(*saved)
        gc.unfreeze()
    assert n == 7
    adds = [("add", f"p{i}", False) for i in range(7)]
    assert log == (["collect", *adds[:3], "freeze", "collect", *adds[3:6], "freeze",
                    "collect", *adds[6:], "freeze"])
    del log[:]
    n = asyncio.run(main("q"))   # default: GC untouched
    assert n == 7 and log == [("add", f"q{i}", True) for i in range(7)]


def test_stop_unfreezes_so_a_dropped_cache_is_collected(redis_url, key_prefix):
    """With freeze_gc_on_sync a synced informer freezes the heap; stop() unfreezes it, so a cache
    its owner drops afterwards (cyclic garbage: an instance's in-process restart) is reclaimed by
    the next full collection instead of kept for good."""
    import weakref

    class Cache:
        pass

    async def main():
        c = AsyncApiClient.from_url(redis_url, key_prefix)
        cache = Cache()
        cache.self_ref = cache   # a cycle: only the collector frees it
        try:
            await c.create(pod("p1"))
            inf = Informer(c, "Pod", freeze_gc_on_sync=True, block_ms=50)
            inf.add_event_handler(on_add=lambda obj, initial, cache=cache: None)
            await inf.start()
            assert await inf.wait_for_sync(30)
            assert gc.get_freeze_count() > 0      # the synced heap (the cache with it) is frozen
            await inf.stop()
            assert gc.get_freeze_count() == 0
        finally:
            await c.close()
        return weakref.ref(cache)

    try:
        ref = asyncio.run(main())
        gc.collect()
        assert ref() is None
    finally:
        gc.unfreeze()


def test_the_first_list_runs_with_the_automatic_gc_paused(redis_url, key_prefix):
    """With freeze_gc_on_sync the automatic GC is paused from start() until the first list is
    delivered (its objects all survive: collections during it only walk them), nested across
    informers (it runs again once the last one synced); without it, or with a start_rv (no first
    list), GC is left alone; an informer stopped before it synced (its list failing) ends its
    pause too."""
    seen: dict[str, list[bool]] = {"a": [], "b": [], "plain": []}

    def recorder(tag):
        return lambda obj, initial: seen[tag].append(gc.isenabled())

    async def main():
        c = AsyncApiClient.from_url(redis_url, key_prefix)
        dead = AsyncApiClient.from_url("redis://127.0.0.1:1", key_prefix)
        try:
            await c.create(pod("p1"))
            a = Informer(c, "Pod", freeze_gc_on_sync=True, block_ms=50)
            b = Informer(c, "Pod", freeze_gc_on_sync=True, block_ms=50)
            a.add_event_handler(on_add=recorder("a"))
            b.add_event_handler(on_add=recorder("b"))
            await a.start()
            await b.start()
            assert not gc.isenabled()
            assert await a.wait_for_sync(30)
            assert await b.wait_for_sync(30)
            assert gc.isenabled()                 # both synced: running again
            await a.stop()
            await b.stop()
            plain = Informer(c, "Pod", block_ms=50)
            plain.add_event_handler(on_add=recorder("plain"))
            await plain.start()
            assert await plain.wait_for_sync(30)
            await plain.stop()
            replaying = Informer(c, "Pod", freeze_gc_on_sync=True, block_ms=50, start_rv=1)
            await replaying.start()          # no first list: nothing to pause for
            await asyncio.sleep(0.1)
            assert gc.isenabled() and replaying.has_synced()
            await replaying.stop()
            failing = Informer(dead, "Pod", freeze_gc_on_sync=True, block_ms=50)
            await failing.start()
            await asyncio.sleep(0.1)
            assert not failing.has_synced() and not gc.isenabled()
            await failing.stop()
            assert gc.isenabled()
        finally:
            await c.close()
            await dead.close()

    assert gc.isenabled()
    try:
        asyncio.run(main())
    finally:
        gc.enable()
        gc.unfreeze()
    assert seen == {"a": [False], "b": [False], "plain": [True]}


def test_no_collection_or_freeze_while_another_holder_pauses_the_gc(redis_url, key_prefix, monkeypatch):
    """A scheduling session pauses the automatic GC while it clones the cache: its objects are
    all young then. A page applied meanwhile neither collects (that would walk the session's
    objects) nor freezes (that would keep them and their cycles for good); the first page after
    the pause collects and freezes as usual. Both paths: pages applied at once, and deliveries
    through the FIFO (refreeze every N)."""
    from cluster_state import gcpause
    saved = gc.get_threshold()
    log: list = []
    monkeypatch.setattr(Informer, "_collect_young", staticmethod(lambda: log.append("collect")))
    monkeypatch.setattr(Informer, "_freeze", staticmethod(lambda: log.append("freeze")))
    monkeypatch.setattr(Informer, "_refreeze", staticmethod(lambda: log.append("refreeze")))

    def on_add(obj, initial):
        log.append(("add", obj["metadata"]["name"]))

    async def main(tag, **kw):
        c = AsyncApiClient.from_url(redis_url, f"{key_prefix}-{tag}")
        try:
            inf = Informer(c, "Pod", block_ms=50, watch_count=1000, freeze_gc_on_sync=True,
                           gc_refreeze_every=3, **kw)
            inf.add_event_handler(on_add=on_add)
            await inf.start()
            assert await inf.wait_for_sync(30)
            del log[:]
            gcpause.begin()            # the other holder: a session
            try:
                for i in range(4):
                    await c.create(pod(f"{tag}{i}"))
                await _store_reaches(inf, 4)
                during = list(log)
            finally:
                gcpause.end()
            del log[:]
            for i in range(4, 7):
                await c.create(pod(f"{tag}{i}"))
            await _store_reaches(inf, 7)
            await inf.stop()
            return during, list(log)
        finally:
            await c.close()

    try:
        during, after = asyncio.run(main("d"))
        assert during == [("add", f"d{i}") for i in range(4)]
        assert "collect" in after and "freeze" in after
        during, after = asyncio.run(main("q", hook=DelayHook(lambda d: 0.0)))
        assert during == [("add", f"q{i}") for i in range(4)]
        assert "refreeze" in after
    finally:
        gc.set_threshold(*saved)
        gc.unfreeze()
