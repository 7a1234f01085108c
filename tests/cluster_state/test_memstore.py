"""What only the in-memory API server has to show (the rest is the differential test's): blocking
watches on asyncio futures in virtual time, interleaving of concurrent async callers, snapshot
expiry and grace periods on the injected clock, deterministic ids, raw (corrupt) data paths."""
from __future__ import annotations

import asyncio

import pytest

from cluster_state.errors import Conflict, Gone, ServerError
from cluster_state.memstore import DEFAULT_EPOCH, MemoryServer
from cluster_state.store import Command
from ha.experiment.engine.sim.loop import SimClock, VirtualTimeLoop, run

from .helpers import node, pod


def test_a_blocking_watch_wakes_at_the_write_and_times_out_in_virtual_time():
    loop = VirtualTimeLoop()
    server = MemoryServer(clock=SimClock(loop).now)
    api = server.client()
    aio = server.async_client()
    api.create(pod("p0"))

    async def main():
        loop.call_later(3.0, lambda: api.create(pod("p1")))
        ev = await aio.watch("Pod", 1, block_ms=10_000)
        t_woke = loop.time()
        empty = await aio.watch("Pod", 2, block_ms=5_000)      # nothing new: [] after 5 s
        t_empty = loop.time()
        loop.call_later(1.0, lambda: api.create(node("n1")))   # another kind moves the RV
        bm = await aio.watch("Pod", 2, block_ms=2_000)
        return ev, t_woke, empty, t_empty, bm, loop.time()

    ev, t_woke, empty, t_empty, bm, t_bm = run(main(), loop=loop)
    assert [(e.type, e.object["metadata"]["name"], e.resource_version) for e in ev] == [("ADDED", "p1", 2)]
    assert t_woke == 3.0
    assert empty == [] and t_empty == 8.0
    assert [(e.type, e.resource_version) for e in bm] == [("BOOKMARK", 3)] and t_bm == 10.0
    assert server._waiters == {} or all(not w for w in server._waiters.values())


def test_the_sync_client_never_blocks():
    server = MemoryServer()
    api = server.client()
    api.create(pod("p0"))
    assert api.watch("Pod", 1, block_ms=60_000) == []


def test_concurrent_async_writers_interleave_between_requests():
    """Each request is a turn of the loop: two read-modify-write callers with the same RV -> one
    409, as two clients of Redis would get (and the same one every run)."""
    def once():
        server = MemoryServer()
        api = server.client()
        p = api.create(pod("p0"))
        a, b = server.async_client(), server.async_client()

        async def write(c, label):
            cur = await c.get("Pod", "p0", "default")
            cur["metadata"]["labels"] = {"by": label}
            try:
                await c.update(cur)
                return "ok"
            except Conflict:
                return "409"

        async def main():
            return await asyncio.gather(write(a, "a"), write(b, "b"))
        res = run(main())
        return res, api.get("Pod", "p0", "default")["metadata"]["labels"], p
    r1, labels1, _ = once()
    r2, labels2, _ = once()
    assert sorted(r1) == ["409", "ok"] and (r1, labels1) == (r2, labels2)


def test_latency_delays_each_request_in_virtual_time():
    loop = VirtualTimeLoop()
    server = MemoryServer(clock=SimClock(loop).now)
    aio = server.async_client(latency=0.25)

    async def main():
        o = await aio.create(pod("p0"))                      # one request
        await aio.patch_annotations("Pod", "p0", "default", {"a": "1"})   # read + write
        return o, loop.time()

    o, t = run(main(), loop=loop)
    # the Store stamps creationTimestamp when it builds the request (as with Redis), before the trip
    assert t == 0.75 and o["metadata"]["creationTimestamp"] == DEFAULT_EPOCH


def test_continue_token_snapshot_expires_on_the_injected_clock():
    now = [DEFAULT_EPOCH]
    server = MemoryServer(clock=lambda: now[0])
    api = server.client()
    for i in range(5):
        api.create(pod(f"p{i}"))
    page = api.list("Pod", limit=2)
    now[0] += server.store.continue_ttl - 1
    page2 = api.list("Pod", limit=2, continue_=page.continue_)     # still there, and refreshed
    assert [o["metadata"]["name"] for o in page2.items] == ["p2", "p3"]
    now[0] += server.store.continue_ttl
    with pytest.raises(Gone, match="snapshot was dropped") as ei:
        api.list("Pod", limit=2, continue_=page2.continue_)
    rest = api.list("Pod", continue_=ei.value.details["continue"])  # the inconsistent remainder
    assert [o["metadata"]["name"] for o in rest.items] == ["p4"]


def test_grace_period_and_finalize_on_virtual_time():
    loop = VirtualTimeLoop()
    clock = SimClock(loop)
    server = MemoryServer(clock=clock.now)
    api = server.client()
    api.create(pod("p0"))

    async def main():
        await asyncio.sleep(100)
        d = api.evict("default", "p0", grace_period_seconds=30)
        await asyncio.sleep(29)
        early = api.finalize_deletions()
        await asyncio.sleep(1)
        late = api.finalize_deletions()
        return d, early, late

    d, early, late = run(main(), loop=loop)
    assert d["metadata"]["deletionTimestamp"] == DEFAULT_EPOCH + 130 and (early, late) == (0, 1)
    assert [e.type for e in api.watch("Pod", 0)] == ["ADDED", "MODIFIED", "DELETED"]


def test_ids_are_deterministic_and_seeded():
    def uids(seed):
        api = MemoryServer(uid_seed=seed).client()
        return [api.create(pod(f"p{i}"))["metadata"]["uid"] for i in range(3)]
    assert uids(1) == uids(1) != uids(2)
    assert len(set(uids(1))) == 3


def test_corrupt_stored_values_and_entries_reach_the_clients_corrupt_paths():
    server = MemoryServer()
    api = server.client()
    api.create(pod("p0"))
    server.put_raw("Pod", "default/bad", b"\xc1\xc1")
    res = api.list("Pod")
    assert [o["metadata"]["name"] for o in res.items] == ["p0"]
    assert len(res.corrupt) == 1 and res.corrupt[0][0] == "default/bad"
    rv = server.add_raw_event("Pod", b"MODIFIED", b"\xc1")
    ev = api.watch("Pod", 1)
    assert [(e.type, e.resource_version) for e in ev] == [("CORRUPT", rv)]
    wl = api.watch_list("Pod")
    assert [e.type for e in wl] == ["CORRUPT", "ADDED", "BOOKMARK"]


def test_requests_it_does_not_serve_are_errors():
    server = MemoryServer()
    with pytest.raises(ServerError, match="unsupported command"):
        server.execute(Command(("FLUSHALL",)))
    with pytest.raises(ServerError, match="scripts only"):
        server.execute(Command(("HSET", server.keys.obj("Pod"), "default/x", b"y")))
