"""The nemesis (Jepsen's word): fires a :class:`chaos.schedule.Schedule`'s actions at their times
against a *Targets* object the driver provides, records what it did, and undoes what is still on
when it stops (heal partitions, resume paused processes, restore clock rates, end watch/API
faults) so a run never ends with a stopped process.

Targets is duck-typed; every method may be sync or async, and a missing one makes the faults that
need it ``skipped`` (with the reason), never a crash. Names are instance names (``scheduler-1``).

==================  =============================================================================
method              used by
==================  =============================================================================
leader()            any fault with ``target: leader`` (resolved when the fault starts)
watch(name)         watch-delay/stall/reorder/expire: a :class:`chaos.injectors.watch.WatchChaos`
                    (or None when the instance's hooks run the schedule themselves: ``set_epoch``)
request_relist(n,k) watch-expire when ``watch(name)`` gives nothing
proxy(name)         partition: a RedisProxy / ThreadedRedisProxy in front of that instance
api(name)           api-latency / api-conflict: a :class:`chaos.injectors.api.ApiChaos`
pause(n)/resume(n)  pause (else ``pid(name)`` and SIGSTOP/SIGCONT)
kill(n)/restart(n)  kill (else ``pid(name)`` and SIGKILL); restart after ``restart_after``
set_clock_rate(n,r) clock-rate (back to 1.0 at the end of the window)
redis_restart(s)    redis-restart (down for ``for``, default 0 s), run in a worker thread
==================  =============================================================================

``self_driven``: fault names whose instance-named targets apply themselves from the schedule
(hooks with an epoch); the nemesis only records them (``leader`` ones it still activates).
"""
from __future__ import annotations

import asyncio
import inspect
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from chaos.injectors import process
from chaos.schedule import Action, Schedule, ScheduledFault

__all__ = ["Nemesis", "FiredAction", "run_nemesis_in_thread", "NemesisThread"]

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


async def _call(fn: Callable, *args) -> Any:
    res = fn(*args)
    if inspect.isawaitable(res):
        res = await res
    return res


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

    def _has(self, name: str) -> bool:
        return callable(getattr(self.targets, name, None))

    async def _resolve(self, sf: ScheduledFault) -> list[str]:
        if sf.targets == ("leader",):
            if not self._has("leader"):
                raise _Skip("target leader: the driver gives no leader()")
            name = await _call(self.targets.leader)
            if not name:
                raise _Skip("no leader at that moment")
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
        except _Skip as e:
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
        f = sf.fault
        name = sf.name
        if name in self.self_driven and sf.targets != ("leader",):
            return "applied by the instances' own hooks (schedule-driven)"
        if name in ("watch-delay", "watch-stall", "watch-reorder"):
            return await self._each(names, "watch", lambda w: (w.activate(sf) if action == "start"
                                                              else w.deactivate(sf.index)))
        if name == "watch-expire":
            out = []
            for n in names:
                w = await _call(self.targets.watch, n) if self._has("watch") else None
                if w is not None:
                    out.append(f"{n}: relist {','.join(w.expire(f.kinds)) or 'none'}")
                elif self._has("request_relist"):
                    await _call(self.targets.request_relist, n, list(f.kinds) if f.kinds else None)
                    out.append(f"{n}: relist requested")
                else:
                    raise _Skip("the driver gives neither watch() nor request_relist()")
            return "; ".join(out)
        if name == "partition":
            def cut(p):
                if action == "start":
                    return f"cut {p.partition()} connections"
                p.heal()
                return "healed"
            return await self._each(names, "proxy", cut)
        if name in ("api-latency", "api-conflict"):
            return await self._each(names, "api", lambda c: (c.activate(sf) if action == "start"
                                                            else c.deactivate(sf.index)))
        if name == "pause":
            return await self._signal(names, action == "start", "pause", "resume",
                                      process.pause_pid, process.resume_pid)
        if name == "kill":
            if action == "restart":
                if not self._has("restart"):
                    raise _Skip("the driver gives no restart()")
                for n in names:
                    await _call(self.targets.restart, n)
                return f"restarted {', '.join(names)}"
            return await self._signal(names, True, "kill", None, process.kill_pid, None)
        if name == "clock-rate":
            if not self._has("set_clock_rate"):
                raise _Skip("the driver gives no set_clock_rate()")
            rate = f.rate if action == "start" else 1.0
            for n in names:
                await _call(self.targets.set_clock_rate, n, rate)
            return f"clock rate {rate:g}"
        if name == "redis-restart":
            if action == "end":
                return "redis is back"
            if not self._has("redis_restart"):
                raise _Skip("the driver gives no redis_restart()")
            down = f.duration or 0.0
            fn = self.targets.redis_restart
            if inspect.iscoroutinefunction(fn):
                await fn(down)
            else:   # blocking (stop, sleep, start): keep our loop (and its proxies) running
                await asyncio.to_thread(fn, down)
            return f"redis restarted (down {down:g}s)"
        raise _Skip(f"fault {name} has no injector")

    async def _each(self, names: list[str], getter: str, fn: Callable[[Any], Any]) -> str:
        if not self._has(getter):
            raise _Skip(f"the driver gives no {getter}()")
        out = []
        for n in names:
            obj = await _call(getattr(self.targets, getter), n)
            if obj is None:
                out.append(f"{n}: no {getter}")
                continue
            r = fn(obj)
            if inspect.isawaitable(r):
                r = await r
            out.append(f"{n}: {r}" if isinstance(r, str) else n)
        if not any(": no " not in o for o in out):
            raise _Skip("; ".join(out))
        return "; ".join(out)

    async def _signal(self, names, on: bool, on_m: str, off_m: str | None, on_pid, off_pid) -> str:
        meth = on_m if on else off_m
        out = []
        for n in names:
            if meth and self._has(meth):
                await _call(getattr(self.targets, meth), n)
                out.append(f"{meth} {n}")
            elif self._has("pid"):
                pid = await _call(self.targets.pid, n)
                (on_pid if on else off_pid)(pid)
                out.append(f"{'SIG' + ('KILL' if on_m == 'kill' else 'STOP') if on else 'SIGCONT'} "
                           f"{n} (pid {pid})")
            else:
                raise _Skip(f"the driver gives neither {meth}() nor pid()")
        return "; ".join(out)


class _Skip(Exception):
    pass


class NemesisThread:
    """A Nemesis on a private loop thread (with the proxies that share that loop), for the
    synchronous experiment runner: ``start(t0_monotonic)``, ``stop()``, ``records()``."""

    def __init__(self, nemesis: Nemesis, loop_thread=None) -> None:
        from chaos.loop import LoopThread
        self.nemesis = nemesis
        self._own = loop_thread is None
        self.loop = loop_thread or LoopThread("nemesis")
        self._fut = None

    def start(self, t0: float | None = None) -> "NemesisThread":
        self.loop.start()
        self._fut = self.loop.submit(self.nemesis.run(t0))
        return self

    def stop(self, timeout: float = 30.0) -> list[dict]:
        if self._fut is not None:
            self._fut.cancel()
        try:
            self.loop.run(self.nemesis.stop(), timeout)
        finally:
            if self._own:
                self.loop.stop()
        return self.nemesis.to_json()

    def records(self) -> list[dict]:
        return self.nemesis.to_json()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until every action has fired (True) or the timeout passed (False)."""
        import concurrent.futures
        try:
            self._fut.result(timeout)
            return True
        except concurrent.futures.TimeoutError:
            return False


def run_nemesis_in_thread(schedule: Schedule, targets: Any, *, t0: float | None = None,
                          loop_thread=None, **kw) -> NemesisThread:
    return NemesisThread(Nemesis(schedule, targets, **kw), loop_thread).start(t0)
