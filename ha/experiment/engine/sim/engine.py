"""The sim engine (``--engine sim``, ``ha.experiment.engine.sim``): the whole run in one process
under a virtual clock, deterministically. Its common base is ``ha.experiment.engine.base.EngineBase``.

The same parts as the live engine — ``ha.runtime.instance.SchedulerInstance`` (informers, cache,
sessions, leader election), ``ha.runtime.cluster.ClusterSim`` (kubelet, job controller, workload
generator), the chaos schedule, the nemesis and its fault packages, the recorder and the checkers
— only in another environment: the in-memory API server (``cluster_state.memstore``), the
virtual-time loop (``ha.experiment.engine.sim.loop``; no socket, thread or executor can be used on
it), each instance's :class:`ha.experiment.engine.sim.environment.SimEnvironment` (inline workers, the
cost model, seeded ids; the life's process: ``InstanceSlot.process``) and
:class:`ha.experiment.engine.sim.targets.SimTargets` for the faults.

It implements the driver's ``Engine`` protocol (``ha.experiment.driver``) and the lifecycle the
runner calls (``start_redis`` = the in-memory API server, ``start_ray`` = nothing,
``start_parts``, ``final_stats``, ``final_api_state``, ``cleanup``). ``advance_to(t)`` runs the
virtual loop until run time ``t``. Determinism: timers and callbacks run in a fixed order, every
random choice is seeded from the experiment (the process-wide ``random`` too, for the libraries
that draw from it, restored afterwards), the run's id and start time are derived from the seed and
the virtual epoch, and what an observation carries of the host (pid, the real session time) is
replaced by the model's (a per-life pid, the modelled session time).
"""
from __future__ import annotations

import asyncio
import contextvars
import logging
import random
from pathlib import Path
from typing import Any

from ha.errors import BadInput
from ha.experiment.config import Experiment
from ha.experiment.engine.base import (EngineBase, InstanceSlot, instance_chaos_options, instance_kwargs,
                                       workload_config)
from ha.experiment.engine.sim.environment import Costs, Link, ServerPower, SimApiClient, SimEnvironment
from ha.experiment.engine.sim.loop import DEFAULT_EPOCH, PROCESS, SimClock, VirtualTimeLoop, _cancel_all
from ha.experiment.engine.sim.targets import SimTargets
from ha.experiment.recorder import Observation, Recorder

__all__ = ["SimEngine"]

log = logging.getLogger(__name__)


class SimEngine(EngineBase):
    engine = "sim"
    redis_embedded = False
    redis_url = "memory"
    ray_address = "none (sim)"

    def __init__(self, exp: Experiment, out: Path, *, source: str,
                 instance_options: dict[str, Any] | None = None,
                 redis_url: str | None = None, ray_address: str | None = None):
        if redis_url is not None or ray_address is not None:
            raise BadInput("--engine sim runs in one process: --redis-url / --ray-address "
                           "belong to the live engine")
        if exp.schedulers.implementation == "volcano":
            raise BadInput(f"--engine sim: schedulers.implementation {exp.schedulers.implementation} runs "
                           "real processes; the sim engine runs the model only (use --engine live)")
        self.exp = exp
        self.out = Path(out)
        self.source = source
        self.instance_options = dict(instance_options or {})
        self.run_id = f"sim-{exp.seed}"
        self.prefix = f"ht-{exp.name}"
        self.started_at = DEFAULT_EPOCH          # the history's header: the virtual epoch
        self.costs = Costs.from_settings(exp.sim)
        self.loop = VirtualTimeLoop(start=0.0, executor="forbid")
        self.clock = SimClock(self.loop, epoch=DEFAULT_EPOCH)
        self.power = ServerPower()
        from ha.runtime.apiserver import api_server_config
        self.api_server = api_server_config(exp)    # the run's API server configuration
        self.server = None
        self.api = None
        self.links: dict[str, Link] = {}
        self.slots: dict[str, InstanceSlot] = {}
        self.cluster = None
        self.cluster_stats: dict[str, Any] | None = None
        self.object_counts: dict[str, int] = {}
        self.recorder: Recorder | None = None
        self.schedule = None
        self.nemesis = None
        self.leader: str | None = None
        self.t0 = 0.0
        self.t0_wall = DEFAULT_EPOCH
        self._chaos_ended = False
        self._closed = False
        self._random_state = random.getstate()
        random.seed(f"ha-testbed-sim:{exp.seed}")   # libraries drawing from `random` (retry jitter)

    # -- clock ---------------------------------------------------------------------------------
    def now(self) -> float:
        # rounded: (t0 + t) - t0 must give t back, or the driver waits for a tick that never comes
        return round(self.loop.time() - self.t0, 9)

    def advance_to(self, t: float) -> None:
        target = self.t0 + t
        if target > self.loop.time():
            self.loop.run_until(target)

    def _run(self, coro):
        """Run one coroutine on the virtual loop (the world goes on meanwhile) and return its result."""
        return self.loop.run_until_complete(coro)

    # -- start ---------------------------------------------------------------------------------
    def start_redis(self) -> None:
        """The in-memory API server under the run's configuration (the live engine's Redis)."""
        from cluster_state.memstore import MemoryServer
        cfg = self.api_server
        self.server = MemoryServer(self.prefix, history=cfg.history,
                                   clear_nnn_on_binding=cfg.clear_nnn_on_binding,
                                   clock=self.clock.now, uid_seed=self.exp.seed)
        self.api = SimApiClient(self.server, self._driver_env())

    def _driver_env(self) -> SimEnvironment:
        """The driver's own connection (recorder, starting objects): free, never partitioned,
        down while the API server is."""
        return SimEnvironment(name="driver", server=self.server, link=Link("driver", self.power),
                              sim_clock=self.clock, costs=Costs(api_call=0.0), seed="driver")

    def start_ray(self) -> None:
        pass

    def start_parts(self, recorder: Recorder) -> None:
        """Instances (each synced before run time 0, as the live actors' start() is), the cluster
        (kubelet, controller, workload), the nemesis; run time 0 is when the workload starts."""
        from ha.runtime.cluster import ClusterConfig, ClusterSim
        self.recorder = recorder
        for name in self.exp.instance_names():
            self.links[name] = Link(name, self.power)
            self.slots[name] = InstanceSlot(name=name, config=self.instance_config(name))

        async def start_all():
            await asyncio.gather(*(self.start_instance(s, set_epoch=False) for s in self.slots.values()))
        self._run(start_all())
        cenv = SimEnvironment(name="cluster", server=self.server, link=Link("cluster", self.power),
                              sim_clock=self.clock, costs=self.costs, seed=f"{self.exp.seed}:cluster")
        api = cenv.api_clients(None, "", self.prefix)[0]
        if self.has_fault("redis-restart"):
            from ha.runtime.retry import AsyncRetryingApiClient
            api = AsyncRetryingApiClient(api, deadline_s=60.0)
        self.cluster = ClusterSim(ClusterConfig(redis_url="memory", prefix=self.prefix, seed=self.exp.seed,
                                                workload=workload_config(self.exp),
                                                api_server=self.api_server),
                                  api=api, env=cenv)
        self._run(self.cluster.start())
        self.t0 = self.loop.time()
        self.t0_wall = self.clock.now()
        recorder.t0_wall = self.t0_wall
        for slot in self.slots.values():
            self.note_started(slot, event="start")
        self.start_nemesis()

    def instance_config(self, name: str):
        from ha.runtime.instance import InstanceConfig
        from cluster_state.reflector import Backoff
        kw = instance_kwargs(self.exp, name)
        kw.update(redis_url="memory", prefix=self.prefix, api_server=self.api_server, delivery_log_dir=str(self.out),
                  gc_tuning="default", log_flush_s=0.0)
        kw.update(instance_chaos_options(self.chaos_schedule(), name, wall_clock=self.clock.now,
                                         informer_options=self.instance_options.get("informer_options")))
        opts = dict(kw.get("informer_options") or {})
        seeds = iter(range(1 << 30))
        seed = kw["seed"]
        clock = self.clock
        opts.setdefault("clock", clock.monotonic)
        opts.setdefault("wall_clock", clock.now)
        # each informer its own seeded backoff (relist jitter), in creation order
        opts.setdefault("backoff", lambda: Backoff(rng=random.Random(f"{seed}:backoff:{next(seeds)}"),
                                                   clock=clock.monotonic))
        kw["informer_options"] = opts
        for k, v in self.instance_options.items():
            if k != "informer_options":
                kw[k] = v
        return InstanceConfig(**kw)

    async def start_instance(self, slot: InstanceSlot, *, set_epoch: bool = True) -> None:
        """A new process life of ``slot``'s instance: a fresh environment, started (synced)."""
        from ha.runtime.instance import SchedulerInstance
        process = f"{slot.name}#{slot.generation}"
        env = SimEnvironment(name=slot.name, server=self.server, link=self.links[slot.name],
                             sim_clock=self.clock, costs=self.costs,
                             seed=f"{self.exp.seed}:{slot.name}:{slot.generation}",
                             clock_rate=slot.config.clock_rate, process=process, loop=self.loop)
        inst = SchedulerInstance(slot.config, env=env)
        inst.generation = f"{slot.name}-{slot.generation}"
        env.instance = inst
        slot.actor = inst
        slot.process = env
        slot.pid = 10_000 + 100 * int(slot.name.rsplit("-", 1)[1]) + slot.generation
        slot.paused = False
        # the life's tasks run in a context of their own: pause freezes exactly those
        ctx = contextvars.copy_context()
        ctx.run(PROCESS.set, process)
        await self.loop.create_task(inst.start(), name=f"{process}-start", context=ctx)
        if set_epoch:
            await inst.chaos_set_epoch(self.t0_wall)
        slot.alive = True

    def stop_instance(self, slot: InstanceSlot, *, crash: bool) -> None:
        """End a life: a crash kills it at once (nothing more reaches the API server, the lease is
        kept until it expires) and its tasks are cancelled in the background."""
        inst = slot.actor
        slot.alive = False
        slot.paused = False
        if inst is None:
            return
        env = slot.process
        if crash:
            env.kill()
        env.resume()
        self.loop.create_task(inst.stop(), name=f"{slot.name}-stop-{slot.generation}")

    def note_started(self, slot: InstanceSlot, event: str) -> None:
        self.record_life(self.now(), slot.name, event, pid=slot.pid)

    # -- chaos ---------------------------------------------------------------------------------
    def start_nemesis(self) -> None:
        from chaos.faults import SELF_DRIVEN
        from chaos.nemesis import Nemesis

        async def epochs():
            for s in self.slots.values():
                await s.actor.chaos_set_epoch(self.t0_wall)
        self._run(epochs())
        self.nemesis = Nemesis(self.run_schedule(), SimTargets(self), clock=self.loop.time,
                               self_driven=SELF_DRIVEN)
        self.nemesis.t0 = self.t0

    def _record_faults(self) -> None:
        if self.nemesis is None or self.recorder is None:
            return
        # a record's wall stamp is the host's clock: the virtual one instead (history and metrics)
        for r in self.nemesis.records:
            r.wall = round(self.t0_wall + r.t, 4)
        self.recorder.faults(self.nemesis.records)

    def fire_due(self) -> None:
        if self.nemesis is not None and self.nemesis.pending():
            self._run(self.nemesis.fire_due())
        self._record_faults()

    def end_chaos(self) -> None:
        if self.nemesis is not None and not self._chaos_ended and not self.loop.is_closed():
            self._chaos_ended = True
            try:
                self._run(self.nemesis.stop())
            except Exception as e:  # noqa: BLE001
                log.warning("ending chaos: %s", e)
            self._record_faults()

    # -- a tick --------------------------------------------------------------------------------
    def _observation(self, slot: InstanceSlot, data: dict) -> dict:
        """What a live observation carries of the host, replaced by the model's."""
        data = dict(data)
        data.pop("generation", None)
        stats = dict(data.get("stats") or {})
        stats["pid"] = slot.pid
        s = slot.process.last_session_s
        stats["last_session_ms"] = None if s is None else round(s * 1000.0, 3)
        # the host's CPU has no model: measured, it would make a run irreproducible
        stats["last_session_cpu_ms"] = stats["last_session_process_cpu_ms"] = None
        stats["last_session_phases_ms"] = None
        # how the host got there, not what the model did: with snapshot reuse off, the same run
        stats["node_clones"] = stats["job_clones"] = None
        data["stats"] = stats
        return data

    def observe(self) -> list[Observation]:
        live = [s for s in self.slots.values() if s.alive and not s.paused]

        async def all_():
            return [await s.actor.observe(self.recorder.decision_cursor.get((s.name, s.generation), 0))
                    for s in live]
        got = dict(zip([s.name for s in live], self._run(all_()) if live else []))
        out: list[Observation] = []
        for name, slot in self.slots.items():
            data = got.get(name)
            if data is not None:
                data = self._observation(slot, data)
                slot.last_stats = data.get("stats") or {}
            out.append(Observation(name=name, generation=slot.generation, alive=data is not None,
                                   data=data))
        self.note_leaders(out)
        return out

    # -- end -----------------------------------------------------------------------------------
    def final_stats(self) -> dict[str, Any]:
        self.end_chaos()
        if self.loop.is_closed():
            return {}
        for slot in self.slots.values():
            if slot.paused and slot.actor is not None:
                slot.process.resume()
                slot.paused = False
            slot.ended_alive = slot.alive
            if slot.alive and slot.actor is not None:
                slot.last_stats = self._observation(slot, {"stats": self._run(slot.actor.stats())})["stats"]
        if self.cluster is not None:
            self.cluster_stats = self._run(self.cluster.stats())
        return {"instances": {n: {**s.last_stats, "carried": s.carried, "generation": s.generation,
                                  "ended_alive": s.ended_alive} for n, s in self.slots.items()},
                "cluster": self.cluster_stats}

    def collect_delivery_logs(self) -> None:
        pass   # written in place, under <out>/delivery

    def cleanup(self) -> None:
        """Stop every part (instances gracefully, the cluster), cancel what is left, close the
        loop, give the process its ``random`` back; never raises."""
        if self._closed:
            return
        self._closed = True
        try:
            self.end_chaos()
            loop = self.loop

            async def stop_all():
                for slot in self.slots.values():
                    if slot.actor is not None and slot.alive:
                        slot.process.resume()
                        await slot.actor.stop()
                if self.cluster is not None:
                    await self.cluster.stop()
            if not loop.is_closed():
                try:
                    self._run(stop_all())
                except Exception as e:  # noqa: BLE001
                    log.warning("stopping the sim parts: %s", e)
                for slot in self.slots.values():
                    slot.alive = False
                for _ in range(3):   # a cancelled task may start another (a lease release)
                    _cancel_all(loop)
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.close()
        finally:
            random.setstate(self._random_state)
