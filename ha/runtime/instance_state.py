"""What of a scheduler instance outlives its incarnations, as one explicit object.

A :class:`ha.runtime.incarnation.Incarnation` (one life: cache, informers, workers, campaign) is
handed an :class:`InstanceState` instead of its owner: the configuration and environment, the
API clients and the chaos port, the decision log, the counters a life adds to (sessions, errors,
leader transitions, the last session's figures) and the few things a life asks of its instance
(``fatal``, ``panic``, ``restart_soon``, ``on_first_bind``, a fresh scheduler configuration, a delivery log).
The instance (``ha.runtime.instance.SchedulerInstance``) owns the state and reads its counters
from it; neither module imports the other's class, so the two have no import cycle.
"""
from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

__all__ = ["InstanceState", "SESSION_RECORDS", "RECENT_SESSION_ERRORS"]

SESSION_RECORDS = 10_000     # session records kept for sessions_since
RECENT_SESSION_ERRORS = 5    # the last few errors sessions recorded


def _unset(*_: Any) -> Any:
    raise RuntimeError("InstanceState: this hook was not given by the instance")


@dataclass
class InstanceState:
    cfg: Any                                   # ha.runtime.instance.InstanceConfig
    env: Any                                   # ha.runtime.environment (live) or the sim's
    rng: random.Random
    gc_tuning: str                             # "instance" or "default"
    chaos: Any                                 # ha.runtime.chaos_port.ChaosPort
    decisions_log: Any                         # ha.runtime.instance.DecisionLog
    aapi: Any = None                           # AsyncApiClient (informers, elector)
    sapi: Any = None                           # ApiClient (the cache's synchronous IO), wrapped
    stopping: bool = False
    # called with the session after its actions, before close, on the session worker
    session_hook: Optional[Callable[[Any], None]] = None

    # what a life asks of its instance
    fatal: Callable[[str], None] = _unset
    panic: Callable[[str], None] = _unset
    restart_soon: Callable[[str], None] = _unset
    on_first_bind: Callable[[], None] = _unset
    new_scheduler_conf: Callable[[], Any] = _unset
    open_delivery_log: Callable[[], Any] = _unset

    # counters and figures that survive in-process restarts
    sessions: int = 0
    session_errors: int = 0
    recent_session_errors: deque = field(default_factory=lambda: deque(maxlen=RECENT_SESSION_ERRORS))
    errors: int = 0
    panics: int = 0
    leader_transitions: int = 0                # times this instance started leading
    elections_lost: int = 0
    became_leader_at: Optional[float] = None
    first_bind_after_leading_at: Optional[float] = None
    last_session_ms: Optional[float] = None
    last_session_cpu_ms: Optional[float] = None           # the session thread's CPU
    last_session_process_cpu_ms: Optional[float] = None   # the whole process's, meanwhile
    last_session_phases_ms: Optional[dict] = None          # SessionResult.phases_ms
    # every session's figures, newest last (``sessions_since``)
    session_records: deque = field(default_factory=lambda: deque(maxlen=SESSION_RECORDS))
    last_error: Optional[str] = None


# the fields the instance shows as its own attributes (reads and writes go to the state)
SHARED_FIELDS: tuple[str, ...] = (
    "aapi", "sapi", "stopping", "session_hook", "sessions", "session_errors", "recent_session_errors",
    "errors", "panics", "leader_transitions", "elections_lost", "became_leader_at",
    "first_bind_after_leading_at", "last_session_ms", "last_session_cpu_ms", "last_session_process_cpu_ms",
    "last_session_phases_ms", "session_records", "last_error")


def state_attribute(name: str) -> property:
    """An attribute of the instance kept in its state (``self.state``)."""
    return property(lambda self: getattr(self.state, name),
                    lambda self, value: setattr(self.state, name, value),
                    doc=f"``state.{name}`` (ha.runtime.instance_state.InstanceState)")
