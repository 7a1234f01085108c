"""Lease-based leader election with client-go's rules (tools/leaderelection), on the testbed's
API server (a ``Lease`` object, coordination.k8s.io/v1 shape).

What is kept from client-go, on purpose:

* defaults LeaseDuration 15 s, RenewDeadline 10 s, RetryPeriod 2 s; ``JitterFactor = 1.2``;
  ``RenewDeadline > JitterFactor * RetryPeriod`` and ``LeaseDuration > RenewDeadline`` are validated;
* acquire retries every ``RetryPeriod`` plus up to ``JitterFactor * RetryPeriod`` of jitter;
  a held lease is taken over only after the *local* observation of the record has not changed for
  ``LeaseDuration`` (only locally captured monotonic timestamps decide — the timestamps written into
  the record are informational), so the scheme tolerates clock skew but not clock-*rate*
  differences — which the scalable :class:`~ha.runtime.clock.ScaledClock` lets chaos reproduce;
* the leader renews every ``RetryPeriod``; when it cannot renew for ``RenewDeadline`` it stops
  leading; ``OnStoppedLeading`` is always called when the elector exits, even if it never led;
* ``leaseTransitions`` increments when the holder changes; ``ReleaseOnCancel`` empties the holder
  on a graceful stop only: a process that crashes (Volcano's ``klog.Fatalf``, an OOM kill) runs no
  release, so :meth:`LeaderElector.abandon` makes the elector exit the same way — its lease stays
  held until the other candidates see it expire.

No fencing in client-go ("does not guarantee that only one client is acting as a leader"). The
testbed adds an optional *fence* (:meth:`LeaderElector.fence`): the (holder, leaseTransitions) pair
this leader won with, which the instance's write path checks before binds/evictions (see
``ha.runtime.instance`` — off by default).
"""
from __future__ import annotations

import asyncio
import inspect
import logging
import math
import random
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

from cluster_state.aio import shielded
from ha.errors import BadInput
from ha.runtime.clock import ScaledClock
from cluster_state.timeouts import wait_for

__all__ = ["JITTER_FACTOR", "LeaderElectionConfig", "LeaderCallbacks", "LeaderElector", "Fence",
           "LEASE_API_VERSION"]

log = logging.getLogger(__name__)

JITTER_FACTOR = 1.2
LEASE_API_VERSION = "coordination.k8s.io/v1"
# Sub-second lease durations (tests, scaled experiments) do not fit the integer
# leaseDurationSeconds field: the exact value travels in this annotation as well.
DURATION_ANNOTATION = "ha-testbed/lease-duration-ms"


@dataclass(frozen=True)
class LeaderElectionConfig:
    identity: str
    lease_name: str = "volcano"
    namespace: str = "volcano-system"
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    release_on_cancel: bool = True

    def __post_init__(self):
        if not self.identity:
            raise BadInput("leader election: identity must not be empty")
        if self.lease_duration <= self.renew_deadline:
            raise BadInput(f"leader election: lease duration ({self.lease_duration}s) must be greater "
                           f"than renew deadline ({self.renew_deadline}s)")
        if self.renew_deadline <= JITTER_FACTOR * self.retry_period:
            raise BadInput(f"leader election: renew deadline ({self.renew_deadline}s) must be greater "
                           f"than retry period*JitterFactor ({JITTER_FACTOR}*{self.retry_period}s)")
        if self.lease_duration < 0 or self.renew_deadline < 0 or self.retry_period <= 0:
            raise BadInput("leader election: durations must be positive")


Callback = Callable[..., Any]


@dataclass
class LeaderCallbacks:
    on_started_leading: Callback | None = None   # (fence) -> None | awaitable; runs as a task
    on_stopped_leading: Callback | None = None   # () -> None | awaitable; always on exit
    on_new_leader: Callback | None = None        # (identity) -> None | awaitable


@dataclass(frozen=True)
class Fence:
    """What a leader won with: the write path compares it with the Lease's current record."""
    namespace: str
    lease_name: str
    holder: str
    transitions: int


@dataclass
class ElectionStats:
    acquired: int = 0          # times this elector started leading
    lost: int = 0              # times it stopped leading (renew deadline passed, or cancelled)
    attempts: int = 0
    errors: int = 0            # API errors while getting/updating the lease
    conflicts: int = 0         # 409s on update (someone else wrote first)
    observed_leaders: list = field(default_factory=list)  # (local time, identity)


async def _call(cb: Callback | None, *args) -> None:
    if cb is None:
        return
    res = cb(*args)
    if inspect.isawaitable(res):
        await res


class LeaderElector:
    """``await elector.run()`` campaigns until cancelled or (after leading) until the lease is lost.

    ``api`` is a ``cluster_state.aio.AsyncApiClient`` (get/create/update of kind ``Lease``).
    """

    def __init__(self, api, config: LeaderElectionConfig, callbacks: LeaderCallbacks | None = None,
                 *, clock: ScaledClock | None = None, rng: random.Random | None = None,
                 wall=time.time):
        self.api = api
        self.config = config
        self.callbacks = callbacks or LeaderCallbacks()
        self.clock = clock or ScaledClock()
        self.rng = rng or random.Random()
        self._wall = wall
        self.stats = ElectionStats()
        self._observed: dict | None = None        # last lease object seen
        self._observed_rv: Any = None
        self._observed_time: float = 0.0          # local monotonic time of the last change seen
        self._leading = False
        self._reported_leader: str | None = None
        self._fence: Fence | None = None
        self._lead_task: asyncio.Task | None = None
        self._abandoned = False                   # crashed: exit without ReleaseOnCancel

    # -- state -------------------------------------------------------------------------------
    @property
    def identity(self) -> str:
        return self.config.identity

    def is_leader(self) -> bool:
        return self._leading

    def observed_holder(self) -> str:
        return ((self._observed or {}).get("spec") or {}).get("holderIdentity") or ""

    def fence(self) -> Fence | None:
        """The fence of the current term, or None when not leading."""
        return self._fence if self._leading else None

    def abandon(self) -> None:
        """The process is crashing: when ``run()`` is cancelled next, skip ReleaseOnCancel (os.Exit
        runs no deferred release). Without this an in-process restart gave its lease back and
        re-won it within milliseconds under a new identity, skipping the lease expiry that every
        real crash costs."""
        self._abandoned = True

    # -- the loop ----------------------------------------------------------------------------
    async def run(self) -> None:
        try:
            if not await self._acquire():
                return
            self._leading = True
            self.stats.acquired += 1
            log.info("%s: started leading (transitions=%s)", self.identity,
                     self._fence.transitions if self._fence else None)
            if self.callbacks.on_started_leading is not None:
                self._lead_task = asyncio.create_task(
                    _call(self.callbacks.on_started_leading, self._fence),
                    name=f"{self.identity}-on-started-leading")
            await self._renew()
        finally:
            was_leading = self._leading
            self._leading = False
            if was_leading:
                self.stats.lost += 1
                if self.config.release_on_cancel and not self._abandoned:
                    try:
                        await asyncio.shield(self._release())
                    except Exception:  # release is best effort (the lease expires anyway)
                        self.stats.errors += 1
            if self._lead_task is not None and not self._lead_task.done():
                self._lead_task.cancel()
            await _call(self.callbacks.on_stopped_leading)

    async def _acquire(self) -> bool:
        """client-go ``acquire``: JitterUntil(tryAcquireOrRenew, RetryPeriod, 1.2, sliding)."""
        while True:
            if await self._try_acquire_or_renew():
                return True
            wait = self.config.retry_period * (1.0 + self.rng.random() * JITTER_FACTOR)
            await self.clock.sleep(wait)

    async def _renew(self) -> None:
        """client-go ``renew``: every RetryPeriod, poll tryAcquireOrRenew every RetryPeriod until it
        succeeds or RenewDeadline (local clock) passes; then leadership is lost."""
        cfg = self.config
        while True:
            deadline = self.clock.monotonic() + cfg.renew_deadline
            while True:
                remaining = deadline - self.clock.monotonic()
                ok = False
                if remaining > 0:
                    try:
                        ok = await wait_for(self._try_acquire_or_renew(),
                                            timeout=self.clock.real_seconds(remaining))
                    except asyncio.TimeoutError:
                        ok = False
                if ok:
                    break
                remaining = deadline - self.clock.monotonic()
                if remaining <= 0:
                    log.warning("%s: failed to renew lease %s/%s within %ss: leadership lost",
                                self.identity, cfg.namespace, cfg.lease_name, cfg.renew_deadline)
                    return
                await self.clock.sleep(min(cfg.retry_period, remaining))
            await self.clock.sleep(cfg.retry_period)

    # -- one attempt ---------------------------------------------------------------------------
    def _record_duration(self, lease: dict) -> float:
        meta = lease.get("metadata") or {}
        ms = (meta.get("annotations") or {}).get(DURATION_ANNOTATION)
        if ms is not None:
            try:
                return float(ms) / 1000.0
            except (TypeError, ValueError):
                pass
        secs = (lease.get("spec") or {}).get("leaseDurationSeconds")
        return float(secs) if isinstance(secs, (int, float)) and secs > 0 else self.config.lease_duration

    def _lease_spec(self, *, acquire_time: float, transitions: int) -> dict:
        now = self._wall()
        return {"holderIdentity": self.identity,
                "leaseDurationSeconds": max(1, math.ceil(self.config.lease_duration)),
                "acquireTime": acquire_time, "renewTime": now,
                "leaseTransitions": transitions}

    def _observe(self, lease: dict) -> None:
        rv = (lease.get("metadata") or {}).get("resourceVersion")
        if self._observed is None or rv != self._observed_rv:
            self._observed = lease
            self._observed_rv = rv
            self._observed_time = self.clock.monotonic()

    async def _report_leader(self) -> None:
        holder = self.observed_holder()
        if holder and holder != self._reported_leader:
            self._reported_leader = holder
            self.stats.observed_leaders.append((self.clock.monotonic(), holder))
            await _call(self.callbacks.on_new_leader, holder)

    async def _try_acquire_or_renew(self) -> bool:
        from cluster_state.errors import AlreadyExists, ApiError, Conflict, NotFound
        cfg = self.config
        self.stats.attempts += 1
        try:
            try:
                lease = await shielded(self.api.get("Lease", cfg.lease_name, cfg.namespace))
            except NotFound:
                now = self._wall()
                obj = {"apiVersion": LEASE_API_VERSION, "kind": "Lease",
                       "metadata": {"name": cfg.lease_name, "namespace": cfg.namespace,
                                    "annotations": {DURATION_ANNOTATION:
                                                    str(int(round(cfg.lease_duration * 1000)))}},
                       "spec": self._lease_spec(acquire_time=now, transitions=0)}
                try:
                    created = await shielded(self.api.create(obj))
                except AlreadyExists:
                    return False
                self._observe(created)
                self._fence = Fence(cfg.namespace, cfg.lease_name, self.identity, 0)
                await self._report_leader()
                return True
            self._observe(lease)
            await self._report_leader()
            spec = lease.get("spec") or {}
            holder = spec.get("holderIdentity") or ""
            now_local = self.clock.monotonic()
            valid = self._observed_time + self._record_duration(lease) > now_local
            if holder and holder != self.identity and valid:
                return False  # held by someone else, and not expired by our local observation
            if holder == self.identity:
                acquire_time = spec.get("acquireTime") or self._wall()
                transitions = int(spec.get("leaseTransitions") or 0)
            else:
                acquire_time = self._wall()
                transitions = int(spec.get("leaseTransitions") or 0) + 1
            new = {"apiVersion": lease.get("apiVersion", LEASE_API_VERSION), "kind": "Lease",
                   "metadata": dict(lease.get("metadata") or {}),
                   "spec": self._lease_spec(acquire_time=acquire_time, transitions=transitions)}
            ann = dict(new["metadata"].get("annotations") or {})
            ann[DURATION_ANNOTATION] = str(int(round(cfg.lease_duration * 1000)))
            new["metadata"]["annotations"] = ann
            try:
                updated = await shielded(self.api.update(new))
            except Conflict:
                self.stats.conflicts += 1
                return False
            self._observe(updated)
            self._fence = Fence(cfg.namespace, cfg.lease_name, self.identity, transitions)
            await self._report_leader()
            return True
        except asyncio.CancelledError:
            raise
        except (ApiError, ConnectionError, OSError, TimeoutError) as e:
            self.stats.errors += 1
            log.debug("%s: lease attempt failed: %r", self.identity, e)
            return False
        except Exception as e:  # redis errors (partition) and the like: an attempt that failed
            self.stats.errors += 1
            log.debug("%s: lease attempt failed: %r", self.identity, e)
            return False

    async def _release(self) -> None:
        """ReleaseOnCancel: give the lease up so a standby need not wait for it to expire."""
        from cluster_state.errors import ApiError
        cfg = self.config
        lease = self._observed
        if not lease or self.observed_holder() != self.identity:
            return
        spec = dict(lease.get("spec") or {})
        spec.update({"holderIdentity": "", "leaseDurationSeconds": 1, "renewTime": self._wall()})
        meta = dict(lease.get("metadata") or {})
        ann = dict(meta.get("annotations") or {})
        ann[DURATION_ANNOTATION] = "1"   # the next candidate may take it almost at once
        meta["annotations"] = ann
        try:
            updated = await self.api.update({"apiVersion": lease.get("apiVersion", LEASE_API_VERSION),
                                             "kind": "Lease", "metadata": meta, "spec": spec})
            self._observe(updated)
        except ApiError:
            pass
