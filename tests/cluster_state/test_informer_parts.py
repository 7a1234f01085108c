"""The informer's pure parts (no Redis needed): FIFO modes, delivery hooks, delivery log, backoff."""
from __future__ import annotations

import asyncio
import random
import time

import msgpack
import pytest

from cluster_state.delivery import (ADDED, DELETED, LIST, MODIFIED, REPLACED, DelayHook, Delivery,
                                    DeliveryLog, DeliveryLogError, PassThrough, read_delivery_log,
                                    replay)
from cluster_state.fifo import DeltaFIFO, RealFIFO
from cluster_state.reflector import Backoff


def pod(name, rv, uid=None, ns="default"):
    return {"kind": "Pod", "metadata": {"name": name, "namespace": ns, "uid": uid or f"u-{name}",
                                        "resourceVersion": rv}}


def ev(typ, name, rv, uid=None):
    return Delivery(typ, "Pod", ("default", name), pod(name, rv, uid), rv, time.monotonic())


async def test_real_fifo_keeps_watch_order_and_batches():
    f = RealFIFO(max_batch=3)
    seq = [ev(ADDED, "a", 1), ev(ADDED, "b", 2), ev(MODIFIED, "a", 3), ev(MODIFIED, "b", 4),
           ev(DELETED, "a", 5)]
    f.add_many(seq)
    first = await f.pop()
    second = await f.pop()
    assert [d.resource_version for d in first] == [1, 2, 3]
    assert [d.resource_version for d in second] == [4, 5]
    assert len(f) == 0


async def test_real_fifo_list_is_one_barrier_item():
    f = RealFIFO()
    f.add(ev(ADDED, "a", 1))
    f.replace([pod("a", 1), pod("b", 2)], "Pod", 7, time.monotonic(), initial=True)
    f.add(ev(MODIFIED, "b", 8))
    batch = await f.pop()
    assert [d.type for d in batch] == [ADDED, LIST, MODIFIED]
    assert batch[1].key is None and batch[1].resource_version == 7 and len(batch[1].items) == 2
    assert f.populated and f.initial_pending == 1


async def test_delta_fifo_pops_all_deltas_of_a_key_together():
    known = {}
    f = DeltaFIFO(lambda: list(known), known.get)
    for d in [ev(ADDED, "a", 1), ev(ADDED, "b", 2), ev(MODIFIED, "a", 3), ev(MODIFIED, "c", 4),
              ev(MODIFIED, "b", 5), ev(MODIFIED, "a", 6)]:
        f.add(d)
    order = []
    while len(f):
        order.append([(d.key[1], d.resource_version) for d in await f.pop()])
    # keys keep their first place; cross-object order is not watch order
    assert order == [[("a", 1), ("a", 3), ("a", 6)], [("b", 2), ("b", 5)], [("c", 4)]]


async def test_delta_fifo_collapses_consecutive_deletes_keeping_known_state():
    f = DeltaFIFO(lambda: [], lambda k: None)
    tomb = ev(DELETED, "a", 3)
    tomb.tombstone = True
    f.add(ev(MODIFIED, "a", 1))
    f.add(tomb)
    f.add(ev(DELETED, "a", 4))
    deltas = await f.pop()
    assert [(d.type, d.tombstone, d.resource_version) for d in deltas] == [
        (MODIFIED, False, 1), (DELETED, False, 4)]


async def test_delta_fifo_replace_emits_replaced_and_tombstones():
    known = {("default", "gone"): pod("gone", 1), ("default", "stays"): pod("stays", 2)}
    f = DeltaFIFO(lambda: list(known), known.get)
    f.add(ev(ADDED, "queued-gone", 3))
    f.replace([pod("stays", 2), pod("new", 9)], "Pod", 10, time.monotonic(), initial=False)
    got = {}
    while len(f):
        for d in await f.pop():
            got.setdefault(d.key[1], []).append((d.type, d.tombstone))
    assert got["stays"] == [(REPLACED, False)]
    assert got["new"] == [(REPLACED, False)]
    assert got["gone"] == [(DELETED, True)]
    assert got["queued-gone"] == [(ADDED, False), (DELETED, True)]


async def test_pass_through_emits_in_order():
    out = []
    h = PassThrough()
    await h.start(out.append)
    for i in range(5):
        await h.submit(ev(MODIFIED, "a", i))
    assert [d.resource_version for d in out] == list(range(5)) and h.held() == 0


async def _drain(hook, timeout=10.0):
    deadline = time.monotonic() + timeout
    while hook.held() and time.monotonic() < deadline:
        await asyncio.sleep(0.005)
    assert hook.held() == 0


async def test_delay_hook_delays_and_keeps_watch_order_by_default():
    out = []
    delays = {"a": 0.15, "b": 0.0}
    h = DelayHook(lambda d: delays[d.key[1]])
    await h.start(lambda d: out.append((time.monotonic(), d)))
    t0 = time.monotonic()
    await h.submit(ev(ADDED, "a", 1))
    await h.submit(ev(ADDED, "b", 2))   # no delay of its own, but may not overtake "a"
    await _drain(h)
    await h.stop()
    assert [d.resource_version for _, d in out] == [1, 2]
    assert out[0][0] - t0 >= 0.15 and out[1][0] - t0 >= 0.15


async def test_delay_hook_reorders_across_objects_only_when_asked():
    out = []
    rng = random.Random(3)
    h = DelayHook(lambda d: rng.uniform(0, 0.05), reorder_across_objects=True)
    await h.start(out.append)
    rv = 0
    for _ in range(40):
        for name in ("a", "b", "c", "d"):
            rv += 1
            await h.submit(ev(MODIFIED, name, rv))
    await _drain(h)
    await h.stop()
    assert len(out) == 160
    rvs = [d.resource_version for d in out]
    assert rvs != sorted(rvs), "random delays with reordering allowed should reorder something"
    for name in ("a", "b", "c", "d"):
        mine = [d.resource_version for d in out if d.key[1] == name]
        assert mine == sorted(mine), f"object {name} delivered out of order"


async def test_delay_hook_list_is_a_barrier_when_reordering():
    out = []
    delays = {1: 0.1, 2: 0.0, 3: 0.0}
    h = DelayHook(lambda d: delays[d.resource_version], reorder_across_objects=True)
    await h.start(out.append)
    await h.submit(ev(ADDED, "a", 1))
    await h.submit(Delivery(LIST, "Pod", None, None, 2, time.monotonic(), items=[]))
    await h.submit(ev(ADDED, "b", 3))
    await _drain(h)
    await h.stop()
    assert [d.resource_version for d in out] == [1, 2, 3]


def test_delivery_log_round_trip(tmp_path):
    path = tmp_path / "delivery" / "scheduler-1.log"
    with DeliveryLog(path, instance="scheduler-1") as lg:
        lg.append({"kind": "Pod", "type": LIST, "rv": 3, "count": 1, "relist": False,
                   "initial": True})
        lg.append({"kind": "Pod", "type": ADDED, "ns": "default", "name": "a", "uid": "u1",
                   "rv": 3, "object": pod("a", 3, "u1"), "initial": True})
        lg.append({"kind": "Pod", "type": MODIFIED, "ns": "default", "name": "a", "uid": "u1",
                   "rv": 5, "object": pod("a", 5, "u1")})
        lg.append({"kind": "Pod", "type": DELETED, "ns": "default", "name": "a", "uid": "u1",
                   "rv": 5, "object": pod("a", 5, "u1"), "tombstone": True})
    header, recs = read_delivery_log(path)
    assert header["instance"] == "scheduler-1"
    assert [r["seq"] for r in recs] == [1, 2, 3, 4]
    assert recs == lg.records
    assert recs[2]["object"]["metadata"]["resourceVersion"] == 5

    class H:
        def __init__(self):
            self.calls = []

        def on_add(self, o, initial):
            self.calls.append(("add", o["metadata"]["name"], initial))

        def on_update(self, old, new):
            self.calls.append(("update", old["metadata"]["resourceVersion"],
                               new["metadata"]["resourceVersion"]))

        def on_delete(self, o, tombstone=False):
            self.calls.append(("delete", o["metadata"]["name"], tombstone))

    h = H()
    stores = replay(recs, {"Pod": h})
    assert h.calls == [("add", "a", True), ("update", 3, 5), ("delete", "a", True)]
    assert stores["Pod"] == {}
    h2 = H()
    stores = replay(recs, {"Pod": h2}, until_rv=3)
    assert h2.calls == [("add", "a", True)] and ("default", "a") in stores["Pod"]


def test_delivery_log_rejects_garbage_naming_the_file(tmp_path):
    p = tmp_path / "x.log"
    p.write_bytes(msgpack.packb({"hello": 1}))
    with pytest.raises(DeliveryLogError, match="x.log: not a delivery log"):
        read_delivery_log(p)
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    with pytest.raises(DeliveryLogError, match="empty.log"):
        read_delivery_log(empty)


def test_backoff_doubles_caps_and_resets():
    now = [0.0]
    b = Backoff(initial=0.8, cap=30.0, jitter=0.0, reset_after=120.0, clock=lambda: now[0])
    seq = []
    for _ in range(8):
        seq.append(b.next())
        now[0] += 1
    assert seq == [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0]
    now[0] += 200           # healthy for longer than reset_after
    assert b.next() == 0.8
    j = Backoff(initial=1.0, jitter=1.0, rng=random.Random(1))
    assert 1.0 <= j.next() < 2.0


def test_staleness_samples_only_for_a_parsable_write_time():
    """The informer's per-event staleness sample (inlined for the default ``write_time_of``)
    takes exactly the objects write_time_of gives a time for; a custom write_time is used as is."""
    from cluster_state.delivery import WRITE_TIME_ANNOTATION, write_time_of
    from cluster_state.informer import Informer

    now = time.time()
    variants = [{WRITE_TIME_ANNOTATION: repr(now - 0.5)}, {WRITE_TIME_ANNOTATION: "not a time"},
                {WRITE_TIME_ANNOTATION: None}, {"other": "1"}, {}, None,
                {WRITE_TIME_ANNOTATION: str(now - 2.0)}, {WRITE_TIME_ANNOTATION: 12}]
    objs = []
    for i, ann in enumerate(variants):
        p = pod(f"p{i}", i + 1)
        if ann is not None:
            p["metadata"]["annotations"] = ann
        objs.append(p)
    want = [now - write_time_of(o) for o in objs if write_time_of(o) is not None]
    assert len(want) == 3       # the two stamped pods and the int 12
    for custom in (False, True):
        inf = Informer(None, "Pod", write_time=(lambda o: now - 1.0) if custom else write_time_of)
        for o in objs:   # add, then an update of the same object: both sample
            inf._deliver(Delivery(ADDED, "Pod", ("default", o["metadata"]["name"]), o, 1, 0.0))
            inf._deliver(Delivery(MODIFIED, "Pod", ("default", o["metadata"]["name"]), o, 2, 0.0))
        got = sorted(inf.staleness_ms)
        if custom:
            assert len(got) == 2 * len(objs) and all(900 < s < 60_000 for s in got)
        else:
            assert len(got) == 2 * len(want)
            for s, w in zip(got, sorted(want + want)):
                assert abs(s / 1000.0 - w) < 30, (s, w)
        assert inf.stats.delivered == 2 * len(objs)
