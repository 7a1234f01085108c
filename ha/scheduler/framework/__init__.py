"""Session, Statement and the plugin registry (Volcano ``pkg/scheduler/framework``)."""
from __future__ import annotations

from ha.scheduler.framework.events import (ABSTAIN, PERMIT, REJECT, Event, EventHandler, NodeScore,
                                           ValidateResult)
from ha.scheduler.framework.fit import (ERROR, SKIP, SUCCESS, UNSCHEDULABLE,
                                        UNSCHEDULABLE_AND_UNRESOLVABLE, WAIT, FitError, FitErrors,
                                        Status, StatusCode, unresolvable, unschedulable)
from ha.scheduler.framework.registry import (Plugin, get_plugin_builder, register_plugin_builder,
                                             registered_plugin_names)
from ha.scheduler.framework.session import Session, close_session, open_session

__all__ = [
    "Session", "open_session", "close_session", "Statement",
    "Plugin", "register_plugin_builder", "get_plugin_builder", "registered_plugin_names",
    "Event", "EventHandler", "ValidateResult", "NodeScore", "PERMIT", "ABSTAIN", "REJECT",
    "FitError", "FitErrors", "Status", "SUCCESS", "ERROR", "UNSCHEDULABLE",
    "UNSCHEDULABLE_AND_UNRESOLVABLE", "WAIT", "SKIP", "StatusCode", "unschedulable", "unresolvable",
]


def __getattr__(name: str):  # Statement imports the api types; load it lazily
    if name == "Statement":
        from ha.scheduler.framework.statement import Statement
        return Statement
    raise AttributeError(name)
