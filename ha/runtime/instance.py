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

The parts:

* :class:`SchedulerInstance` — what outlives a restart: the config, the counters, the decision log,
  the API clients, the chaos port, the restart logic and the queries below. Plain asyncio (tests,
  in-process drivers, a simulation).
* ``ha.runtime.incarnation.Incarnation`` — one life: cache, API io, informers, bind worker, session
  worker, campaign, delivery log, its own tasks. A crash (``FatalCacheError``) or a lost lease
  (``lost_lease="restart"``) closes it whole and builds the next one (``incarnation`` + 1).
* ``ha.runtime.chaos_port.ChaosPort`` (``instance.chaos``) — the typed door for the nemesis.
* :func:`create_instance_actor` — the thin Ray facade: a named async actor that, after a crash,
  Ray restarts (``max_restarts``) and that then starts itself with a fresh list.

The environment (``ha.runtime.environment``; ``SchedulerInstance(config, env=...)``, default
``LiveEnvironment``) supplies the clock (``now``/``monotonic``/``sleep``, scaled by the clock-rate
fault), where blocking work runs (``run_blocking``, the session worker, the bind worker: threads in
live, inline under a virtual clock in a simulation), the API clients (under the run's
``cluster_state.apiserver.ApiServerConfig``, see ``InstanceConfig.api_server``) and fresh ids. The
instance and its incarnations read no system clock and start no thread themselves.

Queries (Ray actor methods; the same coroutines in-process):

* ``digest()``, ``stats(staleness_window=None)``, ``decisions(since=0)``, ``is_leader()``,
  ``pid()``, ``ping()``, ``wait_synced(timeout)``, ``run_session_now()``, ``wait_binds_done()``,
  ``set_clock_rate(rate)``, ``start()``, ``stop()``;
* ``observe(decisions_since) -> {"digest", "stats", "decisions", "staleness_ms", "incarnation",
  "generation"}`` — one tick of a recorded history in one round trip, read in one loop step:
  ``digest()``, ``stats()``, ``decisions(decisions_since)``, the raw staleness samples (ms) added
  since the previous ``observe()`` of this incarnation, the incarnation number and ``generation``
  (a fresh id per process life: when it changes — a Ray restart — decision ``seq`` starts again
  at 1, so the caller resets ``decisions_since`` to 0);
* ``delivery_log(offset=0, size=None, part=None) -> bytes`` — the delivery log's bytes from
  ``offset`` (at most ``size``; flushed first): ``part=None`` the current incarnation's
  (``<name>.log``), ``part=k`` an earlier one's (``<name>.k.log``); ``delivery_log_parts()`` lists
  the file names, oldest first. The driver writes them into its results folder itself: the
  instance never needs a path of the driver's;
* ``placement() -> {"node_id", "host", "pid"}`` — where it runs (the Ray node id in an actor, else
  None);
* ``chaos_set_epoch(t0_wall)``, ``chaos_activate(sf, watch, api, kinds)``,
  ``chaos_deactivate(index, watch, api, kinds)``, ``chaos_expire_now(kinds)`` — the typed chaos
  door of the instance seam (``ha.runtime.external.protocol``) onto the chaos port; ``chaos_stats()``.
"""
from __future__ import annotations

import asyncio
import logging
import os
import random
import shutil
import socket
import tempfile
import threading
import weakref
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ha.errors import BadInput
from ha.runtime.chaos_port import ChaosPort
from ha.runtime.election import LeaderElectionConfig
from ha.runtime.environment import LiveEnvironment
from ha.runtime.incarnation import _Samples, Incarnation, percentiles
from ha.runtime.instance_state import InstanceState, state_attribute
from ha.runtime.tasks import OwnedTasks, cancel_and_wait
from ha.scheduler.wiring import KINDS

__all__ = ["InstanceConfig", "SchedulerInstance", "create_instance_actor", "MODES", "KINDS",
           "DecisionLog", "percentiles"]

log = logging.getLogger(__name__)

MODES = ("leader-elected", "active-active", "shadow")
RESYNC_MODES = ("continuous", "after-session")
_MAX_DECISIONS = 200_000


@dataclass(frozen=True)
class InstanceConfig:
    name: str
    redis_url: str
    prefix: str = "ht"
    mode: str = "leader-elected"
    standby: str = "warm"
    # errTasks retried by a worker of their own ("continuous", Volcano) or only after the
    # instance's own sessions ("after-session")
    resync: str = "continuous"
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
    # the delivery log (what the informers handed the cache, cluster_state.delivery): kept by the
    # instance in ``<delivery_log_dir>/delivery/<name>.log`` — by default a temp dir of its own (on
    # a Ray cluster the driver's results folder is not on this node): the driver fetches it with
    # delivery_log(); False: no log
    delivery_log: bool = True
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
        if self.resync not in RESYNC_MODES:
            raise BadInput(f"instance {self.name}: resync must be one of {', '.join(RESYNC_MODES)}, "
                           f"got {self.resync!r}")
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




class DecisionLog:
    """Every decision of this process life (binds, evictions, status writes, pipelines), numbered
    ``seq`` 1, 2, ... across incarnations; bounded (the oldest half dropped past the cap). The
    session worker and the bind worker both record."""

    def __init__(self, cap: int = _MAX_DECISIONS):
        self._lock = threading.Lock()
        self._items: list[dict] = []
        self._seq = 0
        self._cap = cap

    def record(self, rec: dict) -> None:
        with self._lock:
            self._seq += 1
            rec["seq"] = self._seq
            self._items.append(rec)
            if len(self._items) > self._cap:
                del self._items[: self._cap // 2]

    def since(self, since: int = 0) -> list[dict]:
        with self._lock:
            if not self._items or self._items[-1]["seq"] <= since:
                return []
            first = self._items[0]["seq"]          # seqs are contiguous within the kept window
            start = max(0, since - first + 1)
            return [dict(d) for d in self._items[start:]]


class SchedulerInstance:
    own_process = False   # True in the Ray actor: process-wide settings (GC) are this instance's

    def __init__(self, config: InstanceConfig, *, env: Any = None):
        self.cfg = config
        self.env = env if env is not None else LiveEnvironment(config.clock_rate,
                                                               own_process=self.own_process)
        self.gc_tuning = config.gc_tuning if config.gc_tuning != "auto" else (
            "instance" if self.env.own_process else "default")
        self.rng = random.Random(f"{config.seed}:{config.name}")
        self.generation = self.env.new_id()   # this process life (a Ray restart: a new one)
        self.inc: Incarnation | None = None
        self.started = False
        self._life = OwnedTasks(f"{config.name}-life")   # restarts in progress
        self._restart_lock: asyncio.Lock | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.chaos = ChaosPort(config.name)
        self.decisions_log = DecisionLog()
        # what outlives an incarnation, and what a life asks of the instance: the one object an
        # incarnation is handed (the instance's counters below are read from it)
        self.state = InstanceState(
            cfg=config, env=self.env, rng=self.rng, gc_tuning=self.gc_tuning, chaos=self.chaos,
            decisions_log=self.decisions_log, fatal=self.fatal, panic=self.panic,
            restart_soon=self.restart_soon,
            on_first_bind=self._on_bind, new_scheduler_conf=self.new_scheduler_conf,
            open_delivery_log=self._open_delivery_log)
        self._log_dir: str | None = None
        self._incarnations_begun = 0
        # counters that survive in-process restarts, besides those of the state
        self.fatal_cache_errors = 0
        self.restarts = 0
        self.started_at: float | None = None
        self._io_totals: dict[str, int] = {}   # counters of earlier incarnations' io
        self._stale_seen: dict[str, dict[str, int]] = {}

    # kept in the state an incarnation is handed (ha.runtime.instance_state)
    aapi = state_attribute("aapi")
    sapi = state_attribute("sapi")
    stopping = state_attribute("stopping")
    session_hook = state_attribute("session_hook")
    sessions = state_attribute("sessions")
    session_errors = state_attribute("session_errors")
    recent_session_errors = state_attribute("recent_session_errors")
    errors = state_attribute("errors")
    panics = state_attribute("panics")
    leader_transitions = state_attribute("leader_transitions")
    elections_lost = state_attribute("elections_lost")
    became_leader_at = state_attribute("became_leader_at")
    first_bind_after_leading_at = state_attribute("first_bind_after_leading_at")
    last_session_ms = state_attribute("last_session_ms")
    last_session_cpu_ms = state_attribute("last_session_cpu_ms")
    last_session_process_cpu_ms = state_attribute("last_session_process_cpu_ms")
    last_session_phases_ms = state_attribute("last_session_phases_ms")
    session_records = state_attribute("session_records")
    last_error = state_attribute("last_error")

    def new_scheduler_conf(self):
        """The scheduler configuration for a new life (resolved afresh: nothing carries over)."""
        return _resolve_conf(self.cfg.scheduler_conf)

    # ============================================================================ the current life
    @property
    def incarnation(self) -> int:
        return self.inc.number if self.inc is not None else max(0, self._incarnations_begun - 1)

    _incarnation = incarnation   # the name older tests use

    @property
    def cache(self):
        return self.inc.cache if self.inc is not None else None

    @property
    def io(self):
        return self.inc.io if self.inc is not None else None

    @property
    def scheduler(self):
        return self.inc.scheduler if self.inc is not None else None

    @property
    def informers(self) -> dict[str, Any]:
        return self.inc.informers if self.inc is not None else {}

    @property
    def bind_worker(self):
        return self.inc.bind_worker if self.inc is not None else None

    @property
    def delivery_log_file(self):
        return self.inc.delivery_log if self.inc is not None else None

    @property
    def elector(self):
        return self.inc.elector if self.inc is not None else None

    @property
    def clock(self):
        return self.env.clock

    @property
    def api_chaos(self):
        return self.chaos.api_chaos

    def is_leader_now(self) -> bool:
        return self.inc is not None and self.inc.is_leader()

    def synced(self) -> bool:
        return self.inc is not None and self.inc.synced()

    _synced = synced

    # ============================================================================ lifecycle
    async def start(self) -> None:
        if self.started:
            return
        self.started = True
        self.stopping = False
        self._restart_lock = asyncio.Lock()
        self._loop = asyncio.get_running_loop()
        self.started_at = self.env.clock.now()
        aapi, sapi = self.env.api_clients(self.cfg.api_server_config(), self.cfg.redis_url, self.cfg.prefix)
        self.aapi, self.sapi = aapi, self._wrap_sync_api(sapi)
        await self._begin()

    def _has_api_faults(self) -> bool:
        # imported only when there are faults: the chaos package costs ~0.3 s of an actor's start
        from chaos.injectors.api import API_FAULTS
        return any(sf.name in API_FAULTS for sf in self.cfg.chaos_faults)

    def _wrap_sync_api(self, api):
        """Chaos on the instance's own writes (inside), retries across outages (outside): a
        retried write is a new call, so it draws its own latency / conflict coin."""
        if self.chaos.api_chaos is not None or self.cfg.chaos_faults and self._has_api_faults():
            from chaos.injectors.api import ApiChaos, ChaosApiClient
            if self.chaos.api_chaos is None:
                self.chaos.set_api_chaos(ApiChaos(self.cfg.name, self.cfg.chaos_faults,
                                                  clock=self.env.clock.now, crash=self.env.crash))
            # an environment without threads charges the injected latency instead of sleeping
            sleep = getattr(self.env, "blocking_sleep", None)
            api = ChaosApiClient(api, self.chaos.api_chaos, **({"sleep": sleep} if sleep else {}))
        if self.cfg.retry_outages_s > 0:
            from ha.runtime.retry import RetryingApiClient
            api = RetryingApiClient(api, deadline_s=self.cfg.retry_outages_s)
            self.chaos.retry_stats = lambda: getattr(api, "retry_stats", None)
        return api

    async def _begin(self) -> None:
        """Build the next incarnation and start it."""
        number = self._incarnations_begun
        self._incarnations_begun += 1
        self.inc = Incarnation(self.state, number)
        await self.inc.start()

    async def _end(self) -> None:
        """Close the current incarnation; its io counters join the totals."""
        inc = self.inc
        if inc is None:
            return
        await inc.close(self.cfg.stop_timeout_s)
        for k, v in asdict(inc.io.counters).items():
            self._io_totals[k] = self._io_totals.get(k, 0) + v
        self.inc = None

    async def stop(self) -> None:
        if not self.started:
            return
        self.stopping = True
        timeout = self.cfg.stop_timeout_s
        stuck = await self._life.close(timeout)
        if stuck:
            log.warning("%s: restart still running after %.0fs; left behind", self.cfg.name, timeout)
        ending = asyncio.ensure_future(self._end())
        done, _ = await asyncio.wait({ending}, timeout=timeout)
        if not done:
            log.warning("%s: stop() timed out; leaving stuck tasks behind", self.cfg.name)
            await cancel_and_wait([ending], 1.0)
            inc, self.inc = self.inc, None
            if inc is not None and inc.delivery_log is not None:
                inc.delivery_log.close()
        else:
            try:
                ending.result()
            except Exception:  # noqa: BLE001
                log.exception("%s: teardown failed", self.cfg.name)
        for api in (self.aapi, self.sapi):
            try:
                res = api.close()
                if asyncio.iscoroutine(res):
                    await res
            except Exception:  # noqa: BLE001
                pass
        self.aapi = self.sapi = None
        self.started = False

    async def _restart(self, reason: str) -> None:
        """What a process restart does: drop the whole incarnation, list afresh."""
        if self.stopping:
            return
        async with self._restart_lock:
            if self.stopping:
                return
            log.warning("%s: restarting (%s)", self.cfg.name, reason)
            self.restarts += 1
            el = self.elector
            if el is not None:
                # a crash (Volcano: klog.Fatalf → exit) releases nothing: the lease stays held
                # until it expires, then any candidate — this one under a new identity — takes it
                el.abandon()
            await self._end()
            await self._begin()

    def restart_soon(self, reason: str) -> None:
        """Schedule a restart (from the loop; the caller may belong to the life it ends)."""
        self._life.spawn(self._restart(reason), "restart")

    def fatal(self, msg: str) -> None:
        """A FatalCacheError (Volcano: klog.Fatalf, the process exits): counted, then a restart.
        Callable from the loop (informer handlers) and from the session worker."""
        self.fatal_cache_errors += 1
        self.last_error = f"fatal: {msg}"
        log.error("%s: fatal cache error: %s", self.cfg.name, msg)
        self._exit_and_restart("fatal cache error")

    def panic(self, msg: str) -> None:
        """A session's assertion panic (``ResourceUnderflow``): Volcano's ``runOnce`` runs under
        ``wait.Until``, whose ``runtime.HandleCrash`` re-panics, so the process exits as on a fatal
        error; counted apart from fatal cache errors, then the same restart."""
        self.panics += 1
        self.errors += 1
        self.last_error = f"panic: {msg}"
        log.error("%s: session panic: %s", self.cfg.name, msg)
        self._exit_and_restart("session panic")

    def _exit_and_restart(self, reason: str) -> None:
        """The process exits and comes back: a restart from the loop, whichever thread asks."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        loop = self._loop
        if running is not None:
            self.restart_soon(reason)
        elif loop is not None and not loop.is_closed():   # from the session worker's thread
            loop.call_soon_threadsafe(self.restart_soon, reason)

    _fatal = fatal

    def _on_bind(self) -> None:
        if self.first_bind_after_leading_at is None and self.became_leader_at is not None:
            self.first_bind_after_leading_at = self.env.clock.now()

    # ============================================================================ delivery log
    def _open_delivery_log(self):
        """The next incarnation's delivery log; earlier incarnations' logs stay beside it."""
        if not self.cfg.delivery_log:
            return None
        from cluster_state.delivery import DeliveryLog
        root = self._log_root()
        d = os.path.join(root, "delivery")
        name = self.cfg.name
        path = os.path.join(d, f"{name}.log")
        if os.path.exists(path):   # keep earlier incarnations' logs next to the current one
            k = 1
            while os.path.exists(os.path.join(d, f"{name}.{k}.log")):
                k += 1
            os.replace(path, os.path.join(d, f"{name}.{k}.log"))
        clocks = getattr(self.env, "delivery_log_clocks", None)   # a virtual clock's stamps
        return DeliveryLog.for_instance(root, name, keep=False, **(clocks() if clocks else {}))

    def _log_root(self) -> str:
        if self._log_dir is None:
            if self.cfg.delivery_log_dir:
                self._log_dir = self.cfg.delivery_log_dir
            else:   # the instance's own: removed when this object goes (or the process exits)
                self._log_dir = tempfile.mkdtemp(prefix=f"ha-{self.cfg.name}-")
                weakref.finalize(self, shutil.rmtree, self._log_dir, True)
        return self._log_dir

    def _log_parts(self) -> list[str]:
        if self._log_dir is None:
            return []
        d = os.path.join(self._log_dir, "delivery")
        name = self.cfg.name
        ks = []
        for f in os.listdir(d) if os.path.isdir(d) else ():
            mid = f[len(name) + 1:-4] if f.startswith(name + ".") and f.endswith(".log") else None
            if mid is not None and mid.isdigit():
                ks.append(int(mid))
        parts = [f"{name}.{k}.log" for k in sorted(ks)]
        if os.path.exists(os.path.join(d, f"{name}.log")):
            parts.append(f"{name}.log")
        return parts

    async def delivery_log_parts(self) -> list[str]:
        """The delivery log files, oldest incarnation first, the current one (``<name>.log``) last."""
        return self._log_parts()

    async def delivery_log(self, offset: int = 0, size: int | None = None, part: int | None = None) -> bytes:
        """Bytes of a delivery log from ``offset`` (at most ``size``): ``part=None`` the current
        incarnation's, ``part=k`` ``<name>.k.log``. b"" past the end or without a log."""
        if self._log_dir is None:
            return b""
        cur = self.delivery_log_file
        if part is None and cur is not None:
            try:
                cur.flush()
            except (OSError, ValueError):
                pass
        fname = f"{self.cfg.name}.log" if part is None else f"{self.cfg.name}.{int(part)}.log"
        path = os.path.join(self._log_dir, "delivery", fname)
        if not os.path.exists(path):
            return b""
        with open(path, "rb") as f:
            f.seek(max(0, int(offset)))
            return f.read() if size is None else f.read(max(0, int(size)))

    async def delivery_log_path(self) -> str | None:
        """The current log's path on the instance's node (compatibility: prefer delivery_log())."""
        cur = self.delivery_log_file
        return cur.path if cur is not None else None

    # ============================================================================ queries
    async def digest(self) -> dict:
        cache = self.cache
        d = cache.digest() if cache is not None else {"tasks": {}, "nodes": {}}
        d["name"] = self.cfg.name
        d["rvs"] = {k: i.delivered_rv for k, i in self.informers.items()}
        d["is_leader"] = self.is_leader_now()
        d["sessions"] = self.sessions
        d["synced"] = self.synced()
        # the delivery log position this digest reflects: replay up to it rebuilds this cache
        # (``ha-testbed replay --until-seq``); read in the same loop step as the cache
        lg = self.delivery_log_file
        d["log_seq"] = lg.seq if lg is not None else None
        d["incarnation"] = self.incarnation
        d["t"] = self.env.clock.now()
        return d

    def _io_counter(self, name: str) -> int:
        io = self.io
        cur = getattr(io.counters, name) if io is not None else 0
        return self._io_totals.get(name, 0) + cur

    def staleness(self, window: str | None = None) -> dict:
        """Staleness (write -> applied to this cache, ms) of this incarnation's informers, all
        kinds together: ``all`` (every kept sample) and, with a ``window`` key, ``window`` (the
        samples added since the last call with that key; one key per reader)."""
        kinds: list = []
        fresh: list[float] = []
        seen = self._stale_seen.setdefault(window, {}) if window else None
        inc = self.incarnation
        for k, s in (self.inc.staleness_samples() if self.inc is not None else {}).items():
            kinds.append(np.fromiter(s, dtype=float, count=len(s)))
            if seen is not None:
                key = f"{inc}:{k}"
                fresh.extend(s.since(seen.get(key, 0)) if isinstance(s, _Samples) else [])
                seen[key] = getattr(s, "total", len(s))
        out = {"all": percentiles(np.concatenate(kinds) if kinds else [])}
        if window:
            out["window"] = percentiles(fresh)
        return out

    def chaos_stats(self) -> dict:
        return self.chaos.stats()

    async def stats(self, staleness_window: str | None = None) -> dict:
        el = self.elector
        lease_transitions = None
        if el is not None and el._observed is not None:
            lease_transitions = (el._observed.get("spec") or {}).get("leaseTransitions")
        cache = self.cache
        cache_stats = dict(cache.stats) if cache is not None else {}
        out = {"name": self.cfg.name, "pid": os.getpid(), "mode": self.cfg.mode,
               "standby": self.cfg.standby, "resync": self.cfg.resync, "sessions": self.sessions,
               "is_leader": self.is_leader_now(), "leader_transitions": self.leader_transitions,
               "lease_transitions": lease_transitions, "elections_lost": self.elections_lost,
               "observed_leader": el.observed_holder() if el is not None else None,
               "identity": el.identity if el is not None else None,
               "errors": self.errors, "session_errors": self.session_errors,
               "recent_session_errors": list(self.recent_session_errors),
               "fatal_cache_errors": self.fatal_cache_errors, "panics": self.panics,
               "restarts": self.restarts, "incarnation": self.incarnation,
               "became_leader_at": self.became_leader_at,
               "first_bind_after_leading_at": self.first_bind_after_leading_at,
               "last_session_ms": self.last_session_ms,
               "last_session_cpu_ms": self.last_session_cpu_ms,
               "last_session_process_cpu_ms": self.last_session_process_cpu_ms,
               "last_session_phases_ms": self.last_session_phases_ms,
               # snapshot reuse (ha/scheduler/snapshot_reuse.py): node and job clones reused / cloned
               "node_clones": dict(cache.node_clones.stats) if cache is not None else None,
               "job_clones": dict(cache.job_clones.stats) if cache is not None else None,
               "started_at": self.started_at,
               "synced": self.synced(), "clock_rate": self.env.clock.rate, "gc_tuning": self.gc_tuning,
               "last_error": self.last_error, "cache": cache_stats,
               "api_server": self.cfg.api_server_config().to_dict(),
               "bind_queue": len(cache.bind_queue) if cache is not None else 0,
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
        lg = self.delivery_log_file
        out["log_seq"] = lg.seq if lg is not None else None
        return out

    async def sessions_since(self, n: int = 0) -> list[dict]:
        """The records of the sessions after the ``n``-th (``n`` = the count a reader has seen):
        ``{"n", "leader", "ms", "cpu_ms", "process_cpu_ms", "phases_ms"}``, oldest first; the
        last ``SESSION_RECORDS`` (ha.runtime.instance_state) sessions are kept."""
        recs = self.session_records
        if not recs or recs[-1]["n"] <= n:
            return []
        return [r for r in recs if r["n"] > n]

    async def decisions(self, since: int = 0) -> list[dict]:
        return self.decisions_log.since(since)

    async def observe(self, decisions_since: int = 0) -> dict:
        """One tick of the recorded history in one call (see the module docstring)."""
        inc = self.inc
        return {"digest": await self.digest(), "stats": await self.stats(),
                "decisions": self.decisions_log.since(decisions_since),
                "staleness_ms": inc.staleness_since_last_observe() if inc is not None else [],
                "incarnation": self.incarnation, "generation": self.generation}

    def _node_id(self) -> str | None:
        return None   # the Ray facade knows its node

    async def placement(self) -> dict:
        return {"node_id": self._node_id(), "host": socket.gethostname(), "pid": os.getpid()}

    # ============================================================================ chaos port
    async def chaos_set_epoch(self, t0_wall: float) -> dict:
        return await self.chaos.set_epoch(t0_wall)

    async def chaos_activate(self, sf, watch: bool = True, api: bool = True, kinds: list | None = None) -> dict:
        return await self.chaos.activate(sf, watch=watch, api=api, kinds=kinds)

    async def chaos_deactivate(self, index: int, watch: bool = True, api: bool = True,
                               kinds: list | None = None) -> dict:
        return await self.chaos.deactivate(index, watch=watch, api=api, kinds=kinds)

    async def chaos_expire_now(self, kinds: list | None = None) -> dict:
        return await self.chaos.expire_now(kinds)

    # ============================================================================ control
    async def set_clock_rate(self, rate: float) -> None:
        self.env.clock.set_rate(rate)

    async def pid(self) -> int:
        return os.getpid()

    async def is_leader(self) -> bool:
        return self.is_leader_now()

    async def wait_synced(self, timeout: float = 60.0) -> bool:
        clock = self.env.clock
        deadline = clock.monotonic() + timeout
        while clock.monotonic() < deadline:
            if self.synced():
                return True
            await clock.sleep(0.05)
        return self.synced()

    def run_session(self, *, flush_binds: bool = True):
        """One session of the current incarnation, in the caller's thread (step-wise drivers)."""
        if self.inc is None:
            raise RuntimeError(f"{self.cfg.name}: not started")
        return self.inc.session(flush_binds=flush_binds)

    async def run_session_now(self) -> dict | None:
        """Run one session at once if this instance may schedule now (tests, step-wise drivers);
        None if it may not (not synced, or a standby in leader-elected mode)."""
        inc = self.inc
        if inc is None or not inc.should_schedule():
            return None
        res = await inc.run_session(flush_binds=True)
        return res.to_dict()

    async def wait_binds_done(self, timeout: float = 60.0) -> bool:
        """True once the bind worker has drained the bind queue (step-wise drivers: a session's
        binds are then written, or failed and queued for resync)."""
        clock = self.env.clock
        deadline = clock.monotonic() + timeout
        while clock.monotonic() < deadline:
            bw = self.bind_worker
            if bw is None or bw.idle():
                return True
            await clock.sleep(0.01)
        return False

    async def ping(self) -> str:
        return self.cfg.name


def create_instance_actor(config: InstanceConfig, *, max_restarts: int = 3, namespace: str | None = None,
                          scheduling_strategy: Any = None):
    """A named Ray async actor running ``SchedulerInstance(config)``. After a crash Ray restarts it
    (up to ``max_restarts``); the new incarnation starts itself: fresh informers, fresh list.
    ``scheduling_strategy``: where Ray places it (``ha.runtime.placement.strategy``)."""
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

        def _node_id(self) -> str | None:
            return ray.get_runtime_context().get_node_id()

    opts = {"name": config.name}
    if namespace:
        opts["namespace"] = namespace
    if scheduling_strategy is not None:
        opts["scheduling_strategy"] = scheduling_strategy
    return SchedulerInstanceActor.options(**opts).remote(config)
