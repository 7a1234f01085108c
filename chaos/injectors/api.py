"""API-level chaos on an instance's writes: ``api-latency`` and ``api-conflict``.

``ApiChaos`` holds the active faults of one instance (activations, like the watch hooks: driven by
the schedule once ``set_epoch`` is called, or by the nemesis with ``activate``/``deactivate``).
``ChaosApiClient(inner, chaos)`` / ``AsyncChaosApiClient`` wrap an ``ApiClient`` /
``AsyncApiClient``; for each call of a verb the fault covers (writes by default):

* ``api-latency``: sleep a delay drawn from the fault's distribution, then make the call (a slow
  API server as the client sees it);
* ``api-conflict``: with the fault's probability, do *not* make the call and raise
  ``cluster_state.errors.Conflict`` (409) -- a write that lost a race. ``bind_many`` draws per
  binding: the losers get a Conflict in their slot, the rest are sent;
* ``crash-point``: when a write reaches the armed point of a commit (chaos/faults/crash_point.py),
  call ``crash(point)`` — the environment's process exit — before the write (``bind_many``: after
  its first binding), so nothing of the commit after the point happens.

Draws come from ``ScheduledFault.rng(instance, "api", verb)`` (seeded per fault).
``update_status_many`` (a batch of /status writes) is not a verb of its own: under chaos it is made
one ``update_status`` call per item, so a fault on ``update_status`` covers every item. Other
attributes pass through. The wrapper pickles (the chaos object does; the inner client is created in place).
"""
from __future__ import annotations

import asyncio
import logging
import math
import os
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from chaos.faults import API_FAULTS, VERBS
from chaos.schedule import ScheduledFault

__all__ = ["ApiChaos", "ChaosApiClient", "AsyncChaosApiClient", "API_FAULTS", "exit_process"]

log = logging.getLogger(__name__)
_WRITES = frozenset(("create", "update", "update_status", "patch_annotations", "bind", "bind_many",
                     "delete", "evict"))


def exit_process(point: str) -> None:
    """A SIGKILL-like crash of this process: no cleanup, no lease release, nothing flushed."""
    log.error("crash-point %s: exiting the process", point)
    os._exit(137)


@dataclass
class _Act:
    sf: ScheduledFault
    start: float
    end: float
    rngs: dict


class ApiChaos:
    def __init__(self, instance: str, faults: Iterable[ScheduledFault] = (), *,
                 epoch: float | None = None, clock: Callable[[], float] = time.time,
                 crash: Callable[[str], None] = exit_process) -> None:
        self.instance = instance
        self.clock = clock
        self.crash = crash
        self._evicted = False           # crash-point after-evictions: the last write evicted a pod
        self.scheduled = [sf for sf in faults if sf.name in API_FAULTS and instance in sf.targets]
        self.activations: dict[int, _Act] = {}
        self.stats = {"calls": 0, "delayed": 0, "delay_s_total": 0.0, "conflicts": 0, "crashes": 0}
        if epoch is not None:
            self.set_epoch(epoch)

    def set_epoch(self, t0_wall: float) -> None:
        for sf in self.scheduled:
            end = math.inf if sf.end is None else t0_wall + sf.end
            self.activations[sf.index] = _Act(sf, t0_wall + sf.at, end, {})

    def activate(self, sf: ScheduledFault, *, start: float | None = None, end: float | None = None) -> bool:
        if sf.name not in API_FAULTS:
            return False
        start = self.clock() if start is None else start
        if end is None:
            end = math.inf if sf.fault.duration is None else start + sf.fault.duration
        self.activations[sf.index] = _Act(sf, start, end, {})
        return True

    def deactivate(self, index: int) -> None:
        a = self.activations.get(index)
        if a is not None:
            a.end = min(a.end, self.clock())

    def _rng(self, a: _Act, verb: str):
        r = a.rngs.get(verb)
        if r is None:
            r = a.rngs[verb] = a.sf.rng(self.instance, "api", verb)
        return r

    def crash_point(self, verb: str, args: tuple, kw: dict, n: int = 1) -> tuple[str, int] | None:
        """``(point, writes to send first)`` when this call reaches an armed crash point: the
        crash comes before the call (after its first binding for ``between-gang-binds``)."""
        if verb not in _WRITES:
            return None
        now = self.clock()
        armed = {a.sf.fault.get("point") for a in self.activations.values()
                 if a.sf.name == "crash-point" and a.start <= now < a.end}
        # an eviction is a condition write and a graceful delete of the victim (scheduler_io)
        deleted_pod = verb == "evict" or (verb == "delete" and bool(args) and args[0] == "Pod")
        evicted, self._evicted = self._evicted, deleted_pod
        if not armed:
            return None
        if "between-gang-binds" in armed and verb == "bind_many" and n >= 2:
            return "between-gang-binds", 1
        if "before-nomination-write" in armed and verb == "update_status" and args \
                and isinstance(args[0], dict) and ((args[0].get("status") or {}).get("nominatedNodeName")):
            return "before-nomination-write", 0
        if "after-evictions" in armed and evicted and not deleted_pod:
            return "after-evictions", 0
        return None

    def crashed(self, point: str) -> None:
        self.stats["crashes"] += 1
        self.crash(point)

    def decide(self, verb: str, n: int = 1) -> tuple[float, list[bool]]:
        """(delay seconds, conflict flag per item) for one call of ``verb`` with ``n`` items."""
        now = self.clock()
        delay = 0.0
        conflicts = [False] * n
        self.stats["calls"] += 1
        for a in self.activations.values():
            if a.sf.name == "crash-point" or not (a.start <= now < a.end) or verb not in a.sf.fault.verbs:
                continue
            if a.sf.name == "api-latency":
                delay = max(delay, a.sf.fault.delay.sample(self._rng(a, verb)))
            else:
                p = a.sf.fault.probability
                rng = self._rng(a, verb)
                for i in range(n):
                    if rng.random() < p:
                        conflicts[i] = True
        if delay > 0:
            self.stats["delayed"] += 1
            self.stats["delay_s_total"] += delay
        self.stats["conflicts"] += sum(conflicts)
        return delay, conflicts


def _conflict(verb: str, args: tuple, kw: dict):
    from cluster_state.errors import Conflict
    kind = ns = name = None
    if verb in ("bind", "evict") and len(args) >= 2:
        kind, ns, name = "Pod", args[0], args[1]
    elif args and isinstance(args[0], dict):
        md = args[0].get("metadata") or {}
        kind, ns, name = args[0].get("kind"), md.get("namespace"), md.get("name")
    elif verb in ("delete", "patch_annotations") and args:
        kind = args[0]
        name = args[1] if len(args) > 1 else None
        ns = args[2] if len(args) > 2 else kw.get("namespace")
    return Conflict(f"{verb}: injected conflict (chaos api-conflict)", kind=kind, namespace=ns, name=name)


def _survivors(items: list, lose: list[bool], kw: dict) -> tuple[list, dict]:
    """The bindings that are really sent, and the keyword arguments cut to match them: per-binding
    lists such as ``uids=`` must stay parallel to the bindings."""
    send = [b for b, c in zip(items, lose) if not c]
    if kw.get("uids") is not None:
        kw = dict(kw, uids=[u for u, c in zip(kw["uids"], lose) if not c])
    return send, kw


_VERBS = frozenset(VERBS)


class ChaosApiClient:
    def __init__(self, inner: Any, chaos: ApiChaos, *, sleep: Callable[[float], None] = time.sleep) -> None:
        self.inner = inner
        self.chaos = chaos
        self._sleep = sleep

    def _update_status_many(self, objs: list) -> list:
        """A batch of /status writes under chaos is what it stands for: one ``update_status`` call
        per item, each through the faults (its own coin from the ``update_status`` stream, its own
        delay, the crash points), results and errors in the items' slots."""
        from cluster_state.errors import ApiError
        out: list = []
        for o in objs:
            try:
                out.append(self.__getattr__("update_status")(o))
            except ApiError as e:
                out.append(e)
        return out

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name == "update_status_many":
            return self._update_status_many
        if name not in _VERBS:
            return attr
        chaos = self.chaos

        def call(*args, **kw):
            if name == "bind_many":
                items = list(args[0]) if args else list(kw.pop("bindings"))
                crash = chaos.crash_point(name, args, kw, len(items))
                if crash is not None:
                    first, kw1 = _survivors(items, [i >= crash[1] for i in range(len(items))], kw)
                    if first:
                        attr(first, *args[1:], **kw1)
                    chaos.crashed(crash[0])
                delay, lose = chaos.decide(name, len(items))
                if delay > 0:
                    self._sleep(delay)
                send, kw = _survivors(items, lose, kw)
                got = iter(attr(send, *args[1:], **kw) if send else [])
                return [_conflict("bind", tuple(b), {}) if c else next(got) for b, c in zip(items, lose)]
            crash = chaos.crash_point(name, args, kw)
            if crash is not None:
                chaos.crashed(crash[0])
            delay, lose = chaos.decide(name)
            if delay > 0:
                self._sleep(delay)
            if lose[0]:
                raise _conflict(name, args, kw)
            return attr(*args, **kw)
        call.__name__ = name
        return call


class AsyncChaosApiClient(ChaosApiClient):
    async def _update_status_many(self, objs: list) -> list:
        from cluster_state.errors import ApiError
        out: list = []
        for o in objs:
            try:
                out.append(await self.__getattr__("update_status")(o))
            except ApiError as e:
                out.append(e)
        return out

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name == "update_status_many":
            return self._update_status_many
        if name not in _VERBS:
            return attr
        chaos = self.chaos

        async def call(*args, **kw):
            if name == "bind_many":
                items = list(args[0]) if args else list(kw.pop("bindings"))
                crash = chaos.crash_point(name, args, kw, len(items))
                if crash is not None:
                    first, kw1 = _survivors(items, [i >= crash[1] for i in range(len(items))], kw)
                    if first:
                        await attr(first, *args[1:], **kw1)
                    chaos.crashed(crash[0])
                delay, lose = chaos.decide(name, len(items))
                if delay > 0:
                    await asyncio.sleep(delay)
                send, kw = _survivors(items, lose, kw)
                got = iter(await attr(send, *args[1:], **kw) if send else [])
                return [_conflict("bind", tuple(b), {}) if c else next(got) for b, c in zip(items, lose)]
            crash = chaos.crash_point(name, args, kw)
            if crash is not None:
                chaos.crashed(crash[0])
            delay, lose = chaos.decide(name)
            if delay > 0:
                await asyncio.sleep(delay)
            if lose[0]:
                raise _conflict(name, args, kw)
            return await attr(*args, **kw)
        call.__name__ = name
        return call
