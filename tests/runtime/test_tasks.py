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
        assert len(infs) == 12   # reflector + informer per kind
    finally:
        await inst.stop()
    assert all(t.done() for t in owned + infs)
    assert not any(t.done() for t in others)
    for t in others:
        t.cancel()


async def test_cluster_stop_ends_a_world_loop_whose_read_turned_the_cancel_into_a_timeout(redis_url, key_prefix):
    """Python 3.11: a cancel landing while redis.asyncio's blocking read times out can come back as
    a TimeoutError; the world loop counts errors and goes on, so a stop that cancels once and
    awaits would wait forever."""
    from ha.runtime.cluster import ClusterConfig, ClusterSim
    cluster = ClusterSim(ClusterConfig(redis_url=redis_url, prefix=key_prefix))
    await cluster.start()
    mirror = cluster._pods
    real_sync = mirror.sync
    turned: list = []

    async def sync_turning_the_first_cancel(**kw):
        if turned:
            return await real_sync(**kw)
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            turned.append("timeout")
            raise TimeoutError("read timed out") from None
    mirror.sync = sync_turning_the_first_cancel
    await asyncio.sleep(0.3)        # the loop is now inside the patched read
    world = cluster._tasks[0]
    stopping = asyncio.ensure_future(cluster.stop())
    done, _ = await asyncio.wait({stopping}, timeout=15.0)   # not wait_for: its cancel would end it
    if not done:
        world.cancel()
        await asyncio.wait({stopping}, timeout=5.0)
    assert done, "stop() still waiting for the world loop"
    assert turned == ["timeout"] and world.done()
    assert cluster.kubelet.stats.errors == 1      # the world loop did count it and go on
