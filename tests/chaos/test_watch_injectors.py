"""Watch-level faults on real informers against the real API server (real redis-server)."""
from __future__ import annotations

import asyncio
import pickle
import random
import time

import pytest

from chaos.injectors.watch import WatchChaos, WatchChaosHook
from chaos.schedule import build_schedule

from .helpers import (NS, Recorder, api, aapi, caught_up, check_contract, compact_history,  # noqa: F401
                      eventually, informer, informer_state, make_pod, median, server_state, touch)

I1, I2 = "scheduler-1", "scheduler-2"


def sched(*entries, seed=1):
    return build_schedule(list(entries), seed, [I1, I2])


async def test_delay_raises_staleness_of_the_delayed_informer_only(api, aapi):
    s = sched({"at": 0, "fault": "watch-delay", "target": I1, "kinds": ["Pod"],
               "delay": {"dist": "fixed", "value": "300ms"}})
    h1 = WatchChaosHook(I1, "Pod", s.faults)
    h2 = WatchChaosHook(I2, "Pod", s.faults)       # not a target: must pass everything at once
    assert h1.scheduled and not h2.scheduled
    h1.set_epoch(time.time())
    h2.set_epoch(time.time())
    a, b = informer(aapi, hook=h1, name="a"), informer(aapi, hook=h2, name="b")
    async with a, b:
        assert await a.wait_for_sync(60) and await b.wait_for_sync(60)
        for i in range(15):
            api.create(make_pod(f"p{i}"))
        await caught_up(a, api)
        await caught_up(b, api)
    sa, sb = list(a.staleness_ms), list(b.staleness_ms)
    assert len(sa) == len(sb) == 15
    assert min(sa) >= 300.0                      # every event waited its 300 ms
    assert median(sa) > median(sb)
    assert h1.stats.delayed == 16 and h2.stats.delayed == 0     # the initial list + 15 events
    assert informer_state(a) == informer_state(b) == server_state(api)


async def test_delay_only_inside_its_window_and_only_its_kinds(api, aapi):
    shift = [0.0]
    clock = lambda: time.time() + shift[0]          # noqa: E731 -- a clock the test can jump
    s = sched({"at": 0, "for": "60s", "fault": "watch-delay", "target": I1, "kinds": ["Pod"],
               "delay": {"dist": "exponential", "mean": "50ms"}})
    wc = WatchChaos(I1, s.faults, kinds=("Pod", "Node"), epoch=clock())
    for h in wc.hooks.values():
        h.clock = clock
    pods = informer(aapi, "Pod", hook=wc.hooks["Pod"])
    nodes = informer(aapi, "Node", hook=wc.hooks["Node"])
    async with pods, nodes:
        assert await pods.wait_for_sync(60) and await nodes.wait_for_sync(60)
        for i in range(4):
            api.create(make_pod(f"in{i}"))
        api.create({"kind": "Node", "metadata": {"name": "n1"}, "spec": {},
                    "status": {"allocatable": {"cpu": "1", "memory": "1Gi", "pods": 10}}})
        await caught_up(pods, api)
        await caught_up(nodes, api)
        shift[0] += 120.0                           # the window is over
        for i in range(3):
            api.create(make_pod(f"out{i}"))
        await caught_up(pods, api)
    assert wc.hooks["Pod"].stats.delayed == 5          # the initial list + the 4 inside
    assert wc.hooks["Pod"].stats.submitted == 8
    assert wc.hooks["Node"].stats.delayed == 0 and wc.hooks["Node"].stats.submitted >= 2
    assert informer_state(pods) == server_state(api)


async def test_stall_holds_everything_until_the_window_ends_then_releases_in_order(api, aapi):
    s = sched({"at": 0, "for": "2s", "fault": "watch-stall", "target": I1})
    hook = WatchChaosHook(I1, "Pod")
    rec = Recorder()
    inf = informer(aapi, hook=hook)
    inf.add_event_handler(rec)
    async with inf:
        assert await inf.wait_for_sync(60)
        assert hook.activate(s.faults[0])
        end = hook.activations[0].end
        for i in range(6):
            api.create(make_pod(f"p{i}"))
        await caught_up(inf, api)
    stalled = hook.stats.stalled
    assert stalled >= 1
    adds = [c for c in rec.calls if c[0] == "add"]
    assert len(adds) == 6
    # the deliveries that reached the hook inside the window came out only after it ended
    assert all(c[5] >= end - 0.01 for c in adds[:stalled])
    assert [c[3] for c in adds] == sorted(c[3] for c in adds)      # released in watch order
    check_contract(rec, rec)


async def test_stall_ended_early_by_the_nemesis_releases_at_once(api, aapi):
    s = sched({"at": 0, "for": "10m", "fault": "watch-stall", "target": I1})
    hook = WatchChaosHook(I1, "Pod")
    inf = informer(aapi, hook=hook)
    async with inf:
        assert await inf.wait_for_sync(60)
        hook.activate(s.faults[0])
        for i in range(5):
            api.create(make_pod(f"p{i}"))
        await eventually(lambda: hook.held() == 5, 60, "the stall to hold 5 events")
        await asyncio.sleep(0.3)
        assert len(inf.store) == 0                  # nothing delivered while stalled
        hook.deactivate(0)
        await caught_up(inf, api, timeout=30)
    assert informer_state(inf) == server_state(api)


async def test_reorder_changes_cross_object_order_but_never_per_object(api, aapi):
    s = sched({"at": 0, "fault": "watch-reorder", "target": I1, "window": "400ms"}, seed=5)
    hook = WatchChaosHook(I1, "Pod")
    rec, ref = Recorder(), Recorder()
    chaos_inf = informer(aapi, hook=hook, name="chaos")
    ref_inf = informer(aapi, name="reference")
    chaos_inf.add_event_handler(rec)
    ref_inf.add_event_handler(ref)
    async with chaos_inf, ref_inf:
        assert await chaos_inf.wait_for_sync(60) and await ref_inf.wait_for_sync(60)
        hook.activate(s.faults[0])
        for i in range(12):
            api.create(make_pod(f"p{i}"))
        for rnd in range(3):
            for i in range(12):
                touch(api, f"p{i}", round=str(rnd))
        await caught_up(chaos_inf, api)
        await caught_up(ref_inf, api)
    assert hook.stats.overtaken > 0
    rvs = [c[3] for c in rec.calls if c[0] in ("add", "update")]
    assert rvs != sorted(rvs)                                   # cross-object order changed
    check_contract(rec, ref, cross_object_order=False)          # per-object order kept
    with pytest.raises(AssertionError, match="cross-object"):
        check_contract(rec, ref, cross_object_order=True)
    assert informer_state(chaos_inf) == informer_state(ref_inf) == server_state(api)


async def test_scheduled_expire_forces_a_relist(api, aapi):
    s = sched({"at": "200ms", "fault": "watch-expire", "target": "all", "kinds": ["Pod"]})
    hook = WatchChaosHook(I2, "Pod", s.faults)
    for i in range(3):
        api.create(make_pod(f"p{i}"))
    inf = informer(aapi, hook=hook)
    async with inf:
        assert await inf.wait_for_sync(60)
        hook.set_epoch(time.time())
        await eventually(lambda: inf.stats.relists >= 1, 60, "the relist")
        api.create(make_pod("after"))
        await caught_up(inf, api)
    assert hook.stats.expires == 1 and inf.stats.gone >= 1
    assert informer_state(inf) == server_state(api)


async def test_expire_by_compaction_relists_with_tombstones(api, aapi):
    for i in range(5):
        api.create(make_pod(f"p{i}"))
    rec = Recorder()
    inf = informer(aapi)
    inf.add_event_handler(rec)
    await inf.start()
    assert await inf.wait_for_sync(60)
    old_uid = inf.store.get("p1", NS)["metadata"]["uid"]
    await inf.stop()                                   # the watch is behind ...
    n0 = len(rec.calls)
    api.delete("Pod", "p0", NS, grace_period_seconds=0)
    api.delete("Pod", "p1", NS, grace_period_seconds=0)
    api.create(make_pod("p1"))
    compact_history(api, ["Pod"])                 # ... and its history is gone: 410
    await inf.start()
    try:
        await eventually(lambda: inf.stats.relists >= 1 and inf.pending() == 0, 60, "relist")
        await caught_up(inf, api)
    finally:
        await inf.stop()
    assert inf.stats.gone >= 1
    tombstones = {(c[1][1], c[2]) for c in rec.calls[n0:] if c[0] == "delete" and c[4]}
    assert ("p0", None) not in tombstones and {k for k, _ in tombstones} == {"p0", "p1"}
    assert ("p1", old_uid) in tombstones
    assert informer_state(inf) == server_state(api)


@pytest.mark.parametrize("seed", [3, 11])
async def test_informer_contract_holds_under_delay_stall_and_expire(api, aapi, seed):
    s = sched({"at": 0, "fault": "watch-delay", "target": I1,
               "delay": {"dist": "pareto", "scale": "5ms", "alpha": 1.2, "max": "400ms"}},
              {"at": "300ms", "for": "700ms", "fault": "watch-stall", "target": I1},
              {"at": "1500ms", "fault": "watch-expire", "target": I1}, seed=seed)
    hook = WatchChaosHook(I1, "Pod", s.faults)
    rec, ref = Recorder(), Recorder()
    chaos_inf, ref_inf = informer(aapi, hook=hook, name="chaos"), informer(aapi, name="reference")
    chaos_inf.add_event_handler(rec)
    ref_inf.add_event_handler(ref)
    rnd = random.Random(seed)
    alive: set[str] = set()
    async with chaos_inf, ref_inf:
        assert await chaos_inf.wait_for_sync(60) and await ref_inf.wait_for_sync(60)
        hook.set_epoch(time.time())
        t_end = time.monotonic() + 2.5
        n = 0
        while time.monotonic() < t_end or n < 60:
            n += 1
            name = f"p{rnd.randrange(10)}"
            if name not in alive:
                api.create(make_pod(name))
                alive.add(name)
            elif rnd.random() < 0.2:
                api.delete("Pod", name, NS, grace_period_seconds=0)
                alive.discard(name)
            else:
                touch(api, name, n=str(n))
            await asyncio.sleep(rnd.uniform(0, 0.04))
        await caught_up(ref_inf, api)
        await caught_up(chaos_inf, api)
    assert hook.stats.delayed > 0 and hook.stats.stalled > 0 and hook.stats.expires == 1
    assert chaos_inf.stats.relists >= 1
    check_contract(rec, ref, cross_object_order=False)   # a relist reorders by design
    check_contract(ref, ref)                              # the reference saw watch order
    assert informer_state(chaos_inf) == informer_state(ref_inf) == server_state(api)


def test_hooks_pickle_for_ray_and_keep_their_schedule():
    s = sched({"at": "1s", "for": "2s", "fault": "watch-delay", "target": I1,
               "delay": {"dist": "uniform", "min": "1ms", "max": "2ms"}})
    wc = WatchChaos(I1, s.faults, epoch=1000.0)
    wc2 = pickle.loads(pickle.dumps(wc))
    h = wc2.hooks["Pod"]
    assert h.held() == 0 and h.epoch == 1000.0
    assert [a.sf.index for a in h.active(1001.5)] == [0] and h.active(1003.5) == []
    # the two copies draw the same delays: the seeded stream survives the trip
    a1 = wc.hooks["Pod"].activations[0].rng.random(3)
    a2 = h.activations[0].rng.random(3)
    assert list(a1) == list(a2)


async def test_schedule_driven_hooks_survive_a_pickle_trip_into_an_instance_config(api, aapi):
    """What a Ray actor gets: InstanceConfig.informer_options["hook_factories"] from
    hook_factories(), pickled; the hooks are built in place and act from the epoch."""
    from chaos.injectors.watch import hook_factories
    s = sched({"at": 0, "for": "60s", "fault": "watch-delay", "target": I1, "kinds": ["Pod"],
               "delay": {"dist": "fixed", "value": "100ms"}})
    factories = pickle.loads(pickle.dumps(hook_factories(s, I1)))
    assert set(factories) >= {"Pod", "Node"}
    hooks = {k: f() for k, f in factories.items()}
    for h in hooks.values():
        h.set_epoch(time.time())
    inf = informer(aapi, hook=hooks["Pod"])
    async with inf:
        assert await inf.wait_for_sync(60)
        api.create(make_pod("x"))
        await caught_up(inf, api)
    assert min(inf.staleness_ms) >= 100.0
    assert hooks["Pod"].stats.delayed >= 1 and hooks["Node"].scheduled == []
