"""What a driver records from an instance, in-process against the real API server: ``observe()``
(digest, stats, decisions since, fresh staleness samples, incarnation, generation — one call),
``delivery_log()`` (the log's bytes: the driver writes the file, the instance keeps it in a temp
dir of its own), ``placement()``, and the seam's typed chaos door."""
from __future__ import annotations

import os
import time

from ha.experiment.replay import replay_records
from cluster_state.delivery import WRITE_TIME_ANNOTATION, read_delivery_log
from ha.runtime.external.protocol import OBSERVED_KEYS, SchedulerInstanceProtocol
from ha.runtime.instance import SchedulerInstance
from tests.runtime.instance_helpers import bound_nodes, create_jobs, instance_config, wait_for

MANUAL = 3600.0


def _write(tmp_path, name, data: bytes):
    p = tmp_path / name
    p.write_bytes(data)
    return p


async def test_observe_returns_one_tick_and_staleness_samples_only_once(api, redis_url, key_prefix):
    inst = SchedulerInstance(instance_config("scheduler-1", redis_url, key_prefix, mode="active-active",
                                             period_s=MANUAL))
    await inst.start()
    try:
        assert await inst.wait_synced(60)
        assert isinstance(inst, SchedulerInstanceProtocol)     # the seam the engines talk through
        first = await inst.observe(0)
        assert set(first) == OBSERVED_KEYS == {"digest", "stats", "decisions", "staleness_ms", "incarnation",
                                               "generation"}
        assert first["decisions"] == [] and first["incarnation"] == 0
        assert first["stats"]["name"] == "scheduler-1" and first["digest"]["name"] == "scheduler-1"
        names = create_jobs(api, n_jobs=2, size=2)
        for n in names:   # stamped writes: one staleness sample each
            api.patch_annotations("Pod", n, "default", {WRITE_TIME_ANNOTATION: repr(time.time())})
        assert await wait_for(lambda: len(inst.informers["Pod"].staleness_ms) >= len(names))
        res = await inst.run_session_now()
        assert res["bind_count"] == len(names)
        assert await wait_for(lambda: all(bound_nodes(api).values()))
        tick = await inst.observe(0)
        binds = sorted(d["pod"] for d in tick["decisions"] if d["op"] == "bind" and d["ok"])
        assert binds == sorted(f"default/{n}" for n in names)
        assert tick["digest"]["tasks"] == inst.cache.digest()["tasks"]
        assert tick["stats"]["binds"] == len(names)
        samples = tick["staleness_ms"]
        assert len(samples) == len(names) and all(isinstance(x, float) and x >= 0 for x in samples)
        last = tick["decisions"][-1]["seq"]
        again = await inst.observe(last)
        assert again["decisions"] == [] and again["staleness_ms"] == []     # nothing new since
        assert again["generation"] == tick["generation"]
        # a restart: a new incarnation, its samples counted afresh, decisions keep numbering
        inst.fatal("test: injected")
        assert await wait_for(lambda: inst.incarnation == 1 and inst.synced())
        after = await inst.observe(last)
        assert after["incarnation"] == 1 and after["generation"] == tick["generation"]
        assert after["stats"]["restarts"] == 1
    finally:
        await inst.stop()


async def test_delivery_log_is_fetched_as_bytes_and_replays_to_the_instances_cache(api, redis_url, key_prefix,
                                                                                  tmp_path):
    names = create_jobs(api, n_jobs=2, size=2)
    inst = SchedulerInstance(instance_config("scheduler-1", redis_url, key_prefix, mode="leader-elected",
                                             standby="warm", period_s=MANUAL))
    await inst.start()
    try:
        assert await inst.wait_synced(60)
        assert await wait_for(lambda: len(inst.cache.digest()["tasks"]) == len(names))
        # its own temp dir, not a path of the caller's
        path = await inst.delivery_log_path()
        assert path is not None and not path.startswith(str(tmp_path))
        data = await inst.delivery_log()
        assert await inst.delivery_log_parts() == ["scheduler-1.log"]
        header, records = read_delivery_log(_write(tmp_path, "scheduler-1.log", data))
        assert header["instance"] == "scheduler-1"
        # chunks by offset add up to the whole
        chunks, off = [], 0
        while True:
            c = await inst.delivery_log(off, 1000)
            if not c:
                break
            chunks.append(c)
            off += len(c)
        assert b"".join(chunks) == data[:off] and off >= len(data)
        # the bytes rebuild the instance's cache (a standby: nothing of its own in it)
        d = await inst.digest()
        got = replay_records(records, until_seq=d["log_seq"])
        assert got["errors"] == [] and got["tasks"] == d["tasks"] and got["nodes"] == d["nodes"]
        # a restart keeps the earlier life's log beside the new one
        inst.fatal("test: injected")
        assert await wait_for(lambda: inst.incarnation == 1 and inst.synced())
        assert await inst.delivery_log_parts() == ["scheduler-1.1.log", "scheduler-1.log"]
        old = await inst.delivery_log(part=1)
        assert old[:len(data)] == data
        assert await inst.delivery_log(part=7) == b""
        placement = await inst.placement()
        assert placement == {"node_id": None, "host": os.uname().nodename, "pid": os.getpid()}
    finally:
        await inst.stop()
    assert os.path.exists(path)          # kept after stop(): the driver fetches it then


async def test_no_delivery_log_when_switched_off(api, redis_url, key_prefix):
    inst = SchedulerInstance(instance_config("scheduler-1", redis_url, key_prefix, mode="active-active",
                                             period_s=MANUAL, delivery_log=False))
    await inst.start()
    try:
        assert await inst.wait_synced(60)
        assert await inst.delivery_log() == b"" and await inst.delivery_log_parts() == []
        assert await inst.delivery_log_path() is None
    finally:
        await inst.stop()


async def test_the_typed_chaos_door_reaches_the_hooks(api, redis_url, key_prefix):
    from chaos.injectors.watch import WatchChaosHook
    made: list = []

    def factory(kind):
        def make():
            h = WatchChaosHook("scheduler-1", kind)
            made.append(h)
            return h
        return make
    inst = SchedulerInstance(instance_config(
        "scheduler-1", redis_url, key_prefix, mode="active-active", period_s=MANUAL,
        informer_options={"hook_factories": {k: factory(k) for k in ("Pod", "Node")}}))
    await inst.start()
    try:
        assert await inst.wait_synced(60)
        got = await inst.chaos_set_epoch(1000.0)
        assert set(got) == {"Pod", "Node"}
        assert all(h.epoch == 1000.0 for h in made)
        relists = inst.informers["Pod"].stats.relists
        assert await inst.chaos_expire_now(["Pod"]) == {"Pod": True}
        assert await wait_for(lambda: inst.informers["Pod"].stats.relists > relists)
        assert await inst.chaos_expire_now([]) == {}      # no kind: no hook
        # the engines' call shapes: an API fault reaches no watch hook, a watch fault no API chaos
        assert await inst.chaos_deactivate(0, watch=False, api=True) == {}   # no API chaos configured
        assert set(await inst.chaos_deactivate(0, watch=True, api=False)) == {"Pod", "Node"}
        assert set(inst.chaos_stats()) == {"Pod", "Node"}
        # a new incarnation's fresh hooks get the remembered epoch
        inst.fatal("test: injected")
        assert await wait_for(lambda: inst.incarnation == 1 and inst.synced())
        assert len(made) == 4 and made[2].epoch == made[3].epoch == 1000.0
    finally:
        await inst.stop()
