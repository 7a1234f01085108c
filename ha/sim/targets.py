"""The sim engine's side of the nemesis: ``chaos.targets.Targets`` over the instances of one
process under the virtual clock (``ha.sim.engine.SimEngine``).

* kill: the instance's environment dies at once (every API call of that life fails, as a
  SIGKILLed process sends nothing more; its lease is not released) and its tasks are cancelled;
* restart: a new instance object (a new process life, ``generation`` + 1) with a fresh
  environment, started and given the run's chaos epoch;
* pause / resume: the environment's gate closes (clock sleeps and API requests wait, SIGSTOP-like;
  its clocks run on) and opens again;
* partition: the instance's :class:`ha.sim.environment.Link` is the ``Proxy``; while cut, its API
  clients raise ``redis.exceptions.ConnectionError`` (the cut outlives a restart, as the proxy
  does);
* redis-restart: the in-memory API server is down for ``for`` (every client fails), its state kept;
* watch / API hooks: the instance's own chaos port (``ha.runtime.chaos_port``), called directly;
* clock-rate: the instance's ``ScaledClock`` over the sim clock.
Every life it ends or starts is written to the history, as the live targets do.
"""
from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from chaos.targets import Skip

if TYPE_CHECKING:
    from ha.sim.engine import SimEngine

__all__ = ["SimTargets", "LocalHooks"]


class LocalHooks:
    """An instance's chaos port as the nemesis' ``WatchHooks`` / ``ApiHooks`` (``leader`` faults)."""

    def __init__(self, inst, api: bool):
        self.inst, self.api = inst, api

    async def activate(self, sf) -> str:
        got = await self.inst.chaos_call("activate", sf, kinds=[] if self.api else None, api=self.api)
        return "activated " + (",".join(k for k, v in got.items() if v) or "nothing")

    async def deactivate(self, index: int) -> str:
        await self.inst.chaos_call("deactivate", index, kinds=[] if self.api else None, api=self.api)
        return "deactivated"

    async def expire(self, kinds=None) -> list[str]:
        got = await self.inst.chaos_call("expire_now", kinds=list(kinds) if kinds else None, api=False)
        return [k for k, v in got.items() if v]


class SimTargets:
    def __init__(self, engine: "SimEngine"):
        self.engine = engine

    def _slot(self, name: str):
        slot = self.engine.slots.get(name)
        if slot is None or not slot.alive or slot.actor is None:
            raise Skip(f"{name} is not running")
        return slot

    async def leader(self):
        return self.engine.resolve_leader()

    async def watch(self, name):
        return LocalHooks(self._slot(name).actor, api=False)

    async def api(self, name):
        return LocalHooks(self._slot(name).actor, api=True)

    def proxy(self, name):
        return self.engine.links.get(name)

    async def kill(self, name):
        e = self.engine
        slot = self._slot(name)
        was_leader = e.resolve_leader() == name
        e.stop_instance(slot, crash=True)
        e.record_life(e.now(), name, "kill", was_leader=was_leader, pid=slot.pid)
        return f"killed {name} (pid {slot.pid})"

    async def kill_node(self, name):
        """The sim places each instance on a node of its own (one process per life), so losing the
        node is losing that instance: a kill, recorded as one."""
        return (await self.kill(name)) + " with its node"

    async def restart(self, name):
        e = self.engine
        slot = e.slots[name]
        if slot.alive:
            raise Skip(f"{name} is running")
        slot.generation += 1
        await e.start_instance(slot)
        e.note_started(slot, event="restart")
        return f"restarted {name} as pid {slot.pid}"

    async def pause(self, name):
        e = self.engine
        slot = self._slot(name)
        if slot.paused:
            raise Skip(f"{name} is paused already")
        was_leader = e.resolve_leader() == name
        slot.actor.env.pause()
        slot.paused = True
        e.record_life(e.now(), name, "pause", was_leader=was_leader, pid=slot.pid)
        return f"paused {name} (pid {slot.pid})"

    async def resume(self, name):
        e = self.engine
        slot = e.slots[name]
        if slot.paused and slot.actor is not None:
            slot.actor.env.resume()
            slot.paused = False
            e.record_life(e.now(), name, "resume", pid=slot.pid)
        return f"resumed {name} (pid {slot.pid})"

    async def set_clock_rate(self, name, rate):
        slot = self._slot(name)
        await slot.actor.set_clock_rate(rate)
        return f"{name} clock at {rate:g}x"

    async def redis_restart(self, down_s: float) -> None:
        power = self.engine.power
        power.up = False
        try:
            await asyncio.sleep(max(0.0, down_s))
        finally:
            power.up = True
