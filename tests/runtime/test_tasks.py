"""Owned tasks: a group ends exactly the tasks it started, cancelling again a task that swallowed
a cancel; an instance's stop() leaves tasks it did not start alone, whatever their names."""
from __future__ import annotations

import asyncio

from ha.runtime.instance import SchedulerInstance
from ha.runtime.tasks import OwnedTasks, stop_with_recancel
from tests.runtime.instance_helpers import instance_config


async def _swallows_one_cancel(log: list):
    """Like a redis.asyncio read that swallows the first cancel landing in it."""
    try:
        await asyncio.sleep(3600)
    except asyncio.CancelledError:
        log.append("swallowed")
    await asyncio.sleep(3600)


async def test_close_cancels_again_what_swallowed_a_cancel_and_only_its_own():
    log: list = []
    group = OwnedTasks("g")
    stubborn = group.spawn(_swallows_one_cancel(log), "stubborn")
    plain = group.spawn(asyncio.sleep(3600), "plain")
    bystander = asyncio.get_running_loop().create_task(asyncio.sleep(3600), name="g-bystander")
    await asyncio.sleep(0)
    assert stubborn.get_name() == "g-stubborn"
    left = await group.close(5.0)
    assert left == [] and stubborn.cancelled() and plain.cancelled() and log == ["swallowed"]
    assert not bystander.done()             # same name prefix, not the group's: untouched
    bystander.cancel()


async def test_close_reports_what_is_still_running_after_the_timeout():
    mortal = asyncio.Event()

    async def immortal():      # swallows every cancel until the test lets it go
        while not mortal.is_set():
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                pass
    group = OwnedTasks("g")
    t = group.spawn(immortal(), "immortal")
    await asyncio.sleep(0)
    assert await group.close(0.3) == [t] and not t.done()
    mortal.set()          # the test cleans up what the group had to leave behind
    t.cancel()
    await asyncio.wait({t}, timeout=5)
    assert t.done()


async def test_stop_with_recancel_cancels_the_owners_tasks_while_it_waits():
    log: list = []
    tasks = [asyncio.get_running_loop().create_task(_swallows_one_cancel(log))]

    async def stop():        # an owner whose stop waits for its task (Informer.stop's shape)
        tasks[0].cancel()
        try:
            await tasks[0]
        except asyncio.CancelledError:
            pass
    assert await stop_with_recancel(stop, lambda: tasks, 10.0)
    assert log == ["swallowed"] and tasks[0].cancelled()


async def test_instance_stop_leaves_tasks_of_the_same_name_alone(api, redis_url, key_prefix):
    inst = SchedulerInstance(instance_config("scheduler-1", redis_url, key_prefix, mode="active-active"))
    loop = asyncio.get_running_loop()
    # names the old stop() matched by prefix: another instance's, an unrelated informer's
    others = [loop.create_task(asyncio.sleep(3600), name=n)
              for n in ("scheduler-1-sessions", "reflector-scheduler-1/Pod", "informer-scheduler-1/Node")]
    await inst.start()
    try:
        assert await inst.wait_synced(60)
        owned = inst.inc.tasks.running()
        assert {t.get_name() for t in owned} == {"scheduler-1#0-sessions", "scheduler-1#0-log-flush"}
        infs = [t for i in inst.informers.values() for t in i.tasks()]
        assert len(infs) == 10
    finally:
        await inst.stop()
    assert all(t.done() for t in owned + infs)
    assert not any(t.done() for t in others)
    for t in others:
        t.cancel()
