"""The scheduler instance in-process (plain asyncio, no Ray) against the real API server: modes,
warm/cold standby, bind conflicts, shadow dry runs, fencing, restart with a fresh list."""
from __future__ import annotations

import asyncio

import pytest

from ha.errors import BadInput
from ha.runtime.instance import InstanceConfig, SchedulerInstance
from tests.runtime.instance_helpers import bound_nodes, create_jobs, instance_config, wait_for

MANUAL = 3600.0   # a session period that never fires: tests call run_session() themselves


def test_config_is_validated():
    with pytest.raises(BadInput, match="mode"):
        InstanceConfig(name="s", redis_url="redis://x", mode="primary")
    with pytest.raises(BadInput, match="standby"):
        InstanceConfig(name="s", redis_url="redis://x", standby="lukewarm")
    with pytest.raises(BadInput, match="resync must be one of continuous, after-session"):
        InstanceConfig(name="s", redis_url="redis://x", resync="sometimes")
    with pytest.raises(BadInput, match="renew deadline"):
        InstanceConfig(name="s", redis_url="redis://x", lease_duration=3, lease_renew_deadline=1,
                       lease_retry=1)


async def test_leader_elected_warm_standby_only_leader_binds(api, redis_url, key_prefix, tmp_path):
    names = create_jobs(api)
    insts = [SchedulerInstance(instance_config(f"scheduler-{i}", redis_url, key_prefix,
                                    delivery_log_dir=str(tmp_path))) for i in (1, 2)]
    for i in insts:
        await i.start()
    try:
        assert await wait_for(lambda: all(bound_nodes(api).values()))
        stats = [await i.stats() for i in insts]
        leaders = [s for s in stats if s["is_leader"]]
        assert len(leaders) == 1
        standby = next(s for s in stats if not s["is_leader"])
        assert standby["sessions"] == 0 and standby["binds"] == 0
        assert leaders[0]["binds"] == len(names) and leaders[0]["errors"] == 0
        assert leaders[0]["bind_conflicts"] == 0 and leaders[0]["fatal_cache_errors"] == 0
        # warm standby: its informers keep its cache current without scheduling
        li = insts[0] if stats[0]["is_leader"] else insts[1]
        si = insts[1] if li is insts[0] else insts[0]

        async def same_tasks():
            a, b = await li.digest(), await si.digest()
            return len(a["tasks"]) == len(names) and a["tasks"] == b["tasks"]
        assert await wait_for(same_tasks)
        d = await si.digest()
        assert set(d) >= {"tasks", "nodes", "rvs", "is_leader", "name"}
        assert set(d["rvs"]) == {"Pod", "Node", "HyperNode", "PodGroup", "Queue", "PriorityClass"}
        assert d["rvs"]["Pod"] > 0
        assert set(d["nodes"]["node-1"]) >= {"idle", "used", "releasing", "pipelined"}
        # decisions: one successful bind record per pod, and `since` pages
        decs = await li.decisions(0)
        binds = [x for x in decs if x["op"] == "bind" and x["ok"]]
        assert sorted(x["pod"].split("/")[1] for x in binds) == sorted(names)
        assert await li.decisions(decs[-1]["seq"]) == []
        assert (await li.decisions(decs[-1]["seq"] - 1))[0]["seq"] == decs[-1]["seq"]
        path = await li.delivery_log_path()
        assert path and path.endswith(f"delivery/{li.cfg.name}.log")
    finally:
        for i in insts:
            await i.stop()
    from cluster_state.delivery import read_delivery_log
    header, records = read_delivery_log(path)
    assert header["instance"] == li.cfg.name
    assert {r["kind"] for r in records} >= {"Pod", "Node"}


async def test_cold_standby_lists_only_when_elected(api, redis_url, key_prefix):
    names = create_jobs(api, n_jobs=2)
    a = SchedulerInstance(instance_config("scheduler-1", redis_url, key_prefix, standby="cold"))
    await a.start()
    assert await wait_for(a.is_leader)
    assert await wait_for(lambda: all(bound_nodes(api).values()))
    b = SchedulerInstance(instance_config("scheduler-2", redis_url, key_prefix, standby="cold"))
    await b.start()
    try:
        await asyncio.sleep(0.5)
        d = await b.digest()
        assert d["tasks"] == {} and not d["synced"] and not (await b.is_leader())
        more = create_jobs(api, n_jobs=1, seed=99) if False else []
        await a.stop()                        # graceful: releases the lease
        assert await wait_for(b.is_leader)
        assert await wait_for(lambda: b._synced())
        d = await b.digest()
        assert len(d["tasks"]) == len(names) + len(more)
        s = await b.stats()
        assert s["leader_transitions"] == 1 and s["lease_transitions"] == 1
    finally:
        await a.stop()
        await b.stop()


async def test_active_active_bind_conflicts_are_counted_not_raised(api, redis_url, key_prefix):
    names = create_jobs(api, n_jobs=2, size=3)
    insts = [SchedulerInstance(instance_config(f"scheduler-{i}", redis_url, key_prefix, mode="active-active",
                                    period_s=MANUAL)) for i in (1, 2)]
    for i in insts:
        await i.start()
        assert await i.wait_synced(30)
    try:
        # both sessions run back to back, before either informer can deliver the other's binds:
        # the second instance binds the same pods and gets 409s
        r1 = insts[0].run_session()
        r2 = insts[1].run_session()
        assert r1.ok and r2.ok
        s1, s2 = await insts[0].stats(), await insts[1].stats()
        assert s1["binds"] == len(names) and s1["bind_conflicts"] == 0
        assert s2["binds"] == 0 and s2["bind_conflicts"] == len(names)
        assert s2["errors"] == 0 and s2["fatal_cache_errors"] == 0
        failed = [x for x in await insts[1].decisions(0) if x["op"] == "bind"]
        assert failed and all(not x["ok"] and "409" in x["error"] for x in failed)
        # the loser's cache resyncs from the API server: it converges to the winner's placements
        bound = bound_nodes(api)

        async def converged():
            d = await insts[1].digest()
            return all(d["tasks"][uid][1] == bound[_name(api, uid)] for uid in d["tasks"])
        assert await wait_for(converged)
        insts[1].run_session()
        assert (await insts[1].stats())["bind_conflicts"] == len(names)   # nothing new to fight over
    finally:
        for i in insts:
            await i.stop()


def _name(api, uid):
    for p in api.list("Pod").items:
        if p["metadata"]["uid"] == uid:
            return p["metadata"]["name"]
    return None


async def test_shadow_standby_runs_dry_sessions(api, redis_url, key_prefix):
    names = create_jobs(api, n_jobs=2)
    leader = SchedulerInstance(instance_config("scheduler-1", redis_url, key_prefix, mode="shadow", period_s=MANUAL))
    await leader.start()
    assert await wait_for(leader.is_leader)
    shadow = SchedulerInstance(instance_config("scheduler-2", redis_url, key_prefix, mode="shadow", period_s=MANUAL))
    await shadow.start()
    try:
        assert await shadow.wait_synced(30)
        assert not await shadow.is_leader()
        res = shadow.run_session()
        assert res.ok and set(k.split("/")[1] for k in res.binds) == set(names)
        assert not any(bound_nodes(api).values())          # nothing written
        decs = [x for x in await shadow.decisions(0) if x["op"] == "bind"]
        assert len(decs) == len(names) and all(x["dry_run"] and not x["leader"] for x in decs)
        s = await shadow.stats()
        assert s["binds"] == 0 and s["dry_run_ops"] >= len(names) and s["errors"] == 0
        leader.run_session()
        assert all(bound_nodes(api).values())
        ldecs = {x["pod"]: x["node"] for x in await leader.decisions(0) if x["op"] == "bind"}
        assert all(not x["dry_run"] for x in await leader.decisions(0))
        assert set(ldecs) == {x["pod"] for x in decs}    # comparable, pod by pod
    finally:
        await shadow.stop()
        await leader.stop()


@pytest.mark.parametrize("fencing", [True, False])
async def test_fencing_refuses_writes_of_a_deposed_leader(api, redis_url, key_prefix, fencing):
    names = create_jobs(api, n_jobs=1)
    # a long renew deadline: the deposed leader keeps believing it leads while the test acts
    a = SchedulerInstance(instance_config("scheduler-1", redis_url, key_prefix, period_s=MANUAL, fencing=fencing,
                               lease_duration=30.0, lease_renew_deadline=20.0, lease_retry=0.2))
    await a.start()
    try:
        assert await wait_for(a.is_leader)
        assert await a.wait_synced(30)
        lease = api.get("Lease", "volcano", "volcano-system")
        lease["spec"].update(holderIdentity="intruder",
                             leaseTransitions=lease["spec"]["leaseTransitions"] + 1)
        api.update(lease)
        assert await a.is_leader()                   # it has not noticed yet (renew deadline 20 s)
        a.run_session()
        s = await a.stats()
        if fencing:
            assert s["fenced"] == len(names) and s["binds"] == 0
            assert not any(bound_nodes(api).values())
            decs = [x for x in await a.decisions(0) if x["op"] == "bind"]
            assert decs and all("412 Fenced" in x["error"] for x in decs)
        else:   # client-go's hazard: the old leader still writes
            assert s["binds"] == len(names) and s["fenced"] == 0
    finally:
        await a.stop()


async def test_fatal_cache_error_restarts_with_a_fresh_list(api, redis_url, key_prefix):
    names = create_jobs(api, n_jobs=2)
    a = SchedulerInstance(instance_config("scheduler-1", redis_url, key_prefix, mode="active-active"))
    await a.start()
    try:
        assert await wait_for(lambda: all(bound_nodes(api).values()))
        before = await a.digest()
        old_cache = a.cache
        a._fatal("test: injected")
        assert await wait_for(lambda: a.restarts == 1 and a.cache is not old_cache and a._synced())
        s = await a.stats()
        assert s["fatal_cache_errors"] == 1 and s["incarnation"] == 1
        assert s["binds"] == len(names)               # counters survive the restart

        async def same():   # the fresh list places every task where the old cache had it
            now = (await a.digest())["tasks"]
            return {u: n for u, (_, n) in now.items()} == {u: n for u, (_, n) in before["tasks"].items()}
        assert await wait_for(same)
    finally:
        await a.stop()


async def test_session_panic_exits_and_restarts_like_a_fatal_error(api, redis_url, key_prefix):
    """vc-scheduler's runOnce runs under wait.Until, whose HandleCrash re-panics: an assertion
    panic in a session (ResourceUnderflow) ends the process. The instance restarts with a fresh
    list, counts the panic apart from fatal cache errors, and schedules again afterwards."""
    from ha.scheduler.api import ResourceUnderflow
    create_jobs(api, n_jobs=1)
    a = SchedulerInstance(instance_config("scheduler-1", redis_url, key_prefix, mode="active-active"))
    await a.start()
    try:
        assert await wait_for(lambda: all(bound_nodes(api).values()))
        old_cache = a.cache
        calls = []

        def underflow(ssn):
            calls.append(ssn)
            if len(calls) == 1:
                raise ResourceUnderflow("resource is not sufficient to do operation: <cpu 1> sub <cpu 2>")
        a.session_hook = underflow      # the next periodic session panics
        assert await wait_for(lambda: a.restarts == 1 and a.cache is not old_cache and a._synced())
        s = await a.stats()
        assert s["panics"] == 1 and s["fatal_cache_errors"] == 0 and s["incarnation"] == 1
        assert "panic" in (a.last_error or "")
        create_jobs(api, n_jobs=1, prefix="after")     # the new life schedules
        assert await wait_for(lambda: all(bound_nodes(api).values()))
        assert len(calls) >= 2 and a.restarts == 1
    finally:
        await a.stop()


async def test_leader_crash_keeps_the_lease_until_it_expires(api, redis_url, key_prefix):
    """A fatal cache error is Volcano's klog.Fatalf: the process exits and releases nothing. The
    in-process restart that models it must not hand the lease back: the next term (another
    instance, or this one under a new identity) starts only once the lease has expired. Before,
    the restart released it and re-won it within milliseconds — the extra leader change seen
    after every failover in examples/quickstart.yaml (pr5045)."""
    lease = dict(lease_duration=3.0, lease_renew_deadline=2.0, lease_retry=0.5)
    a = SchedulerInstance(instance_config("scheduler-1", redis_url, key_prefix, **lease))
    b = SchedulerInstance(instance_config("scheduler-2", redis_url, key_prefix, **lease))
    await a.start()
    try:
        assert await wait_for(a.is_leader_now)
        await b.start()
        assert await wait_for(lambda: b.elector is not None and b.elector.stats.attempts >= 2)
        dead = a.elector.identity
        a._fatal("test: injected")
        assert await wait_for(lambda: a._incarnation == 1)           # torn down and rebooted
        rec = api.get("Lease", "volcano", "volcano-system")
        assert rec["spec"]["holderIdentity"] == dead                # the dead term still holds it
        assert rec["spec"]["leaseTransitions"] == 0
        last_renew = rec["spec"]["renewTime"]

        def next_term():
            r = api.get("Lease", "volcano", "volcano-system")
            return r if r["spec"]["holderIdentity"] not in ("", dead) else None
        assert await wait_for(next_term, timeout=60)
        rec = next_term()
        assert rec["spec"]["leaseTransitions"] == 1
        # taken only after a whole lease duration without a renewal (lower bound: load only delays)
        assert rec["spec"]["acquireTime"] - last_renew >= lease["lease_duration"] - 0.05
        s = await a.stats()
        assert s["restarts"] == 1 and s["fatal_cache_errors"] == 1 and s["elections_lost"] == 0
    finally:
        await b.stop()
        await a.stop()


@pytest.mark.parametrize("resync", ["continuous", "after-session"])
async def test_a_standby_resyncs_continuously_without_sessions(api, redis_url, key_prefix, resync):
    """Volcano runs processResyncTask in a loop of its own (wait.Until(..., 0)): a warm standby,
    which never runs a session, still reconciles a task queued for resync. With ``resync:
    after-session`` (the old timing) only a session drains errTasks: the standby keeps the task."""
    create_jobs(api, n_jobs=1, size=2)
    insts = [SchedulerInstance(instance_config(f"scheduler-{i}", redis_url, key_prefix, resync=resync))
             for i in (1, 2)]
    for i in insts:
        await i.start()
    try:
        assert await wait_for(lambda: all(bound_nodes(api).values()))
        standby = next(i for i in insts if not i.is_leader_now())
        assert (await standby.stats())["sessions"] == 0
        cache = standby.inc.cache
        assert await wait_for(lambda: len(cache.jobs) == 1 and all(
            t.node_name for j in cache.jobs.values() for t in j.tasks.values()))
        task = next(t for j in cache.jobs.values() for t in j.tasks.values())
        with cache.mutex:
            cache.resync_task(task)
        assert cache.err_tasks
        if resync == "continuous":
            assert await wait_for(lambda: not cache.err_tasks, timeout=10)
        else:
            assert not await wait_for(lambda: not cache.err_tasks, timeout=1.5)
            assert standby.inc.resync_worker is None
        assert (await standby.stats())["sessions"] == 0
        assert (await standby.stats())["resync"] == resync
    finally:
        for i in insts:
            await i.stop()


async def test_stats_name_the_errors_sessions_recorded(api, redis_url, key_prefix):
    """A count of session errors says that something failed; the stats also say what (the last
    few messages, newest last)."""
    create_jobs(api, n_jobs=1, size=1)
    inst = SchedulerInstance(instance_config("scheduler-1", redis_url, key_prefix, mode="active-active",
                                             period_s=MANUAL))
    await inst.start()
    try:
        assert await inst.wait_synced(60)
        assert (await inst.stats())["recent_session_errors"] == []
        inst.session_hook = lambda ssn: [ssn.record_error(f"planted {i}") for i in range(7)]
        await inst.run_session_now()
        st = await inst.stats()
        assert st["session_errors"] == 7
        assert st["recent_session_errors"] == ["planted 0", "planted 1", "planted 2", "planted 3",
                                               "planted 4"]

        async def caught_up() -> bool:
            # the first session's writes back in the cache: the next one's PodGroup copy is not
            # stale, so its status write meets no 409 (an error of its own)
            rvs = (await inst.digest())["rvs"]
            return max(rvs.values()) >= api.current_resource_version()
        assert await wait_for(caught_up)
        inst.session_hook = lambda ssn: ssn.record_error("planted later")
        await inst.run_session_now()
        st = await inst.stats()
        assert st["session_errors"] == 8
        assert st["recent_session_errors"] == ["planted 1", "planted 2", "planted 3", "planted 4",
                                               "planted later"]
    finally:
        await inst.stop()
