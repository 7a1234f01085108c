"""Scheduler actions (Volcano ``pkg/scheduler/actions``): ``get_action(name).execute(ssn)``."""
from __future__ import annotations

from typing import Any

from ha.errors import BadInput
from ha.scheduler.framework import registry as _registry

__all__ = ["get_action", "action_names"]


def action_names() -> list[str]:
    """The registered actions (``ha.scheduler.framework.registry``): the one list of them."""
    return _registry.registered_action_names()


def get_action(name: str) -> Any:
    """A fresh action object (``name()``, ``initialize()``, ``execute(ssn)``, ``uninitialize()``)."""
    f = _registry.get_action_factory(name)
    if f is None:
        raise BadInput(f"unknown scheduler action {name!r}; known: {', '.join(action_names())}")
    return f()


# Importing the modules registers the actions (in this order: the order of action_names()).
from ha.scheduler.actions import enqueue, allocate, backfill, preempt, reclaim  # noqa: E402,F401,I001
