"""The live engine's side of the nemesis: what a fault acts on when the parts are real processes.

``LiveTargets`` implements the engines' targets interface (``ha.experiment.engine.base.EngineTargets``,
i.e. ``chaos.targets.Targets`` plus ``kill_node``) over the run's Ray actors and processes:
kill (``ray.kill``), pause / resume (SIGSTOP / SIGCONT to the actor's PID), restart (a new actor
under the same name, running the same chaos schedule, back on its node or another alive one),
node-kill (the raylet of the instance's Ray node and every process under it, by PID: only a node of
this machine, never the head or the driver's node), clock rate, the per-instance chaos port
(watch / API hooks inside the instance), the loopback proxies of partitions, and redis-restart of
the embedded Redis. Every life it ends or starts is written to the history (``lives.jsonl``) with
whether the instance was leading, which is what the failover checker reads.

An instance is reached through the instance seam (``ha.runtime.external.protocol``: ``start``,
``placement``, ``pid``, ``is_leader``, ``set_clock_rate``, the typed ``chaos_*`` door), the same for a
model instance's actor and a vc-scheduler supervisor's; its process from outside (``ray.kill``,
signals to the pid the seam names). The engine is known here by its shape
(:class:`LiveParts`): this module does not import the live engine's, which imports it.

Everything that blocks (Ray calls, actor restarts) runs in a worker thread, so the loop that also
carries the partition proxies keeps going.
"""
from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from typing import Any, Protocol

from ha.experiment.engine.base import EngineBase, EngineTargets, InstanceSlot

__all__ = ["LiveTargets", "RemoteHooks", "EndpointHooks", "skip"]

log = logging.getLogger(__name__)


def skip(reason: str) -> Exception:
    """The nemesis' "skipped, with the reason" (not a failure)."""
    from chaos.targets import Skip
    return Skip(reason)


class RemoteHooks:
    """An instance's chaos hooks seen from the driver (nemesis-driven ``leader`` faults): its typed
    chaos door through Ray; ``api`` picks its API chaos, else its watch hooks."""

    def __init__(self, actor, api: bool):
        self.actor, self.api = actor, api

    @staticmethod
    def _get(ref):
        import ray
        return ray.get(ref, timeout=30)

    def activate(self, sf) -> str:
        got = self._get(self.actor.chaos_activate.remote(sf, watch=not self.api, api=self.api))
        return "activated " + (",".join(k for k, v in got.items() if v) or "nothing")

    def deactivate(self, index: int) -> str:
        self._get(self.actor.chaos_deactivate.remote(index, watch=not self.api, api=self.api))
        return "deactivated"

    def expire(self, kinds=None) -> list[str]:
        got = self._get(self.actor.chaos_expire_now.remote(list(kinds) if kinds else None))
        return [k for k, v in got.items() if v]


class EndpointHooks:
    """An external instance's chaos hooks: its endpoint of the front (``kube_api.endpoint.EndpointChaos``),
    which every watch and API call of the vc-scheduler passes. Blocking calls onto the front's loop."""

    def __init__(self, front, endpoint, api: bool):
        self.front, self.endpoint, self.api = front, endpoint, api

    def activate(self, sf) -> str:
        got = self.front.run(self.endpoint.chaos.activate(sf, watch=not self.api, api=self.api), 30)
        return "activated " + (",".join(k for k, v in (got or {}).items() if v) or "nothing") + " at its endpoint"

    def deactivate(self, index: int) -> str:
        self.front.run(self.endpoint.chaos.deactivate(index, watch=not self.api, api=self.api), 30)
        return "deactivated at its endpoint"

    def expire(self, kinds=None) -> list[str]:
        got = self.front.run(self.endpoint.chaos.expire_now(list(kinds) if kinds else None), 30)
        return [k for k, v in (got or {}).items() if v]


class LiveParts(Protocol):
    """What the live targets use of the live engine (``ha.experiment.engine.live.engine.LiveEngine``,
    named here by its shape, not imported): the base's slots, leader, clock and lives, and its
    live parts."""

    slots: dict[str, InstanceSlot]
    leader: str | None
    redis: Any                          # the embedded Redis (None: not ours)
    external: bool                      # vc-scheduler instances
    front: Any                          # their kube-api front, and each one's endpoint
    endpoints: dict[str, Any]
    proxies: dict[str, Any]             # partition proxies by instance
    ray_address: str | None
    t0_wall: float | None
    driver_node: str | None
    dead_nodes: set[str]

    def now(self) -> float: ...
    def record_life(self, t: float, name: str, event: str, **info: Any) -> None: ...
    def note_started(self, slot: InstanceSlot, event: str) -> None: ...
    def resolve_leader(self) -> str | None: ...
    def replan(self, slot: InstanceSlot) -> None: ...
    def new_instance_actor(self, slot: InstanceSlot) -> Any: ...


class LiveTargets(EngineTargets):
    """The targets of a live engine (``ha.experiment.engine.live.engine.LiveEngine``)."""

    def __init__(self, life: EngineBase):
        self.life: LiveParts = life      # type: ignore[assignment]
        self.engine = life
        if life.redis is not None:
            self.redis_restart = self._redis_restart

    async def _bg(self, fn, *args):
        return await asyncio.to_thread(fn, *args)

    async def leader(self):
        return await self._bg(self.life.resolve_leader)

    async def watch(self, name):
        if self.life.external:
            self.slot(name)
            return EndpointHooks(self.life.front, self.life.endpoints[name], api=False)
        return RemoteHooks(self.slot(name).actor, api=False)

    async def api(self, name):
        if self.life.external:
            self.slot(name)
            return EndpointHooks(self.life.front, self.life.endpoints[name], api=True)
        return RemoteHooks(self.slot(name).actor, api=True)

    def proxy(self, name):
        if self.life.external:
            return None        # a partition of an external instance is not modelled: skipped
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

    async def kill_node(self, name):
        return await self._bg(self.kill_instance_node, name)

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
        if self.life.external:
            # the scheduler's own process first (as a pod's container is killed), by the pid of the
            # last tick: at once, with no Ray round trip (a loaded machine makes those take seconds);
            # then whatever pid its supervisor names now, then the supervisor
            killed = self._sigkill(slot.pid)
            t = self.life.now()
            pid = self._external_pid(slot)
            if pid != killed:
                self._sigkill(pid)
        ray.kill(slot.actor, no_restart=True)
        slot.alive = False
        self.life.record_life(t, name, "kill", was_leader=was_leader, pid=slot.pid)
        return f"killed {name} (pid {slot.pid})"

    def kill_instance_node(self, name: str) -> str:
        """node-kill: the Ray node ``name`` runs on crashes with every instance placed there."""
        from chaos.injectors.process import NotHere, kill_ray_node
        from ha.runtime.placement import ray_nodes
        life = self.life
        slot = self.slot(name)
        node_id = slot.placement.get("node_id")
        if not node_id:
            raise skip(f"{name} runs on no known Ray node")
        short = node_id[:8]
        node = next((n for n in ray_nodes() if n.node_id == node_id), None)
        if node is None or not node.alive or node_id in life.dead_nodes:
            raise skip(f"{name}'s node {short} is not alive")
        if node.head or node_id == life.driver_node:
            raise skip(f"{name} runs on the {'head' if node.head else 'driver'}'s node {short}: "
                       "node-kill refuses it (the run would lose Ray)")
        on_it = [s for s in life.slots.values() if s.alive and s.placement.get("node_id") == node_id]
        leader = life.resolve_leader()
        leading = {s.name: life.leader == s.name or leader == s.name for s in on_it}
        t = life.now()
        try:
            raylet, others = kill_ray_node(node.address, node.port)
        except NotHere as e:
            raise skip(f"{name}'s node {short} ({node.host}): {e}") from None
        life.dead_nodes.add(node_id)
        for s in on_it:
            s.alive = False
            life.record_life(t, s.name, "kill", was_leader=leading[s.name], pid=s.pid,
                             node_id=node_id, host=node.host, cause="node-kill")
        return (f"killed node {short} ({node.host}): raylet pid {raylet} and {len(others)} "
                f"process(es) under it; with it {', '.join(s.name for s in on_it)}")

    @staticmethod
    def _sigkill(pid: int | None) -> int | None:
        if pid:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return pid

    def _external_pid(self, slot) -> int | None:
        """The vc-scheduler's pid now (its supervisor may have restarted it since the last tick)."""
        import ray
        try:
            slot.pid = ray.get(slot.actor.pid.remote(), timeout=10)
        except Exception as e:  # noqa: BLE001 — the supervisor gone: the last pid known
            log.info("pid of %s: %s", slot.name, e)
        return slot.pid

    def pause_instance(self, name: str) -> str:
        slot = self.life.slots[name]
        if self.life.ray_address is not None:
            raise skip("pause stops the instance's process by PID: needs a local Ray")
        if not slot.alive or slot.paused:
            raise skip(f"{name} is not running")
        was_leader = self._leading(name)
        t = self.life.now()
        os.kill(slot.pid, signal.SIGSTOP)
        if self.life.external:
            # the pid of the last tick is stopped at once; one its supervisor started since is too
            first = slot.pid
            if self._external_pid(slot) != first and slot.pid:
                os.kill(slot.pid, signal.SIGSTOP)
                try:
                    os.kill(first, signal.SIGCONT)
                except ProcessLookupError:
                    pass
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
        self.life.replan(slot)
        deadline = time.monotonic() + 20
        old, asked = slot.actor, False
        while True:   # the name is free once the GCS has the old actor dead
            try:
                slot.actor = self.life.new_instance_actor(slot)
                # through the Ray Client a taken name shows only at the actor's first call
                ray.get(slot.actor.placement.remote(), timeout=120)
                break
            except Exception as e:  # noqa: BLE001 — ActorAlreadyExistsError, or the client's wrapper of it
                if "already taken" not in str(e) or time.monotonic() > deadline:
                    raise
                if old is not None and not asked:
                    # an actor that died with its node stays registered until the GCS's health
                    # checks give the node up (tens of seconds): killing the handle frees the name
                    asked = True
                    try:
                        ray.kill(old, no_restart=True)
                    except Exception as err:  # noqa: BLE001 — already gone: the retry finds the name free
                        log.info("freeing the name of %s: %s", name, err)
                time.sleep(0.2)
        ray.get(slot.actor.start.remote(), timeout=120)
        if self.life.t0_wall is not None:   # the new life runs the same chaos schedule
            ray.get(slot.actor.chaos_set_epoch.remote(self.life.t0_wall), timeout=30)
        slot.generation += 1
        slot.alive = True
        self.life.note_started(slot, event="restart")
        return f"restarted {name} as pid {slot.pid}"

    def set_instance_clock_rate(self, name: str, rate: float) -> None:
        import ray
        slot = self.life.slots[name]
        if self.life.external:
            raise skip(f"{name} is a vc-scheduler process: clock-rate acts on the model's clock only")
        if not slot.alive:
            raise skip(f"{name} is not running")
        ray.get(slot.actor.set_clock_rate.remote(rate), timeout=30)
