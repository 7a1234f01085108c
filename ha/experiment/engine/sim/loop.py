"""A virtual-time asyncio event loop, and the clocks the rest of the code is given.

:class:`VirtualTimeLoop` is an asyncio event loop whose ``time()`` is virtual: whenever no
callback is ready, it jumps straight to the next scheduled timer, so ``asyncio.sleep(30)`` costs
no wall time. Everything asyncio builds on the loop's timers (``sleep``, ``wait_for``,
``asyncio.timeout``, ``call_later``) therefore runs in virtual time.

Deterministic: ready callbacks run first in, first out (asyncio's own order); timers run in
order of their due time, ties in the order they were scheduled (asyncio's heap alone leaves ties
to the heap's shape); nothing waits on real I/O. The loop has no selector and no self-pipe: real
sockets, pipes, subprocesses, signal handlers and DNS raise :class:`SimForbidden`, and so does
``run_in_executor`` (hence ``asyncio.to_thread``) unless the loop was built with
``executor="inline"``, which runs the function at once on the loop's thread and hands back a
finished future (deterministic; it blocks the virtual world while it runs, as a CPU-bound step
would). ``call_soon_threadsafe`` from another thread raises too. A loop with nothing ready and no
timer while the main coroutine still waits can never make progress: that is
:class:`SimDeadlock`, not a hang.

Clocks: :class:`SimClock` (``now()`` unix seconds = ``epoch`` + virtual time, ``monotonic()`` =
virtual time, ``await sleep(s)``) for code that must not read the wall clock, and
:class:`WallClock`, the same interface on the real clocks for the live engine.

Running: ``run(coro, until=None)`` runs a coroutine to completion on a fresh loop (``until``: a
virtual deadline; the coroutine is cancelled and :class:`SimDeadline` raised if it is reached
first); ``loop.run_until(t)`` advances a loop's world to virtual time ``t`` and returns with every
task still pending (timers due at or before ``t`` have fired).
"""
from __future__ import annotations

import asyncio
import contextvars
import heapq
import itertools
import threading
import time
from asyncio import events
from typing import Awaitable, Callable, TypeVar
from cluster_state.timeouts import wait_for

__all__ = ["VirtualTimeLoop", "SimClock", "WallClock", "Clock", "run", "SimForbidden", "SimDeadlock",
           "SimDeadline", "DEFAULT_EPOCH", "PROCESS"]

T = TypeVar("T")
DEFAULT_EPOCH = 1_700_000_000.0   # SimClock.now() at virtual time 0 (2023-11-14T22:13:20Z)

# the simulated process a callback belongs to (set in the context its tasks are started in; every
# task they start inherits it): VirtualTimeLoop.pause_process freezes all of its callbacks
PROCESS: contextvars.ContextVar[str | None] = contextvars.ContextVar("ha_sim_process", default=None)


class SimForbidden(RuntimeError):
    """Something tried real I/O, a thread or an executor on the virtual-time loop."""


class SimDeadlock(RuntimeError):
    """No callback is ready and no timer is scheduled, yet the loop was asked to go on."""


class SimDeadline(TimeoutError):
    """``run(..., until=t)``: the coroutine had not finished at virtual time ``t``."""


class _Handle(events.Handle):
    """A ready callback and the simulated process it belongs to (``PROCESS`` in its context when
    it was scheduled; None: no process). Built without ``Handle.__init__``'s debug look-ups (a run
    makes ~2,000 of them a virtual second; no source tracebacks, even in debug mode)."""

    __slots__ = ("_proc",)

    def __init__(self, callback, args, loop, context, proc) -> None:
        self._context = context
        self._loop = loop
        self._callback = callback
        self._args = args
        self._cancelled = False
        self._repr = None
        self._source_traceback = None
        self._proc = proc


class _SeqTimerHandle(events.TimerHandle):
    """A timer and its place in the order timers run: (due time, scheduling order) — ties run first
    scheduled, first run. The loop's heap holds ``(when, seq, handle)`` tuples, which the heap
    compares in C (a timer is compared ~10 times as it is pushed and popped)."""

    __slots__ = ("_seq", "_proc")

    def __init__(self, when, callback, args, loop, context, seq: int, proc=None) -> None:
        # TimerHandle.__init__'s fields, without its debug look-ups (as _Handle)
        self._context = context
        self._loop = loop
        self._callback = callback
        self._args = args
        self._cancelled = False
        self._repr = None
        self._source_traceback = None
        self._when = when
        self._scheduled = False
        self._seq = seq
        self._proc = proc


def _forbidden(what: str) -> Callable:
    def method(self, *args, **kw):
        raise SimForbidden(f"{what} is not available on the virtual-time loop: the simulation runs in "
                           "one thread without real I/O (give the code an in-memory part instead)")
    method.__name__ = what
    return method


class VirtualTimeLoop(asyncio.BaseEventLoop):
    """See the module docstring. ``VirtualTimeLoop(start=0.0, executor="forbid"|"inline")``."""

    def __init__(self, start: float = 0.0, *, executor: str = "forbid") -> None:
        if executor not in ("forbid", "inline"):
            raise ValueError(f"executor must be 'forbid' or 'inline', not {executor!r}")
        super().__init__()
        self._now = float(start)
        self._executor_mode = executor
        self._timer_seq = itertools.count()
        self._clock_resolution = 1e-9
        self.callbacks_run = 0   # not used by the loop: a cheap progress counter for callers
        self._paused: set[str] = set()
        self._frozen: dict[str, list] = {}

    # --- simulated processes: SIGSTOP / SIGCONT ------------------------------------------------
    def pause_process(self, process: str) -> None:
        """Freeze every callback of ``process`` (tasks started in a context whose :data:`PROCESS`
        is it): ready ones and timers that come due are held, not run, until it is resumed —
        its sleeps, timeouts and wake-ups included, as a stopped process's are."""
        self._paused.add(process)

    def resume_process(self, process: str) -> None:
        """Run what was held, in the order it would have run."""
        self._paused.discard(process)
        for cb, args, ctx in self._frozen.pop(process, []):
            self.call_soon(cb, *args, context=ctx)

    def process_paused(self, process: str) -> bool:
        return process in self._paused

    def call_soon(self, callback, *args, context=None):
        # asyncio's call_soon, with the handle noting its process: a paused process's callbacks
        # are held when they come to run (_run_once), not wrapped when scheduled
        if self._closed:
            raise RuntimeError("Event loop is closed")
        if context is None:
            context = contextvars.copy_context()
        if self._debug:
            self._check_thread()
            self._check_callback(callback, "call_soon")
        handle = _Handle(callback, args, self, context, context.get(PROCESS))
        self._ready.append(handle)
        return handle

    # --- time ---------------------------------------------------------------------------------
    def time(self) -> float:
        return self._now

    def call_later(self, delay, callback, *args, context=None):
        # asyncio's, without its second look-up of time() and of the source traceback
        if delay is None:
            raise TypeError("delay must not be None")
        return self.call_at(self._now + delay, callback, *args, context=context)

    def call_at(self, when, callback, *args, context=None):
        if when is None:
            raise TypeError("when cannot be None")
        if self._closed:
            raise RuntimeError("Event loop is closed")
        if self._debug:
            self._check_thread()
            self._check_callback(callback, "call_at")
        if context is None:
            context = contextvars.copy_context()
        seq = next(self._timer_seq)
        timer = _SeqTimerHandle(when, callback, args, self, context, seq, context.get(PROCESS))
        heapq.heappush(self._scheduled, (when, seq, timer))
        timer._scheduled = True
        return timer

    def _run_once(self) -> None:
        """One iteration of asyncio's ``BaseEventLoop._run_once``, step for step: cancelled timers
        dropped (all of them once they are over half of a heap of more than 100), then — nothing
        being ready — virtual time jumped to the first timer (the selector's wait), the timers due
        within the clock's resolution made ready, and every callback ready at this point run in
        order, except a paused process's, which are held (:meth:`pause_process`)."""
        sched = self._scheduled
        n = len(sched)
        if n > 100 and self._timer_cancelled_count / n > 0.5:
            kept = []
            for entry in sched:
                if entry[2]._cancelled:
                    entry[2]._scheduled = False
                else:
                    kept.append(entry)
            heapq.heapify(kept)
            self._scheduled = sched = kept
            self._timer_cancelled_count = 0
        else:
            while sched and sched[0][2]._cancelled:
                self._timer_cancelled_count -= 1
                heapq.heappop(sched)[2]._scheduled = False
        ready = self._ready
        if not ready and not self._stopping:
            if not sched:
                raise SimDeadlock("virtual-time loop: no callback is ready and no timer is scheduled, "
                                  "so nothing can ever happen again (every task waits for an event "
                                  f"nobody will set) at virtual time {self._now!r}")
            when = sched[0][0]
            if when > self._now:   # jump to it exactly (no float drift from adding timeouts)
                self._now = when
        end_time = self._now + self._clock_resolution
        while sched and sched[0][0] < end_time:
            handle = heapq.heappop(sched)[2]
            handle._scheduled = False
            ready.append(handle)
        paused = self._paused
        popleft = ready.popleft
        for _ in range(len(ready)):
            handle = popleft()
            if handle._cancelled:
                continue
            if paused:
                proc = getattr(handle, "_proc", None)
                if proc is not None and proc in paused:
                    self._frozen.setdefault(proc, []).append((handle._callback, handle._args,
                                                               handle._context))
                    continue
            handle._run()
        handle = None  # noqa: F841 -- breaks a cycle when a callback raised (as asyncio does)

    def run_until(self, t: float) -> None:
        """Run until nothing more can happen at or before virtual time ``t``: every timer due by
        then has fired and every callback it made ready has run (tasks woken at ``t`` included);
        then return with the clock at ``t`` and every task still pending (call again to go on).
        A task that never stops yielding (``while True: await asyncio.sleep(0)``) keeps it from
        returning, as it keeps virtual time from moving."""
        if t < self._now:
            raise ValueError(f"run_until({t!r}): virtual time is already {self._now!r}")

        def settled() -> None:
            sched = self._scheduled
            if self._ready or (sched and sched[0][0] <= t):
                self.call_soon(settled)   # after what is ready now (and what that makes ready)
            else:
                self.stop()

        h = self.call_at(t, settled)
        try:
            self.run_forever()
        finally:
            h.cancel()
        self._now = max(self._now, t)

    # --- what BaseEventLoop expects of a concrete loop ------------------------------------------
    def _process_events(self, event_list) -> None:
        pass

    def _write_to_self(self) -> None:
        pass

    def call_soon_threadsafe(self, callback, *args, context=None):
        if self._thread_id is not None and threading.get_ident() != self._thread_id:
            raise SimForbidden("call_soon_threadsafe from another thread: the virtual-time loop runs "
                               "everything in its own thread")
        return self.call_soon(callback, *args, context=context)

    def run_in_executor(self, executor, func, *args):
        if self._executor_mode != "inline":
            raise SimForbidden(f"run_in_executor({getattr(func, '__qualname__', func)!r}) (and "
                               "asyncio.to_thread) would start a thread: not on the virtual-time loop "
                               "(build it with executor='inline' to run such calls inline)")
        self._check_closed()
        fut = self.create_future()
        try:
            fut.set_result(func(*args))
        except BaseException as e:  # noqa: BLE001 -- handed to the awaiting caller
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
            fut.set_exception(e)
        return fut

    async def shutdown_default_executor(self, timeout=None) -> None:
        self._executor_shutdown_called = True



_FORBIDDEN = ("create_connection", "create_server", "create_unix_connection", "create_unix_server",
              "create_datagram_endpoint", "connect_accepted_socket", "connect_read_pipe",
              "connect_write_pipe", "subprocess_exec", "subprocess_shell", "getaddrinfo", "getnameinfo",
              "sock_recv", "sock_recv_into", "sock_recvfrom", "sock_recvfrom_into", "sock_sendall",
              "sock_sendto", "sock_connect", "sock_accept", "sock_sendfile", "sendfile", "start_tls",
              "add_reader", "add_writer", "remove_reader", "remove_writer", "add_signal_handler",
              "remove_signal_handler")
for _name in _FORBIDDEN:
    setattr(VirtualTimeLoop, _name, _forbidden(_name))
del _name


class SimClock:
    """Time for code under the virtual-time loop: ``now()`` (unix seconds), ``monotonic()``,
    ``await sleep(s)``. ``loop`` defaults to the running loop at each call."""

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None, *, epoch: float = DEFAULT_EPOCH) -> None:
        self._loop = loop
        self.epoch = float(epoch)

    def _l(self) -> asyncio.AbstractEventLoop:
        return self._loop or asyncio.get_running_loop()

    def monotonic(self) -> float:
        return self._l().time()

    def now(self) -> float:
        return self.epoch + self._l().time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class WallClock:
    """The same interface on the real clocks (the live engine)."""

    @staticmethod
    def monotonic() -> float:
        return time.monotonic()

    @staticmethod
    def now() -> float:
        return time.time()

    @staticmethod
    async def sleep(seconds: float) -> None:
        await asyncio.sleep(seconds)


Clock = SimClock | WallClock


def _cancel_all(loop: asyncio.AbstractEventLoop) -> None:
    pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
    if not pending:
        return
    pending.sort(key=lambda t: t.get_name())   # all_tasks is a set: cancel in a fixed order
    for t in pending:
        t.cancel()
    loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))


def run(main: Awaitable[T], *, until: float | None = None, loop: VirtualTimeLoop | None = None,
        close: bool = True) -> T:
    """Run ``main`` on a virtual-time loop (a fresh one unless given) and return its result.
    ``until``: virtual deadline; reached first, ``main`` is cancelled and :class:`SimDeadline`
    raised. Afterwards every task still pending is cancelled and (``close``) the loop closed."""
    loop = loop or VirtualTimeLoop()
    old = events._get_running_loop()
    if old is not None:
        raise RuntimeError("ha.experiment.engine.sim.loop.run() cannot be called from a running event loop")

    async def guarded() -> T:
        if until is None:
            return await main
        try:
            return await wait_for(main, max(0.0, until - loop.time()))
        except asyncio.TimeoutError:
            raise SimDeadline(f"not finished at virtual time {until!r}") from None

    # (the loop is not made the thread's current loop: code reaches it as the running loop, and
    # a test runner's own current loop is left alone)
    try:
        return loop.run_until_complete(guarded())
    finally:
        try:
            _cancel_all(loop)
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            if close:
                loop.close()
