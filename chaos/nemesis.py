"""The nemesis (Jepsen's word): fires a :class:`chaos.schedule.Schedule`'s actions at their times
against the driver's :class:`chaos.targets.Targets`, records what it did, and undoes what is still
on when it stops (heal partitions, resume paused processes, restore clock rates, end watch/API
faults) so a run never ends with a stopped process.

It knows no fault: each action goes to the fault's package (``chaos.faults.FAULTS[name]``:
``start`` / ``end`` / ``fire`` / ``restart``) with the instance names it resolved — ``leader``
through ``Targets.leader()`` when the fault starts or fires, ``all`` and named instances as the
schedule lists them — so every target takes the same path.

Records (:class:`FiredAction`): status ``applied``, ``skipped`` (a :class:`chaos.targets.Skip`: the
driver lacks the method, no leader, the instance is not running …) or ``failed`` (any other error;
the run goes on). ``self_driven``: fault names whose instance-named targets apply themselves from
the schedule (hooks inside the instances, given the run's epoch); the nemesis only records those
(a ``leader`` one it still activates). The runner passes :data:`chaos.faults.SELF_DRIVEN`.
"""
from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from chaos.faults import FAULTS
from chaos.faults.base import call
from chaos.schedule import Action, Schedule, ScheduledFault
from chaos.targets import Skip

__all__ = ["Nemesis", "FiredAction", "Skip"]

# the name the runner imports (raise _Skip(reason) from a target method)
_Skip = Skip

log = logging.getLogger("chaos.nemesis")


@dataclass
class FiredAction:
    index: int
    fault: str
    action: str
    t: float                       # seconds since the run's start when it fired
    targets: list[str]
    status: str                    # applied | skipped | failed
    detail: str = ""
    wall: float = field(default_factory=time.time)

    def to_json(self) -> dict:
        return {"index": self.index, "fault": self.fault, "action": self.action,
                "t": round(self.t, 4), "targets": self.targets, "status": self.status,
                "detail": self.detail, "wall": self.wall}


class Nemesis:
    def __init__(self, schedule: Schedule, targets: Any, *, clock: Callable[[], float] = time.monotonic,
                 self_driven: Iterable[str] = ()) -> None:
        self.schedule = schedule
        self.targets = targets
        self.clock = clock
        self.self_driven = frozenset(self_driven)
        self.records: list[FiredAction] = []
        self.t0: float | None = None
        self._resolved: dict[int, list[str]] = {}     # fault index -> instances it was applied to
        self._open: dict[int, ScheduledFault] = {}     # windows started and not yet ended
        self._timeline = schedule.timeline()
        self._next = 0
        self._inflight = 0
        self._task: asyncio.Task | None = None

    # ------------------------------------------------------------------------------ driving
    async def run(self, t0: float | None = None, until: float | None = None) -> None:
        """Fire every action at t0 + its time (t0: ``clock()`` now unless given); ``until`` stops
        after that many seconds (actions later than it are not reached)."""
        self.t0 = self.clock() if t0 is None else t0
        while self._next < len(self._timeline):
            a = self._timeline[self._next]
            if until is not None and a.t > until:
                return
            wait = self.t0 + a.t - self.clock()
            if wait > 0:
                await asyncio.sleep(wait)
            await self.fire_due()

    async def fire_due(self, now: float | None = None) -> list[FiredAction]:
        """Fire every action due at ``now`` (seconds since t0); for drivers with their own loop."""
        if self.t0 is None:
            self.t0 = self.clock()
        now = self.clock() - self.t0 if now is None else now
        fired = []
        while self._next < len(self._timeline) and self._timeline[self._next].t <= now + 1e-9:
            a = self._timeline[self._next]
            self._next += 1
            self._inflight += 1
            try:
                fired.append(await self._fire(a))
            finally:
                self._inflight -= 1
        return fired

    def pending(self) -> int:
        """Actions not fired yet (one being fired counts)."""
        return len(self._timeline) - self._next + self._inflight

    async def stop(self) -> None:
        """End every window still open (heal, resume, restore): nothing stays broken."""
        for index in sorted(self._open):
            sf = self._open[index]
            await self._fire(Action(self._elapsed(), 0, index, "end", sf.name), reason="run ended")

    def to_json(self) -> list[dict]:
        return [r.to_json() for r in self.records]

    # ------------------------------------------------------------------------------ firing
    def _elapsed(self) -> float:
        return 0.0 if self.t0 is None else self.clock() - self.t0

    async def _resolve(self, sf: ScheduledFault) -> list[str]:
        if sf.targets == ("leader",):
            leader = getattr(self.targets, "leader", None)
            if not callable(leader):
                raise Skip("target leader: the driver gives no leader()")
            name = await call(leader)
            if not name:
                raise Skip("no leader at that moment")
            return [name]
        return list(sf.targets)

    async def _fire(self, a: Action, reason: str = "") -> FiredAction:
        sf = self.schedule.by_index(a.index)
        t = self._elapsed()
        names: list[str] = self._resolved.get(a.index, [])
        try:
            if a.action in ("start", "fire"):
                names = await self._resolve(sf)
                self._resolved[a.index] = names
            detail = await self._apply(sf, a.action, names)
            status = "applied"
            if a.action == "start":
                self._open[a.index] = sf
            elif a.action == "end":
                self._open.pop(a.index, None)
        except Skip as e:
            status, detail = "skipped", str(e)
            if a.action == "end":
                self._open.pop(a.index, None)
        except Exception as e:  # noqa: BLE001 -- a failed fault is recorded; the run goes on
            status, detail = "failed", f"{type(e).__name__}: {e}"
            log.warning("chaos[%d] %s %s failed: %s", a.index, sf.name, a.action, detail)
            if a.action == "end":
                self._open.pop(a.index, None)
        if reason:
            detail = f"{detail} ({reason})" if detail else reason
        rec = FiredAction(a.index, sf.name, a.action, t, names, status, detail)
        self.records.append(rec)
        log.info("chaos[%d] %s %s %s: %s %s", a.index, sf.name, a.action, names, status, detail)
        return rec

    async def _apply(self, sf: ScheduledFault, action: str, names: list[str]) -> str:
        if sf.name in self.self_driven and sf.targets != ("leader",):
            return "applied by the instances' own hooks (schedule-driven)"
        return await FAULTS[sf.name].act(action, self.targets, sf, names)


