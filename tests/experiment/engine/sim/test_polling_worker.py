"""The sim's polling worker (ha.experiment.engine.sim.environment._TaskPollingWorker) takes the same turns as the
asyncio task it replaced: run beside other tasks whose timers tie with its own, paused and
resumed, and stopped in each of its states (before its first step, asleep, with its timer fired
but not yet handled, with its wake-up ready), a run traces callback for callback what the task
traces — the order of everyone's callbacks, the virtual times, the steps, when stop() returns.
The reference is the task, written out here as it was."""
from __future__ import annotations

import asyncio
import contextvars

import pytest

from ha.experiment.engine.sim.environment import _TaskPollingWorker
from ha.experiment.engine.sim.loop import PROCESS, VirtualTimeLoop


class _Debt:
    """What the worker asks of its environment: the debt of the synchronous calls of a step."""

    def __init__(self) -> None:
        self.debt = 0.0

    def take_debt(self) -> float:
        d, self.debt = self.debt, 0.0
        return d


class _TaskWorker:
    """The worker as an asyncio task (the reference)."""

    def __init__(self, env, name, step, period_s, pending):
        self.env, self.name, self.step, self.period_s = env, name, step, period_s
        self._pending = pending
        self._task = None
        self.batches = 0

    def start(self):
        self._task = asyncio.get_running_loop().create_task(self._run(), name=self.name)
        return self

    async def _run(self):
        env = self.env
        while True:
            if not self._pending():
                await asyncio.sleep(self.period_s)
                continue
            env.take_debt()
            if self.step():
                self.batches += 1
            d = env.take_debt()
            await asyncio.sleep(d if d > 0 else self.period_s)

    async def stop(self, timeout):
        t, self._task = self._task, None
        if t is not None and not t.done():
            t.cancel()
            try:
                await t
            except asyncio.CancelledError:
                pass
        return True


def _trace(kind: str, stop_at: float | None, pause: tuple | None) -> list:
    loop = VirtualTimeLoop()
    out: list = []
    env = _Debt()
    queue: list[int] = []

    def step() -> bool:
        out.append(("step", loop.time(), len(queue)))
        if queue:
            queue.pop()
            env.debt += 0.0035          # the step's API calls: the next turn is this much later
            return True
        return False

    cls = _TaskPollingWorker if kind == "sim" else _TaskWorker
    worker = cls(env, "w", step, 0.005, lambda: bool(queue))

    async def probe(name: str, period: float, n: int, feed: int) -> None:
        for i in range(n):
            await asyncio.sleep(period)
            out.append((name, loop.time(), i))
            if feed and i % feed == 0:
                queue.append(i)
                loop.call_soon(out.append, (name + "-soon", loop.time(), i))

    async def stopper() -> None:
        await asyncio.sleep(stop_at)
        out.append(("stop", loop.time()))
        await worker.stop(1.0)
        out.append(("stopped", loop.time()))

    async def pauser() -> None:
        await asyncio.sleep(pause[0])
        loop.pause_process("p")
        out.append(("paused", loop.time()))
        await asyncio.sleep(pause[1])
        loop.resume_process("p")
        out.append(("resumed", loop.time()))
        if len(pause) > 2:
            # stop at once: its first step runs just after the held callbacks, a held timer's
            # callback among them (the worker's timer fired, its wake-up not yet run)
            loop.create_task(stopper_now())

    async def stopper_now() -> None:
        out.append(("stop", loop.time()))
        await worker.stop(1.0)
        out.append(("stopped", loop.time()))

    async def main() -> None:
        ctx = contextvars.copy_context()
        ctx.run(PROCESS.set, "p")
        loop.call_soon(worker.start, context=ctx)     # its callbacks belong to process "p"
        tasks = [loop.create_task(probe("a", 0.005, 40, 7)),      # ties with the worker's grid
                 loop.create_task(probe("b", 0.0025, 80, 0)),
                 loop.create_task(probe("c", 0.0035, 60, 5))]
        if stop_at is not None:
            tasks.append(loop.create_task(stopper()))
        if pause is not None:
            tasks.append(loop.create_task(pauser()))
        await asyncio.gather(*tasks)
        out.append(("end", loop.time(), worker.batches))
        if stop_at is None and (pause is None or len(pause) == 2):
            await worker.stop(1.0)

    loop.run_until_complete(main())
    loop.close()
    return out


@pytest.mark.parametrize("stop_at", [None, 0.0, 0.005, 0.0125, 0.0175, 0.02, 0.0385, 0.1])
@pytest.mark.parametrize("pause", [None, (0.0125, 0.02), (0.015, 0.0035), (0.0125, 0.0225, "stop")])
def test_the_worker_takes_the_tasks_turns(stop_at, pause):
    ref = _trace("task", stop_at, pause)
    got = _trace("sim", stop_at, pause)
    if (stop_at is None or stop_at > 0.05) and (pause is None or len(pause) == 2):   # it worked
        assert sum(1 for e in ref if e[0] == "step") > 3
    assert got == ref
