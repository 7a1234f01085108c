"""``cluster_state.timeouts.wait_for`` delivers a cancellation that ``asyncio.wait_for`` drops."""
from __future__ import annotations

import asyncio
import sys

import pytest

from cluster_state.timeouts import wait_for


async def _cancel_as_it_finishes(waiting):
    """Park a task in ``waiting(fut)``, then finish ``fut`` and cancel the task in the same loop
    iteration: the race in which Python 3.11's wait_for returns the result and drops the cancel."""
    fut = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(waiting(fut))
    await asyncio.sleep(0)
    fut.set_result("done")
    task.cancel()
    try:
        return await task
    except asyncio.CancelledError:
        return "cancelled"


async def test_the_race_drops_the_cancel_in_asyncio_wait_for_on_this_python():
    got = await _cancel_as_it_finishes(lambda fut: asyncio.wait_for(fut, 10))
    # the reason for the wrapper; CPython 3.12 fixed it
    assert got == ("done" if sys.version_info < (3, 12) else "cancelled")


async def test_the_race_delivers_the_cancel():
    assert await _cancel_as_it_finishes(lambda fut: wait_for(fut, 10)) == "cancelled"


async def test_a_loop_around_it_stops_when_cancelled_in_the_race():
    """A renew loop (the shape of a lease candidate's) ends on the cancel instead of running on."""
    loop = asyncio.get_running_loop()
    rounds = 0
    finished: list[asyncio.Future] = []

    async def renew_loop():
        nonlocal rounds
        while True:
            fut = loop.create_future()
            finished.append(fut)
            await wait_for(fut, 10)
            rounds += 1

    task = asyncio.create_task(renew_loop())
    await asyncio.sleep(0)
    finished[-1].set_result(True)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)
    assert rounds == 0


async def test_result_timeout_and_ordinary_cancel_are_unchanged():
    loop = asyncio.get_running_loop()
    fut = loop.create_future()
    loop.call_soon(fut.set_result, 7)
    assert await wait_for(fut, 1) == 7
    with pytest.raises(asyncio.TimeoutError):
        await wait_for(loop.create_future(), 0.01)
    blocked = asyncio.create_task(wait_for(loop.create_future(), 10))
    await asyncio.sleep(0)
    blocked.cancel()
    with pytest.raises(asyncio.CancelledError):
        await blocked


async def test_a_cancel_handled_before_the_wait_does_not_cancel_it():
    """A task that caught an earlier cancel (its cancelling() count stays raised) still gets
    its result: only a cancel requested during the wait is re-raised."""
    loop = asyncio.get_running_loop()

    async def body():
        try:
            await loop.create_future()
        except asyncio.CancelledError:
            pass                        # handled, without uncancel()
        fut = loop.create_future()
        loop.call_soon(fut.set_result, "after")
        return await wait_for(fut, 1)

    task = asyncio.create_task(body())
    await asyncio.sleep(0)
    task.cancel()
    assert await task == "after"
