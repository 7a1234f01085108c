"""``wait_for``: :func:`asyncio.wait_for` that never swallows its caller's cancellation.

On Python 3.11, when the awaited finishes and the caller is cancelled in the same loop iteration,
``asyncio.wait_for`` returns the result and drops the cancellation (a CPython bug, fixed in
3.12 by rebuilding it on ``asyncio.timeout``). A loop around it then never ends: a lease candidate
cancelled as its renewal completed kept renewing, and the task that cancelled it waited forever;
a delivery queue or a reflector being stopped can hang the same way.

This wrapper calls ``asyncio.wait_for`` unchanged, so a run's scheduling (and a sim history) is
the same as before whenever no cancellation is lost, and raises :class:`asyncio.CancelledError`
when the caller's task had a cancellation requested during the wait that did not reach it.
"""
from __future__ import annotations

import asyncio
from typing import Awaitable, TypeVar

__all__ = ["wait_for"]

T = TypeVar("T")


async def wait_for(aw: Awaitable[T], timeout: float | None) -> T:
    task = asyncio.current_task()
    before = task.cancelling() if task is not None else 0
    result = await asyncio.wait_for(aw, timeout)
    if task is not None and task.cancelling() > before:
        # the cancel was requested while we waited and wait_for dropped it: deliver it now
        raise asyncio.CancelledError()
    return result
