"""The instance seam: what the driver, the targets and the recorder may ask of "a scheduler instance".

A model instance (``ha.runtime.instance.SchedulerInstance`` and its Ray actor) fulfils it, and so
does an external scheduler process's supervisor (``ha.runtime.external.supervisor.ExternalScheduler``
and its actor). Through Ray every method is called as ``actor.<method>.remote(...)``; in process they
are coroutines. The engine's other powers act from outside, on what ``placement()`` / ``pid()`` name:
kill (``ray.kill`` of the actor: an external process dies with it), pause (SIGSTOP / SIGCONT to
``pid()``: the scheduler's own process), node-kill (the Ray node and every process under it),
restart (a new actor of the same name, as a Deployment would start a new pod). In the sim engine the
instance object is in process and its process is the engine's (``SimEnvironment``: kill, pause).

The chaos that acts inside an instance has one typed door: ``chaos_set_epoch(t0_wall)``,
``chaos_activate(sf, watch, api, kinds)``, ``chaos_deactivate(index, watch, api, kinds)``,
``chaos_expire_now(kinds)``, each answering ``{kind or "api": result}`` over the parts that took it
(an external scheduler's chaos is at its endpoint of the front: it answers ``{}``).

``observe(decisions_since)`` answers, in one round trip::

    {"digest": {"name", "is_leader", "synced", "incarnation", "t", "tasks", "nodes", ...},
     "stats": {"pid", "is_leader", "incarnation", "restarts", "last_error", counters...},
     "decisions": [{"seq", "t", "op", ...}],      # seq > decisions_since, seq from 1 per generation
     "staleness_ms": [...], "incarnation": int, "generation": str}

``stats()["incarnation"]`` changing without the engine's doing is a life the instance began by
itself (a lost lease, an exit): the recorder writes it as an internal restart (``lives.jsonl``).
"""
from __future__ import annotations

from typing import Any, Protocol, TypedDict, runtime_checkable

__all__ = ["SchedulerInstanceProtocol", "SEAM_METHODS", "Observed", "OBSERVED_KEYS"]

SEAM_METHODS = ("start", "stop", "observe", "decisions", "placement", "pid", "is_leader", "stats",
                "chaos_set_epoch", "chaos_activate", "chaos_deactivate", "chaos_expire_now",
                "set_clock_rate", "ping")


class _ObservedRequired(TypedDict):
    digest: dict[str, Any]          # name, is_leader, synced, incarnation, t, tasks, nodes, ...
    stats: dict[str, Any]           # pid, is_leader, incarnation, restarts, last_error, counters
    decisions: list[dict[str, Any]]  # seq > decisions_since
    staleness_ms: list[float]       # the samples taken since the previous observe() of this life
    incarnation: int
    generation: str


class Observed(_ObservedRequired, total=False):
    """What ``observe()`` answers: the one shape the recorder reads, from a model instance and from
    an external scheduler's supervisor alike."""
    scrape: dict[str, Any]          # an external scheduler's /metrics record (history/scrapes.jsonl)


# the keys every observe() answer has (``scrape``: only an external scheduler's)
OBSERVED_KEYS: frozenset[str] = frozenset(_ObservedRequired.__annotations__)


@runtime_checkable
class SchedulerInstanceProtocol(Protocol):
    async def start(self) -> None: ...
    async def stop(self) -> None: ...
    async def observe(self, decisions_since: int = 0) -> Observed: ...
    async def decisions(self, since: int = 0) -> list[dict[str, Any]]: ...
    async def placement(self) -> dict[str, Any]: ...     # {"node_id", "host", "pid"}
    async def pid(self) -> int: ...                       # the process a pause stops
    async def is_leader(self) -> bool: ...
    async def stats(self) -> dict[str, Any]: ...
    async def chaos_set_epoch(self, t0_wall: float) -> dict: ...
    async def chaos_activate(self, sf: Any, watch: bool = True, api: bool = True,
                             kinds: list | None = None) -> dict: ...
    async def chaos_deactivate(self, index: int, watch: bool = True, api: bool = True,
                               kinds: list | None = None) -> dict: ...
    async def chaos_expire_now(self, kinds: list | None = None) -> dict: ...
    async def set_clock_rate(self, rate: float) -> None: ...
    async def ping(self) -> str: ...
