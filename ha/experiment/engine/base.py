"""The engines' common base: what the live and the sim engine share.

The engine package (``ha.experiment.engine``) is the part of an experiment run that starts the
world, lets it run and takes it down again; the driver (``ha.experiment.driver``) ticks it and the
recorder writes what it observes. Two engines stand beside each other and are picked by name from
one table (``ha.experiment.engine.registry.ENGINES``, ``ha-testbed run --engine live|sim``):

* ``live`` (``ha.experiment.engine.live``): Redis, Ray actors and processes, wall-clock time;
* ``sim`` (``ha.experiment.engine.sim``): the same parts in one process under a virtual clock,
  deterministically.

This module is what both are made of, and it imports neither of them:

* :class:`EngineBase` — the run's phases in the order the runner calls them (``start_redis``,
  ``create_cluster_objects``, ``start_ray``, ``start_parts``; per tick ``fire_due``, ``observe``,
  ``advance_to``; then ``final_stats``, ``collect_delivery_logs``, ``final_api_state``,
  ``cleanup``), with the parts that are the same in both (the starting objects, the chaos
  schedule, lives in the history, the leader as observed, the final API state);
* :class:`InstanceSlot` — one scheduler instance across its lives; :data:`COUNTERS` — the
  counters summed over them;
* :func:`instance_kwargs` / :func:`instance_chaos_options` / :func:`workload_config` — the
  engine-neutral part of what an instance and the cluster are configured with;
* :class:`EngineTargets` — the targets' interface: ``chaos.targets.Targets`` (what the nemesis
  calls) plus ``kill_node``, implemented by ``LiveTargets`` and ``SimTargets``. A target acts on an
  instance through the instance seam (``ha.runtime.external.protocol``: ``start``, ``stop``,
  ``is_leader``, ``pid``, ``placement``, ``set_clock_rate``, the typed ``chaos_*`` door) and on its
  process through the engine (``ray.kill`` / signals live, the life's environment in the sim),
  never through a model instance's attributes, so a model instance and a vc-scheduler supervisor
  are interchangeable behind it.
"""
from __future__ import annotations

import logging
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from chaos.targets import ApiHooks, Proxy, Skip, WatchHooks
from ha.errors import BadInput
from ha.experiment.config import Experiment
from ha.experiment.objects import starting_objects
from ha.experiment.recorder import Observation, Recorder

if TYPE_CHECKING:
    from chaos.nemesis import Nemesis
    from chaos.schedule import Schedule

__all__ = ["EngineBase", "EngineTargets", "InstanceSlot", "COUNTERS", "instance_kwargs",
           "instance_chaos_options", "workload_config"]

log = logging.getLogger(__name__)

COUNTERS = ("binds", "bind_conflicts", "bind_errors", "evictions", "evict_errors", "sessions",
            "status_writes", "errors", "elections_lost", "fatal_cache_errors")


@dataclass
class InstanceSlot:
    """One scheduler instance across its lives (a kill with restart_after starts a new one).
    ``actor``: the life's instance behind the seam (a Ray actor handle live, the instance object in
    the sim); ``process``: the engine's handle on the life's process where it has one of its own
    (the sim's ``SimEnvironment``; live, the process is ``pid``)."""
    name: str
    config: Any
    actor: Any = None
    pid: int | None = None
    alive: bool = False
    paused: bool = False
    generation: int = 0
    last_stats: dict[str, Any] = field(default_factory=dict)
    carried: dict[str, int] = field(default_factory=dict)   # counters of earlier lives
    ended_alive: bool = False
    placement: dict[str, Any] = field(default_factory=dict)  # node_id, host, pid of this life
    process: Any = None

    def total(self, key: str) -> int:
        return int(self.last_stats.get(key) or 0) + int(self.carried.get(key, 0))

    def carry(self) -> None:
        for k in COUNTERS:
            self.carried[k] = self.carried.get(k, 0) + int(self.last_stats.get(k) or 0)
        self.last_stats = {}


def instance_kwargs(exp: Experiment, name: str) -> dict[str, Any]:
    """The engine-neutral part of an instance's ``InstanceConfig`` (mode, lease timing, profile,
    configuration, seed); each engine adds where the API server and the delivery log are."""
    s = exp.schedulers
    return dict(name=name, mode=s.mode, standby=s.standby, resync=s.resync, period_s=s.period,
                lease_duration=s.lease.duration, lease_renew_deadline=s.lease.renew_deadline,
                lease_retry=s.lease.retry, profile=exp.profile, switches=dict(exp.switches),
                scheduler_conf=exp.scheduler_conf_resolved(), scheduler_name=s.scheduler_name,
                seed=exp.seed * 1000 + int(name.rsplit("-", 1)[1]))


def instance_chaos_options(sched, name: str, *, informer_options: dict | None = None,
                           wall_clock=None) -> dict[str, Any]:
    """An instance's own chaos (``InstanceConfig`` fields): its scheduled faults plus the
    ``leader`` API faults (``chaos_faults``), and watch hook factories when a watch fault can
    reach it (``informer_options["hook_factories"]``: every incarnation gets fresh hooks, built
    inside the instance). ``wall_clock``: the hooks' clock (default theirs: the system's)."""
    from chaos.faults import API_FAULTS, WATCH_FAULTS
    from chaos.injectors.watch import hook_factories
    mine = sched.for_instance(name)
    leader = [sf for sf in sched if sf.targets == ("leader",)]
    kw: dict[str, Any] = {}
    faults = tuple(mine) + tuple(sf for sf in leader if sf.name in API_FAULTS)
    if faults:
        kw["chaos_faults"] = faults
    if any(sf.name in WATCH_FAULTS for sf in list(mine) + leader):
        opts = dict(informer_options or {})
        opts["hook_factories"] = hook_factories(sched, name, clock=wall_clock)
        kw["informer_options"] = opts
    return kw


def workload_config(exp: Experiment):
    """The workload generator's configuration (None: the experiment has no workload)."""
    from ha.runtime.workload import WorkloadConfig
    if exp.workload is None:
        return None
    # leaves only: with capacity's queue hierarchy a job of an inner queue is refused
    queues = exp.leaf_queue_names()
    return WorkloadConfig.from_experiment(exp.workload, duration_s=exp.duration,
                                          queues=queues or ["default"],
                                          scheduler_name=exp.schedulers.scheduler_name)


class EngineBase(ABC):
    """The run's phases (see the module doc). A subclass sets the attributes below in its
    constructor, which every engine takes alike: ``(exp, out, *, source, instance_options,
    redis_url, ray_address)`` (an engine refuses what it cannot use with :class:`BadInput`)."""

    engine: str                       # its name in the table (``--engine``)
    exp: Experiment
    out: Path
    source: str                       # the experiment file, for messages
    run_id: str
    prefix: str                       # the run's key prefix in the API server
    api: Any                          # the driver's sync API client
    api_server: Any                   # the run's ``ApiServerConfig``
    redis_url: str | None
    redis_embedded: bool
    ray_address: str | None
    slots: dict[str, InstanceSlot]
    recorder: Recorder | None
    schedule: "Schedule | None"
    nemesis: "Nemesis | None"
    leader: str | None
    object_counts: dict[str, int]
    cluster_stats: dict[str, Any] | None
    t0_wall: float | None

    @abstractmethod
    def __init__(self, exp: Experiment, out: Path, *, source: str,
                 instance_options: dict[str, Any] | None = None,
                 redis_url: str | None = None, ray_address: str | None = None) -> None: ...

    # -- the phases each engine has its own way of ---------------------------------------------
    @abstractmethod
    def start_redis(self) -> None:
        """The API server's store, and ``api`` (the driver's client) on it."""

    @abstractmethod
    def start_ray(self) -> None:
        """Where the instances will run."""

    @abstractmethod
    def start_parts(self, recorder: Recorder) -> None:
        """The instances, the cluster (kubelet, controller, workload), the nemesis; run time 0 is
        when the workload starts."""

    @abstractmethod
    def now(self) -> float:
        """Run time (seconds since run time 0)."""

    @abstractmethod
    def advance_to(self, t: float) -> None:
        """Let the world run until run time ``t`` (or a step towards it)."""

    @abstractmethod
    def fire_due(self) -> None:
        """The chaos actions that are due, and their records into the history."""

    @abstractmethod
    def end_chaos(self) -> None:
        """Undo what is still on (heal, resume, restore clocks), once."""

    @abstractmethod
    def observe(self) -> list[Observation]:
        """Every instance once (the driver's tick)."""

    @abstractmethod
    def note_started(self, slot: InstanceSlot, event: str) -> None:
        """A life began (``start``, ``restart``): into the history."""

    @abstractmethod
    def final_stats(self) -> dict[str, Any]:
        """The parts' last words, before anything stops."""

    @abstractmethod
    def collect_delivery_logs(self) -> None:
        """Each instance's delivery log into the results folder."""

    @abstractmethod
    def cleanup(self) -> None:
        """Stop everything this run started; never raises."""

    # -- what is the same in both ------------------------------------------------------------

    def create_cluster_objects(self) -> None:
        from cluster_state.errors import ApiError
        objs = starting_objects(self.exp, self.source)
        for obj in objs.in_order():
            md = obj["metadata"]
            what = f"{obj['kind']} {md.get('namespace', '') + '/' if md.get('namespace') else ''}{md['name']}"
            try:
                self.api.create(obj)
            except ApiError as e:
                raise BadInput(f"{self.source}: creating {what}: {e}") from None
        self.object_counts = objs.counts()

    def record_life(self, t: float, name: str, event: str, **info: Any) -> None:
        slot = self.slots[name]
        if event in ("kill", "crash"):
            slot.carry()
        if self.recorder is not None:
            self.recorder.life(t, name, event, slot.generation, **info)

    def has_fault(self, fault: str) -> bool:
        return any(c.fault == fault for c in self.exp.chaos)

    def chaos_schedule(self):
        if self.schedule is None:
            from chaos.schedule import build_schedule
            self.schedule = build_schedule(self.exp.chaos, self.exp.seed, self.exp.instance_names())
        return self.schedule

    def run_schedule(self):
        """The chaos schedule of this run: what starts before the run's end."""
        sched = self.chaos_schedule()
        return type(sched)(sched.seed, sched.instances, [sf for sf in sched if sf.at < self.exp.duration])

    def next_chaos_t(self) -> float | None:
        nem = self.nemesis
        if nem is None or not nem.pending():
            return None
        return nem._timeline[nem._next].t

    def note_leaders(self, out: list) -> None:
        """The leader as the observations report it (several in active-active); an observation
        round without one clears it, except in active-active where nobody leads."""
        leaders = sorted(o.name for o in out if o.data and (o.data.get("digest") or {}).get("is_leader"))
        if leaders:
            self.leader = ",".join(leaders)
        elif self.exp.schedulers.mode != "active-active":
            self.leader = None

    def final_api_state(self, attempts: int = 20) -> dict[str, Any] | None:
        """What the API server holds at the end, ``{"rv", "kinds": {kind: {key: resourceVersion}}}``
        (the consistency checker folds the events up to ``rv`` and compares). The kinds are listed
        one by one while the cluster may still run (live), so the listing counts only when the RV
        did not move across it (retried; ``quiet`` says whether it succeeded)."""
        from ha.experiment.recorder import TRUTH_KINDS
        from ha.experiment.checkers._fold import key_of
        state = None
        try:
            for _ in range(attempts):
                rv0 = int(self.api.current_resource_version())
                kinds = {kind: {key_of(o): int(o["metadata"]["resourceVersion"]) for o in self.api.list(kind).items}
                         for kind in TRUTH_KINDS if kind != "Lease"}
                rv1 = int(self.api.current_resource_version())
                state = {"rv": rv1, "kinds": kinds, "quiet": rv0 == rv1}
                if rv0 == rv1:
                    break
                time.sleep(0.05)
        except Exception as e:  # noqa: BLE001 — Redis gone: the checker says why it is absent
            log.info("final API state: %s", e)
        return state


class EngineTargets(ABC):
    """What the faults act on (``chaos.targets.Targets`` and ``NodeTargets``), one per engine.
    ``redis_restart`` is not declared here: an engine that cannot restart the API server's store
    (a Redis it does not own) leaves it out, and the nemesis records those faults as skipped."""

    engine: EngineBase

    def slot(self, name: str) -> InstanceSlot:
        """The instance's slot while it runs; :class:`Skip` when it does not."""
        slot = self.engine.slots.get(name)
        if slot is None or not slot.alive or slot.actor is None:
            raise Skip(f"{name} is not running")
        return slot

    @abstractmethod
    async def leader(self) -> Optional[str]:
        """The instance that leads now (None: none does)."""

    @abstractmethod
    async def watch(self, name: str) -> Optional[WatchHooks]:
        """The instance's watch hooks (its typed chaos door, or its endpoint's)."""

    @abstractmethod
    async def api(self, name: str) -> Optional[ApiHooks]:
        """The chaos on the instance's API calls."""

    @abstractmethod
    def proxy(self, name: str) -> Optional[Proxy]:
        """What a partition cuts (None: it has nothing to cut)."""

    @abstractmethod
    async def kill(self, name: str) -> Optional[str]:
        """Crash the instance's process (its lease is not released); recorded as a life's end."""

    @abstractmethod
    async def kill_node(self, name: str) -> Optional[str]:
        """Crash the node the instance runs on, with every instance placed there."""

    @abstractmethod
    async def restart(self, name: str) -> Optional[str]:
        """A new life of a killed instance (same name, same chaos schedule)."""

    @abstractmethod
    async def pause(self, name: str) -> Optional[str]:
        """Stop the instance's process (SIGSTOP-like)."""

    @abstractmethod
    async def resume(self, name: str) -> Optional[str]:
        """Continue a paused instance."""

    @abstractmethod
    async def set_clock_rate(self, name: str, rate: float) -> Optional[str]:
        """Run the instance's clock at ``rate`` × the engine's time."""
