"""Session event handlers (``framework/event.go``) and small result types plugins return."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from ha.scheduler.api.types import ValidateResult

__all__ = ["Event", "EventHandler", "ValidateResult", "NodeScore", "PERMIT", "ABSTAIN", "REJECT"]

# Vote values (``util.Permit`` / ``Abstain`` / ``Reject``) for JobPipelined, JobEnqueueable, ...
PERMIT = 1
ABSTAIN = 0
REJECT = -1


@dataclass
class Event:
    """Passed to AllocateFunc / DeallocateFunc. A handler may set ``err``; Statement.Allocate and
    Statement.Pipeline then fail (and record nothing)."""

    task: Any
    err: Exception | str | None = None


@dataclass
class EventHandler:
    allocate_func: Callable[[Event], None] | None = None
    deallocate_func: Callable[[Event], None] | None = None


@dataclass
class NodeScore:
    """One entry of a k8s ``NodeScoreList`` handed to NodeReduce functions (mutable score)."""

    name: str
    score: float = 0.0
    extra: dict = field(default_factory=dict)
