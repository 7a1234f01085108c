"""``ha-testbed run EXPERIMENT.yaml``: start the parts, drive the run, measure, write the results.

Order of things (and of their undoing, in reverse, also on Ctrl-C / SIGTERM):

1. Redis: a private embedded ``redis-server`` on 127.0.0.1, unless ``--redis-url``.
2. The cluster's starting objects (priority classes, queues, nodes, ``initial``) through the API
   server client, under a key prefix of their own (several runs may share one Redis).
3. Ray: local on loopback (``ha.runtime.ray_local``), unless ``--ray-address``.
4. The scheduler instances (Ray actors ``scheduler-1`` … ``scheduler-N``) and the cluster actor
   (kubelet, job controller, workload generator).
5. The run: every ``measure.every`` each instance's digest and stats are sampled (one CSV row per
   instance per tick); the chaos schedule (chaos.schedule) is fired by a chaos.nemesis.Nemesis from
   this loop: kill/pause/restart/clock-rate through the actors, partitions through a loopback proxy
   per instance (chaos.injectors.proxy), redis-restart on the embedded Redis (with AOF), and the
   watch / API faults by hooks inside each instance that run the schedule themselves once given the
   run's start (``chaos_call("set_epoch", t0)``); ``leader``-targeted ones are activated remotely.
6. metrics.json, delivery logs, a summary table.
"""
from __future__ import annotations

import logging
import os
import signal
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ha.errors import BadInput
from ha.experiment.config import Experiment, load_experiment
from ha.experiment.objects import starting_objects
from ha.experiment.results import (ResultsWriter, TASK_STATUSES, pairwise_drift, pairwise_drifts,
                                   summarise_drift, task_status_counts)
from ha.experiment.units import format_duration

__all__ = ["run_cli", "ExperimentRunner", "RunOutcome", "default_out"]

log = logging.getLogger(__name__)

EXIT_INTERRUPTED = 130


class Interrupted(BaseException):
    """SIGINT/SIGTERM: stop the run, clean up, write what was measured."""

    def __init__(self, signum: int):
        self.signum = signum
        super().__init__(signal.Signals(signum).name)


def default_out(exp: Experiment) -> Path:
    return Path("results") / f"{exp.name}-{time.strftime('%Y%m%d-%H%M%S')}"


def run_cli(path, out=None, seed=None, profile=None, redis_url=None, ray_address=None,
            duration=None, *, console=None, progress: bool = True) -> int:
    """The ``ha-testbed run`` command. Returns the exit code (0 ok, 130 interrupted); bad input
    raises :class:`BadInput` (exit 2)."""
    exp = load_experiment(path).with_overrides(seed=seed, profile=profile, duration=duration)
    out_dir = Path(out) if out is not None else default_out(exp)
    runner = ExperimentRunner(exp, out_dir, redis_url=redis_url, ray_address=ray_address,
                              source=str(path), console=console, progress=progress)
    outcome = runner.run()
    return EXIT_INTERRUPTED if outcome.interrupted else 0


# ------------------------------------------------------------------------------------ the runner


@dataclass
class InstanceSlot:
    """One scheduler instance across its lives (a kill with restart_after starts a new one)."""
    name: str
    config: Any
    actor: Any = None
    pid: int | None = None
    alive: bool = False
    paused: bool = False
    generation: int = 0
    last_stats: dict[str, Any] = field(default_factory=dict)
    carried: dict[str, int] = field(default_factory=dict)   # counters of earlier lives
    delivery_log: str | None = None
    ended_alive: bool = False
    staleness: dict[str, Any] | None = None                  # latest p50/p99/max (ms) seen

    def total(self, key: str) -> int:
        return int(self.last_stats.get(key) or 0) + int(self.carried.get(key, 0))


@dataclass
class ChaosRecord:
    index: int
    entry: dict[str, Any]
    fault: str
    at_s: float
    status: str = "pending"           # applied | skipped | not-reached | failed | pending
    detail: str = ""
    target_resolved: str | None = None
    applied_at_s: float | None = None
    ended_at_s: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "fault": self.fault, "at": format_duration(self.at_s),
                "status": self.status, "detail": self.detail, "target": self.target_resolved,
                "applied_at_s": self.applied_at_s, "ended_at_s": self.ended_at_s,
                "entry": self.entry}


@dataclass
class FailoverEvent:
    cause: str                 # kill | pause
    instance: str
    at_s: float                # experiment time of the leader loss
    at_wall: float
    new_leader: str | None = None
    recovery_s: float | None = None
    resumed_wall: float | None = None   # a pause: when SIGCONT came (then the old leader renews or yields)
    no_takeover: bool = False           # a pause the leader survived: nobody took over in time


def match_failover(ev: FailoverEvent, stats: dict[str, dict], window_end: float | None, now: float) -> None:
    """Resolve a leader loss from the instances' stats: the first instance that became leader after
    it and has bound since gives ``new_leader`` and ``recovery_s``. A pause with a window (see
    ``_pause_window_end``) only matches a takeover inside it; past the window with none, the paused
    leader kept its lease (``no_takeover``) and there is nothing to time."""
    if ev.recovery_s is not None or ev.no_takeover:
        return
    took_over = False
    for name, st in stats.items():
        if name == ev.instance and ev.cause == "kill":
            continue
        first = st.get("first_bind_after_leading_at")
        became = st.get("became_leader_at")
        if not became or became < ev.at_wall - 1e-3 or (window_end is not None and became > window_end):
            continue
        took_over = True
        if st.get("is_leader") and first and first >= ev.at_wall:
            ev.new_leader = name
            ev.recovery_s = round(first - ev.at_wall, 3)
            return
    if window_end is not None and now > window_end and not took_over:
        ev.no_takeover = True


@dataclass
class RunOutcome:
    out: Path
    summary: dict[str, Any]
    interrupted: bool = False
    error: str | None = None


_COUNTERS = ("binds", "bind_conflicts", "bind_errors", "evictions", "evict_errors", "sessions",
             "status_writes", "errors", "elections_lost", "fatal_cache_errors")


class ExperimentRunner:
    def __init__(self, exp: Experiment, out: Path, *, redis_url: str | None = None,
                 ray_address: str | None = None, source: str = "<experiment>", console=None,
                 progress: bool = True, instance_options: dict[str, Any] | None = None):
        self.exp = exp
        self.out = Path(out).absolute()
        self.redis_url = redis_url
        self.ray_address = ray_address
        self.source = source
        self.progress_enabled = progress
        self.instance_options = dict(instance_options or {})
        if console is None:
            from rich.console import Console
            console = Console(stderr=False)
        self.console = console
        self.run_id = uuid.uuid4().hex[:6]
        self.prefix = f"ht-{exp.name}-{self.run_id}"
        self.redis = None            # EmbeddedRedis we started
        self.redis_embedded = False
        self.ray_handle = None
        self.cluster_actor = None
        self.slots: dict[str, InstanceSlot] = {}
        self.chaos: list[ChaosRecord] = []
        self.failovers: list[FailoverEvent] = []
        self.drift_ticks: list[dict[tuple[str, str], int]] = []
        self.writer: ResultsWriter | None = None
        self.t0_mono: float | None = None
        self.t0_wall: float | None = None
        self.ticks = 0
        self.started_at = time.time()
        self.cluster_stats: dict[str, Any] | None = None
        self._timers: list[tuple[float, int, str, Any]] = []   # (t, seq, action, payload)
        self._seq = 0
        self.leader: str | None = None
        self.lease_record: dict[str, Any] | None = None   # the Lease at the end (leader_changes)
        self.elapsed_s = 0.0
        self.oracle_hub = None       # reference cache + oracles (started with the actors)
        # chaos engine (built in _start_actors): schedule, proxies + their loop thread, nemesis
        self.schedule = None
        self.loop_thread = None
        self.proxies: dict[str, Any] = {}
        self.nemesis = None

    # -- public ------------------------------------------------------------------------------

    def run(self) -> RunOutcome:
        interrupted = False
        error: str | None = None
        old = self._install_signals()
        try:
            ResultsWriter.check_out(self.out)    # bad --out before anything starts
            self._start_redis()
            self.writer = ResultsWriter(self.out)
            self._create_cluster_objects()
            self._start_ray()
            self._install_signals()   # ray.init replaces the SIGTERM handler with sys.exit
            self._start_actors()
            self._drive()
        except Interrupted as e:
            interrupted = True
            self.console.print(f"[yellow]interrupted ({e}); stopping and writing what was measured[/]")
        except KeyboardInterrupt:
            interrupted = True
            self.console.print("[yellow]interrupted; stopping and writing what was measured[/]")
        except BadInput:
            self._ignore_signals()
            self._cleanup()
            raise
        except Exception as e:  # noqa: BLE001 - clean up, record, re-raise
            error = f"{type(e).__name__}: {e}"
            self._ignore_signals()
            self._final_stats()
            self._cleanup()
            if self.writer is not None:
                self._write(interrupted=False, error=error)
            raise
        finally:
            self._restore_signals(old)
        # normal end or interrupted: take the final numbers, then tear down (no second Ctrl-C
        # may abort the teardown half-way)
        old = self._ignore_signals()
        try:
            self._final_stats()
            self._cleanup()
            summary = self._write(interrupted=interrupted, error=None)
        finally:
            self._restore_signals(old)
        self._print_summary(summary, interrupted)
        return RunOutcome(out=self.out, summary=summary, interrupted=interrupted)

    # -- signals -----------------------------------------------------------------------------

    def _install_signals(self):
        def handler(signum, frame):
            raise Interrupted(signum)
        old = {}
        try:
            for s in (signal.SIGINT, signal.SIGTERM):
                old[s] = signal.signal(s, handler)
        except ValueError:  # not the main thread: leave signals alone
            pass
        return old

    def _ignore_signals(self):
        old = {}
        try:
            for s in (signal.SIGINT, signal.SIGTERM):
                old[s] = signal.signal(s, signal.SIG_IGN)
        except ValueError:
            pass
        return old

    @staticmethod
    def _restore_signals(old) -> None:
        for s, h in old.items():
            try:
                signal.signal(s, h)
            except (ValueError, TypeError):
                pass

    # -- start -------------------------------------------------------------------------------

    def _start_redis(self) -> None:
        import redis as redis_lib
        if self.redis_url is None:
            from cluster_state.embedded import EmbeddedRedis
            # redis-restart must not lose the API server's state: AOF on
            self.redis = EmbeddedRedis(persistence=self._has_fault("redis-restart")).start()
            self.redis_url = self.redis.url
            self.redis_embedded = True
            return
        try:
            r = redis_lib.Redis.from_url(self.redis_url, socket_connect_timeout=5)
            r.ping()
            r.close()
        except (redis_lib.RedisError, ValueError, OSError) as e:
            raise BadInput(f"--redis-url {self.redis_url}: cannot connect: {e}") from None

    def _api(self):
        from cluster_state.client import ApiClient
        return ApiClient.from_url(self.redis_url, prefix=self.prefix)

    def _create_cluster_objects(self) -> None:
        from cluster_state.errors import ApiError
        objs = starting_objects(self.exp, self.source)
        api = self._api()
        for obj in objs.in_order():
            md = obj["metadata"]
            what = f"{obj['kind']} {md.get('namespace', '') + '/' if md.get('namespace') else ''}{md['name']}"
            try:
                api.create(obj)
            except ApiError as e:
                raise BadInput(f"{self.source}: creating {what}: {e}") from None
        self.object_counts = objs.counts()

    def _start_ray(self) -> None:
        import ray
        from ha.runtime.ray_local import start_ray
        # a Ray that was already up (tests, notebooks) is left up; one we start or join is undone
        self._ray_owned = not ray.is_initialized()
        try:
            self.ray_handle = start_ray(self.ray_address)
        except ConnectionError as e:
            raise BadInput(f"--ray-address {self.ray_address}: cannot connect: {e}") from None

    def _instance_config(self, name: str):
        from ha.runtime.instance import InstanceConfig
        s = self.exp.schedulers
        kw = dict(name=name, redis_url=self.redis_url, prefix=self.prefix, mode=s.mode,
                  standby=s.standby, period_s=s.period, lease_duration=s.lease.duration,
                  lease_renew_deadline=s.lease.renew_deadline, lease_retry=s.lease.retry,
                  profile=self.exp.profile, switches=dict(self.exp.switches),
                  scheduler_conf=self.exp.scheduler_conf_resolved(), scheduler_name=s.scheduler_name,
                  seed=self.exp.seed * 1000 + int(name.rsplit("-", 1)[1]),
                  delivery_log_dir=str(self.out))   # the instance writes <out>/delivery/<name>.log
        chaos = self._chaos_instance_options(name)
        kw.update(chaos)
        for k, v in self.instance_options.items():   # caller's options win, informer hooks merge
            kw[k] = {**v, **chaos[k]} if k == "informer_options" and k in chaos else v
        return InstanceConfig(**kw)

    def _cluster_config(self):
        from ha.runtime.cluster import ClusterConfig
        from ha.runtime.workload import WorkloadConfig
        wl = None
        if self.exp.workload is not None:
            queues = [q.name for q in self.exp.queues] + [q.name for q in self.exp.initial.queues]
            wl = WorkloadConfig.from_experiment(self.exp.workload, duration_s=self.exp.duration,
                                                queues=queues or ["default"],
                                                scheduler_name=self.exp.schedulers.scheduler_name)
        return ClusterConfig(redis_url=self.redis_url, prefix=self.prefix, seed=self.exp.seed,
                             workload=wl,
                             retry_outages_s=60.0 if self._has_fault("redis-restart") else 0.0)

    def _start_actors(self) -> None:
        import ray
        from ha.runtime.cluster import create_cluster_actor
        self._start_proxies()
        for name in self.exp.instance_names():
            self.slots[name] = InstanceSlot(name=name, config=self._instance_config(name))
        for slot in self.slots.values():
            slot.actor = self._new_instance_actor(slot)
        ray.get([s.actor.start.remote() for s in self.slots.values()], timeout=120)
        for slot in self.slots.values():
            slot.alive = True
            slot.pid = ray.get(slot.actor.pid.remote(), timeout=30)
            slot.delivery_log = ray.get(slot.actor.delivery_log_path.remote(), timeout=30)
        self._start_oracles()
        self.cluster_actor = create_cluster_actor(self._cluster_config(), name=f"cluster-{self.run_id}",
                                                  max_restarts=0)
        ray.get(self.cluster_actor.start.remote(), timeout=120)
        self.t0_mono = time.monotonic()
        self.t0_wall = time.time()
        # chaos schedule (entries after a shortened end are never reached)
        for i, c in enumerate(self.exp.chaos):
            rec = ChaosRecord(index=i, entry=c.model_dump(mode="json", by_alias=True, exclude_none=True),
                              fault=c.fault, at_s=c.at)
            self.chaos.append(rec)
            if c.at >= self.exp.duration:
                rec.status, rec.detail = "not-reached", "after the end of this (shortened) run"
        self._start_nemesis()

    def _new_instance_actor(self, slot: InstanceSlot):
        from ha.runtime.instance import create_instance_actor
        # a Ray namespace per run: several runs may share one Ray cluster (docker-compose)
        return create_instance_actor(slot.config, max_restarts=0, namespace=f"ha-testbed-{self.run_id}")

    def _at(self, t: float, action: str, payload: Any) -> None:
        self._seq += 1
        self._timers.append((t, self._seq, action, payload))
        self._timers.sort()

    def _now(self) -> float:
        return time.monotonic() - self.t0_mono

    # -- the run -----------------------------------------------------------------------------

    def _drive(self) -> None:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
        every = self.exp.measure.every
        duration = self.exp.duration
        next_tick = 0.0
        columns = (TextColumn("[bold]{task.description}"), BarColumn(),
                   TextColumn("{task.fields[secs]}"), TimeElapsedColumn(), TextColumn("{task.fields[info]}"))
        with Progress(*columns, console=self.console, disable=not self.progress_enabled,
                      transient=False) as progress:
            task = progress.add_task(self.exp.name, total=duration, secs="", info="starting")
            while True:
                now = self._now()
                if now >= duration:
                    break
                if self.nemesis is not None and self.nemesis.pending():
                    self.loop_thread.run(self.nemesis.fire_due())
                while self._timers and self._timers[0][0] <= now:
                    _, _, action, payload = self._timers.pop(0)
                    self._fire(action, payload)
                if now >= next_tick:
                    self._sample(self._now())     # stamped when taken (after any chaos just fired)
                    next_tick += every
                    while next_tick <= self._now():   # a slow tick: skip, do not pile up
                        next_tick += every
                    progress.update(task, completed=min(now, duration),
                                    secs=f"{now:5.1f}/{duration:g}s", info=self._progress_info())
                wake = min([next_tick, duration] + [t for t, *_ in self._timers[:1]]
                           + self._next_chaos_t())
                time.sleep(max(0.0, min(wake - self._now(), 0.25)))
            self._sample(self._now())
            progress.update(task, completed=duration, secs=f"{duration:g}/{duration:g}s",
                            info=self._progress_info())
        self.elapsed_s = self._now()

    def _progress_info(self) -> str:
        binds = sum(s.total("binds") for s in self.slots.values())
        drift = max(self.drift_ticks[-1].values()) if self.drift_ticks and self.drift_ticks[-1] else 0
        leader = self.leader or "-"
        return f"leader {leader}  binds {binds}  drift {drift}"

    # -- sampling ----------------------------------------------------------------------------

    def _sample(self, t: float) -> None:
        import ray
        live = [s for s in self.slots.values() if s.alive and not s.paused]
        if self.oracle_hub:
            self.oracle_hub.before_sample()
        refs = {}
        for s in live:
            refs[s.name] = (s.actor.digest.remote(), s.actor.stats.remote(staleness_window="runner"))
        flat = [r for pair in refs.values() for r in pair]
        timeout = max(2.0, self.exp.measure.every)
        ready, _ = ray.wait(flat, num_returns=len(flat), timeout=timeout) if flat else ([], [])
        ready_set = set(ready)
        digests: dict[str, dict] = {}
        stats: dict[str, dict] = {}
        for name, (dref, sref) in refs.items():
            if dref not in ready_set or sref not in ready_set:
                continue
            try:
                digests[name], stats[name] = ray.get([dref, sref])
            except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError) as e:
                slot = self.slots[name]
                if slot.alive:
                    log.info("instance %s is gone: %s", name, e)
                slot.alive = False
        for name, st in stats.items():
            self.slots[name].last_stats = st
            if st.get("staleness_ms"):
                self.slots[name].staleness = st["staleness_ms"]
        leaders = [n for n, d in digests.items() if d.get("is_leader")]
        if leaders:
            self.leader = leaders[0] if len(leaders) == 1 else ",".join(sorted(leaders))
        elif self.exp.schedulers.mode != "active-active":
            self.leader = None
        self._check_failovers(stats)
        oracle_rows = self.oracle_hub.tick(t, digests, stats, self.slots) if self.oracle_hub else {}

        # drift among instances whose informers have synced (a cold standby holds no cache)
        cached = {n: d.get("tasks") or {} for n, d in digests.items() if d.get("synced", True)}
        drifts = pairwise_drifts(cached) if len(cached) >= 2 else {}
        if drifts:
            self.drift_ticks.append(drifts)
        lead = leaders[0] if len(leaders) == 1 else None
        self.ticks += 1
        for name, slot in self.slots.items():
            d, st = digests.get(name), stats.get(name)
            row: dict[str, Any] = {"t": round(t, 3), "instance": name,
                                   "alive": int(d is not None)}
            if d is not None:
                counts = task_status_counts(d.get("tasks") or {})
                rvs = d.get("rvs") or {}
                row.update({"is_leader": int(bool(d.get("is_leader"))),
                            "rv": max(rvs.values()) if rvs else None,
                            "sessions": (st or {}).get("sessions", d.get("sessions"))})
                row.update({f"tasks_{s.lower()}": counts[s] for s in TASK_STATUSES})
                row.update({"binds": slot.total("binds"), "bind_conflicts": slot.total("bind_conflicts"),
                            "bind_errors": slot.total("bind_errors"), "evictions": slot.total("evictions")})
                sw = (st or {}).get("staleness_window_ms") or {}   # samples since the last tick
                row.update({"staleness_p50_ms": sw.get("p50"), "staleness_p99_ms": sw.get("p99"),
                            "staleness_max_ms": sw.get("max")})
                mine = [v for (a, b), v in drifts.items() if name in (a, b)]
                row["pairwise_drift_max"] = max(mine) if mine else None
                row.update(oracle_rows.get(name, {}))
                if lead and name != lead and name in cached and lead in cached:
                    row["drift_to_leader"] = pairwise_drift(cached[name], cached[lead])
            self.writer.add_row(row)
        self.writer.flush()

    def _pause_window_end(self, ev: FailoverEvent) -> float | None:
        """A paused leader that is resumed renews within a retry period or yields; a takeover that
        starts later belongs to some other leader loss, not to this pause."""
        if ev.cause != "pause" or ev.resumed_wall is None:
            return None
        lease = self.exp.schedulers.lease
        return ev.resumed_wall + lease.duration + lease.retry

    def _check_failovers(self, stats: dict[str, dict]) -> None:
        now = time.time()
        for ev in self.failovers:
            match_failover(ev, stats, self._pause_window_end(ev), now)

    # -- chaos -------------------------------------------------------------------------------

    def _fire(self, action: str, payload: Any) -> None:
        """Timers of the runner's own (chaos goes through the nemesis)."""
        log.debug("timer %s %r", action, payload)

    def _resolve_target(self, target: str) -> str | None:
        if target != "leader":
            return target
        import ray
        live = [s for s in self.slots.values() if s.alive and not s.paused]
        refs = [s.actor.is_leader.remote() for s in live]
        try:
            answers = ray.get(refs, timeout=10)
        except Exception:  # noqa: BLE001
            answers = [False] * len(live)
        leaders = [s.name for s, yes in zip(live, answers) if yes]
        return leaders[0] if leaders else None

    # the nemesis' targets (chaos.nemesis.Nemesis; see RunnerTargets): each acts on one instance

    def _kill_instance(self, name: str) -> str:
        import ray
        slot = self.slots[name]
        if not slot.alive:
            raise _skip(f"{name} is not running")
        now = self._now()
        was_leader = self.leader == name or self._resolve_target("leader") == name
        at_wall = time.time()
        ray.kill(slot.actor, no_restart=True)
        slot.alive = False
        self._carry(slot)
        if was_leader:
            self.failovers.append(FailoverEvent("kill", name, round(now, 3), at_wall))
        return f"killed {name} (pid {slot.pid})"

    def _pause_instance(self, name: str) -> str:
        slot = self.slots[name]
        if self.ray_address is not None:
            raise _skip("pause stops the instance's process by PID: needs a local Ray")
        if not slot.alive or slot.paused:
            raise _skip(f"{name} is not running")
        now = self._now()
        was_leader = self.leader == name or self._resolve_target("leader") == name
        at_wall = time.time()
        os.kill(slot.pid, signal.SIGSTOP)
        slot.paused = True
        if was_leader:
            self.failovers.append(FailoverEvent("pause", name, round(now, 3), at_wall))
        return f"SIGSTOP {name} (pid {slot.pid})"

    def _resume_instance(self, name: str) -> str:
        slot = self.slots[name]
        if slot.paused and slot.pid:
            try:
                os.kill(slot.pid, signal.SIGCONT)
            except ProcessLookupError:
                slot.alive = False
            slot.paused = False
            for ev in reversed(self.failovers):
                if ev.cause == "pause" and ev.instance == name and ev.resumed_wall is None:
                    ev.resumed_wall = time.time()
                    break
        return f"SIGCONT {name} (pid {slot.pid})"

    def _carry(self, slot: InstanceSlot) -> None:
        for k in _COUNTERS:
            slot.carried[k] = slot.carried.get(k, 0) + int(slot.last_stats.get(k) or 0)
        slot.last_stats = {}

    def _restart_instance(self, name: str) -> str:
        import ray
        slot = self.slots[name]
        if slot.alive:
            raise _skip(f"{name} is running")
        deadline = time.monotonic() + 20
        while True:   # the name is free once Ray has noticed the old actor's death
            try:
                slot.actor = self._new_instance_actor(slot)
                break
            except ValueError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        ray.get(slot.actor.start.remote(), timeout=120)
        if self.t0_wall is not None:   # the new life runs the same chaos schedule
            ray.get(slot.actor.chaos_call.remote("set_epoch", self.t0_wall), timeout=30)
        slot.pid = ray.get(slot.actor.pid.remote(), timeout=30)
        slot.alive, slot.generation = True, slot.generation + 1
        return f"restarted {name} as pid {slot.pid}"

    def _set_clock_rate(self, name: str, rate: float) -> None:
        import ray
        slot = self.slots[name]
        if not slot.alive:
            raise _skip(f"{name} is not running")
        ray.get(slot.actor.set_clock_rate.remote(rate), timeout=30)

    # -- the chaos engine ---------------------------------------------------------------------

    def _has_fault(self, fault: str) -> bool:
        return any(c.fault == fault for c in self.exp.chaos)

    def _schedule(self):
        if getattr(self, "schedule", None) is None:
            from chaos.schedule import build_schedule
            self.schedule = build_schedule(self.exp.chaos, self.exp.seed, self.exp.instance_names())
        return self.schedule

    def _start_proxies(self) -> None:
        """A loopback proxy in front of Redis for each instance a partition may hit."""
        from chaos.injectors.proxy import ThreadedRedisProxy
        from chaos.loop import LoopThread
        sched = self._schedule()
        self.loop_thread = LoopThread(f"chaos-{self.run_id}").start()
        self.proxies = {}
        names: set[str] = set()
        for sf in sched:
            if sf.name == "partition":
                names.update(self.exp.instance_names() if sf.targets == ("leader",) else sf.targets)
        for n in sorted(names):
            self.proxies[n] = ThreadedRedisProxy(self.redis_url, name=n, loop_thread=self.loop_thread).start()

    def _chaos_instance_options(self, name: str) -> dict[str, Any]:
        import functools
        from chaos.faults import WATCH_FAULTS
        from chaos.injectors.api import API_FAULTS
        from chaos.injectors.watch import INFORMER_KINDS, WatchChaosHook
        sched = self._schedule()
        mine = sched.for_instance(name)
        leader = [sf for sf in sched if sf.targets == ("leader",)]
        kw: dict[str, Any] = {}
        if name in getattr(self, "proxies", {}):
            kw["redis_url"] = self.proxies[name].url
        if any(sf.name in ("partition", "redis-restart") for sf in sched):
            kw["retry_outages_s"] = 30.0
        faults = tuple(mine) + tuple(sf for sf in leader if sf.name in API_FAULTS)
        if faults:
            kw["chaos_faults"] = faults
        if any(sf.name in WATCH_FAULTS for sf in list(mine) + leader):
            watch = [sf for sf in mine if sf.is_watch]
            # factories: every incarnation gets fresh hooks (built inside the actor)
            opts = dict(self.instance_options.get("informer_options") or {})
            opts["hook_factories"] = {k: functools.partial(WatchChaosHook, name, k, watch)
                                      for k in INFORMER_KINDS}
            kw["informer_options"] = opts
        return kw

    def _start_nemesis(self) -> None:
        import ray
        from chaos.faults import WATCH_FAULTS
        from chaos.nemesis import Nemesis
        sched = self._schedule()
        # the instances' hooks run the schedule from the run's start (wall clock)
        ray.get([s.actor.chaos_call.remote("set_epoch", self.t0_wall) for s in self.slots.values()],
                timeout=60)
        until = self.exp.duration
        live = [sf for sf in sched if sf.at < until]
        sched_run = type(sched)(sched.seed, sched.instances, live)
        self.nemesis = Nemesis(sched_run, RunnerTargets(self),
                               self_driven=set(WATCH_FAULTS) | {"api-latency", "api-conflict"})
        self.nemesis.t0 = self.t0_mono

    def _next_chaos_t(self) -> list[float]:
        nem = getattr(self, "nemesis", None)
        if nem is None or not nem.pending():
            return []
        return [nem._timeline[nem._next].t]

    def _end_chaos(self) -> None:
        """Undo what is still on (heal, resume, restore clocks), once; then fold the nemesis'
        records into the chaos list of metrics.json."""
        nem = getattr(self, "nemesis", None)
        lt = getattr(self, "loop_thread", None)
        if nem is not None and lt is not None and not getattr(self, "_chaos_ended", False):
            self._chaos_ended = True
            try:
                lt.run(nem.stop(), timeout=120)
            except Exception as e:  # noqa: BLE001
                log.warning("ending chaos: %s", e)
            self._fold_chaos_records()

    def _fold_chaos_records(self) -> None:
        by_index: dict[int, list] = {}
        for r in self.nemesis.records:
            by_index.setdefault(r.index, []).append(r)
        for rec in self.chaos:
            rs = by_index.get(rec.index) or []
            first = next((r for r in rs if r.action in ("start", "fire")), None)
            if first is None:
                continue
            rec.status = first.status
            rec.target_resolved = ",".join(first.targets) or None
            rec.applied_at_s = round(first.t, 3)
            rec.detail = "; ".join(f"{r.action}: {r.detail}" for r in rs if r.detail)
            if first.status == "skipped" and rec.fault == "redis-restart" and not self.redis_embedded:
                rec.detail = "--redis-url: an external Redis is not restarted by the testbed"
            ends = [r for r in rs if r.action in ("end", "restart")]
            if ends:
                rec.ended_at_s = round(ends[-1].t, 3)

    def _stop_chaos_plumbing(self) -> None:
        for p in getattr(self, "proxies", {}).values():
            try:
                p.stop()
            except Exception:  # noqa: BLE001
                pass
        self.proxies = {}
        lt = getattr(self, "loop_thread", None)
        if lt is not None:
            lt.stop()
            self.loop_thread = None

    # -- end ---------------------------------------------------------------------------------

    def _final_stats(self) -> None:
        self._end_chaos()
        try:
            import ray
            if not ray.is_initialized():
                return
        except Exception:  # noqa: BLE001
            return
        for slot in self.slots.values():
            if slot.paused and slot.pid:
                try:
                    os.kill(slot.pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
                slot.paused = False
            slot.ended_alive = slot.alive
            if slot.alive and slot.actor is not None:
                try:
                    slot.last_stats = ray.get(slot.actor.stats.remote(), timeout=10)
                except Exception:  # noqa: BLE001
                    pass
        self.lease_record = self._read_lease()
        if self.cluster_actor is not None:
            try:
                self.cluster_stats = ray.get(self.cluster_actor.stats.remote(), timeout=10)
            except Exception:  # noqa: BLE001
                self.cluster_stats = None
        if self.oracle_hub is not None:
            self.oracle_hub.finish()    # the API server vs the replay of its own event stream

    def _read_lease(self) -> dict[str, Any] | None:
        """The election's Lease as the run leaves it (before the instances stop). Sampling
        ``is_leader`` every tick misses a term that ends and restarts between two ticks; the
        Lease's ``leaseTransitions`` counts every change of holder."""
        if self.exp.schedulers.mode == "active-active" or not self.slots:
            return None
        cfg = next(iter(self.slots.values())).config
        try:
            api = self._api()
            try:
                lease = api.get("Lease", cfg.lease_name, cfg.lease_namespace)
            finally:
                api.close()
        except Exception as e:  # noqa: BLE001 — no lease (never elected) or Redis gone
            log.info("reading the lease: %s", e)
            return None
        spec = lease.get("spec") or {}
        return {"holder": spec.get("holderIdentity") or "",
                "lease_transitions": int(spec.get("leaseTransitions") or 0)}

    def _cleanup(self) -> None:
        """Stop everything this run started, each by its own handle; never raises."""
        self._end_chaos()
        try:
            import ray
            ray_on = ray.is_initialized()
        except Exception:  # noqa: BLE001
            ray_on = False
        if ray_on:
            refs = []
            for slot in self.slots.values():
                if slot.paused and slot.pid:
                    try:
                        os.kill(slot.pid, signal.SIGCONT)
                    except ProcessLookupError:
                        pass
                if slot.alive and slot.actor is not None:
                    refs.append(slot.actor.stop.remote())
            if self.cluster_actor is not None:
                refs.append(self.cluster_actor.stop.remote())
            if refs:
                try:
                    ray.wait(refs, num_returns=len(refs), timeout=15)
                except Exception:  # noqa: BLE001
                    pass
            for actor in [s.actor for s in self.slots.values()] + [self.cluster_actor]:
                if actor is not None:
                    try:
                        ray.kill(actor, no_restart=True)
                    except Exception:  # noqa: BLE001
                        pass
            for slot in self.slots.values():
                slot.alive = False
        # delivery logs: written in place locally; copy if an instance wrote elsewhere
        if self.writer is not None:
            for slot in self.slots.values():
                try:
                    self.writer.add_delivery_log(slot.name, slot.delivery_log)
                except OSError:
                    pass
        self._stop_chaos_plumbing()
        if ray_on and getattr(self, "_ray_owned", False):
            try:
                # local: ray.shutdown() stops the processes and our session folder goes;
                # --ray-address: disconnects from the cluster (which keeps running)
                from ha.runtime.ray_local import stop_ray
                stop_ray(self.ray_handle)
            except Exception as e:  # noqa: BLE001
                log.warning("stopping Ray: %s", e)
        self.ray_handle = None
        self._stop_oracles()
        if self.redis is not None:
            self.redis.close()
            self.redis = None

    def summary(self) -> dict[str, Any]:
        dur = self.elapsed_s or self.exp.duration
        binds = sum(s.total("binds") for s in self.slots.values())
        s: dict[str, Any] = {}
        drift = summarise_drift(self.drift_ticks)
        if drift is not None:
            s["pairwise_drift"] = drift
        if self.slots and any(sl.last_stats or sl.carried for sl in self.slots.values()):
            s["bind_conflicts"] = sum(sl.total("bind_conflicts") for sl in self.slots.values())
            s["pods_bound_per_s"] = round(binds / dur, 3) if dur > 0 else None
        # a killed leader is a leader loss; a paused one only if another instance took over (a
        # pause shorter than the lease leaves the leader in place: no failover to time)
        losses = [f for f in self.failovers if f.cause == "kill" or f.recovery_s is not None]
        recovered = [f.recovery_s for f in losses if f.recovery_s is not None]
        if losses:
            # the slowest failover of the run; null if a leader loss never recovered in the run
            s["failover_recovery_s"] = max(recovered) if len(recovered) == len(losses) else None
        # extensions (not in DESIGN.md's table): flapping and its causes. leader_changes = times
        # the Lease changed hands (a restarted instance comes back under a new identity, so its
        # new term counts); lease_losses = terms ended by the renew deadline; fatal_cache_errors
        # = modelled klog.Fatalf crashes (each restarts its instance)
        if self.lease_record is not None:
            s["leader_changes"] = self.lease_record["lease_transitions"]
        if self.slots and any(sl.last_stats or sl.carried for sl in self.slots.values()):
            if self.exp.schedulers.mode != "active-active":
                s["lease_losses"] = sum(sl.total("elections_lost") for sl in self.slots.values())
            s["fatal_cache_errors"] = sum(sl.total("fatal_cache_errors") for sl in self.slots.values())
        stale = {n: {k: sl.staleness.get(k) for k in ("p50", "p99", "max", "n")}
                 for n, sl in self.slots.items() if sl.staleness}
        if stale:
            s["staleness_ms"] = stale
        if self.oracle_hub is not None:
            s = self.oracle_hub.summary(s)
        return s

    def _write(self, *, interrupted: bool, error: str | None) -> dict[str, Any]:
        summary = self.summary()
        conf = None
        try:
            conf = self.exp.scheduler_conf_resolved().to_dict()
        except Exception:  # noqa: BLE001
            pass
        doc = {
            "summary": summary,
            "experiment": self.exp.resolved(),
            "scheduler_conf": conf,
            "switches": self._switches(),
            "run": {"source": self.source, "run_id": self.run_id, "prefix": self.prefix,
                    "started_at": self.started_at, "finished_at": time.time(),
                    "elapsed_s": round(self.elapsed_s, 3), "ticks": self.ticks,
                    "rows": self.writer.rows if self.writer else 0,
                    "redis": "embedded" if self.redis_embedded else self.redis_url,
                    "ray": self.ray_address or "local",
                    "interrupted": interrupted, "error": error,
                    "objects_created": getattr(self, "object_counts", {})},
            "totals": {k: sum(s.total(k) for s in self.slots.values()) for k in _COUNTERS},
            "failovers": [vars(f) for f in self.failovers],
            "chaos": [c.to_json() for c in self.chaos],
            "chaos_schedule": self.schedule.to_json() if self.schedule is not None else None,
            "chaos_fired": self.nemesis.to_json() if self.nemesis is not None else [],
            "instances": {n: {**s.last_stats, "carried": s.carried, "generation": s.generation}
                          for n, s in self.slots.items()},
            "cluster": self.cluster_stats,
            "oracles": self.oracle_hub.extra() if self.oracle_hub is not None else None,
        }
        self.writer.write_metrics(doc)
        self.writer.close()
        self._write_report()
        return summary

    # -- oracles and report (ha.experiment.reference / oracles / report) ----------------------

    def _start_oracles(self) -> None:
        from ha.experiment.reference import OracleHub
        self.oracle_hub = OracleHub(self.redis_url, self.prefix, profile=self.exp.profile,
                                    switches=dict(self.exp.switches),
                                    scheduler_name=self.exp.schedulers.scheduler_name,
                                    out=str(self.out)).start()

    def _stop_oracles(self) -> None:
        hub = getattr(self, "oracle_hub", None)
        if hub is not None:
            hub.stop()

    def _write_report(self) -> None:
        try:
            from ha.experiment.report import write_report
            write_report(self.out)
        except Exception as e:  # noqa: BLE001 — the results stand without their report
            log.warning("report: %s", e)
            self.console.print(f"[yellow]report.md not written: {e}[/]")

    def _switches(self) -> dict[str, bool] | None:
        try:
            return self.exp.switches_resolved().to_dict()
        except Exception:  # noqa: BLE001
            return None

    def _print_summary(self, summary: dict[str, Any], interrupted: bool) -> None:
        from rich.table import Table
        t = Table(title=f"{self.exp.name} ({self.exp.profile}, seed {self.exp.seed})"
                        + (" — interrupted" if interrupted else ""))
        t.add_column("metric")
        t.add_column("value", justify="right")
        for k, v in summary.items():
            if isinstance(v, dict) and "max" in v and "mean" in v:
                v = f"max {v['max']}  mean {v['mean']}"
            elif isinstance(v, dict):
                from ha.experiment.oracles import headline
                v = headline(k, v)
            t.add_row(k, "n/a" if v is None else str(v))
        self.console.print(t)
        it = Table(title="instances")
        for col in ("instance", "leader", "alive", "sessions", "binds", "bind_conflicts", "evictions"):
            it.add_column(col, justify="right" if col not in ("instance",) else "left")
        for n, s in self.slots.items():
            it.add_row(n, "yes" if s.last_stats.get("is_leader") else "", "yes" if s.ended_alive else "no",
                       str(s.total("sessions")), str(s.total("binds")), str(s.total("bind_conflicts")),
                       str(s.total("evictions")))
        self.console.print(it)
        for c in self.chaos:
            self.console.print(f"chaos[{c.index}] {c.fault} at {format_duration(c.at_s)}: {c.status}"
                               + (f" — {c.detail}" if c.detail else ""))
        self.console.print(f"results: {self.out}")


def _skip(reason: str) -> Exception:
    from chaos.nemesis import _Skip
    return _Skip(reason)


class _RemoteHooks:
    """An instance's chaos hooks seen from the runner (nemesis-driven ``leader`` faults)."""

    def __init__(self, actor, api: bool):
        self.actor, self.api = actor, api

    def _call(self, method, *args, kinds=None, api=False):
        import ray
        return ray.get(self.actor.chaos_call.remote(method, *args, kinds=kinds, api=api), timeout=30)

    def activate(self, sf) -> str:
        got = self._call("activate", sf, kinds=[] if self.api else None, api=self.api)
        return "activated " + (",".join(k for k, v in got.items() if v) or "nothing")

    def deactivate(self, index: int) -> str:
        self._call("deactivate", index, kinds=[] if self.api else None, api=self.api)
        return "deactivated"

    def expire(self, kinds=None) -> list[str]:
        got = self._call("expire_now", kinds=list(kinds) if kinds else None)
        return [k for k, v in got.items() if v]


class RunnerTargets:
    """chaos.nemesis targets backed by an ExperimentRunner. Everything that blocks (Ray calls,
    actor restarts) runs in a worker thread so the loop that also carries the proxies keeps going."""

    def __init__(self, runner: ExperimentRunner):
        self.r = runner
        if runner.redis is not None:
            self.redis_restart = self._redis_restart

    async def _bg(self, fn, *args):
        import asyncio
        return await asyncio.to_thread(fn, *args)

    async def leader(self):
        return await self._bg(self.r._resolve_target, "leader")

    def _slot(self, name):
        slot = self.r.slots[name]
        if not slot.alive or slot.actor is None:
            raise _skip(f"{name} is not running")
        return slot

    async def watch(self, name):
        return _RemoteHooks(self._slot(name).actor, api=False)

    async def api(self, name):
        return _RemoteHooks(self._slot(name).actor, api=True)

    def proxy(self, name):
        p = self.r.proxies.get(name)
        return p.proxy if p is not None else None     # the asyncio proxy: we run on its loop

    async def kill(self, name):
        return await self._bg(self.r._kill_instance, name)

    async def restart(self, name):
        return await self._bg(self.r._restart_instance, name)

    async def pause(self, name):
        return await self._bg(self.r._pause_instance, name)

    async def resume(self, name):
        return await self._bg(self.r._resume_instance, name)

    async def set_clock_rate(self, name, rate):
        return await self._bg(self.r._set_clock_rate, name, rate)

    def _redis_restart(self, down_s: float) -> None:
        from chaos.injectors.process import restart_redis
        restart_redis(self.r.redis, down_s)
