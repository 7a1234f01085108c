"""What the faults act on: the :class:`Targets` a driver (the experiment runner, a test) gives the
nemesis. Every fault of :mod:`chaos.faults` reaches the world only through these methods, named
by instance (``scheduler-1``); ``leader`` is resolved through :meth:`Targets.leader` when a fault
starts, so a fault aimed at the leader and one aimed at a named instance take the same path.

Contract for an implementation (the engines' ``LiveTargets`` and ``SimTargets`` implement it
through ``ha.experiment.engine.base.EngineTargets``):

* The async methods may also be plain functions (test doubles): the nemesis awaits what is
  awaitable. Blocking work (Ray calls, restarts) belongs in a worker thread, since the nemesis'
  loop also carries the partition proxies.
* A method the object does not have makes the faults that need it ``skipped`` (the record names
  the missing method), never a crash. ``redis_restart`` is present only when the testbed owns Redis;
  ``kill_node`` only where instances run on machines a driver can reach (the live engine).
* Raise :class:`Skip` to record an action as ``skipped`` with a reason (e.g. the instance is not
  running); any other exception records it as ``failed`` and the run goes on.
* A method's ``str`` result (e.g. ``"killed scheduler-1 (pid 4242)"``) becomes the record's detail.
"""
from __future__ import annotations

from typing import Iterable, Optional, Protocol, Union, runtime_checkable

__all__ = ["Targets", "RedisRestartTargets", "NodeTargets", "WatchHooks", "ApiHooks", "Proxy", "Skip"]


class Skip(Exception):
    """Raised by a fault or a target method: the action is recorded as ``skipped`` (the message
    is the reason)."""


@runtime_checkable
class WatchHooks(Protocol):
    """One instance's watch hooks (:class:`chaos.injectors.watch.WatchChaos`, or a remote handle
    to the hooks inside the instance's process)."""

    def activate(self, sf) -> Union[str, list[str], bool]:
        """Turn the scheduled fault ``sf`` (a :class:`chaos.schedule.ScheduledFault`) on now, for
        its ``for``. A str is recorded as the detail (e.g. ``"activated Pod,Node"``)."""

    def deactivate(self, index: int) -> object:
        """End the fault with this ``chaos:`` index now (a stall releases what it holds)."""

    def expire(self, kinds: Optional[Iterable[str]] = None) -> list[str]:
        """watch-expire: make the informers of ``kinds`` (default all) relist as after 410 Gone;
        returns the kinds that did."""


@runtime_checkable
class ApiHooks(Protocol):
    """One instance's API chaos (:class:`chaos.injectors.api.ApiChaos`, or a remote handle)."""

    def activate(self, sf) -> Union[str, bool]:
        """Turn api-latency / api-conflict ``sf`` on now, for its ``for``."""

    def deactivate(self, index: int) -> object:
        """End the fault with this index now."""


@runtime_checkable
class Proxy(Protocol):
    """The TCP proxy between one instance and Redis (:class:`chaos.injectors.proxy.RedisProxy`);
    the nemesis calls it on its own loop."""

    def partition(self) -> int:
        """Cut every connection and refuse new ones; returns how many were cut."""

    def heal(self) -> None:
        """Accept connections again."""


@runtime_checkable
class Targets(Protocol):
    """The instances of a run, as the faults see them (see the module doc)."""

    async def leader(self) -> Optional[str]:
        """The name of the instance that leads now, None when none does."""

    async def watch(self, name: str) -> Optional[WatchHooks]:
        """That instance's watch hooks (None: it has none)."""

    async def api(self, name: str) -> Optional[ApiHooks]:
        """That instance's API chaos (None: it has none)."""

    def proxy(self, name: str) -> Optional[Proxy]:
        """The asyncio proxy in front of that instance's Redis link (None: it has none)."""

    async def kill(self, name: str) -> Optional[str]:
        """Crash the instance (SIGKILL: its lease is not released)."""

    async def restart(self, name: str) -> Optional[str]:
        """Start a new incarnation of a killed instance (same name, same chaos schedule)."""

    async def pause(self, name: str) -> Optional[str]:
        """Stop the instance's process (SIGSTOP)."""

    async def resume(self, name: str) -> Optional[str]:
        """Continue a paused instance (SIGCONT)."""

    async def set_clock_rate(self, name: str, rate: float) -> Optional[str]:
        """Run the instance's lease clock at ``rate`` × real time (1.0 restores it)."""


@runtime_checkable
class RedisRestartTargets(Protocol):
    """The optional part of :class:`Targets`: only when the testbed owns Redis."""

    def redis_restart(self, down_s: float) -> None:
        """Stop Redis, keep it down ``down_s`` seconds, start it again with its data (may block:
        the nemesis runs a plain function in a worker thread)."""


@runtime_checkable
class NodeTargets(Protocol):
    """The optional part of :class:`Targets` for ``node-kill``: only where the instances run on
    nodes (Ray's) the driver may take down."""

    async def kill_node(self, name: str) -> Optional[str]:
        """Crash the whole node the instance runs on, with every instance placed there (each
        recorded as killed); :class:`Skip` for a node it must not or cannot take down (the head,
        the driver's, one on another machine)."""
