"""One scheduler instance: its own informers feeding its own SchedulerCache, a session loop every
``period`` through ``ha.scheduler.scheduler.Scheduler``, writes through the API server, a delivery
log, and an HA mode:

* ``leader-elected``: a LeaderElector on a Lease; only the leader runs sessions. ``standby: warm``
  keeps the informers (and so the cache) running while standby — kube-scheduler's default;
  ``cold`` starts them only on election — Volcano's behaviour, so failover includes a full list.
  Losing the lease ends the term like Volcano's ``klog.Fatalf("leaderelection lost")``: with
  ``lost_lease="restart"`` the instance drops its cache and informers and starts over (a fresh
  list), as the restarted process would; ``"standby"`` keeps the cache and campaigns again.
* ``active-active``: every instance runs sessions; the API server's 409s on binding decide, and
  they are counted (``bind_conflicts``), not raised.
* ``shadow``: leader-elected, but standbys also run sessions — in dry run: every write is recorded
  as a decision and refused, so the standby's cache resyncs from the API server and stays honest.

``SchedulerInstance`` is plain asyncio (tests, in-process drivers); ``create_instance_actor`` wraps
it as a Ray async actor that restarts itself after a crash (Ray ``max_restarts``) with a fresh list.
"""
from __future__ import annotations

import asyncio
import logging
import os
import random
import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any

from ha.errors import BadInput
from ha.runtime.apiio import InstanceIO
from ha.runtime.clock import ScaledClock
from ha.runtime.election import LeaderCallbacks, LeaderElectionConfig, LeaderElector

__all__ = ["InstanceConfig", "SchedulerInstance", "create_instance_actor", "MODES", "KINDS"]

log = logging.getLogger(__name__)

MODES = ("leader-elected", "active-active", "shadow")
# Informer start order: what pods refer to comes first, so the first pods find their jobs/nodes.
KINDS = ("PriorityClass", "Queue", "Node", "PodGroup", "Pod")
_MAX_DECISIONS = 200_000


@dataclass(frozen=True)
class InstanceConfig:
    name: str
    redis_url: str
    prefix: str = "ht"
    mode: str = "leader-elected"
    standby: str = "warm"
    period_s: float = 1.0
    lease_duration: float = 15.0
    lease_renew_deadline: float = 10.0
    lease_retry: float = 2.0
    lease_name: str = "volcano"
    lease_namespace: str = "volcano-system"
    profile: str = "v1.14"
    switches: dict = field(default_factory=dict)
    scheduler_conf: Any = None          # SchedulerConf, or its dict shape {"actions", "tiers"}, or None
    scheduler_name: str = "volcano"
    default_queue: str = "default"
    seed: int = 0
    clock_rate: float = 1.0
    fencing: bool = False
    lost_lease: str = "restart"
    delivery_log_dir: str | None = None
    informer_options: dict = field(default_factory=dict)
    sync_timeout_s: float = 60.0

    def __post_init__(self):
        if self.mode not in MODES:
            raise BadInput(f"instance {self.name}: mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if self.standby not in ("warm", "cold"):
            raise BadInput(f"instance {self.name}: standby must be warm or cold, got {self.standby!r}")
        if self.lost_lease not in ("restart", "standby"):
            raise BadInput(f"instance {self.name}: lost_lease must be restart or standby, got {self.lost_lease!r}")
        if not self.period_s > 0:
            raise BadInput(f"instance {self.name}: period must be > 0, got {self.period_s}")
        self.election_config()  # validates the lease timing (client-go's rules)

    def election_config(self, identity: str | None = None) -> LeaderElectionConfig:
        return LeaderElectionConfig(identity=identity or self.name, lease_name=self.lease_name,
                                    namespace=self.lease_namespace, lease_duration=self.lease_duration,
                                    renew_deadline=self.lease_renew_deadline,
                                    retry_period=self.lease_retry)

    @property
    def elected(self) -> bool:
        return self.mode in ("leader-elected", "shadow")


def _resolve_conf(conf: Any):
    from ha.scheduler.conf import SchedulerConf, default_conf
    if conf is None:
        return default_conf()
    if isinstance(conf, SchedulerConf):
        return conf
    if isinstance(conf, dict):
        return SchedulerConf.from_dict(conf, source="instance scheduler_conf", apply_defaults=True)
    raise BadInput(f"scheduler_conf: expected a SchedulerConf or a dict, got {type(conf).__name__}")


async def _stop_informer(inf) -> None:
    """``inf.stop()``, re-cancelling its tasks while it waits: on Python 3.11 a cancel that lands
    while redis.asyncio's blocking XREAD is timing out can be swallowed (observed: a reflector kept
    watching and ``stop()`` never returned). Tasks are found by the informer's task names."""
    names = {f"reflector-{inf.name}", f"informer-{inf.name}"}
    stopping = asyncio.ensure_future(inf.stop())
    while True:
        done, _ = await asyncio.wait({stopping}, timeout=1.0)
        if done:
            stopping.result()
            return
        for t in asyncio.all_tasks():
            if t.get_name() in names and not t.done():
                t.cancel()


class _CacheHandlers:
    """Informer handlers → cache methods. A FatalCacheError (Volcano: klog.Fatalf → the process
    exits) is caught here, counted, and turned into an instance restart."""

    def __init__(self, inst: "SchedulerInstance", cache, kind: str):
        self.inst, self.cache = inst, cache
        name = {"Pod": "pod", "Node": "node", "PodGroup": "pod_group", "Queue": "queue",
                "PriorityClass": "priority_class"}[kind]
        self._add = getattr(cache, f"add_{name}")
        self._update = getattr(cache, f"update_{name}", None)
        self._delete = getattr(cache, f"delete_{name}")

    def _guard(self, fn, *args):
        from ha.scheduler.api.types import FatalCacheError
        try:
            fn(*args)
        except FatalCacheError as e:
            self.inst._fatal(f"informer handler: {e}")

    def on_add(self, obj, is_initial_list=False):
        self._guard(self._add, obj)

    def on_update(self, old, new):
        if self._update is None:   # e.g. priority classes without an update handler
            self._guard(self._delete, old)
            self._guard(self._add, new)
        else:
            self._guard(self._update, old, new)

    def on_delete(self, obj, tombstone=False):
        self._guard(self._delete, obj)


class SchedulerInstance:
    def __init__(self, config: InstanceConfig):
        self.cfg = config
        self.clock = ScaledClock(config.clock_rate)
        self._rng = random.Random(f"{config.seed}:{config.name}")
        self._aapi = None            # AsyncApiClient (informers, elector)
        self._sapi = None            # ApiClient (the cache's synchronous IO)
        self._tasks: list[asyncio.Task] = []
        self._started = False
        self._stopping = False
        self._incarnation = 0        # bumps on every in-process restart
        self._restart_lock: asyncio.Lock | None = None
        # per-incarnation state
        self.cache = None
        self.io: InstanceIO | None = None
        self.scheduler = None
        self.informers: dict[str, Any] = {}
        self._informers_started = False
        self.delivery_log = None
        self.elector: LeaderElector | None = None
        # counters that survive in-process restarts
        self.sessions = 0
        self.session_errors = 0
        self.errors = 0
        self.fatal_cache_errors = 0
        self.panics = 0
        self.restarts = 0
        self.leader_transitions = 0       # times this instance started leading
        self.elections_lost = 0
        self.became_leader_at: float | None = None
        self.first_bind_after_leading_at: float | None = None
        self.last_session_ms: float | None = None
        self.started_at: float | None = None
        self._prev_io = None              # counters of earlier incarnations
        self._io_totals: dict[str, int] = {}
        self._decisions: list[dict] = []
        self._seq = 0
        self._last_error: str | None = None

    # ================================================================================ lifecycle
    async def start(self) -> None:
        if self._started:
            return
        from cluster_state.aio import AsyncApiClient
        from cluster_state.client import ApiClient
        self._started = True
        self._stopping = False
        self._restart_lock = asyncio.Lock()
        self.started_at = time.time()
        self._aapi = AsyncApiClient.from_url(self.cfg.redis_url, prefix=self.cfg.prefix)
        self._sapi = ApiClient.from_url(self.cfg.redis_url, prefix=self.cfg.prefix)
        await self._boot()

    async def _boot(self) -> None:
        """Build a fresh incarnation (cache, IO, informers, loops) and start it."""
        self._build()
        if not self.cfg.elected or self.cfg.standby == "warm":
            await self._start_informers()
        self._tasks.append(asyncio.create_task(self._session_loop(), name=f"{self.cfg.name}-sessions"))
        if self.cfg.elected:
            self._tasks.append(asyncio.create_task(self._campaign(), name=f"{self.cfg.name}-election"))

    async def stop(self) -> None:
        if not self._started:
            return
        self._stopping = True
        await self._teardown()
        for api in (self._aapi, self._sapi):
            try:
                res = api.close()
                if asyncio.iscoroutine(res):
                    await res
            except Exception:  # noqa: BLE001
                pass
        self._aapi = self._sapi = None
        self._started = False

    async def _teardown(self) -> None:
        tasks, self._tasks = self._tasks, []
        me = asyncio.current_task()
        for t in tasks:
            if t is not me:
                t.cancel()
        for t in tasks:
            if t is me:
                continue
            try:
                await t
            except asyncio.CancelledError:
                pass
            except Exception:  # noqa: BLE001
                log.exception("%s: task ended with an error", self.cfg.name)
        await self._stop_informers()
        if self.io is not None:
            for k, v in asdict(self.io.counters).items():
                self._io_totals[k] = self._io_totals.get(k, 0) + v
            self.io = None
        if self.delivery_log is not None:
            self.delivery_log.close()

    async def _restart(self, reason: str) -> None:
        """What a process restart does: drop everything, list afresh."""
        if self._stopping:
            return
        async with self._restart_lock:
            if self._stopping:
                return
            log.warning("%s: restarting (%s)", self.cfg.name, reason)
            self.restarts += 1
            await self._teardown()
            self._incarnation += 1
            await self._boot()

    def _fatal(self, msg: str) -> None:
        self.fatal_cache_errors += 1
        self._last_error = f"fatal: {msg}"
        log.error("%s: fatal cache error: %s", self.cfg.name, msg)
        asyncio.get_running_loop().create_task(self._restart("fatal cache error"))

    # ================================================================================ building
    def _build(self) -> None:
        from cluster_state.delivery import DeliveryLog
        from cluster_state.informer import Informer
        from ha.scheduler.cache import SchedulerCache
        from ha.scheduler.profiles import profile
        from ha.scheduler.scheduler import Scheduler
        cfg = self.cfg
        switches = profile(cfg.profile).with_(**cfg.switches) if cfg.switches else profile(cfg.profile)
        inc = self._incarnation

        def context():
            return self.sessions, self.is_leader_now()

        self.io = InstanceIO(self._sapi, instance=cfg.name, record=self._record, context=context,
                             dry_run=lambda: cfg.mode == "shadow" and not self.is_leader_now(),
                             fence=lambda: self.elector.fence() if self.elector else None,
                             fencing=cfg.fencing and cfg.elected, on_first_bind=self._on_bind,
                             scheduler_name=cfg.scheduler_name)
        self.cache = SchedulerCache(switches=switches, binder=self.io, evictor=self.io,
                                    status_updater=self.io, scheduler_names=(cfg.scheduler_name,),
                                    default_queue=cfg.default_queue, pod_getter=self.io,
                                    bind_mode="sync", batch_num=1_000_000)
        self.scheduler = Scheduler(self.cache, _resolve_conf(cfg.scheduler_conf),
                                   seed=cfg.seed * 1_000_003 + inc)
        self.delivery_log = None
        if cfg.delivery_log_dir:
            path = os.path.join(cfg.delivery_log_dir, "delivery", f"{cfg.name}.log")
            if os.path.exists(path):   # keep earlier incarnations' logs next to the current one
                k = 1
                while os.path.exists(os.path.join(cfg.delivery_log_dir, "delivery", f"{cfg.name}.{k}.log")):
                    k += 1
                os.replace(path, os.path.join(cfg.delivery_log_dir, "delivery", f"{cfg.name}.{k}.log"))
            self.delivery_log = DeliveryLog.for_instance(cfg.delivery_log_dir, cfg.name, keep=False)
        opts = dict(cfg.informer_options)
        # chaos: a DeliveryHook per kind; factories (kind -> zero-arg callable) are preferred, since
        # every incarnation needs fresh hooks and callables travel to Ray actors more safely
        hooks = opts.pop("hooks", {}) or {}
        factories = opts.pop("hook_factories", {}) or {}
        self.informers = {}
        for kind in KINDS:
            hook = factories[kind]() if kind in factories else hooks.get(kind)
            inf = Informer(self._aapi, kind, log=self.delivery_log, name=f"{cfg.name}/{kind}",
                           hook=hook, **opts)
            inf.add_event_handler(_CacheHandlers(self, self.cache, kind))
            self.informers[kind] = inf
        self._informers_started = False

    async def _start_informers(self) -> bool:
        """Start every informer and wait for their first lists (WaitForCacheSync)."""
        if not self._informers_started:
            self._informers_started = True
            for kind in KINDS:   # in order, each synced before the next: pods find their jobs
                inf = self.informers[kind]
                await inf.start()
                await inf.wait_for_sync(self.cfg.sync_timeout_s)
        return all(i.has_synced() for i in self.informers.values())

    async def _stop_informers(self) -> None:
        infs = list(self.informers.values())
        for inf in reversed(infs):
            try:
                await _stop_informer(inf)
            except Exception:  # noqa: BLE001
                log.exception("%s: informer stop failed", self.cfg.name)
        self._informers_started = False

    def _synced(self) -> bool:
        return self._informers_started and all(i.has_synced() for i in self.informers.values())

    # ================================================================================ election
    def is_leader_now(self) -> bool:
        return self.elector is not None and self.elector.is_leader()

    async def _campaign(self) -> None:
        cfg = self.cfg
        while not self._stopping:
            # like Volcano/kube-scheduler (hostname + "_" + uuid): a restarted process must not
            # find the lease "already its own" and resume a term it never saw begin
            identity = f"{cfg.name}_{uuid.uuid4().hex[:8]}"
            self.elector = LeaderElector(
                self._aapi, cfg.election_config(identity),
                LeaderCallbacks(on_started_leading=self._on_started_leading,
                                on_stopped_leading=self._on_stopped_leading),
                clock=self.clock, rng=self._rng)
            await self.elector.run()     # returns when the lease is lost
            self.elections_lost += 1
            if self._stopping:
                return
            if cfg.lost_lease == "restart":
                asyncio.get_running_loop().create_task(self._restart("leader election lost"))
                return

    async def _on_started_leading(self, fence) -> None:
        self.leader_transitions += 1
        self.became_leader_at = time.time()
        self.first_bind_after_leading_at = None
        if not self._informers_started:          # cold standby: list now (Volcano's failover)
            await self._start_informers()

    def _on_stopped_leading(self) -> None:
        pass

    def _on_bind(self) -> None:
        if self.first_bind_after_leading_at is None and self.became_leader_at is not None:
            self.first_bind_after_leading_at = time.time()

    # ================================================================================ sessions
    def _should_schedule(self) -> bool:
        if not self._synced():
            return False
        if self.cfg.mode == "active-active":
            return True
        if self.cfg.mode == "shadow":
            return True
        return self.is_leader_now()

    async def _session_loop(self) -> None:
        while True:
            await self.clock.sleep(self.cfg.period_s)
            if not self._should_schedule():
                continue
            try:
                self.run_session()
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 — a bad session must not stop the scheduler
                self.errors += 1
                self._last_error = repr(e)
                log.exception("%s: session failed", self.cfg.name)

    def run_session(self):
        """One session (synchronous: the cache is not touched by anyone else meanwhile)."""
        res = self.scheduler.run_once()
        self.sessions += 1
        self.last_session_ms = res.duration_s * 1000.0
        self.session_errors += len(res.errors)
        if res.fatal:
            self._fatal(f"session: {res.fatal}")
        elif res.panic:
            self.panics += 1
            self.errors += 1
            self._last_error = f"panic: {res.panic}"
        else:
            self.cache.process_resync_task()
            self.cache.process_cleanup_job()
        return res

    # ================================================================================ records
    def _record(self, rec: dict) -> None:
        self._seq += 1
        rec["seq"] = self._seq
        self._decisions.append(rec)
        if len(self._decisions) > _MAX_DECISIONS:
            del self._decisions[: _MAX_DECISIONS // 2]

    # ================================================================================ queries
    async def digest(self) -> dict:
        d = self.cache.digest() if self.cache is not None else {"tasks": {}, "nodes": {}}
        d["name"] = self.cfg.name
        d["rvs"] = {k: i.delivered_rv for k, i in self.informers.items()}
        d["is_leader"] = self.is_leader_now()
        d["sessions"] = self.sessions
        d["synced"] = self._synced()
        d["t"] = time.time()
        return d

    def _io_counter(self, name: str) -> int:
        cur = getattr(self.io.counters, name) if self.io is not None else 0
        return self._io_totals.get(name, 0) + cur

    async def stats(self) -> dict:
        el = self.elector
        lease_transitions = None
        if el is not None and el._observed is not None:
            lease_transitions = (el._observed.get("spec") or {}).get("leaseTransitions")
        cache_stats = dict(self.cache.stats) if self.cache is not None else {}
        out = {"name": self.cfg.name, "pid": os.getpid(), "mode": self.cfg.mode,
               "standby": self.cfg.standby, "sessions": self.sessions,
               "is_leader": self.is_leader_now(), "leader_transitions": self.leader_transitions,
               "lease_transitions": lease_transitions, "elections_lost": self.elections_lost,
               "observed_leader": el.observed_holder() if el is not None else None,
               "identity": el.identity if el is not None else None,
               "errors": self.errors, "session_errors": self.session_errors,
               "fatal_cache_errors": self.fatal_cache_errors, "panics": self.panics,
               "restarts": self.restarts, "incarnation": self._incarnation,
               "became_leader_at": self.became_leader_at,
               "first_bind_after_leading_at": self.first_bind_after_leading_at,
               "last_session_ms": self.last_session_ms, "started_at": self.started_at,
               "synced": self._synced(), "clock_rate": self.clock.rate,
               "last_error": self._last_error, "cache": cache_stats,
               "informers": {k: i.stats.as_dict() if hasattr(i.stats, "as_dict") else {}
                             for k, i in self.informers.items()}}
        for name in ("binds", "bind_conflicts", "bind_errors", "evictions", "evict_errors",
                     "status_writes", "status_errors", "pod_group_writes", "fenced", "dry_run_ops"):
            out[name] = self._io_counter(name)
        return out

    async def decisions(self, since: int = 0) -> list[dict]:
        if not self._decisions or self._decisions[-1]["seq"] <= since:
            return []
        # seqs are contiguous within the kept window
        first = self._decisions[0]["seq"]
        start = max(0, since - first + 1)
        return [dict(d) for d in self._decisions[start:]]

    async def delivery_log_path(self) -> str | None:
        return self.delivery_log.path if self.delivery_log is not None else None

    async def set_clock_rate(self, rate: float) -> None:
        self.clock.set_rate(rate)

    async def pid(self) -> int:
        return os.getpid()

    async def is_leader(self) -> bool:
        return self.is_leader_now()

    async def wait_synced(self, timeout: float = 60.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._synced():
                return True
            await asyncio.sleep(0.05)
        return self._synced()

    async def run_session_now(self) -> dict | None:
        """Run one session at once if this instance may schedule now (tests, step-wise drivers);
        None if it may not (not synced, or a standby in leader-elected mode)."""
        if not self._should_schedule():
            return None
        return self.run_session().to_dict()

    async def ping(self) -> str:
        return self.cfg.name


def create_instance_actor(config: InstanceConfig, *, max_restarts: int = 3, namespace: str | None = None):
    """A named Ray async actor running ``SchedulerInstance(config)``. After a crash Ray restarts it
    (up to ``max_restarts``); the new incarnation starts itself: fresh informers, fresh list."""
    import ray

    @ray.remote(max_restarts=max_restarts, max_task_retries=0, max_concurrency=64)
    class SchedulerInstanceActor(SchedulerInstance):
        def __init__(self, cfg):
            super().__init__(cfg)
            ctx = ray.get_runtime_context()
            if ctx.was_current_actor_reconstructed:
                self.restarts += 1
                ctx.current_actor.start.remote()

    opts = {"name": config.name}
    if namespace:
        opts["namespace"] = namespace
    return SchedulerInstanceActor.options(**opts).remote(config)
