"""The live engine's side of the nemesis (``chaos.targets.Targets``): what a fault acts on when the parts are real processes.

``LiveTargets`` implements ``chaos.targets.Targets`` over the run's Ray actors and processes:
kill (``ray.kill``), pause / resume (SIGSTOP / SIGCONT to the actor's PID), restart (a new actor
under the same name, running the same chaos schedule), clock rate, the per-instance chaos port
(watch / API hooks inside the instance), the loopback proxies of partitions, and redis-restart of
the embedded Redis. Every life it ends or starts is written to the history (``lives.jsonl``) with
whether the instance was leading, which is what the failover checker reads.

Everything that blocks (Ray calls, actor restarts) runs in a worker thread, so the loop that also
carries the partition proxies keeps going.
"""
from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ha.experiment.lifecycle import LiveLifecycle

__all__ = ["LiveTargets", "RemoteHooks", "skip"]

log = logging.getLogger(__name__)


def skip(reason: str) -> Exception:
    """The nemesis' "skipped, with the reason" (not a failure)."""
    from chaos.targets import Skip
    return Skip(reason)


class RemoteHooks:
    """An instance's chaos hooks seen from the driver (nemesis-driven ``leader`` faults)."""

    def __init__(self, actor, api: bool):
        self.actor, self.api = actor, api

    def _call(self, method, *args, kinds=None, api=False):
        import ray
        return ray.get(self.actor.chaos_call.remote(method, *args, kinds=kinds, api=api), timeout=30)

    def activate(self, sf) -> str:
        got = self._call("activate", sf, kinds=[] if self.api else None, api=self.api)
        return "activated " + (",".join(k for k, v in got.items() if v) or "nothing")

    def deactivate(self, index: int) -> str:
        self._call("deactivate", index, kinds=[] if self.api else None, api=self.api)
        return "deactivated"

    def expire(self, kinds=None) -> list[str]:
        got = self._call("expire_now", kinds=list(kinds) if kinds else None)
        return [k for k, v in got.items() if v]


class LiveTargets:
    """``chaos.targets.Targets`` backed by a :class:`LiveLifecycle`."""

    def __init__(self, life: "LiveLifecycle"):
        self.life = life
        if life.redis is not None:
            self.redis_restart = self._redis_restart

    async def _bg(self, fn, *args):
        return await asyncio.to_thread(fn, *args)

    async def leader(self):
        return await self._bg(self.life.resolve_leader)

    def _slot(self, name):
        slot = self.life.slots[name]
        if not slot.alive or slot.actor is None:
            raise skip(f"{name} is not running")
        return slot

    async def watch(self, name):
        return RemoteHooks(self._slot(name).actor, api=False)

    async def api(self, name):
        return RemoteHooks(self._slot(name).actor, api=True)

    def proxy(self, name):
        p = self.life.proxies.get(name)
        return p.proxy if p is not None else None     # the asyncio proxy: we run on its loop

    async def kill(self, name):
        return await self._bg(self.kill_instance, name)

    async def restart(self, name):
        return await self._bg(self.restart_instance, name)

    async def pause(self, name):
        return await self._bg(self.pause_instance, name)

    async def resume(self, name):
        return await self._bg(self.resume_instance, name)

    async def set_clock_rate(self, name, rate):
        return await self._bg(self.set_instance_clock_rate, name, rate)

    def _redis_restart(self, down_s: float) -> None:
        from chaos.injectors.process import restart_redis
        restart_redis(self.life.redis, down_s)

    # -- the actuators (blocking; run in a worker thread) --------------------------------------

    def _leading(self, name: str) -> bool:
        return self.life.leader == name or self.life.resolve_leader() == name

    def kill_instance(self, name: str) -> str:
        import ray
        slot = self.life.slots[name]
        if not slot.alive:
            raise skip(f"{name} is not running")
        was_leader = self._leading(name)
        t = self.life.now()
        ray.kill(slot.actor, no_restart=True)
        slot.alive = False
        self.life.record_life(t, name, "kill", was_leader=was_leader, pid=slot.pid)
        return f"killed {name} (pid {slot.pid})"

    def pause_instance(self, name: str) -> str:
        slot = self.life.slots[name]
        if self.life.ray_address is not None:
            raise skip("pause stops the instance's process by PID: needs a local Ray")
        if not slot.alive or slot.paused:
            raise skip(f"{name} is not running")
        was_leader = self._leading(name)
        t = self.life.now()
        os.kill(slot.pid, signal.SIGSTOP)
        slot.paused = True
        self.life.record_life(t, name, "pause", was_leader=was_leader, pid=slot.pid)
        return f"SIGSTOP {name} (pid {slot.pid})"

    def resume_instance(self, name: str) -> str:
        slot = self.life.slots[name]
        if slot.paused and slot.pid:
            try:
                os.kill(slot.pid, signal.SIGCONT)
            except ProcessLookupError:
                slot.alive = False
            slot.paused = False
            self.life.record_life(self.life.now(), name, "resume", pid=slot.pid)
        return f"SIGCONT {name} (pid {slot.pid})"

    def restart_instance(self, name: str) -> str:
        import ray
        slot = self.life.slots[name]
        if slot.alive:
            raise skip(f"{name} is running")
        deadline = time.monotonic() + 20
        while True:   # the name is free once Ray has noticed the old actor's death
            try:
                slot.actor = self.life.new_instance_actor(slot)
                break
            except ValueError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        ray.get(slot.actor.start.remote(), timeout=120)
        if self.life.t0_wall is not None:   # the new life runs the same chaos schedule
            ray.get(slot.actor.chaos_call.remote("set_epoch", self.life.t0_wall), timeout=30)
        slot.generation += 1
        slot.alive = True
        self.life.note_started(slot, event="restart")
        return f"restarted {name} as pid {slot.pid}"

    def set_instance_clock_rate(self, name: str, rate: float) -> None:
        import ray
        slot = self.life.slots[name]
        if not slot.alive:
            raise skip(f"{name} is not running")
        ray.get(slot.actor.set_clock_rate.remote(rate), timeout=30)
