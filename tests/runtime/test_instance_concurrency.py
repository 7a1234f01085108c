"""Volcano's concurrency inside one scheduler instance, in-process against the real API server:
the session runs on its own thread (informers keep delivering, digest() answers, the lease is
renewed meanwhile), binds go through the bind worker (processBindTask) without the cache lock,
and a partitioned leader's loop stays alive so it steps down by its renew deadline."""
from __future__ import annotations

import asyncio
import threading
import time

import pytest

from ha.runtime.instance import InstanceConfig, SchedulerInstance
from ha.runtime.workload import WorkloadConfig, WorkloadGenerator, make_nodes, make_queue

LEASE = dict(lease_duration=1.5, lease_renew_deadline=1.0, lease_retry=0.2)


def _cfg(name, redis_url, prefix, **kw):
    base = dict(name=name, redis_url=redis_url, prefix=prefix, period_s=0.3, **LEASE)
    base.update(kw)
    return InstanceConfig(**base)


async def _wait(pred, timeout=60.0, step=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = pred()
        if asyncio.iscoroutine(r):
            r = await r
        if r:
            return True
        await asyncio.sleep(step)
    return False


@pytest.fixture
def api(redis_url, key_prefix):
    from cluster_state.client import ApiClient
    c = ApiClient.from_url(redis_url, prefix=key_prefix)
    for n in make_nodes(3, cpu="8", memory="32Gi", pods=110):
        c.create(n)
    c.create(make_queue("default"))
    yield c
    c.close()


def _create_jobs(api, n_jobs=3, size=2, seed=0, prefix="job"):
    wl = WorkloadConfig(rate_per_s=100.0, gang_size=(size, size), runtime_s=(60, 60), max_gangs=n_jobs,
                        duration_s=100.0, name_prefix=prefix)
    gen = WorkloadGenerator(wl, seed)
    names = []
    for job in gen.plan():
        pg, pods = gen.objects(job)
        api.create(pg)
        for p in pods:
            api.create(p)
            names.append(p["metadata"]["name"])
    return names


def _bound(api):
    return {p["metadata"]["name"]: p["spec"].get("nodeName") for p in api.list("Pod").items}


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
    inst = SchedulerInstance(_cfg("scheduler-1", redis_url, key_prefix))
    gate = _Gate()
    inst.session_hook = gate
    await inst.start()
    try:
        assert await _wait(inst.is_leader_now)
        assert await inst.wait_synced(60)
        assert await _wait(gate.entered.is_set)          # a session is now held open
        sessions_before = inst.sessions
        rv_before = inst.informers["Pod"].delivered_rv or 0
        lease0 = api.get("Lease", "volcano", "volcano-system")["spec"]["renewTime"]
        names = _create_jobs(api, n_jobs=2, size=2)
        # the same instance's informer applies the new pods while the session is still running
        assert await _wait(lambda: (inst.informers["Pod"].delivered_rv or 0) > rv_before
                           and len([u for u in inst.cache.digest()["tasks"]]) >= len(names))
        d = await asyncio.wait_for(inst.digest(), 10)
        assert len(d["tasks"]) == len(names)
        assert all(t[0] == "Pending" for t in d["tasks"].values())
        st = await asyncio.wait_for(inst.stats(), 10)
        assert st["name"] == "scheduler-1"
        # the lease is renewed during the session: longer than a whole lease duration held open
        assert await _wait(lambda: api.get("Lease", "volcano", "volcano-system")["spec"]["renewTime"] != lease0)
        await asyncio.sleep(LEASE["lease_duration"] * 1.5)
        assert inst.is_leader_now() and inst.elections_lost == 0
        assert not gate.release.is_set() and inst.sessions == sessions_before   # still the same session
        assert gate.threads[0].startswith("scheduler-1-session")
        gate.release.set()
        inst.session_hook = None
        assert await _wait(lambda: all(_bound(api).values()))
        assert await _wait(lambda: _consistent(api, inst.cache.digest()))
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
    inst = SchedulerInstance(_cfg("scheduler-1", redis_url, key_prefix, mode="active-active"))
    await inst.start()
    hold = threading.Event()
    try:
        assert await inst.wait_synced(60)
        rec = _ThreadRecordingBinder(inst.io, hold)
        rec.cache = inst.cache
        inst.cache.binder = rec
        names = _create_jobs(api, n_jobs=3, size=2)
        # the session only enqueues: tasks are Binding in the cache while the worker holds the bind
        assert await _wait(lambda: rec.threads)
        victim = names[0]
        d = await inst.digest()
        assert any(t[0] == "Binding" for t in d["tasks"].values())
        sessions_at_hold = inst.sessions
        assert await _wait(lambda: inst.sessions > sessions_at_hold)   # sessions go on meanwhile
        # someone else binds one of the pods first: the worker's bind of it gets a 409
        other = "node-3" if d["tasks"][api.get("Pod", victim, "default")["metadata"]["uid"]][1] != "node-3" \
            else "node-2"
        api.bind("default", victim, other)
        hold.set()
        assert await _wait(lambda: all(_bound(api).values()))
        assert set(rec.threads) == {"scheduler-1-bind"}
        assert all(rec.lock_free)
        assert inst.bind_worker.batches >= 1 and inst.bind_worker.errors == 0
        st = await inst.stats()
        assert st["bind_conflicts"] >= 1
        assert st["binds"] + st["bind_conflicts"] >= len(names)
        assert _bound(api)[victim] == other
        # the failed bind was resynced (end of a later session): the cache agrees with the server
        assert await _wait(lambda: _consistent(api, inst.cache.digest()))
        assert await _wait(lambda: not inst.cache.err_tasks and not inst.cache.bind_queue)
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
    a = SchedulerInstance(_cfg("scheduler-1", proxy.url, key_prefix, retry_outages_s=30.0,
                               stop_timeout_s=10.0, **lease))
    b = SchedulerInstance(_cfg("scheduler-2", redis_url, key_prefix, **lease))
    try:
        await a.start()
        assert await _wait(a.is_leader_now)
        await b.start()
        names = _create_jobs(api, n_jobs=2, size=2)
        assert await _wait(lambda: all(_bound(api).values()))
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
        assert b.became_leader_at is not None
        assert stepped_down_at <= b.became_leader_at, \
            (f"old leader stepped down {stepped_down_at - t_cut:.1f}s after the cut, "
             f"new leader elected {b.became_leader_at - t_cut:.1f}s after it")
        # the new leader schedules new work
        more = _create_jobs(api, n_jobs=1, size=2, prefix="late")
        assert await _wait(lambda: all(_bound(api)[n] for n in more))
        assert len(names) == 4
    finally:
        proxy.heal()
        await b.stop()
        await a.stop()
        proxy.stop()
