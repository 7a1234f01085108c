"""The sim engine's :class:`ha.runtime.environment.Environment`: what a scheduler instance gets
instead of threads, Redis and the wall clock when it runs under the virtual-time loop.

* ``clock``: :class:`SimScaledClock` — ``ha.runtime.clock.ScaledClock`` over the sim clock (so the
  clock-rate fault works unchanged);
* pause (SIGSTOP): the loop holds every callback of this life's tasks (they run in a context whose
  ``ha.experiment.engine.sim.loop.PROCESS`` is this life) until resume — sleeps, timeouts and wake-ups included;
* blocking work runs inline, on the loop, in a fixed order; the virtual time it takes comes from
  the cost model (:class:`Costs`), never from how long it really took: the session worker runs a
  session inline, then holds the worker for the modelled session time plus what its synchronous
  API calls cost; the bind worker is an asyncio task stepping every 20 ms of virtual time;
* the API clients are the in-memory server's (``cluster_state.memstore``) behind a :class:`Link`:
  every request pays the modelled latency and raises
  ``redis.exceptions.ConnectionError`` while the link is cut (partition), the server is down
  (redis-restart) or the instance is dead (kill) — what the Redis client raises in the live engine;
* ``new_id()`` is drawn from a seeded ``random.Random``.

Synchronous API calls cannot wait on the loop, so they are charged: each adds its cost to the
environment's debt, and the worker that made them pays the debt (sleeps it) when its step returns.
"""
from __future__ import annotations

import asyncio
import contextvars
import logging
import random
from dataclasses import dataclass
from typing import Any, Callable

import redis.exceptions as rex

from cluster_state.memstore import AsyncMemApiClient, MemApiClient, MemoryServer
from ha.runtime.clock import ScaledClock

__all__ = ["Costs", "Link", "ServerPower", "SimScaledClock", "SimEnvironment", "SimApiClient",
           "SimAsyncApiClient"]

log = logging.getLogger(__name__)

BIND_PERIOD_S = 0.02


@dataclass(frozen=True)
class Costs:
    """The cost model in seconds (``ha.experiment.config.Sim`` gives it in milliseconds)."""
    session: float = 0.05
    session_per_task: float = 0.00005
    session_per_pending: float = 0.0003
    session_per_node: float = 0.00005
    api_call: float = 0.0005
    watch_delivery: float = 0.0015

    @classmethod
    def from_settings(cls, sim: Any) -> "Costs":
        if sim is None:
            return cls()
        return cls(session=sim.session_ms / 1000, session_per_task=sim.session_per_task_ms / 1000,
                    session_per_pending=sim.session_per_pending_ms / 1000,
                    session_per_node=sim.session_per_node_ms / 1000, api_call=sim.api_call_ms / 1000,
                    watch_delivery=sim.watch_delivery_ms / 1000)

    def session_s(self, tasks: int, pending: int, nodes: int) -> float:
        return (self.session + self.session_per_task * tasks + self.session_per_pending * pending
                + self.session_per_node * nodes)


class ServerPower:
    """Whether the in-memory API server is up (redis-restart takes it down; its state is kept)."""

    def __init__(self) -> None:
        self.up = True


class Link:
    """One instance's connection to the API server, across its lives (the live engine's proxy):
    cut by a partition. Implements the nemesis' ``Proxy`` (``partition`` / ``heal``)."""

    def __init__(self, name: str, power: ServerPower) -> None:
        self.name = name
        self.power = power
        self.cut = False
        self.cuts = 0

    def partition(self) -> int:
        self.cut = True
        self.cuts += 1
        return 1

    def heal(self) -> None:
        self.cut = False

    def check(self) -> None:
        if self.cut:
            raise rex.ConnectionError(f"{self.name}: connection cut (partition)")
        if not self.power.up:
            raise rex.ConnectionError("API server down (redis-restart)")


class SimApiClient(MemApiClient):
    """The sync memory client of one process life: fails while its link is down or the process is
    dead; each request charges the modelled API call to the environment."""

    def __init__(self, server: MemoryServer, env: "SimEnvironment"):
        super().__init__(server)
        self.env = env

    def _execute(self, req):
        env = self.env
        env.check()
        env.charge(env.costs.api_call)
        return self.server.execute(req)


class SimAsyncApiClient(AsyncMemApiClient):
    """The async memory client of one process life: each request waits its latency (a watch
    read that returns events hands them over ``watch_delivery`` later) and fails while the link is
    down or the process is dead — checked before and after a blocking watch (a cut during the wait
    loses the reply, as a cut connection does)."""

    def __init__(self, server: MemoryServer, env: "SimEnvironment"):
        super().__init__(server, latency=env.costs.api_call)
        self.env = env

    async def _execute(self, req):
        from cluster_state.store import Command
        env = self.env
        env.check()
        if isinstance(req, Command) and str(req.args[0]).upper() == "XREAD":
            got = await self.server.xread_block(req.args[1:])
            if got is not None:   # the events reach the watcher this long after they were written
                await asyncio.sleep(env.costs.watch_delivery)
            env.check()
            return got
        await asyncio.sleep(self.latency)
        env.check()
        return self.server.execute(req)


MIN_SLEEP_S = 1e-6


class SimScaledClock(ScaledClock):
    """The instance's clock: ``ScaledClock`` (the clock-rate fault) over the sim clock. A positive
    sleep lasts at least a microsecond: real time always moves on, virtual time only when a timer
    is later than now — a loop sleeping "until the deadline" whose remainder is a rounding error
    (1e-16 s) would otherwise spin at one instant for ever."""

    def __init__(self, sim_clock: Any, rate: float = 1.0):
        super().__init__(rate, real=sim_clock.monotonic, wall=sim_clock.now)

    async def sleep(self, local_seconds: float) -> None:
        s = self.real_seconds(local_seconds)
        await asyncio.sleep(max(s, MIN_SLEEP_S) if local_seconds > 0 else 0)


class _InlineSerialWorker:
    """The session worker: the call runs inline; the worker then stays busy for the modelled
    session time plus the synchronous API calls' debt (``cost(result)``)."""

    def __init__(self, env: "SimEnvironment", cost: Callable[[Any], float]):
        self.env, self.cost = env, cost
        self._busy: asyncio.Future | None = None
        self.closed = False

    async def submit(self, fn: Callable, *args, **kw) -> Any:
        if self.closed:
            raise RuntimeError("session worker closed")
        env = self.env
        loop = asyncio.get_running_loop()
        self._busy = busy = loop.create_future()
        try:
            env.take_debt()
            res = fn(*args, **kw)
            d = self.cost(res) + env.take_debt()
            if d > 0:
                await asyncio.sleep(d)
            return res
        finally:
            if not busy.done():
                busy.set_result(None)
            self._busy = None

    def in_flight(self):
        b = self._busy
        return b if b is not None and not b.done() else None

    def close(self) -> None:
        self.closed = True


class _TaskPollingWorker:
    """The bind worker: calls ``step()`` whenever ``pending()``, else waits ``period_s``; a step's
    synchronous API calls are paid (slept) after it.

    It behaves as the asyncio task ``while True: ...; await asyncio.sleep(d)`` would, callback for
    callback, without being one: each turn is the same timer, then the same two ready callbacks (the
    sleep's result being set, the task's wake-up), scheduled in the same context in the same
    order, so every other callback of the run keeps its place and its time; what it leaves out is
    the task's future, coroutine and step machinery, which a worker waking 200 times a virtual
    second while idle mostly spent its time on. ``stop()`` takes the hops a cancelled task takes
    before its awaiter wakes (tests/experiment/engine/sim/test_polling_worker.py runs both side by side).
    """

    def __init__(self, env: "SimEnvironment", name: str, step: Callable[[], bool], period_s: float,
                 pending: Callable[[], bool] | None):
        self.env, self.name, self.step, self.period_s = env, name, step, period_s
        self._pending = pending or (lambda: True)
        self._busy = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ctx: contextvars.Context | None = None
        self._timer: asyncio.TimerHandle | None = None   # the sleep's timer
        self._state = "off"     # off | step (a wake-up is ready) | sleep (timer) | fired | done
        self._cancel: asyncio.Future | None = None        # stop() is waiting for this
        self.batches = 0
        self.errors = 0

    def start(self) -> "_TaskPollingWorker":
        # a task is created in a copy of its creator's context and its first step is scheduled
        loop = self._loop = asyncio.get_running_loop()
        self._ctx = contextvars.copy_context()
        self._state = "step"
        loop.call_soon(self._turn, context=self._ctx)
        return self

    def _one(self) -> None:
        self._busy = True
        try:
            if self.step():
                self.batches += 1
        except Exception:  # noqa: BLE001 — a bad batch must not end the worker
            self.errors += 1
            log.exception("%s: step failed", self.name)
        finally:
            self._busy = False

    def _turn(self) -> None:
        """The task's step: one turn of the loop, up to its sleep."""
        if self._cancel is not None:          # cancelled with this wake-up pending
            self._finish()
            return
        env = self.env
        try:
            if not self._pending():
                d = self.period_s
            else:
                env.take_debt()
                self._one()
                d = env.take_debt()
                if not d > 0:
                    d = self.period_s
        except BaseException:
            self._state = "done"      # the task would have ended with the error
            raise
        self._state = "sleep"
        # asyncio.sleep: the timer, created in the task's context
        self._timer = self._loop.call_later(d, self._fired, context=self._ctx)

    def _fired(self) -> None:
        """The sleep's timer: its result set, which schedules the task's wake-up."""
        if self._cancel is not None:          # cancelled while this was ready: nothing to wake
            return
        self._state = "fired"
        self._loop.call_soon(self._turn, context=self._ctx)

    def _finish(self) -> None:
        """The cancelled task's last step: the sleep's timer cancelled, the task done."""
        t, self._timer = self._timer, None
        if t is not None:
            t.cancel()
        self._state = "done"
        fut = self._cancel
        if not fut.done():
            fut.set_result(None)

    def idle(self) -> bool:
        return not self._busy and not self._pending()

    def wait_idle_blocking(self, timeout: float) -> bool:
        # inline: the queued batches are written now (a step-wise driver asked for them)
        for _ in range(1000):
            if self.idle():
                break
            self._one()
        return self.idle()

    async def stop(self, timeout: float) -> bool:
        state = self._state
        if state in ("off", "done") or self._cancel is not None:
            return True          # never started, or already stopped (by another caller)
        loop = self._loop
        self._cancel = loop.create_future()
        if state == "sleep":
            # the sleep's future cancelled: the task's wake-up is scheduled (a timer that already
            # fired but whose callback has not run yet finds the future cancelled and does nothing)
            loop.call_soon(self._turn, context=self._ctx)
        # "step", "fired": the wake-up already scheduled meets the cancellation
        await self._cancel
        return True


class SimEnvironment:
    """One scheduler instance's (one process life's) environment in the sim engine."""

    own_process = False

    def __init__(self, *, name: str, server: MemoryServer, link: Link, sim_clock: Any,
                 costs: Costs, seed: str, clock_rate: float = 1.0, process: str | None = None,
                 loop: Any = None):
        self.name = name
        self.server = server
        self.costs = costs
        self.link = link
        self.dead = False
        self.process = process or name       # loop.PROCESS of this life's tasks
        self.loop = loop
        self.clock = SimScaledClock(sim_clock, clock_rate)
        self._rng = random.Random(seed)
        self._debt = 0.0
        self.instance: Any = None        # the SchedulerInstance (the session cost reads its cache)
        self.last_session_s: float | None = None

    # -- the process: dead (killed), paused (SIGSTOP) -----------------------------------------
    def check(self) -> None:
        if self.dead:
            raise rex.ConnectionError(f"{self.name}: process killed")
        self.link.check()

    def kill(self) -> None:
        """SIGKILL: nothing more of this life reaches the API server (every call raises), and the
        Lease it holds is abandoned, not released: it stays until it expires, as a killed
        process's does."""
        self.dead = True
        el = getattr(self.instance, "elector", None)
        if el is not None:
            el.abandon()

    def pause(self) -> None:
        """SIGSTOP: every callback of this life's tasks is held by the loop until :meth:`resume`."""
        self.loop.pause_process(self.process)

    def resume(self) -> None:
        self.loop.resume_process(self.process)

    @property
    def paused(self) -> bool:
        return self.loop is not None and self.loop.process_paused(self.process)

    # -- costs -----------------------------------------------------------------------------
    def charge(self, seconds: float) -> None:
        """Virtual time a synchronous call took (paid by the worker that made it)."""
        if seconds > 0:
            self._debt += seconds

    blocking_sleep = charge   # what the API chaos' latency costs a synchronous write

    def take_debt(self) -> float:
        d, self._debt = self._debt, 0.0
        return d

    def session_cost(self, _result: Any = None) -> float:
        cache = getattr(self.instance, "cache", None)
        if cache is None:
            self.last_session_s = self.costs.session
            return self.last_session_s
        tasks = pending = 0
        for job in cache.jobs.values():
            n = len(job.tasks)
            tasks += n
            pending += sum(1 for t in job.tasks.values() if not getattr(t, "node_name", ""))
        self.last_session_s = self.costs.session_s(tasks, pending, len(cache.nodes))
        return self.last_session_s

    # -- Environment ------------------------------------------------------------------------
    async def run_blocking(self, fn: Callable, *args) -> Any:
        res = fn(*args)
        d = self.take_debt()
        if d > 0:
            await asyncio.sleep(d)
        return res

    def serial_worker(self, name: str) -> _InlineSerialWorker:
        return _InlineSerialWorker(self, self.session_cost)

    def polling_worker(self, name: str, step: Callable[[], bool], period_s: float, *,
                       pending: Callable[[], bool] | None = None) -> _TaskPollingWorker:
        return _TaskPollingWorker(self, name, step, period_s, pending)

    def status_writer(self, name: str, *, batch_events: bool = True) -> None:
        # a session's write-back calls run in order in the session, as every write of the sim does
        return None

    def api_clients(self, server: Any, url: str, prefix: str) -> tuple[Any, Any]:
        # the run's MemoryServer already carries the run's ApiServerConfig
        return SimAsyncApiClient(self.server, self), SimApiClient(self.server, self)

    def new_id(self) -> str:
        return f"{self._rng.getrandbits(32):08x}"

    def crash(self, reason: str) -> None:
        # every instance shares the simulator's process: a crash-point cannot kill one of them
        raise RuntimeError(f"crash-point {reason}: the sim engine runs every instance in one process")

    def delivery_log_clocks(self) -> dict[str, Callable[[], float]]:
        return {"clock": self.clock.monotonic, "wall_clock": self.clock.now}
