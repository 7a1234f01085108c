"""The environment is injected: an instance run under another environment — blocking work inline
on the event loop, the bind worker an asyncio task, a clock whose wall time is fixed, ids from a
counter — schedules exactly as live does, starts no thread of its own, and stamps its records
with the environment's time, not the system's."""
from __future__ import annotations

import asyncio
import threading

from ha.runtime.clock import ScaledClock
from ha.runtime.instance import SchedulerInstance
from tests.runtime.instance_helpers import bound_nodes, create_jobs, instance_config, wait_for

FIXED_NOW = 1_234_567.5


class _InlineSerial:
    async def submit(self, fn, *args, **kw):
        return fn(*args, **kw)

    def in_flight(self):
        return None

    def close(self):
        pass


class _TaskPolling:
    """step() on the event loop, in an asyncio task, period_s apart when idle."""

    def __init__(self, step, period_s, pending, clock):
        self.step, self.period_s, self.pending, self.clock = step, period_s, pending, clock
        self.batches = self.errors = 0
        self._task = None
        self._busy = False

    def start(self):
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    async def _run(self):
        while True:
            if self.pending():
                self._busy = True
                try:
                    if self.step():
                        self.batches += 1
                except Exception:  # noqa: BLE001
                    self.errors += 1
                finally:
                    self._busy = False
            await self.clock.sleep(self.period_s)

    def idle(self):
        return not self._busy and not self.pending()

    def wait_idle_blocking(self, timeout):
        return self.idle()   # inline: nothing can be in flight while the caller runs

    async def stop(self, timeout):
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait({self._task}, timeout=timeout)
        return True


class InlineEnvironment:
    own_process = False

    def __init__(self):
        self.clock = ScaledClock(1.0, wall=lambda: FIXED_NOW)
        self.ids = 0

    async def run_blocking(self, fn, *args):
        return fn(*args)

    def serial_worker(self, name):
        return _InlineSerial()

    def polling_worker(self, name, step, period_s, *, pending=None):
        return _TaskPolling(step, period_s, pending or (lambda: True), self.clock)

    def api_clients(self, server, url, prefix):
        return server.async_client(url, prefix), server.sync_client(url, prefix)

    def new_id(self):
        self.ids += 1
        return f"{self.ids:08x}"


async def test_an_inline_environment_runs_the_same_instance_without_threads(api, redis_url, key_prefix):
    names = create_jobs(api, n_jobs=2, size=2)
    before = {t.name for t in threading.enumerate()}
    env = InlineEnvironment()
    inst = SchedulerInstance(instance_config("scheduler-1", redis_url, key_prefix, mode="leader-elected",
                                             period_s=0.2), env=env)
    await inst.start()
    try:
        assert await wait_for(inst.is_leader_now)
        assert inst.elector.identity == "scheduler-1_00000002"    # ids: the environment's
        assert await wait_for(lambda: all(bound_nodes(api).values()))
        decs = await inst.decisions(0)
        binds = [d for d in decs if d["op"] == "bind" and d["ok"]]
        assert sorted(d["pod"] for d in binds) == sorted(f"default/{n}" for n in names)
        assert {d["t"] for d in decs} == {FIXED_NOW}               # the environment's time
        st = await inst.stats()
        assert st["became_leader_at"] == FIXED_NOW and st["started_at"] == FIXED_NOW
        assert (await inst.digest())["t"] == FIXED_NOW
        assert inst.cache.clock is env.clock                        # the model's time too
        started = {t.name for t in threading.enumerate()} - before
        assert not any(n.startswith("scheduler-1") for n in started), started
    finally:
        await inst.stop()


def test_the_live_status_writer_runs_a_sessions_calls_in_parallel_and_returns_when_all_are_done():
    """Four calls that each wait for the other three finish only when they run at once; ``run``
    returns after the last, and the writer's threads end with ``close``."""
    import threading
    from ha.runtime.environment import LiveEnvironment
    w = LiveEnvironment().status_writer("test-status")
    barrier = threading.Barrier(4, timeout=10)
    done: list[int] = []

    def call(i):
        def run():
            barrier.wait()          # a serial writer would wait here for ever (BrokenBarrierError)
            done.append(i)
        return run
    try:
        w.run([call(i) for i in range(4)])
        assert sorted(done) == [0, 1, 2, 3]
        w.run([lambda: done.append(9)])            # a single call runs in the caller's thread
        assert done[-1] == 9
    finally:
        w.close()
    w.run([lambda: done.append(10), lambda: done.append(11)])   # closed: in order, here
    assert done[-2:] == [10, 11]
