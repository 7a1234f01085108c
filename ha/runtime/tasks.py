"""Owned asyncio tasks: a group keeps the tasks it started and ends exactly those — never tasks
found by their name.

``OwnedTasks(owner)``: ``spawn(coro, name)`` starts one; ``await close(timeout)`` cancels every one
and waits, cancelling again each second the ones still running (on Python 3.11 a cancel that lands
while redis.asyncio's blocking read is timing out can be swallowed: observed, a task that never
ended), and returns those still running after ``timeout`` (left behind, logged by the caller).
:func:`cancel_and_wait` does the same for tasks someone else started (an informer's, via
``Informer.tasks``)."""
from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable, Iterable

__all__ = ["OwnedTasks", "cancel_and_wait", "stop_with_recancel"]

log = logging.getLogger(__name__)


async def cancel_and_wait(tasks: Iterable[asyncio.Task], timeout: float, *, what: str = "task") -> list[asyncio.Task]:
    """Cancel ``tasks`` and wait for them, re-cancelling stragglers every second; the ones still
    running after ``timeout``."""
    me = asyncio.current_task()
    pending = {t for t in tasks if t is not me and not t.done()}
    for t in pending:
        t.cancel()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while pending:
        left = deadline - loop.time()
        if left <= 0:
            break
        done, pending = await asyncio.wait(pending, timeout=min(1.0, left))
        for t in done:
            if not t.cancelled() and t.exception() is not None:
                log.error("%s %s ended with an error", what, t.get_name(), exc_info=t.exception())
        for t in pending:
            t.cancel()
    return sorted(pending, key=lambda t: t.get_name())


async def stop_with_recancel(stop: Callable[[], Awaitable], tasks: Callable[[], Iterable[asyncio.Task]],
                             timeout: float) -> bool:
    """``await stop()`` (e.g. ``Informer.stop``), re-cancelling ``tasks()`` (captured before the
    call: the owner forgets them once it starts stopping) every second while it waits; False if it
    has not returned after ``timeout``."""
    owned = list(tasks())
    stopping = asyncio.ensure_future(stop())
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        done, _ = await asyncio.wait({stopping}, timeout=max(0.0, min(1.0, deadline - loop.time())))
        if done:
            stopping.result()
            return True
        if loop.time() >= deadline:
            stopping.cancel()
            return False
        for t in owned:
            if not t.done():
                t.cancel()


class OwnedTasks:
    def __init__(self, owner: str):
        self.owner = owner
        self._tasks: list[asyncio.Task] = []

    def spawn(self, coro, name: str) -> asyncio.Task:
        t = asyncio.get_running_loop().create_task(coro, name=f"{self.owner}-{name}")
        self._tasks.append(t)
        self._tasks = [x for x in self._tasks if not x.done() or x is t]
        return t

    def running(self) -> list[asyncio.Task]:
        return [t for t in self._tasks if not t.done()]

    async def close(self, timeout: float) -> list[asyncio.Task]:
        tasks, self._tasks = self._tasks, []
        return await cancel_and_wait(tasks, timeout, what=f"{self.owner} task")
