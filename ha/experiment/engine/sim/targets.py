"""The sim engine's side of the nemesis: the engines' targets interface
(``ha.experiment.engine.base.EngineTargets``, i.e. ``chaos.targets.Targets`` plus ``kill_node``) over
the instances of one process under the virtual clock (``ha.experiment.engine.sim.engine.SimEngine``).

* kill: the life's process dies at once (its :class:`ha.experiment.engine.sim.environment.SimEnvironment`,
  ``InstanceSlot.process``: every API call of that life fails, as a SIGKILLed process sends
  nothing more; its lease is not released) and its tasks are cancelled;
* restart: a new instance object (a new process life, ``generation`` + 1) with a fresh
  environment, started and given the run's chaos epoch;
* pause / resume: the process's gate closes (clock sleeps and API requests wait, SIGSTOP-like;
  its clocks run on) and opens again;
* partition: the instance's :class:`ha.experiment.engine.sim.environment.Link` is the ``Proxy``;
  while cut, its API clients raise ``redis.exceptions.ConnectionError`` (the cut outlives a
  restart, as the proxy does);
* redis-restart: the in-memory API server is down for ``for`` (every client fails), its state kept;
* watch / API hooks: the instance's typed chaos door (``chaos_activate`` … of the instance seam,
  ``ha.runtime.external.protocol``), called directly;
* clock-rate: the seam's ``set_clock_rate`` (the instance's ``ScaledClock`` over the sim clock);
* leader: the seam's ``is_leader`` of each running instance, by name.
An instance is reached only through the seam, its process only through the engine's handle on it.
Every life it ends or starts is written to the history, as the live targets do. The engine is
known here by its shape (:class:`SimParts`): this module does not import the sim engine's, which
imports it.
"""
from __future__ import annotations

import asyncio
from typing import Any, Protocol

from chaos.targets import Skip
from ha.experiment.engine.base import EngineBase, EngineTargets, InstanceSlot

__all__ = ["SimTargets", "LocalHooks"]


class LocalHooks:
    """An instance's typed chaos door as the nemesis' ``WatchHooks`` / ``ApiHooks`` (``leader``
    faults); ``api`` picks its API chaos, else its watch hooks."""

    def __init__(self, inst, api: bool):
        self.inst, self.api = inst, api

    async def activate(self, sf) -> str:
        got = await self.inst.chaos_activate(sf, watch=not self.api, api=self.api)
        return "activated " + (",".join(k for k, v in got.items() if v) or "nothing")

    async def deactivate(self, index: int) -> str:
        await self.inst.chaos_deactivate(index, watch=not self.api, api=self.api)
        return "deactivated"

    async def expire(self, kinds=None) -> list[str]:
        got = await self.inst.chaos_expire_now(list(kinds) if kinds else None)
        return [k for k, v in got.items() if v]


class SimParts(Protocol):
    """What the sim targets use of the sim engine (``ha.experiment.engine.sim.engine.SimEngine``,
    named here by its shape, not imported): the base's slots, clock and lives, each instance's
    link (the partition's proxy), the API server's power, and starting and stopping a life."""

    slots: dict[str, InstanceSlot]
    links: dict[str, Any]
    power: Any

    def now(self) -> float: ...
    def record_life(self, t: float, name: str, event: str, **info: Any) -> None: ...
    def note_started(self, slot: InstanceSlot, event: str) -> None: ...
    async def start_instance(self, slot: InstanceSlot, *, set_epoch: bool = True) -> None: ...
    def stop_instance(self, slot: InstanceSlot, *, crash: bool) -> None: ...


class SimTargets(EngineTargets):
    """The targets of a sim engine."""

    def __init__(self, engine: EngineBase):
        self.engine: SimParts = engine      # type: ignore[assignment]

    async def leader(self):
        for name in sorted(self.engine.slots):
            s = self.engine.slots[name]
            if s.alive and not s.paused and s.actor is not None and await s.actor.is_leader():
                return name
        return None

    async def watch(self, name):
        return LocalHooks(self.slot(name).actor, api=False)

    async def api(self, name):
        return LocalHooks(self.slot(name).actor, api=True)

    def proxy(self, name):
        return self.engine.links.get(name)

    async def kill(self, name):
        e = self.engine
        slot = self.slot(name)
        was_leader = await self.leader() == name
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
        slot = self.slot(name)
        if slot.paused:
            raise Skip(f"{name} is paused already")
        was_leader = await self.leader() == name
        slot.process.pause()
        slot.paused = True
        e.record_life(e.now(), name, "pause", was_leader=was_leader, pid=slot.pid)
        return f"paused {name} (pid {slot.pid})"

    async def resume(self, name):
        e = self.engine
        slot = e.slots[name]
        if slot.paused and slot.actor is not None:
            slot.process.resume()
            slot.paused = False
            e.record_life(e.now(), name, "resume", pid=slot.pid)
        return f"resumed {name} (pid {slot.pid})"

    async def set_clock_rate(self, name, rate):
        slot = self.slot(name)
        await slot.actor.set_clock_rate(rate)
        return f"{name} clock at {rate:g}x"

    async def redis_restart(self, down_s: float) -> None:
        power = self.engine.power
        power.up = False
        try:
            await asyncio.sleep(max(0.0, down_s))
        finally:
            power.up = True
