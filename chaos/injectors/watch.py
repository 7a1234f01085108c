"""Watch-level chaos: a DeliveryHook (cluster_state.delivery) that sits between one informer's FIFO
and its store + handlers, and acts on *events*, not packets.

* ``watch-delay``: each delivery waits a delay drawn from the fault's distribution (fixed, uniform,
  exponential, pareto), per instance and per kind, only for deliveries that reach the hook inside
  the fault's window. Watch order is kept (a slow stream: an event never overtakes an earlier one).
* ``watch-stall``: everything that arrives inside the window is held until the window ends, then
  released in order.
* ``watch-reorder``: deliveries inside the window get a random hold in [0, window) and may overtake
  deliveries *of other objects*; one object's deliveries never change order, and a list/relist
  (``key is None``) stays a barrier -- the informer contract (client-go shared_informer.go: per
  object order) holds.
* ``watch-expire``: ``informer.request_relist()`` at the fault's time -- the reflector handles it
  exactly like 410 Gone (backoff, relist, tombstones for what vanished).

Two ways to drive a hook, same code path (an *activation* = fault + wall-clock window):
* schedule-driven: built with the instance's faults, ``set_epoch(t0_wall)`` turns the schedule's
  relative times into activations (works inside a Ray actor: no remote control needed);
* nemesis-driven: ``activate(sf)`` / ``deactivate(index)`` at fire time (``leader`` targets).

Every random draw comes from ``ScheduledFault.rng(instance, kind)`` (numpy, seeded per fault).
Hooks pickle; :func:`hook_factories` gives an instance's ``InstanceConfig.informer_options
["hook_factories"]`` (every incarnation builds fresh hooks inside its process). The asyncio parts
are created in ``start()``, which an in-process restart calls again (held deliveries of the old
informer are dropped with it).
"""
from __future__ import annotations

import asyncio
import functools
import heapq
import logging
import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from chaos.schedule import Schedule, ScheduledFault
from cluster_state.timeouts import wait_for

__all__ = ["WatchChaosHook", "WatchChaos", "hook_factories", "INFORMER_KINDS"]

log = logging.getLogger("chaos.watch")

# the kinds a scheduler instance has informers for (ha.runtime.instance.KINDS)
INFORMER_KINDS = ("PriorityClass", "Queue", "Node", "HyperNode", "PodGroup", "Pod")


@dataclass
class _Activation:
    sf: ScheduledFault
    start: float                 # wall clock
    end: float                   # wall clock; inf = until the end of the run
    rng: Any = None
    expired: bool = False        # watch-expire: fired already


@dataclass
class _Held:
    seq: int
    base: float                  # due before the ordering constraints
    reorder: bool                # may overtake other objects' deliveries
    stall: int | None            # index of the stall holding it (early end re-times it)
    d: Any
    submitted: float = 0.0
    due: float = 0.0


@dataclass
class WatchStats:
    submitted: int = 0
    emitted: int = 0
    delayed: int = 0             # deliveries held by a watch-delay
    stalled: int = 0             # deliveries held by a watch-stall
    reorder_candidates: int = 0  # deliveries submitted while a watch-reorder was active
    overtaken: int = 0           # emissions that went out before an earlier-submitted delivery
    expires: int = 0             # watch-expire relists requested
    delay_s_total: float = 0.0
    max_hold_s: float = 0.0

    def as_dict(self) -> dict:
        return dict(self.__dict__)


class WatchChaosHook:
    """The DeliveryHook for one informer (one instance, one kind). See the module doc."""

    def __init__(self, instance: str, kind: str, faults: Iterable[ScheduledFault] = (), *,
                 epoch: float | None = None, clock: Callable[[], float] = time.time) -> None:
        self.instance = instance
        self.kind = kind
        self.clock = clock
        self.scheduled = [sf for sf in faults if sf.is_watch and sf.applies_to(instance, kind)]
        self.epoch: float | None = None
        self.activations: dict[int, _Activation] = {}
        self.stats = WatchStats()
        self._reset_runtime()
        if epoch is not None:
            self.set_epoch(epoch)

    # --------------------------------------------------------------------------- pickling (Ray)
    def _reset_runtime(self) -> None:
        self._emit = None
        self._informer = None
        self._heap: list[tuple[float, int, _Held]] = []
        self._held: dict[int, _Held] = {}
        self._seq = 0
        self._max_due = -math.inf
        self._barrier_due = -math.inf
        self._key_due: dict[Any, float] = {}
        self._max_emitted_seq = 0
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task | None = None

    def __getstate__(self) -> dict:
        st = dict(self.__dict__)
        for k in ("_emit", "_informer", "_heap", "_held", "_wake", "_task", "_key_due"):
            st.pop(k, None)
        return st

    def __setstate__(self, st: dict) -> None:
        self.__dict__.update(st)
        self._reset_runtime()

    # --------------------------------------------------------------------------- control
    def set_epoch(self, t0_wall: float) -> None:
        """Start of the run (wall clock): the scheduled faults' windows become activations."""
        self.epoch = float(t0_wall)
        for sf in self.scheduled:
            end = math.inf if sf.end is None else self.epoch + sf.end
            self.activations[sf.index] = _Activation(sf, self.epoch + sf.at, end,
                                                     sf.rng(self.instance, self.kind))
        self._poke()

    def activate(self, sf: ScheduledFault, *, start: float | None = None,
                 end: float | None = None) -> bool:
        """Turn a fault on now (or at ``start``) for its ``for`` (or until ``end`` / forever).
        Returns False when the fault is not a watch fault for this hook's kind."""
        if not sf.is_watch or (sf.kinds is not None and self.kind not in sf.kinds):
            return False
        now = self.clock()
        start = now if start is None else start
        if end is None:
            end = math.inf if sf.fault.duration is None else start + sf.fault.duration
        self.activations[sf.index] = _Activation(sf, start, end, sf.rng(self.instance, self.kind))
        self._poke()
        return True

    def deactivate(self, index: int) -> None:
        """End a fault now: a stall releases what it holds (in order); delays already drawn stay."""
        a = self.activations.get(index)
        if a is None:
            return
        now = self.clock()
        a.end = min(a.end, now)
        if a.sf.name == "watch-stall" and self._held:
            for h in self._held.values():
                if h.stall == index:
                    h.base = now
                    h.stall = None
            self._retime()
        self._poke()

    def expire_now(self) -> bool:
        """watch-expire: make the informer relist as if its watch got 410 Gone."""
        inf = self._informer
        if inf is None or not hasattr(inf, "request_relist"):
            log.warning("watch-expire %s/%s: no informer to expire", self.instance, self.kind)
            return False
        inf.request_relist()
        self.stats.expires += 1
        return True

    def active(self, now: float | None = None) -> list[_Activation]:
        now = self.clock() if now is None else now
        return [a for a in self.activations.values() if a.start <= now < a.end]

    # --------------------------------------------------------------------------- DeliveryHook
    async def start(self, emit) -> None:
        self._reset_runtime()
        self._emit = emit
        # the informer's bound _deliver: lets watch-expire reach its reflector
        self._informer = getattr(emit, "__self__", None)
        self._wake = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._run(),
                                                            name=f"watch-chaos-{self.instance}-{self.kind}")

    async def submit(self, d) -> None:
        now = self.clock()
        self.stats.submitted += 1
        base = now
        reorder = False
        stall: int | None = None
        for a in self.active(now):
            name = a.sf.name
            if name == "watch-delay":
                x = a.sf.fault.delay.sample(a.rng)
                self.stats.delayed += 1
                self.stats.delay_s_total += x
                base = max(base, now + x)
            elif name == "watch-stall":
                self.stats.stalled += 1
                if a.end > base:
                    base, stall = a.end, a.sf.index
            elif name == "watch-reorder":
                self.stats.reorder_candidates += 1
                reorder = True
                base = max(base, now + float(a.rng.uniform(0.0, a.sf.fault.window)))
        if base <= now and not self._held:
            self._out(d, self._next_seq(), 0.0)     # nothing active, nothing held: at once
            return
        h = _Held(self._next_seq(), base, reorder and d.key is not None, stall, d, now)
        h.due = self._constrain(h)
        self._held[h.seq] = h
        heapq.heappush(self._heap, (h.due, h.seq, h))
        self._poke()

    def held(self) -> int:
        return len(self._held)

    async def stop(self) -> None:
        t, self._task = self._task, None
        if t is not None:
            t.cancel()
            try:
                await t
            except asyncio.CancelledError:
                pass

    # --------------------------------------------------------------------------- internals
    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def _constrain(self, h: _Held) -> float:
        """Ordering: FIFO unless reordering; per object always; lists are barriers."""
        due = h.base
        if h.d.key is None:
            due = max(due, self._max_due)
            self._barrier_due = due
        elif h.reorder:
            due = max(due, self._barrier_due, self._key_due.get(h.d.key, -math.inf))
        else:
            due = max(due, self._max_due)
        if h.d.key is not None:
            self._key_due[h.d.key] = max(due, self._key_due.get(h.d.key, -math.inf))
        self._max_due = max(self._max_due, due)
        return due

    def _retime(self) -> None:
        """Recompute every held delivery's due time (after a stall ended early)."""
        self._max_due = self._barrier_due = -math.inf
        self._key_due = {}
        self._heap = []
        for seq in sorted(self._held):
            h = self._held[seq]
            h.due = self._constrain(h)
            self._heap.append((h.due, h.seq, h))
        heapq.heapify(self._heap)

    def _out(self, d, seq: int, hold: float) -> None:
        self.stats.emitted += 1
        if seq < self._max_emitted_seq:
            self.stats.overtaken += 1
        else:
            self._max_emitted_seq = seq
        if hold > self.stats.max_hold_s:
            self.stats.max_hold_s = hold
        self._emit(d)

    def _poke(self) -> None:
        if self._wake is not None:
            self._wake.set()

    def _next_expire(self) -> float | None:
        ts = [a.start for a in self.activations.values()
              if a.sf.name == "watch-expire" and not a.expired]
        return min(ts) if ts else None

    async def _run(self) -> None:
        heap = self._heap
        while True:
            now = self.clock()
            # watch-expire activations that are due
            for a in self.activations.values():
                if a.sf.name == "watch-expire" and not a.expired and a.start <= now:
                    a.expired = True
                    self.expire_now()
            heap = self._heap
            while heap and heap[0][0] <= now:
                _due, seq, h = heapq.heappop(heap)
                if self._held.pop(seq, None) is None:
                    continue
                self._out(h.d, seq, now - h.submitted)
            wake_at = [heap[0][0]] if heap else []
            nx = self._next_expire()
            if nx is not None:
                wake_at.append(nx)
            self._wake.clear()
            if wake_at:
                wait = min(wake_at) - self.clock()
                if wait > 0:
                    try:
                        await wait_for(self._wake.wait(), min(wait, 3600.0))
                    except asyncio.TimeoutError:
                        pass
            else:
                await self._wake.wait()


class WatchChaos:
    """The watch hooks of one instance, one per informer kind, with one control surface.

    ``hooks`` goes into ``InstanceConfig(informer_options={"hooks": wc.hooks})``.
    """

    def __init__(self, instance: str, faults: Iterable[ScheduledFault] = (), *,
                 kinds: Iterable[str] = INFORMER_KINDS, epoch: float | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        faults = list(faults)
        self.instance = instance
        self.hooks: dict[str, WatchChaosHook] = {
            k: WatchChaosHook(instance, k, faults, epoch=epoch, clock=clock) for k in kinds}

    def set_epoch(self, t0_wall: float) -> None:
        for h in self.hooks.values():
            h.set_epoch(t0_wall)

    def activate(self, sf: ScheduledFault, **kw) -> list[str]:
        return [k for k, h in self.hooks.items() if h.activate(sf, **kw)]

    def deactivate(self, index: int) -> None:
        for h in self.hooks.values():
            h.deactivate(index)

    def expire(self, kinds: Iterable[str] | None = None) -> list[str]:
        kinds = list(self.hooks) if kinds is None else [k for k in kinds if k in self.hooks]
        return [k for k in kinds if self.hooks[k].expire_now()]

    def stats(self) -> dict[str, dict]:
        return {k: h.stats.as_dict() for k, h in self.hooks.items()}


def hook_factories(schedule: Schedule, instance: str, *, kinds: Iterable[str] = INFORMER_KINDS,
                   clock: Callable[[], float] | None = None) -> dict[str, Callable[[], WatchChaosHook]]:
    """kind -> a picklable zero-argument factory of that instance's schedule-driven watch hook (its
    watch faults by name or ``all``): ``InstanceConfig.informer_options["hook_factories"]``. The
    hooks act once given the run's epoch (``set_epoch``); ``clock``: theirs (default the system's;
    the sim engine passes its virtual one)."""
    mine = schedule.for_instance(instance, watch_only=True)
    extra = {"clock": clock} if clock is not None else {}
    return {k: functools.partial(WatchChaosHook, instance, k, mine, **extra) for k in kinds}
