"""The real Informer (reflector, FIFO, handlers) on the in-memory API server under the virtual-time
loop: list + watch, relist after 410 with its backoff in virtual time, bookmarks, watch-list,
corrupt entries skipped, and the same delivery log from two runs (and from another process)."""
from __future__ import annotations

import asyncio
import hashlib
import os
import random
import subprocess
import sys
from pathlib import Path

import msgpack

from cluster_state.informer import Informer
from cluster_state.memstore import MemoryServer
from cluster_state.reflector import Backoff
from ha.experiment.engine.sim.loop import SimClock, VirtualTimeLoop, run

ROOT = Path(__file__).resolve().parents[4]


def _pod(name: str, ns: str = "default") -> dict:
    return {"kind": "Pod", "metadata": {"name": name, "namespace": ns},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
            "status": {"phase": "Pending"}}


def _node(name: str) -> dict:
    return {"kind": "Node", "metadata": {"name": name}, "status": {"allocatable": {"cpu": "4"}}}


class Recorder:
    def __init__(self, loop) -> None:
        self.loop = loop
        self.events: list[tuple] = []

    def on_add(self, obj, initial):
        self.events.append((self.loop.time(), "add", obj["metadata"]["name"], obj["metadata"]["resourceVersion"],
                            initial))

    def on_update(self, old, new):
        self.events.append((self.loop.time(), "update", new["metadata"]["name"], new["metadata"]["resourceVersion"]))

    def on_delete(self, obj, tombstone=False):
        self.events.append((self.loop.time(), "delete", obj["metadata"]["name"], tombstone))


def _world(history: int = 1000, **informer_kw):
    loop = VirtualTimeLoop()
    clock = SimClock(loop)
    server = MemoryServer(history=history, clock=clock.now)
    api = server.client()   # the sync client: writes happen at once, atomically
    rec = Recorder(loop)
    backoff = Backoff(rng=random.Random(1), clock=clock.monotonic)
    inf = Informer(server.async_client(), "Pod", backoff=backoff, clock=clock.monotonic,
                   wall_clock=clock.now, **informer_kw)
    inf.add_event_handler(rec)
    return loop, clock, server, api, rec, inf


def _same_store(inf: Informer, api) -> None:
    want = {(o["metadata"]["namespace"], o["metadata"]["name"]): o for o in api.list("Pod").items}
    assert {k: inf.store.get_by_key(k) for k in inf.store.keys()} == want


def test_list_watch_and_handlers_in_virtual_time():
    loop, clock, server, api, rec, inf = _world()
    for i in range(3):
        api.create(_pod(f"p{i}"))

    async def main():
        await inf.start()
        assert await inf.wait_for_sync(5)
        t_sync = loop.time()
        await asyncio.sleep(10)
        api.update_status({**api.get("Pod", "p1", "default"), "status": {"phase": "Running"}})
        api.delete("Pod", "p2", "default", grace_period_seconds=0)
        await asyncio.sleep(0.5)
        api.create(_pod("p3"))
        await asyncio.sleep(100)
        _same_store(inf, api)
        await inf.stop()
        return t_sync

    t_sync = run(main(), loop=loop)
    assert t_sync == 0.0
    assert rec.events == [(0.0, "add", "p0", 1, True), (0.0, "add", "p1", 2, True), (0.0, "add", "p2", 3, True),
                          (10.0, "update", "p1", 4), (10.0, "delete", "p2", False), (10.5, "add", "p3", 6, False)]
    assert inf.stats.lists == 1 and inf.stats.gone == 0 and inf.stats.events == 3
    assert loop.time() == 110.5


def test_relist_after_gone_with_backoff_in_virtual_time():
    loop, clock, server, api, rec, inf = _world(history=4)
    api.create(_pod("p0"))
    expected_delay = Backoff(rng=random.Random(1)).next()   # the same seeded backoff's first wait

    async def main():
        await inf.start()
        await inf.wait_for_sync(5)
        await asyncio.sleep(5)
        # ten writes at once while the reflector waits: the history (4 kept) moves past it
        for i in range(1, 11):
            api.create(_pod(f"p{i}"))
        api.delete("Pod", "p0", "default", grace_period_seconds=0)
        await asyncio.sleep(60)
        _same_store(inf, api)
        await inf.stop()

    run(main(), loop=loop)
    assert inf.stats.gone == 1 and inf.stats.relists == 1
    relist = [e for e in rec.events if e[0] > 5.0]
    # nothing arrives until the relist, which comes one backoff after the 410 (at t=5)
    assert {e[0] for e in relist} == {5.0 + expected_delay}
    assert ("delete" in {e[1] for e in relist}) and (5.0 + expected_delay, "delete", "p0", True) in relist
    assert sorted(e[2] for e in relist if e[1] == "add") == sorted(f"p{i}" for i in range(1, 11))


def test_bookmarks_move_the_synced_rv_without_events():
    loop, clock, server, api, rec, inf = _world(block_ms=2000)
    api.create(_pod("p0"))

    async def main():
        await inf.start()
        await inf.wait_for_sync(5)
        api.create(_node("n1"))
        api.create(_node("n2"))
        await asyncio.sleep(1.0)
        before = (inf.stats.bookmarks, inf.last_synced_rv)
        await asyncio.sleep(1.5)   # the Pod watch's 2 s block ends at t=2: a bookmark at RV 3
        after = (inf.stats.bookmarks, inf.last_synced_rv)
        await inf.stop()
        return before, after

    before, after = run(main(), loop=loop)
    assert before == (0, 1) and after == (1, 3)
    assert len(rec.events) == 1


def test_watch_list_and_its_relist_after_gone():
    loop, clock, server, api, rec, inf = _world(history=4, watch_list=True)
    for i in range(3):
        api.create(_pod(f"p{i}"))

    async def main():
        await inf.start()
        await inf.wait_for_sync(5)
        for i in range(3, 12):
            api.create(_pod(f"p{i}"))
        await asyncio.sleep(30)
        _same_store(inf, api)
        await inf.stop()

    run(main(), loop=loop)
    assert inf.stats.watch_lists == 2 and inf.stats.watch_list_fallbacks == 0
    assert inf.stats.gone == 1 and inf.stats.relists == 1


def test_corrupt_watch_entries_are_skipped():
    loop, clock, server, api, rec, inf = _world()

    async def main():
        await inf.start()
        await inf.wait_for_sync(5)
        api.create(_pod("p0"))
        server.add_raw_event("Pod", b"MODIFIED", b"\xc1 not msgpack")
        api.create(_pod("p1"))
        await asyncio.sleep(5)
        await inf.stop()

    run(main(), loop=loop)
    assert inf.stats.corrupt == 1
    assert [e[2] for e in rec.events] == ["p0", "p1"] and inf.last_synced_rv == 3


# a churn scenario with a delivery log; run twice here and once in another process
SCENARIO = r'''
import asyncio, random
from cluster_state.delivery import DeliveryLog
from cluster_state.informer import Informer
from cluster_state.memstore import MemoryServer
from cluster_state.reflector import Backoff
from ha.experiment.engine.sim.loop import SimClock, VirtualTimeLoop, run

def scenario(seed):
    loop = VirtualTimeLoop()
    clock = SimClock(loop)
    server = MemoryServer(history=20, clock=clock.now, uid_seed=seed)
    api = server.client()
    log = DeliveryLog(instance="s", clock=clock.monotonic, wall_clock=clock.now)
    infs = [Informer(server.async_client(latency=0.001 * (k + 1)), kind, log=log, name=f"{kind}-{k}",
                     backoff=Backoff(rng=random.Random(seed + k), clock=clock.monotonic),
                     clock=clock.monotonic, wall_clock=clock.now, watch_list=(k == 1), block_ms=500)
            for k, kind in enumerate(["Pod", "Pod", "Node"])]
    rng = random.Random(seed)
    async def writer():
        for step in range(300):
            await asyncio.sleep(rng.expovariate(20.0))
            name = f"p{rng.randrange(30)}"
            try:
                if rng.random() < 0.1:
                    api.create({"kind": "Node", "metadata": {"name": f"n{rng.randrange(5)}"}})
                elif rng.random() < 0.5:
                    api.create({"kind": "Pod", "metadata": {"name": name, "namespace": "ns"},
                                "spec": {}, "status": {"phase": "Pending"}})
                elif rng.random() < 0.5:
                    api.patch_annotations("Pod", name, "ns", {"k": str(step)})
                else:
                    api.delete("Pod", name, "ns", grace_period_seconds=0)
            except Exception as e:
                log.append({"kind": "writer", "type": type(e).__name__, "t": loop.time()})
            if step % 97 == 0:
                for _ in range(25):   # a burst past the kept history: 410s and relists
                    try:
                        api.create({"kind": "Pod", "metadata": {"name": f"b{rng.randrange(10**6)}", "namespace": "ns"},
                                    "spec": {}, "status": {}})
                    except Exception:
                        pass
    async def main():
        for inf in infs:
            await inf.start()
        await writer()
        await asyncio.sleep(10)
        for inf in infs:
            await inf.stop()
        return [inf.stats.as_dict() for inf in infs]
    stats = run(main(), loop=loop)
    return log.records, stats
'''


def _digest(records, stats) -> str:
    return hashlib.sha256(msgpack.packb([records, stats], use_bin_type=True)).hexdigest()


def test_a_churn_run_is_reproducible_across_runs_and_processes(tmp_path):
    ns: dict = {}
    exec(compile(SCENARIO, "scenario", "exec"), ns)
    rec1, stats1 = ns["scenario"](5)
    rec2, stats2 = ns["scenario"](5)
    assert rec1 == rec2 and stats1 == stats2
    assert sum(s["gone"] for s in stats1) > 0 and stats1[1]["watch_lists"] > 1   # relists happened
    assert len(rec1) > 300
    script = tmp_path / "scenario.py"
    script.write_text(SCENARIO + "\nimport sys, hashlib, msgpack\nr, s = scenario(5)\n"
                      "print(hashlib.sha256(msgpack.packb([r, s], use_bin_type=True)).hexdigest())\n")
    env = dict(os.environ, PYTHONHASHSEED="97", PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                         timeout=300, check=True)
    assert out.stdout.strip() == _digest(rec1, stats1)
    rec3, _ = ns["scenario"](6)
    assert rec3 != rec1
