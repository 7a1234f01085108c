"""One life of a scheduler instance: what a process restart (or a lost lease with
``lost_lease="restart"``) drops whole and builds anew.

An :class:`Incarnation` owns its cache (``ha.scheduler.wiring.build_cache``) and scheduler, its
API io (``ha.runtime.apiio.InstanceIO``: binder, evictor, status writer, with decisions, fencing
and dry run), its informers (one per kind, with this life's chaos watch hooks) and their delivery
log, its bind worker (Volcano's ``processBindTask``), its session worker (sessions run one at a
time off the event loop, so informers, queries and the lease go on meanwhile), its campaign for
the lease (a fresh identity each life) and the tasks it started (:class:`ha.runtime.tasks.
OwnedTasks`). ``close()`` ends exactly those.

What survives a restart — the counters, the decision log, the API clients, the chaos port — is
the instance's, handed to each life as one explicit object (``ha.runtime.instance_state.
InstanceState``), never the instance itself. Time, threads and sleeping come from the state's
environment (``ha.runtime.environment``): nothing here reads the system clock or starts a thread
itself.
"""
from __future__ import annotations

import asyncio
import logging
import math
from collections import OrderedDict, deque
from itertools import islice
from typing import TYPE_CHECKING, Any

import numpy as np

from ha.runtime.apiio import InstanceIO
from ha.runtime.election import LeaderCallbacks, LeaderElector
from ha.runtime.tasks import OwnedTasks, stop_with_recancel
from ha.scheduler.wiring import KINDS

if TYPE_CHECKING:
    from ha.runtime.instance_state import InstanceState

__all__ = ["Incarnation", "percentiles", "KINDS"]

log = logging.getLogger(__name__)

BIND_PERIOD_S = 0.02   # Volcano: wait.Until(processBindTask, 20ms)
# Volcano: wait.Until(processResyncTask, 0) — a worker that takes the next due task at once; an idle
# queue is polled this often (the per-task retry delay is the cache's rate limiter)
RESYNC_PERIOD_S = 0.005


class _Samples(deque):
    """An informer's staleness samples, counting every append (the deque itself is bounded), so
    a reader can take only the samples added since its last look."""

    def __init__(self, maxlen: int = 100_000):
        super().__init__((), maxlen)
        self.total = 0

    def append(self, x) -> None:
        self.total += 1
        super().append(x)

    def since(self, total_before: int) -> list[float]:
        """The samples appended after the reader saw ``total_before`` (as many as are kept)."""
        new = self.total - total_before
        if new <= 0:
            return []
        out = list(islice(reversed(self), min(new, len(self))))
        out.reverse()
        return out


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
    """{p50, p99, max, n} of staleness samples (ms), or None when there are none. The p-th
    percentile is the ceil(p*n)-th smallest sample (nearest rank)."""
    if isinstance(samples, np.ndarray):
        xs = samples
    else:
        xs = samples if isinstance(samples, list) else list(samples)
        if len(xs) < _SELECT_FROM:
            return _ranked(sorted(xs))
        xs = np.asarray(xs, dtype=float)
    n = len(xs)
    if not n:
        return None
    # an instance's stats carry these of up to 100,000 samples a kind, asked several times a
    # second: selecting the three ranks is a fifth of sorting them, and gives the same samples
    ks = sorted({_rank(0.50, n), _rank(0.99, n), n - 1})
    part = np.partition(xs, ks)
    return {"p50": round(float(part[_rank(0.50, n)]), 3), "p99": round(float(part[_rank(0.99, n)]), 3),
            "max": round(float(part[n - 1]), 3), "n": n}


_SELECT_FROM = 4096


def _rank(p: float, n: int) -> int:
    return min(n - 1, max(0, int(math.ceil(p * n)) - 1))


def _ranked(xs: list) -> dict | None:
    if not xs:
        return None
    n = len(xs)
    return {"p50": round(xs[_rank(0.50, n)], 3), "p99": round(xs[_rank(0.99, n)], 3),
            "max": round(xs[-1], 3), "n": n}


class Incarnation:
    def __init__(self, state: "InstanceState", number: int):
        from cluster_state.informer import Informer, instance_gc_options
        from ha.scheduler.scheduler import Scheduler
        from ha.scheduler.wiring import build_cache
        self.state = st = state
        self.number = number
        cfg, env = st.cfg, st.env
        self.cfg, self.env = cfg, env
        self.name = cfg.name
        self.closed = False
        self._closing: asyncio.Future | None = None
        self.tasks = OwnedTasks(f"{cfg.name}#{number}")
        self.elector: LeaderElector | None = None
        self.io = InstanceIO(st.sapi, instance=cfg.name, record=st.decisions_log.record,
                             context=lambda: (st.sessions, self.is_leader()),
                             dry_run=lambda: cfg.mode == "shadow" and not self.is_leader(),
                             fence=lambda: self.elector.fence() if self.elector else None,
                             fencing=cfg.fencing and cfg.elected, on_first_bind=st.on_first_bind,
                             scheduler_name=cfg.scheduler_name, clock=env.clock)
        self.cache, handlers = build_cache(
            profile=cfg.profile, switches=cfg.switches, scheduler_name=cfg.scheduler_name,
            default_queue=cfg.default_queue, io=self.io, bind_mode="queued", batch_num=1_000_000,
            clock=env.clock, on_fatal=lambda e: st.fatal(f"informer handler: {e}"))
        self.scheduler = Scheduler(self.cache, st.new_scheduler_conf(), seed=cfg.seed * 1_000_003 + number,
                                   clock=env.clock)
        self.delivery_log = st.open_delivery_log()
        opts = dict(cfg.informer_options)
        # chaos: a DeliveryHook per kind; factories (kind -> zero-arg callable) are preferred, since
        # every incarnation needs fresh hooks and callables travel to Ray actors more safely
        hooks = opts.pop("hooks", {}) or {}
        factories = opts.pop("hook_factories", {}) or {}
        self.informers: dict[str, Any] = {}
        chaos_hooks: dict[str, Any] = {}
        for kind in KINDS:
            hook = factories[kind]() if kind in factories else hooks.get(kind)
            if hook is not None:
                chaos_hooks[kind] = hook
            kw = dict(opts)
            kw.setdefault("write_time", _FreshStamp())
            if st.gc_tuning == "instance":
                for k, v in instance_gc_options().items():
                    kw.setdefault(k, v)
            inf = Informer(st.aapi, kind, log=self.delivery_log, name=f"{cfg.name}/{kind}",
                           hook=hook, **kw)
            inf.staleness_ms = _Samples(inf.staleness_ms.maxlen or 100_000)
            inf.add_event_handler(handlers[kind])
            self.informers[kind] = inf
        st.chaos.attach(chaos_hooks)   # a new life keeps the run's chaos schedule (its epoch)
        self.informers_started = False
        self._stale_seen: dict[str, int] = {}   # kind -> samples total at the last observe()
        self.session_worker = env.serial_worker(f"{cfg.name}-session")
        # a session's write-back: in parallel in live (Volcano's job updater), in order in a sim
        # (an environment without one: in order, in the session)
        # (the conditions of every job in one request, unless API faults must meet each write)
        writer = getattr(env, "status_writer", None)
        self.cache.status_writer = None if writer is None else \
            writer(f"{cfg.name}-status", batch_events=st.chaos.api_chaos is None)
        cache = self.cache
        self.bind_worker = env.polling_worker(f"{cfg.name}-bind", cache.process_bind_task, BIND_PERIOD_S,
                                              pending=lambda: bool(cache.bind_queue))
        # every instance, standbys too, reconciles failed writes continuously, not only after its
        # own sessions (a standby's cache would otherwise keep a task its failed write left behind);
        # resync "after-session": no worker, session() alone drains errTasks
        self.resync_worker = env.polling_worker(f"{cfg.name}-resync", self._resync_step, RESYNC_PERIOD_S,
                                                pending=lambda: bool(cache.err_tasks)) \
            if cfg.resync == "continuous" else None

    # ============================================================================ lifecycle
    async def start(self) -> None:
        cfg = self.cfg
        self.bind_worker.start()
        if self.resync_worker is not None:
            self.resync_worker.start()
        if not cfg.elected or cfg.standby == "warm":
            await self.start_informers()
            self.tasks.spawn(self._session_loop(), "sessions")
        # a cold standby schedules from when it leads (_on_started_leading), as vc-scheduler does
        if cfg.elected:
            self.tasks.spawn(self._campaign(), "election")
        if self.delivery_log is not None and cfg.log_flush_s > 0:
            self.tasks.spawn(self._flush_loop(), "log-flush")

    async def start_informers(self) -> bool:
        """Start every informer and wait for their first lists (WaitForCacheSync)."""
        if not self.informers_started:
            self.informers_started = True
            for kind in KINDS:   # in order, each synced before the next: pods find their jobs
                inf = self.informers[kind]
                await inf.start()
                await inf.wait_for_sync(self.cfg.sync_timeout_s)
        return all(i.has_synced() for i in self.informers.values())

    def synced(self) -> bool:
        return self.informers_started and all(i.has_synced() for i in self.informers.values())

    async def close(self, timeout: float) -> None:
        """End this life: its tasks (the campaign abandons or releases its lease as the owner
        decided), the session in flight (a thread cannot be cancelled: bounded wait), the bind
        worker after its batch in flight, the informers, the delivery log. Past the bounds, what
        is stuck is left behind (daemon threads working on this dropped cache). Idempotent: a
        second caller (stop() while a restart is closing this life) waits for the same close,
        which a cancelled caller does not interrupt."""
        if self._closing is None:
            self.closed = True
            self._closing = asyncio.ensure_future(self._close(timeout))
        await asyncio.shield(self._closing)

    async def _close(self, timeout: float) -> None:
        name = self.name
        stuck = await self.tasks.close(timeout)
        if stuck:
            log.warning("%s: tasks still running after %.0fs, left behind: %s", name, timeout,
                        ", ".join(t.get_name() for t in stuck))
        bound = max(1.0, timeout / 2)
        fut = self.session_worker.in_flight()
        if fut is not None:
            done, _ = await asyncio.wait({fut}, timeout=bound)
            if not done:
                log.warning("%s: session still running after %.0fs; leaving it behind", name, bound)
        self.session_worker.close()
        if self.cache.status_writer is not None:
            self.cache.status_writer.close()
        if not await self.bind_worker.stop(bound):
            log.warning("%s: bind worker still in I/O after %.0fs; leaving it behind", name, bound)
        if self.resync_worker is not None and not await self.resync_worker.stop(bound):
            log.warning("%s: resync worker still in I/O after %.0fs; leaving it behind", name, bound)
        for inf in reversed(list(self.informers.values())):
            try:
                if not await stop_with_recancel(inf.stop, inf.tasks, timeout):
                    log.warning("%s: informer %s did not stop within %.0fs", name, inf.name, timeout)
            except Exception:  # noqa: BLE001
                log.exception("%s: informer stop failed", name)
        self.informers_started = False
        if self.delivery_log is not None:
            self.delivery_log.close()

    async def _flush_loop(self) -> None:
        """Flush the delivery log every ``log_flush_s``: a SIGKILLed instance keeps its log up to
        a moment ago (the log buffers records in memory between flushes)."""
        while True:
            await self.env.clock.sleep(self.cfg.log_flush_s)
            try:
                self.delivery_log.flush()
            except (OSError, ValueError):   # closed under us
                pass

    # ============================================================================ election
    def is_leader(self) -> bool:
        return self.elector is not None and self.elector.is_leader()

    async def _campaign(self) -> None:
        cfg, st, env = self.cfg, self.state, self.env
        while not st.stopping:
            # like Volcano/kube-scheduler (hostname + "_" + uuid): a restarted process must not
            # find the lease "already its own" and resume a term it never saw begin
            identity = f"{cfg.name}_{env.new_id()}"
            self.elector = LeaderElector(
                st.aapi, cfg.election_config(identity),
                LeaderCallbacks(on_started_leading=self._on_started_leading),
                clock=env.clock, rng=st.rng, wall=env.clock.now)
            await self.elector.run()     # returns when the lease is lost
            st.elections_lost += 1
            if st.stopping:
                return
            if cfg.lost_lease == "restart":
                st.restart_soon("leader election lost")
                return

    async def _on_started_leading(self, fence) -> None:
        st = self.state
        st.leader_transitions += 1
        st.became_leader_at = self.env.clock.now()
        st.first_bind_after_leading_at = None
        if not self.informers_started:          # cold standby: list now (Volcano's failover)
            await self.start_informers()
            # vc-scheduler's Run() on winning the Lease: the cache's informers synced, then
            # wait.Until(runOnce, period), which runs the first session at once and the next a
            # period later -- not at the next tick of a loop that has been running since start
            self.tasks.spawn(self._session_loop(first_at_once=True), "sessions")

    # ============================================================================ sessions
    def should_schedule(self) -> bool:
        if not self.synced():
            return False
        if self.cfg.mode in ("active-active", "shadow"):
            return True
        return self.is_leader()

    async def _session_loop(self, first_at_once: bool = False) -> None:
        st = self.state
        wait = not first_at_once
        while True:
            if wait:
                await self.env.clock.sleep(self.cfg.period_s)
            wait = True
            if not self.should_schedule():
                continue
            try:
                await self.run_session(flush_binds=False)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 — a bad session must not stop the scheduler
                st.errors += 1
                st.last_error = repr(e)
                log.exception("%s: session failed", self.name)

    async def run_session(self, *, flush_binds: bool):
        """``session()`` on the session worker; the loop stays free meanwhile (Volcano: the
        informers' goroutines keep applying events under the cache mutex during a session)."""
        return await self.session_worker.submit(self.session, flush_binds=flush_binds)

    def session(self, *, flush_binds: bool = True):
        """One session (blocking; on the session worker). It works on its snapshot; the cache is
        shared with the informers (loop) and the bind worker through the cache's lock.
        ``flush_binds`` (step-wise drivers): return only once this session's binds are written or
        failed; the session loop leaves them to the bind worker, like Volcano."""
        from cluster_state.gcpause import gc_paused
        st, cache = self.state, self.cache
        # a session's snapshot is millions of objects that die with it: automatic collections
        # in the middle would walk them (and the young part of the cache) again and again
        from ha.runtime.session_profile import session_profile
        with session_profile(self.name, st.sessions), gc_paused():
            res = self.scheduler.run_once(session_hook=st.session_hook)
        if flush_binds:
            cache.process_bind_task()                     # what is still queued, here
            self.bind_worker.wait_idle_blocking(120.0)    # and the batch the worker may have
        # oracles (allocation drift, wasted evictions) need the session's pipeline decisions,
        # which v1.14 never writes anywhere; recorded with this session's number
        leader = self.is_leader()
        dry = self.cfg.mode == "shadow" and not leader
        now = self.env.clock.now()
        # one record per task Pipelined at the end; ``new``: the session decided it (not a
        # reservation kept from an earlier session), what repeat_pipelines counts
        for key, node in res.pipelined.items():
            st.decisions_log.record({"t": now, "session": st.sessions, "instance": self.name,
                                        "leader": leader, "dry_run": dry, "op": "pipeline", "pod": key,
                                        "uid": None, "node": node, "ok": True, "error": None,
                                        "new": res.new_pipelines.get(key) == node})
        st.sessions += 1
        st.last_session_ms = res.duration_s * 1000.0
        st.last_session_cpu_ms = res.cpu_s * 1000.0
        st.last_session_process_cpu_ms = res.process_cpu_s * 1000.0
        st.last_session_phases_ms = {k: [round(x, 3) for x in v] for k, v in res.phases_ms.items()}
        st.session_records.append({"n": st.sessions, "leader": leader, "ms": st.last_session_ms,
                                      "cpu_ms": st.last_session_cpu_ms,
                                      "process_cpu_ms": st.last_session_process_cpu_ms,
                                      "phases_ms": st.last_session_phases_ms})
        st.session_errors += len(res.errors)
        st.recent_session_errors.extend(res.errors[:5])
        if res.fatal:
            st.fatal(f"session: {res.fatal}")
        elif res.panic:
            st.panic(f"session: {res.panic}")
        else:
            cache.process_resync_task()
            cache.process_cleanup_job()
        return res

    def _resync_step(self) -> int:
        """One turn of the resync worker: the tasks whose retry is due (a failed nomination
        write, a 409) are synced from the API server; a fatal one restarts the instance."""
        from ha.scheduler.api.types import FatalCacheError
        try:
            return self.cache.process_resync_task(now=self.env.clock.monotonic())
        except FatalCacheError as e:
            self.state.fatal(f"resync: {e}")
            return 0

    # ============================================================================ staleness
    def staleness_samples(self) -> dict[str, _Samples]:
        return {k: inf.staleness_ms for k, inf in self.informers.items()}

    def staleness_since_last_observe(self) -> list[float]:
        """The raw staleness samples (ms, all kinds, in KINDS order) added since the previous call."""
        out: list[float] = []
        for k, s in self.staleness_samples().items():
            total = getattr(s, "total", len(s))
            out.extend(s.since(self._stale_seen.get(k, 0)) if isinstance(s, _Samples) else [])
            self._stale_seen[k] = total
        return out
