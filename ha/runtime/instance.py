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
import math
import os
import random
import threading
import time
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from collections import OrderedDict, deque
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
    # the informers' process-wide GC settings: "instance" = cluster_state.informer.
    # instance_gc_options() (young collections only between watch chunks, the synced heap frozen:
    # no full collection walks the cache, which under CPython's defaults stalls delivery for
    # hundreds of ms at 10k pods, a pause Go's concurrent GC does not have); "default" = CPython's;
    # "auto" = "instance" in a Ray actor (its own process), "default" in-process (tests, e2e bench)
    gc_tuning: str = "auto"
    sync_timeout_s: float = 60.0
    # chaos (chaos.injectors.api): this instance's scheduled faults; api-latency / api-conflict
    # among them act on its synchronous writes (binds, evictions, status) once set_epoch is called
    chaos_faults: tuple = ()
    # wrap the synchronous ApiClient in chaos.retry.RetryingApiClient: writes retry across a
    # partition / redis-restart instead of failing (0 = off)
    retry_outages_s: float = 0.0
    # the run's API server configuration (cluster_state.apiserver.ApiServerConfig); None: derived
    # from profile + switches (ha.runtime.apiserver.for_profile), so the switch clear_nnn_on_binding
    # reaches this instance's binder
    api_server: Any = None
    log_flush_s: float = 0.2            # delivery log flushed this often (a kill loses at most this)
    stop_timeout_s: float = 20.0        # stop() gives up waiting on stuck tasks after this

    def __post_init__(self):
        if self.mode not in MODES:
            raise BadInput(f"instance {self.name}: mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if self.standby not in ("warm", "cold"):
            raise BadInput(f"instance {self.name}: standby must be warm or cold, got {self.standby!r}")
        if self.lost_lease not in ("restart", "standby"):
            raise BadInput(f"instance {self.name}: lost_lease must be restart or standby, got {self.lost_lease!r}")
        if not self.period_s > 0:
            raise BadInput(f"instance {self.name}: period must be > 0, got {self.period_s}")
        if self.gc_tuning not in ("auto", "instance", "default"):
            raise BadInput(f"instance {self.name}: gc_tuning must be auto, instance or default, "
                           f"got {self.gc_tuning!r}")
        self.election_config()  # validates the lease timing (client-go's rules)

    def election_config(self, identity: str | None = None) -> LeaderElectionConfig:
        return LeaderElectionConfig(identity=identity or self.name, lease_name=self.lease_name,
                                    namespace=self.lease_namespace, lease_duration=self.lease_duration,
                                    renew_deadline=self.lease_renew_deadline,
                                    retry_period=self.lease_retry)

    def api_server_config(self):
        from ha.runtime.apiserver import for_profile
        return self.api_server if self.api_server is not None else for_profile(self.profile, self.switches)

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


class _Samples(deque):
    """An informer's staleness samples, counting every append (the deque itself is bounded), so
    a reader can take only the samples added since its last look."""

    def __init__(self, maxlen: int = 100_000):
        super().__init__((), maxlen)
        self.total = 0

    def append(self, x) -> None:
        self.total += 1
        super().append(x)


class _FreshStamp:
    """``write_time`` for an informer: the write-time annotation only when it changed since the
    last state of the same object seen here. A write that cannot carry the stamp (a binding, a
    /status write: the API server keeps metadata) leaves the creator's stamp in place; measuring
    against that would report the object's age, not the watch's staleness."""

    def __init__(self, cap: int = 200_000):
        self._last: "OrderedDict[str, Any]" = OrderedDict()
        self._cap = cap

    def __call__(self, obj):
        from cluster_state.delivery import write_time_of
        wt = write_time_of(obj)
        if wt is None:
            return None
        uid = (obj.get("metadata") or {}).get("uid")
        if uid is None:
            return wt
        if self._last.get(uid) == wt:
            return None
        self._last[uid] = wt
        self._last.move_to_end(uid)
        if len(self._last) > self._cap:
            self._last.popitem(last=False)
        return wt


def percentiles(samples) -> dict | None:
    """{p50, p99, max, n} of staleness samples (ms), or None when there are none."""
    xs = sorted(samples)
    if not xs:
        return None
    n = len(xs)

    def q(p):
        return round(xs[min(n - 1, max(0, int(math.ceil(p * n)) - 1))], 3)
    return {"p50": q(0.50), "p99": q(0.99), "max": round(xs[-1], 3), "n": n}


class _CacheHandlers:
    """Informer handlers → cache methods. A FatalCacheError (Volcano: klog.Fatalf → the process
    exits) is caught here, counted, and turned into an instance restart. (Once per informer event:
    one frame between the informer and the cache, the exception class looked up once.)"""

    def __init__(self, inst: "SchedulerInstance", cache, kind: str):
        from ha.scheduler.api.types import FatalCacheError   # with the cache, not at module import
        self.inst, self.cache = inst, cache
        self._fatal_error = FatalCacheError
        name = {"Pod": "pod", "Node": "node", "PodGroup": "pod_group", "Queue": "queue",
                "PriorityClass": "priority_class"}[kind]
        self._add = getattr(cache, f"add_{name}")
        self._update = getattr(cache, f"update_{name}", None)
        self._delete = getattr(cache, f"delete_{name}")

    def _fatal(self, e: BaseException) -> None:
        self.inst._fatal(f"informer handler: {e}")

    def on_add(self, obj, is_initial_list=False):
        try:
            self._add(obj)
        except self._fatal_error as e:
            self._fatal(e)

    def on_update(self, old, new):
        try:
            if self._update is None:   # e.g. priority classes without an update handler
                self._delete(old)
                self._add(new)
            else:
                self._update(old, new)
        except self._fatal_error as e:
            self._fatal(e)

    def on_delete(self, obj, tombstone=False):
        try:
            self._delete(obj)
        except self._fatal_error as e:
            self._fatal(e)


class _BindWorker:
    """Volcano's ``processBindTask`` goroutine: drains the cache's bind queue (``bind_mode=
    "queued"``; the session's ``add_bind_task`` only updates the cache and enqueues) in its own
    thread. The binder's I/O runs without the cache lock (``SchedulerCache.bind``), so a bind that
    retries through a partition blocks neither the session nor the informers. Polls every 20 ms,
    like Volcano's ``wait.Until(processBindTask, 20ms)``."""

    def __init__(self, cache, name: str, period_s: float = 0.02):
        self.cache = cache
        self.period_s = period_s
        self._stop = threading.Event()
        self._busy = False
        self.batches = 0
        self.errors = 0
        self.thread = threading.Thread(target=self._run, name=f"{name}-bind", daemon=True)

    def start(self) -> "_BindWorker":
        self.thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            if not self.cache.bind_queue:     # unlocked peek (a list's truth value is atomic)
                self._stop.wait(self.period_s)
                continue
            self._busy = True
            try:
                if self.cache.process_bind_task():
                    self.batches += 1
            except BaseException:  # noqa: BLE001 — a bad batch must not end the worker
                self.errors += 1
                log.exception("bind worker: processBindTask failed")
            finally:
                self._busy = False

    def idle(self) -> bool:
        return not self._busy and not self.cache.bind_queue

    def stop(self, timeout: float) -> bool:
        """Stop after the batch in flight; False if it is still stuck in I/O after ``timeout``
        (a daemon thread: it cannot outlive the process)."""
        self._stop.set()
        if self.thread.is_alive():
            self.thread.join(timeout)
        return not self.thread.is_alive()


class SchedulerInstance:
    own_process = False   # True in the Ray actor: process-wide settings (GC) are this instance's

    def __init__(self, config: InstanceConfig):
        self.cfg = config
        self.gc_tuning = config.gc_tuning if config.gc_tuning != "auto" else (
            "instance" if self.own_process else "default")
        self.clock = ScaledClock(config.clock_rate)
        self._rng = random.Random(f"{config.seed}:{config.name}")
        self._aapi = None            # AsyncApiClient (informers, elector)
        self._sapi = None            # ApiClient (the cache's synchronous IO)
        self._tasks: list[asyncio.Task] = []
        self._started = False
        self._stopping = False
        self._incarnation = 0        # bumps on every in-process restart
        self._restart_lock: asyncio.Lock | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        # sessions run in this single worker thread (one at a time) so the event loop keeps
        # delivering informer events, answering digest()/stats() and renewing the lease
        self._session_exec: ThreadPoolExecutor | None = None
        self._session_future: Future | None = None
        self._decisions_lock = threading.Lock()
        # per-incarnation state
        self.bind_worker: _BindWorker | None = None
        # called with the session after its actions, before close, on the session thread
        # (ha.scheduler.scheduler.run_session's session_hook; tests slow sessions down with it)
        self.session_hook = None
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
        # chaos: watch hooks of the current incarnation, the API chaos (survives restarts), the
        # epoch set_epoch was last called with (new incarnations' hooks get it too)
        self._chaos_hooks: dict[str, Any] = {}
        self._chaos_epoch: float | None = None
        self.api_chaos = None
        self._stale_seen: dict[str, dict[str, int]] = {}
        self._stale_totals_prev: dict[str, int] = {}   # samples of earlier incarnations, per kind

    # ================================================================================ lifecycle
    async def start(self) -> None:
        if self._started:
            return
        self._started = True
        self._stopping = False
        self._restart_lock = asyncio.Lock()
        self._loop = asyncio.get_running_loop()
        self._session_exec = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"{self.cfg.name}-session")
        self.started_at = time.time()
        server = self.cfg.api_server_config()
        self._aapi = server.async_client(self.cfg.redis_url, self.cfg.prefix)
        self._sapi = self._wrap_sync_api(server.sync_client(self.cfg.redis_url, self.cfg.prefix))
        await self._boot()

    def _wrap_sync_api(self, api):
        """Chaos on the instance's own writes (inside), retries across outages (outside): a
        retried write is a new call, so it draws its own latency / conflict coin."""
        from chaos.injectors.api import API_FAULTS
        if any(sf.name in API_FAULTS for sf in self.cfg.chaos_faults) or self.api_chaos is not None:
            from chaos.injectors.api import ApiChaos, ChaosApiClient
            if self.api_chaos is None:
                self.api_chaos = ApiChaos(self.cfg.name, self.cfg.chaos_faults)
                if self._chaos_epoch is not None:
                    self.api_chaos.set_epoch(self._chaos_epoch)
            api = ChaosApiClient(api, self.api_chaos)
        if self.cfg.retry_outages_s > 0:
            from chaos.retry import RetryingApiClient
            api = RetryingApiClient(api, deadline_s=self.cfg.retry_outages_s)
        return api

    async def _boot(self) -> None:
        """Build a fresh incarnation (cache, IO, informers, loops) and start it."""
        self._build()
        self.bind_worker = _BindWorker(self.cache, self.cfg.name).start()
        if not self.cfg.elected or self.cfg.standby == "warm":
            await self._start_informers()
        self._tasks.append(asyncio.create_task(self._session_loop(), name=f"{self.cfg.name}-sessions"))
        if self.cfg.elected:
            self._tasks.append(asyncio.create_task(self._campaign(), name=f"{self.cfg.name}-election"))
        if self.delivery_log is not None and self.cfg.log_flush_s > 0:
            self._tasks.append(asyncio.create_task(self._flush_loop(), name=f"{self.cfg.name}-log-flush"))

    async def _flush_loop(self) -> None:
        """Flush the delivery log every ``log_flush_s``: a SIGKILLed instance keeps its log up to
        a moment ago (the log buffers records in memory between flushes)."""
        while True:
            await asyncio.sleep(self.cfg.log_flush_s)
            log_ = self.delivery_log
            if log_ is not None:
                try:
                    log_.flush()
                except (OSError, ValueError):   # closed under us by a restart
                    pass

    async def stop(self) -> None:
        if not self._started:
            return
        self._stopping = True
        # bounded: redis-py's asyncio client can swallow a cancel that lands inside a blocking
        # call (then a task never ends); past the timeout, cancel whatever is left again and go on
        td = asyncio.ensure_future(self._teardown())
        deadline = time.monotonic() + self.cfg.stop_timeout_s
        while not td.done():
            done, _ = await asyncio.wait({td}, timeout=1.0)
            if done:
                break
            me = asyncio.current_task()
            for t in asyncio.all_tasks():
                if t is not me and t is not td and not t.done() and \
                        t.get_name().startswith((f"{self.cfg.name}-", f"reflector-{self.cfg.name}/",
                                                 f"informer-{self.cfg.name}/", f"watch-chaos-{self.cfg.name}-")):
                    t.cancel()
            if time.monotonic() > deadline:
                log.warning("%s: stop() timed out after %.0fs; leaving stuck tasks behind",
                            self.cfg.name, self.cfg.stop_timeout_s)
                td.cancel()
                if self.delivery_log is not None:
                    self.delivery_log.close()
                break
        try:
            td.result()
        except (asyncio.CancelledError, asyncio.InvalidStateError):
            pass
        except Exception:  # noqa: BLE001
            log.exception("%s: teardown failed", self.cfg.name)
        if self._session_exec is not None:
            self._session_exec.shutdown(wait=False, cancel_futures=True)
            self._session_exec = None
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
        await self._stop_workers()
        await self._stop_informers()
        for k, inf in self.informers.items():
            samples = getattr(inf, "staleness_ms", None)
            if isinstance(samples, _Samples):
                self._stale_totals_prev[k] = self._stale_totals_prev.get(k, 0) + samples.total
        if self.io is not None:
            for k, v in asdict(self.io.counters).items():
                self._io_totals[k] = self._io_totals.get(k, 0) + v
            self.io = None
        if self.delivery_log is not None:
            self.delivery_log.close()

    async def _stop_workers(self) -> None:
        """The session in flight finishes (a thread cannot be cancelled; bounded wait), then the
        bind worker stops after its batch in flight. Past the bounds they are left behind as
        daemon threads working on the dropped incarnation's cache."""
        bound = max(1.0, self.cfg.stop_timeout_s / 2)
        fut = self._session_future
        if fut is not None and not fut.done():
            done, _ = await asyncio.wait({asyncio.wrap_future(fut)}, timeout=bound)
            if not done:
                log.warning("%s: session still running after %.0fs; leaving it behind", self.cfg.name, bound)
        bw, self.bind_worker = self.bind_worker, None
        if bw is not None:
            if not await asyncio.to_thread(bw.stop, bound):
                log.warning("%s: bind worker still in I/O after %.0fs; leaving it behind", self.cfg.name, bound)

    async def _restart(self, reason: str) -> None:
        """What a process restart does: drop everything, list afresh."""
        if self._stopping:
            return
        async with self._restart_lock:
            if self._stopping:
                return
            log.warning("%s: restarting (%s)", self.cfg.name, reason)
            self.restarts += 1
            if self.elector is not None:
                # a crash (Volcano: klog.Fatalf → exit) releases nothing: the lease stays held
                # until it expires, then any candidate — this one under a new identity — takes it
                self.elector.abandon()
            await self._teardown()
            self._incarnation += 1
            await self._boot()

    def _fatal(self, msg: str) -> None:
        self.fatal_cache_errors += 1
        self._last_error = f"fatal: {msg}"
        log.error("%s: fatal cache error: %s", self.cfg.name, msg)
        loop = self._loop
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is not None:
            running.create_task(self._restart("fatal cache error"))
        elif loop is not None and not loop.is_closed():   # from the session thread
            loop.call_soon_threadsafe(lambda: loop.create_task(self._restart("fatal cache error")))

    # ================================================================================ building
    def _build(self) -> None:
        from cluster_state.delivery import DeliveryLog
        from cluster_state.informer import Informer, instance_gc_options
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
                                    bind_mode="queued", batch_num=1_000_000)
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
        self._chaos_hooks = {}
        gc_tuning = self.gc_tuning
        for kind in KINDS:
            hook = factories[kind]() if kind in factories else hooks.get(kind)
            if hook is not None:
                self._chaos_hooks[kind] = hook
                if self._chaos_epoch is not None and hasattr(hook, "set_epoch"):
                    hook.set_epoch(self._chaos_epoch)   # a new incarnation keeps the schedule
            kw = dict(opts)
            kw.setdefault("write_time", _FreshStamp())
            if gc_tuning == "instance":
                for k, v in instance_gc_options().items():
                    kw.setdefault(k, v)
            inf = Informer(self._aapi, kind, log=self.delivery_log, name=f"{cfg.name}/{kind}",
                           hook=hook, **kw)
            inf.staleness_ms = _Samples(inf.staleness_ms.maxlen or 100_000)
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
                await self._run_session_in_thread()
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 — a bad session must not stop the scheduler
                self.errors += 1
                self._last_error = repr(e)
                log.exception("%s: session failed", self.cfg.name)

    async def _run_session_in_thread(self, flush_binds: bool = False):
        """``run_session`` in the session thread; the loop stays free meanwhile (Volcano: the
        informers' goroutines keep applying events under the cache mutex during a session)."""
        ex = self._session_exec
        if ex is None:
            raise RuntimeError(f"{self.cfg.name}: not started")
        fut = ex.submit(self.run_session, flush_binds=flush_binds)
        self._session_future = fut
        return await asyncio.wrap_future(fut)

    def run_session(self, *, flush_binds: bool = True):
        """One session (the session loop runs it on the session thread). It works on its
        snapshot; the cache is shared with the informers (loop thread) and the bind worker
        through the cache's lock. ``flush_binds`` (direct callers, step-wise drivers): return
        only once this session's binds are written or failed, as the old inline binder did;
        the session loop leaves them to the bind worker, like Volcano."""
        cache, scheduler = self.cache, self.scheduler   # this incarnation's, even if it restarts
        res = scheduler.run_once(session_hook=self.session_hook)
        if flush_binds:
            self._flush_binds(cache)
        # oracles (allocation drift, wasted evictions) need the session's pipeline decisions,
        # which v1.14 never writes anywhere; recorded with this session's number
        leader = self.is_leader_now()
        dry = self.cfg.mode == "shadow" and not leader
        for key, node in res.pipelined.items():
            self._record({"t": time.time(), "session": self.sessions, "instance": self.cfg.name,
                          "leader": leader, "dry_run": dry, "op": "pipeline", "pod": key, "uid": None,
                          "node": node, "ok": True, "error": None})
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
            cache.process_resync_task()
            cache.process_cleanup_job()
        return res

    # ================================================================================ records
    def _record(self, rec: dict) -> None:
        with self._decisions_lock:   # the session thread and the bind worker both record
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
        # the delivery log position this digest reflects: replay up to it rebuilds this cache
        # (``ha-testbed replay --until-seq``); read in the same loop step as the cache
        d["log_seq"] = self.delivery_log.seq if self.delivery_log is not None else None
        d["incarnation"] = self._incarnation
        d["t"] = time.time()
        return d

    def _io_counter(self, name: str) -> int:
        cur = getattr(self.io.counters, name) if self.io is not None else 0
        return self._io_totals.get(name, 0) + cur

    def staleness(self, window: str | None = None) -> dict:
        """Staleness (write -> applied to this cache, ms) of this incarnation's informers, all
        kinds together: ``all`` (every kept sample) and, with a ``window`` key, ``window`` (the
        samples added since the last call with that key; one key per reader)."""
        all_samples: list[float] = []
        fresh: list[float] = []
        seen = self._stale_seen.setdefault(window, {}) if window else None
        inc = self._incarnation
        for k, inf in self.informers.items():
            s = inf.staleness_ms
            all_samples.extend(s)
            if seen is not None:
                total = getattr(s, "total", len(s))
                key = f"{inc}:{k}"
                new = total - seen.get(key, 0)
                seen[key] = total
                if new > 0:
                    fresh.extend(list(s)[-min(new, len(s)):])
        out = {"all": percentiles(all_samples)}
        if window:
            out["window"] = percentiles(fresh)
        return out

    async def chaos_call(self, method: str, *args, kinds: list | None = None, api: bool = True) -> dict:
        """Call ``method(*args)`` on each chaos watch hook (of ``kinds``, default all) and, with
        ``api``, on the API chaos -- where they have it. ``set_epoch`` is remembered, so hooks of
        later incarnations get it too. Returns {kind or "api": result}."""
        if method == "set_epoch" and args:
            self._chaos_epoch = float(args[0])
        out: dict[str, Any] = {}
        for k, h in list(self._chaos_hooks.items()):
            if kinds is not None and k not in kinds:
                continue
            fn = getattr(h, method, None)
            if callable(fn):
                r = fn(*args)
                if asyncio.iscoroutine(r):
                    r = await r
                out[k] = r
        if api and self.api_chaos is not None:
            fn = getattr(self.api_chaos, method, None)
            if callable(fn):
                out["api"] = fn(*args)
        return out

    def chaos_stats(self) -> dict:
        out: dict[str, Any] = {}
        for k, h in self._chaos_hooks.items():
            st = getattr(h, "stats", None)
            if st is not None and hasattr(st, "as_dict"):
                out[k] = st.as_dict()
        if self.api_chaos is not None:
            out["api"] = dict(self.api_chaos.stats)
        rs = getattr(self._sapi, "retry_stats", None)
        if rs is not None:
            out["retry"] = rs.as_dict()
        return out

    async def stats(self, staleness_window: str | None = None) -> dict:
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
               "synced": self._synced(), "clock_rate": self.clock.rate, "gc_tuning": self.gc_tuning,
               "last_error": self._last_error, "cache": cache_stats,
               "bind_queue": len(self.cache.bind_queue) if self.cache is not None else 0,
               "informers": {k: i.stats.as_dict() if hasattr(i.stats, "as_dict") else {}
                             for k, i in self.informers.items()}}
        for name in ("binds", "bind_conflicts", "bind_errors", "evictions", "evict_errors",
                     "status_writes", "status_errors", "pod_group_writes", "fenced", "dry_run_ops"):
            out[name] = self._io_counter(name)
        st = self.staleness(staleness_window)
        out["staleness_ms"] = st["all"]
        if staleness_window:
            out["staleness_window_ms"] = st["window"]
        out["chaos"] = self.chaos_stats()
        out["log_seq"] = self.delivery_log.seq if self.delivery_log is not None else None
        return out

    async def decisions(self, since: int = 0) -> list[dict]:
        with self._decisions_lock:
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
        res = await self._run_session_in_thread(flush_binds=True)
        return res.to_dict()

    def _flush_binds(self, cache, timeout: float = 120.0) -> None:
        cache.process_bind_task()          # what is still queued, in this thread
        bw = self.bind_worker              # and the batch the worker may have in flight
        deadline = time.monotonic() + timeout
        while bw is not None and bw.cache is cache and not bw.idle() and time.monotonic() < deadline:
            time.sleep(0.005)

    async def wait_binds_done(self, timeout: float = 60.0) -> bool:
        """True once the bind worker has drained the bind queue (step-wise drivers: a session's
        binds are then written, or failed and queued for resync)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            bw = self.bind_worker
            if bw is None or bw.idle():
                return True
            await asyncio.sleep(0.01)
        return False

    async def ping(self) -> str:
        return self.cfg.name


def create_instance_actor(config: InstanceConfig, *, max_restarts: int = 3, namespace: str | None = None):
    """A named Ray async actor running ``SchedulerInstance(config)``. After a crash Ray restarts it
    (up to ``max_restarts``); the new incarnation starts itself: fresh informers, fresh list."""
    import ray

    @ray.remote(max_restarts=max_restarts, max_task_retries=0, max_concurrency=64)
    class SchedulerInstanceActor(SchedulerInstance):
        own_process = True   # gc_tuning "auto" → "instance"

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
