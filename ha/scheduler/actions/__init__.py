"""Scheduler actions (Volcano ``pkg/scheduler/actions``): ``get_action(name).execute(ssn)``."""
from __future__ import annotations

from typing import Any, Callable

from ha.errors import BadInput

__all__ = ["get_action", "action_names"]


def _factories() -> dict[str, Callable[[], Any]]:
    from ha.scheduler.actions import allocate, backfill, enqueue, preempt, reclaim
    return {"enqueue": enqueue.new, "allocate": allocate.new, "backfill": backfill.new,
            "preempt": preempt.new, "reclaim": reclaim.new}


def action_names() -> list[str]:
    return list(_factories())


def get_action(name: str) -> Any:
    """A fresh action object (``name()``, ``initialize()``, ``execute(ssn)``, ``uninitialize()``)."""
    f = _factories().get(name)
    if f is None:
        raise BadInput(f"unknown scheduler action {name!r}; known: {', '.join(action_names())}")
    return f()
