"""Volcano's concurrency inside one scheduler instance, in-process against the real API server:
the session runs on its own thread (informers keep delivering, digest() answers, the lease is
renewed meanwhile), binds go through the bind worker (processBindTask) without the cache lock,
and a partitioned leader's loop stays alive so it steps down by its renew deadline."""
from __future__ import annotations

import asyncio
import threading
import time

from ha.runtime.instance import SchedulerInstance
from tests.runtime.instance_helpers import LEASE, bound_nodes, create_jobs, instance_config, wait_for


def _consistent(api, digest) -> bool:
    """Every pod of the API server is in the cache, on the node the API server says, Bound."""
    pods = api.list("Pod").items
    for p in pods:
        t = digest["tasks"].get(p["metadata"]["uid"])
        if t is None or t[1] != (p["spec"].get("nodeName") or "") or t[0] != "Bound":
            return False
    return len(pods) > 0


class _Gate:
    """A session hook that holds the session (on the session thread) until released."""

    def __init__(self):
        self.entered = threading.Event()
        self.release = threading.Event()
        self.threads: list[str] = []

    def __call__(self, ssn):
        self.threads.append(threading.current_thread().name)
        self.entered.set()
        self.release.wait(120)


async def test_informers_digest_and_lease_keep_going_during_a_slow_session(api, redis_url, key_prefix):
    inst = SchedulerInstance(instance_config("scheduler-1", redis_url, key_prefix))
    gate = _Gate()
    inst.session_hook = gate
    await inst.start()
    try:
        assert await wait_for(inst.is_leader_now)
        assert await inst.wait_synced(60)
        assert await wait_for(gate.entered.is_set)          # a session is now held open
        sessions_before = inst.sessions
        rv_before = inst.informers["Pod"].delivered_rv or 0
        lease0 = api.get("Lease", "volcano", "volcano-system")["spec"]["renewTime"]
        names = create_jobs(api, n_jobs=2, size=2)
        # the same instance's informer applies the new pods while the session is still running
        assert await wait_for(lambda: (inst.informers["Pod"].delivered_rv or 0) > rv_before
                           and len([u for u in inst.cache.digest()["tasks"]]) >= len(names))
        d = await asyncio.wait_for(inst.digest(), 10)
        assert len(d["tasks"]) == len(names)
        assert all(t[0] == "Pending" for t in d["tasks"].values())
        st = await asyncio.wait_for(inst.stats(), 10)
        assert st["name"] == "scheduler-1"
        # the lease is renewed during the session: longer than a whole lease duration held open
        assert await wait_for(lambda: api.get("Lease", "volcano", "volcano-system")["spec"]["renewTime"] != lease0)
        await asyncio.sleep(LEASE["lease_duration"] * 1.5)
        assert inst.is_leader_now() and inst.elections_lost == 0
        assert not gate.release.is_set() and inst.sessions == sessions_before   # still the same session
        assert gate.threads[0].startswith("scheduler-1-session")
        gate.release.set()
        inst.session_hook = None
        assert await wait_for(lambda: all(bound_nodes(api).values()))
        assert await wait_for(lambda: _consistent(api, inst.cache.digest()))
    finally:
        gate.release.set()
        await inst.stop()


class _ThreadRecordingBinder:
    """The instance's InstanceIO, noting which thread binds and holding binds until released."""

    def __init__(self, io, hold: threading.Event):
        self.io, self.hold = io, hold
        self.threads: list[str] = []
        self.lock_free: list[bool] = []
        self.cache = None

    def bind(self, tasks):
        self.threads.append(threading.current_thread().name)
        # the cache lock is not held during the binder's I/O: another thread can take it
        got = []

        def probe():
            ok = self.cache.mutex.acquire(timeout=30)
            if ok:
                self.cache.mutex.release()
            got.append(ok)
        t = threading.Thread(target=probe)
        t.start()
        t.join()
        self.lock_free.append(bool(got and got[0]))
        self.hold.wait(120)
        return self.io.bind(tasks)


async def test_binds_go_through_the_bind_worker_and_the_cache_ends_consistent(api, redis_url, key_prefix):
    inst = SchedulerInstance(instance_config("scheduler-1", redis_url, key_prefix, mode="active-active"))
    await inst.start()
    hold = threading.Event()
    try:
        assert await inst.wait_synced(60)
        rec = _ThreadRecordingBinder(inst.io, hold)
        rec.cache = inst.cache
        inst.cache.binder = rec
        names = create_jobs(api, n_jobs=3, size=2)
        # the session only enqueues: tasks are Binding in the cache while the worker holds the bind
        assert await wait_for(lambda: rec.threads)
        victim = names[0]
        d = await inst.digest()
        assert any(t[0] == "Binding" for t in d["tasks"].values())
        sessions_at_hold = inst.sessions
        assert await wait_for(lambda: inst.sessions > sessions_at_hold)   # sessions go on meanwhile
        # someone else binds one of the pods first: the worker's bind of it gets a 409
        other = "node-3" if d["tasks"][api.get("Pod", victim, "default")["metadata"]["uid"]][1] != "node-3" \
            else "node-2"
        api.bind("default", victim, other)
        hold.set()
        assert await wait_for(lambda: all(bound_nodes(api).values()))
        assert set(rec.threads) == {"scheduler-1-bind"}
        assert all(rec.lock_free)
        # the worker counts a batch once its step returns, after the binds reached the API
        assert await wait_for(lambda: inst.bind_worker.batches >= 1)
        assert inst.bind_worker.errors == 0
        st = await inst.stats()
        assert st["bind_conflicts"] >= 1
        assert st["binds"] + st["bind_conflicts"] >= len(names)
        assert bound_nodes(api)[victim] == other
        # the failed bind was resynced (end of a later session): the cache agrees with the server
        assert await wait_for(lambda: _consistent(api, inst.cache.digest()))
        assert await wait_for(lambda: not inst.cache.err_tasks and not inst.cache.bind_queue)
        assert _consistent(api, inst.cache.digest())
        decs = [x for x in await inst.decisions(0) if x["op"] == "bind"]
        assert any(not x["ok"] and x["error"].startswith("409") and x["pod"] == f"default/{victim}" for x in decs)
    finally:
        hold.set()
        await inst.stop()
    assert inst.bind_worker is None        # stopped with the instance


async def test_partitioned_leader_steps_down_by_its_renew_deadline(api, redis_url, key_prefix):
    from chaos.injectors.proxy import ThreadedRedisProxy
    lease = dict(lease_duration=6.0, lease_renew_deadline=4.0, lease_retry=0.5)
    proxy = ThreadedRedisProxy(redis_url, name="scheduler-1").start()
    a = SchedulerInstance(instance_config("scheduler-1", proxy.url, key_prefix, retry_outages_s=30.0,
                               stop_timeout_s=10.0, **lease))
    b = SchedulerInstance(instance_config("scheduler-2", redis_url, key_prefix, **lease))
    try:
        await a.start()
        assert await wait_for(a.is_leader_now)
        await b.start()
        names = create_jobs(api, n_jobs=2, size=2)
        assert await wait_for(lambda: all(bound_nodes(api).values()))
        assert not b.is_leader_now()
        proxy.partition()
        t_cut = time.time()
        # a's loop stays alive through the partition: it answers, and it notices the lost lease
        # itself (renew deadline), before the standby can take the lease over (lease duration)
        stepped_down_at = None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            await asyncio.wait_for(a.digest(), 10)
            if stepped_down_at is None and (a.elections_lost >= 1 or not a.is_leader_now()):
                stepped_down_at = time.time()
            if stepped_down_at is not None and b.is_leader_now():
                break
            await asyncio.sleep(0.05)
        assert stepped_down_at is not None, "the partitioned leader never stepped down"
        assert b.is_leader_now(), "the standby never took over"
        # the elector leads first; on_started_leading, which stamps the time, runs as a task after
        assert await wait_for(lambda: b.became_leader_at is not None)
        assert stepped_down_at <= b.became_leader_at, \
            (f"old leader stepped down {stepped_down_at - t_cut:.1f}s after the cut, "
             f"new leader elected {b.became_leader_at - t_cut:.1f}s after it")
        # the new leader schedules new work
        more = create_jobs(api, n_jobs=1, size=2, prefix="late")
        assert await wait_for(lambda: all(bound_nodes(api)[n] for n in more))
        assert len(names) == 4
    finally:
        proxy.heal()
        await b.stop()
        await a.stop()
        proxy.stop()
