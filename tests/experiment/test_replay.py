"""Deterministic replay: a live in-process scheduler instance (ha.runtime.instance, no Ray) runs
under watch faults / partition fired by the nemesis; digests taken live are rebuilt exactly from
its delivery log -- at a logged position (seq) and at a resourceVersion (``--until``)."""
from __future__ import annotations

import asyncio
import json
import random
import time

import pytest
from typer.testing import CliRunner

from chaos.injectors.proxy import RedisProxy
from chaos.injectors.watch import WatchChaos
from chaos.nemesis import Nemesis
from ha.experiment.replay import replay_instance
from chaos.schedule import build_schedule
from cluster_state.reflector import Backoff
from ha.runtime.instance import InstanceConfig, SchedulerInstance
from ha.runtime.workload import WorkloadConfig, WorkloadGenerator, make_nodes, make_queue

from tests.chaos.helpers import api, eventually  # noqa: F401

LEASE = dict(lease_duration=10.0, lease_renew_deadline=6.0, lease_retry=1.0)
CASES = {
    "delay+reorder+expire": (1, "v1.14", [
        {"at": 0, "fault": "watch-delay", "target": "scheduler-2", "delay": {"dist": "exponential", "mean": "30ms"}},
        {"at": "500ms", "for": "1500ms", "fault": "watch-reorder", "target": "scheduler-2", "window": "150ms"},
        {"at": "1s", "fault": "watch-expire", "target": "scheduler-2"}]),
    "stall+pareto+expire": (2, "pr5045", [
        {"at": "300ms", "for": "700ms", "fault": "watch-stall", "target": "scheduler-2"},
        {"at": 0, "fault": "watch-delay", "target": "scheduler-2", "kinds": ["Pod"],
         "delay": {"dist": "pareto", "scale": "2ms", "alpha": 1.3, "max": "300ms"}},
        {"at": "1200ms", "fault": "watch-expire", "target": "scheduler-2", "kinds": ["Pod"]}]),
    "partition+uniform": (3, "pr5045-fixed", [
        {"at": "300ms", "for": "1s", "fault": "partition", "target": "scheduler-2"},
        {"at": 0, "fault": "watch-delay", "target": "scheduler-2", "delay": {"dist": "uniform", "min": 0, "max": "40ms"}}]),
}


class Targets:
    def __init__(self, insts, watches, proxies):
        self.insts, self.watches, self.proxies = insts, watches, proxies

    def leader(self):
        return next((n for n, i in self.insts.items() if i.is_leader_now()), None)

    def watch(self, name):
        return self.watches.get(name)

    def proxy(self, name):
        return self.proxies.get(name)


def _jobs(api, seed, n, tag):
    wl = WorkloadConfig(rate_per_s=100.0, gang_size=(1, 3), runtime_s=(60, 60), max_gangs=n,
                        duration_s=100.0, name_prefix=tag)
    gen = WorkloadGenerator(wl, seed)
    for job in gen.plan():
        pg, pods = gen.objects(job)
        api.create(pg)
        for p in pods:
            api.create(p)


async def _quiet(inst, api):
    """Every informer of the instance has applied everything up to the server's current RV."""
    async def ok():
        rv = api.current_resource_version()
        return inst._synced() and all(i.last_synced_rv >= rv and i.pending() == 0
                                      for i in inst.informers.values())
    await eventually(ok, 60, f"{inst.cfg.name} to be quiet", step=0.05)
    await asyncio.sleep(0.3)         # a leader write in flight would show up now
    await eventually(ok, 60, f"{inst.cfg.name} to be quiet", step=0.05)


def _same(replayed, live):
    assert replayed["errors"] == []
    assert replayed["tasks"] == live["tasks"]
    assert replayed["nodes"] == live["nodes"]


@pytest.mark.parametrize("case", list(CASES))
async def test_replay_rebuilds_the_live_digest_under_faults(api, redis_url, key_prefix, tmp_path, case):
    seed, prof, chaos = CASES[case]
    for n in make_nodes(3, cpu="8", memory="32Gi", pods=110):
        api.create(n)
    api.create(make_queue("default"))
    schedule = build_schedule(chaos, seed, ["scheduler-1", "scheduler-2"])
    proxy = await RedisProxy(redis_url, name="scheduler-2").start()
    wc = WatchChaos("scheduler-2", ())
    fast = {"backoff": Backoff.fast(seed=seed), "block_ms": 100}
    base = dict(prefix=key_prefix, period_s=0.2, profile=prof, seed=seed,
                delivery_log_dir=str(tmp_path), **LEASE)
    leader = SchedulerInstance(InstanceConfig(name="scheduler-1", redis_url=redis_url,
                                              informer_options=dict(fast), **base))
    standby = SchedulerInstance(InstanceConfig(name="scheduler-2", redis_url=proxy.url,
                                               informer_options={**fast, "hooks": wc.hooks}, **base))
    checkpoints: list[tuple[int, dict]] = []
    try:
        await leader.start()
        await eventually(leader.is_leader_now, 60, "scheduler-1 to lead")
        await standby.start()
        await eventually(standby._synced, 60, "scheduler-2 to sync")
        _jobs(api, seed, 4, "a")
        await _quiet(standby, api)
        d1 = await standby.digest()
        r1 = max(d1["rvs"].values())

        nem = Nemesis(schedule, Targets({"scheduler-1": leader, "scheduler-2": standby},
                                        {"scheduler-2": wc}, {"scheduler-2": proxy}))
        run = asyncio.create_task(nem.run())
        rnd = random.Random(seed)
        t_end = time.monotonic() + 2.5
        k = 0
        while time.monotonic() < t_end:
            k += 1
            _jobs(api, seed * 100 + k, 1, f"b{k}")
            await asyncio.sleep(rnd.uniform(0.05, 0.25))
            # a live digest and the log position it reflects, taken in one step of the loop
            checkpoints.append((standby.delivery_log_file.seq, await standby.digest()))
        await run
        await nem.stop()
        await _quiet(standby, api)
        d2 = await standby.digest()
        r2 = max(d2["rvs"].values())
        assert not standby.is_leader_now() and (await standby.stats())["sessions"] == 0
        recs = nem.to_json()
        assert all(r["status"] == "applied" for r in recs), recs
        st = wc.stats()
        if case.startswith("partition"):
            assert proxy.stats.cut >= 1 and proxy.stats.partitions == 1
            assert standby.informers["Pod"].stats.watch_errors >= 1
        else:
            assert sum(s["delayed"] for s in st.values()) > 0 and sum(s["expires"] for s in st.values()) >= 1
            assert sum(i.stats.relists for i in standby.informers.values()) >= 1
    finally:
        await standby.stop()
        await leader.stop()
        await proxy.stop()
    # the standby caught up: same tasks as the leader's truth
    assert len(d2["tasks"]) > len(d1["tasks"]) > 0
    assert any(node for _status, node in d2["tasks"].values())     # the leader's binds came through
    # replay to a resourceVersion
    _same(replay_instance(tmp_path, "scheduler-2", r1, profile=prof), d1)
    _same(replay_instance(tmp_path, "scheduler-2", r2, profile=prof), d2)
    assert replay_instance(tmp_path, "scheduler-2", r1, profile=prof)["tasks"] != d2["tasks"]
    # replay to the exact logged position of every live checkpoint taken under chaos
    assert len(checkpoints) >= 3
    for seq, live in checkpoints:
        _same(replay_instance(tmp_path, "scheduler-2", until_seq=seq, profile=prof), live)
    # deterministic: twice the same answer
    a = replay_instance(tmp_path, "scheduler-2", r2, profile=prof)
    b = replay_instance(tmp_path, "scheduler-2", r2, profile=prof)
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def test_replay_cli(tmp_path):
    from cluster_state.delivery import DeliveryLog
    from ha.cli import app
    node = {"kind": "Node", "metadata": {"name": "n1", "uid": "u-n1", "resourceVersion": 3},
            "spec": {}, "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": 10}}}
    with DeliveryLog.for_instance(tmp_path, "scheduler-1") as log:
        log.append({"kind": "Node", "type": "LIST", "rv": 3, "count": 1, "relist": False, "initial": True})
        log.append({"kind": "Node", "type": "ADDED", "ns": "", "name": "n1", "uid": "u-n1", "rv": 3,
                    "initial": True, "tombstone": False, "object": node})
        node2 = json.loads(json.dumps(node))
        node2["metadata"]["resourceVersion"] = 9
        node2["status"]["allocatable"]["cpu"] = "8"
        log.append({"kind": "Node", "type": "MODIFIED", "ns": "", "name": "n1", "uid": "u-n1", "rv": 9,
                    "initial": False, "tombstone": False, "object": node2})
    runner = CliRunner()
    full = runner.invoke(app, ["replay", str(tmp_path), "--instance", "scheduler-1"])
    early = runner.invoke(app, ["replay", str(tmp_path), "--instance", "scheduler-1", "--until", "5"])
    assert full.exit_code == 0 and early.exit_code == 0, full.output + early.output
    f, e = json.loads(full.output), json.loads(early.output)
    assert f["records"] == 3 and e["records"] == 2
    assert f["nodes"]["n1"] != e["nodes"]["n1"]            # the later capacity is not in the early one
    bad = runner.invoke(app, ["replay", str(tmp_path), "--instance", "scheduler-7"])
    assert bad.exit_code == 2 and "no delivery log" in bad.output
    (tmp_path / "delivery" / "junk.log").write_bytes(b"\x00garbage")
    junk = runner.invoke(app, ["replay", str(tmp_path), "--instance", "junk"])
    assert junk.exit_code == 2 and "not a delivery log" in junk.output
