"""The environment a scheduler instance runs in: everything that differs between the ``live``
engine (real processes, threads, Redis, the wall clock) and a deterministic simulation (one
process, a virtual clock, an in-memory API server) — and nothing else. The instance, its
incarnations, the informers, the election and the scheduler model take it as given; none of them
reads the system clock, starts a thread or opens a Redis connection on its own.

An environment has:

* ``clock``: ``now()`` (wall seconds since the epoch: decision records, the model's time),
  ``monotonic()`` and ``async sleep(s)`` (lease timing, loop periods), ``rate``/``set_rate`` (the
  clock-rate fault), ``real_seconds(s)`` — :class:`ha.runtime.clock.ScaledClock` in live;
* ``async run_blocking(fn, *args)``: blocking work off the event loop (``asyncio.to_thread`` in
  live; an inline call in a simulation);
* ``serial_worker(name)``: a :class:`SerialWorker` running one blocking call at a time in its own
  thread (the session thread: the loop keeps delivering informer events meanwhile) — ``async
  submit(fn, *args)``, ``in_flight()``, ``close()``; inline in a simulation;
* ``polling_worker(name, step, period_s, pending=...)``: a :class:`PollingWorker` calling
  ``step()`` (blocking, returns True when it did work; after a step that did nothing it waits a
  period) until stopped, whenever ``pending()`` (a
  cheap peek) says there is work, else waiting ``period_s`` (the bind
  worker: Volcano's ``wait.Until(processBindTask, 20ms)``) — ``start()``, ``idle()``,
  ``wait_idle_blocking(timeout)``, ``async stop(timeout) -> bool``; an asyncio task stepping in a
  fixed order under the virtual clock in a simulation;
* ``status_writer(name, batch_events=...)``: what runs a session's write-back calls
  (``run(calls)``, ``close()``): 16 threads in live (as Volcano's job updater's workers), the
  PodScheduled conditions of every job sent in one request when ``batch_events``; None in a
  simulation (in order, in the session);
* ``api_clients(server, url, prefix) -> (async client, sync client)``: the API clients under the
  run's :class:`cluster_state.apiserver.ApiServerConfig` (Redis in live; the in-memory store in a
  simulation);
* ``new_id()``: a fresh short id (a lease candidate's identity suffix: uuid4 in live, so a
  restarted process never resumes a term it did not win; seeded in a simulation);
* ``own_process``: whether process-wide settings (the GC) belong to this instance alone.

``LiveEnvironment(clock_rate=1.0, own_process=False)`` is the live one.
"""
from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, Protocol

from ha.runtime.clock import ScaledClock

__all__ = ["Environment", "LiveEnvironment", "SerialWorker", "PollingWorker"]

log = logging.getLogger(__name__)


class SerialWorker(Protocol):
    async def submit(self, fn: Callable, *args, **kw) -> Any: ...
    def in_flight(self) -> "asyncio.Future | None": ...
    def close(self) -> None: ...


class PollingWorker(Protocol):
    batches: int
    errors: int

    def start(self) -> "PollingWorker": ...
    def idle(self) -> bool: ...
    def wait_idle_blocking(self, timeout: float) -> bool: ...
    async def stop(self, timeout: float) -> bool: ...


class Environment(Protocol):
    clock: Any
    own_process: bool

    async def run_blocking(self, fn: Callable, *args) -> Any: ...
    def serial_worker(self, name: str) -> SerialWorker: ...
    def polling_worker(self, name: str, step: Callable[[], bool], period_s: float, *,
                       pending: Callable[[], bool] | None = None) -> PollingWorker: ...
    def api_clients(self, server: Any, url: str, prefix: str) -> tuple[Any, Any]: ...
    def status_writer(self, name: str, *, batch_events: bool = True) -> Any: ...
    def new_id(self) -> str: ...
    def crash(self, reason: str) -> None: ...


class _ThreadSerialWorker:
    """One blocking call at a time in a dedicated thread (``{name}`` is the thread's prefix)."""

    def __init__(self, name: str):
        self._ex: ThreadPoolExecutor | None = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        self._name = name
        self._fut: Future | None = None

    async def submit(self, fn: Callable, *args, **kw) -> Any:
        ex = self._ex
        if ex is None:
            raise RuntimeError(f"{self._name}: worker closed")
        self._fut = ex.submit(fn, *args, **kw)
        return await asyncio.wrap_future(self._fut)

    def in_flight(self):
        fut = self._fut
        return asyncio.wrap_future(fut) if fut is not None and not fut.done() else None

    def close(self) -> None:
        ex, self._ex = self._ex, None
        if ex is not None:
            ex.shutdown(wait=False, cancel_futures=True)


class _ThreadPollingWorker:
    """``step()`` in a loop in its own daemon thread named ``name``; ``period_s`` between idle
    steps. A step that raises is counted and logged: a bad batch must not end the worker."""

    def __init__(self, name: str, step: Callable[[], bool], period_s: float, *,
                 pending: Callable[[], bool] | None = None):
        self.step = step
        self.period_s = period_s
        self._pending = pending or (lambda: True)
        self._stop = threading.Event()
        self._busy = False
        self.batches = 0
        self.errors = 0
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> "_ThreadPollingWorker":
        self.thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            if not self._pending():   # unlocked peek: nothing to do, no step
                self._stop.wait(self.period_s)
                continue
            self._busy = True
            worked = False
            try:
                worked = bool(self.step())
                if worked:
                    self.batches += 1
            except BaseException:  # noqa: BLE001
                self.errors += 1
                log.exception("%s: step failed", self.thread.name)
            finally:
                self._busy = False
            if not worked:   # pending but nothing due yet (a rate-limited retry): no busy loop
                self._stop.wait(self.period_s)

    def idle(self) -> bool:
        return not self._busy and not self._pending()

    def wait_idle_blocking(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while not self.idle() and time.monotonic() < deadline:
            time.sleep(0.005)
        return self.idle()

    async def stop(self, timeout: float) -> bool:
        """Stop after the step in flight; False if it is still stuck in I/O after ``timeout`` (a
        daemon thread: it cannot outlive the process)."""
        self._stop.set()
        if self.thread.is_alive():
            await asyncio.to_thread(self.thread.join, timeout)
        return not self.thread.is_alive()


class _ThreadStatusWriter:
    """Runs a session's write-back calls (the job updater's: ha/scheduler/framework/job_updater.py)
    on ``workers`` threads and returns when all are done; the calls do their own error handling.
    The API waits overlap: a session whose jobs write a thousand pod conditions no longer waits
    for a thousand round trips in a row. 16 workers, as Volcano's job updater runs: with Redis
    and three instances sharing two cores, the session that wrote 1,100 statuses closed in
    540 ms on 16 threads and in 880 ms on 4 (single runs of ``bench scale``); on an idle machine
    4 threads are the quicker (1,000 writes: 190-280 ms in a row, 170-180 ms on 4, 270-280 ms
    on 16), a write there being mostly the interpreter's work rather than a wait.

    With ``batch_events`` the job updater gives the threads only the PodGroup writes and sends
    the pods' conditions in one pipelined request: 16 threads each waiting for a reply had to
    win the interpreter back from the informer taking the writes' echoes, every time (one
    process, a thread spinning beside them: 1,000 single writes took 0.9-1.2 s on 16 threads,
    6 s in a row); the close of ``bench scale``'s burst session went from 290-582 ms to
    224-405 ms (BENCHMARKS.md)."""

    def __init__(self, name: str, workers: int = 16, *, batch_events: bool = True):
        self.workers = workers
        # the job updater may send every job's condition writes in one request (job_updater.py);
        # off where each write must stay a call of its own (API faults draw per call)
        self.batch_events = batch_events
        self._ex: ThreadPoolExecutor | None = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name)

    def run(self, calls: list[Callable[[], None]]) -> None:
        ex = self._ex
        if ex is None or len(calls) < 2:
            for call in calls:
                call()
            return
        for f in [ex.submit(call) for call in calls]:
            f.result()

    def close(self) -> None:
        ex, self._ex = self._ex, None
        if ex is not None:
            ex.shutdown(wait=False, cancel_futures=True)


class LiveEnvironment:
    """Real threads, Redis clients and the wall clock (scaled by the clock-rate fault)."""

    def __init__(self, clock_rate: float = 1.0, *, own_process: bool = False):
        self.clock = ScaledClock(clock_rate)
        self.own_process = own_process

    async def run_blocking(self, fn: Callable, *args) -> Any:
        return await asyncio.to_thread(fn, *args)

    def serial_worker(self, name: str) -> _ThreadSerialWorker:
        return _ThreadSerialWorker(name)

    def polling_worker(self, name: str, step: Callable[[], bool], period_s: float, *,
                       pending: Callable[[], bool] | None = None) -> _ThreadPollingWorker:
        return _ThreadPollingWorker(name, step, period_s, pending=pending)

    def status_writer(self, name: str, *, batch_events: bool = True) -> _ThreadStatusWriter:
        return _ThreadStatusWriter(name, batch_events=batch_events)

    def api_clients(self, server: Any, url: str, prefix: str) -> tuple[Any, Any]:
        return server.async_client(url, prefix), server.sync_client(url, prefix)

    def new_id(self) -> str:
        return uuid.uuid4().hex[:8]

    def crash(self, reason: str) -> None:
        """The process dies at once, SIGKILL-like (chaos crash-point): only in a process of the
        instance's own; in-process (tests, e2e bench) it raises instead of killing the caller."""
        if not self.own_process:
            raise RuntimeError(f"crash-point {reason}: not in a process of its own")
        from chaos.injectors.api import exit_process
        exit_process(reason)
