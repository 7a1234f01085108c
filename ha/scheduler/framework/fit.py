"""Predicate failure helpers. The types themselves live in ``ha.scheduler.api`` (Volcano's
``api/unschedule_info.go``); this module re-exports them and adds short constructors.

Predicate functions return None when the node fits, otherwise an error: preferably a ``FitError``
carrying status codes (Unschedulable / UnschedulableAndUnresolvable / ...), or any Exception or
string, which counts as an ``ERROR``-coded FitError (as ``api.NewFitError`` does).
"""
from __future__ import annotations

from typing import Any

from ha.scheduler.api.types import (FitError, FitErrors, Status, StatusCode, StatusSets,
                                    wrap_insufficient_resource_reason)

__all__ = ["SUCCESS", "ERROR", "UNSCHEDULABLE", "UNSCHEDULABLE_AND_UNRESOLVABLE", "WAIT", "SKIP",
           "Status", "StatusCode", "StatusSets", "FitError", "FitErrors", "as_fit_error",
           "unschedulable", "unresolvable", "wrap_insufficient_resource_reason"]

SUCCESS = StatusCode.SUCCESS
ERROR = StatusCode.ERROR
UNSCHEDULABLE = StatusCode.UNSCHEDULABLE
UNSCHEDULABLE_AND_UNRESOLVABLE = StatusCode.UNSCHEDULABLE_AND_UNRESOLVABLE
WAIT = StatusCode.WAIT
SKIP = StatusCode.SKIP


def _names(task: Any, node: Any) -> tuple[str, str, str]:
    ns = getattr(task, "namespace", "") if task is not None else ""
    nm = getattr(task, "name", "") if task is not None else ""
    nn = node if isinstance(node, str) else getattr(node, "name", "")
    return ns, nm, nn


def unschedulable(task: Any, node: Any, reason: str, plugin: str = "") -> FitError:
    """A FitError with one Unschedulable status (preemption may help)."""
    ns, nm, nn = _names(task, node)
    return FitError(ns, nm, nn, [Status(StatusCode.UNSCHEDULABLE, reason, plugin)])


def unresolvable(task: Any, node: Any, reason: str, plugin: str = "") -> FitError:
    """A FitError with one UnschedulableAndUnresolvable status (preemption cannot help)."""
    ns, nm, nn = _names(task, node)
    return FitError(ns, nm, nn, [Status(StatusCode.UNSCHEDULABLE_AND_UNRESOLVABLE, reason, plugin)])


def as_fit_error(task: Any, node: Any, err: Any) -> FitError:
    """``api.NewFitError(task, node, err.Error())`` for anything that is not a FitError."""
    if isinstance(err, FitError):
        return err
    ns, nm, nn = _names(task, node)
    return FitError(ns, nm, nn, [Status(StatusCode.ERROR, str(err))])
