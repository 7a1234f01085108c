"""Pod → task status and status groups (``api/helpers.go``, PR #5045, the annotation-persistence
design)."""
from __future__ import annotations

from typing import Any

from .types import TaskStatus

__all__ = [
    "pod_key", "get_task_status", "allocated_status", "preemptable_status", "completed_status",
    "scheduled_status", "is_terminated", "merge_errors", "job_terminated", "COMPLETED_STATUSES",
    "SCHEDULED_STATUSES",
    "GROUP_NAME_ANNOTATION", "TASK_SPEC_KEY", "PREEMPTABLE_KEY", "TASK_PRIORITY_ANNOTATION",
    "PIPELINED_STATUS_ANNOTATION", "PIPELINED_NODE_ANNOTATION", "EVICTION_OCCURRED_ANNOTATION",
    "REVOCABLE_ZONE_KEY", "JDB_MIN_AVAILABLE", "JDB_MAX_UNAVAILABLE",
]

GROUP_NAME_ANNOTATION = "scheduling.k8s.io/group-name"
TASK_SPEC_KEY = "volcano.sh/task-spec"
PREEMPTABLE_KEY = "volcano.sh/preemptable"
TASK_PRIORITY_ANNOTATION = "volcano.sh/task-priority"
REVOCABLE_ZONE_KEY = "volcano.sh/revocable-zone"
JDB_MIN_AVAILABLE = "volcano.sh/jdb-min-available"
JDB_MAX_UNAVAILABLE = "volcano.sh/jdb-max-unavailable"
# the annotation-persistence design: pipelined state persisted in pod annotations
PIPELINED_STATUS_ANNOTATION = "volcano.sh/pipelined-status"
PIPELINED_NODE_ANNOTATION = "volcano.sh/pipelined-node"
EVICTION_OCCURRED_ANNOTATION = "volcano.sh/eviction-occurred"

_P = TaskStatus
PENDING, ALLOCATED, PIPELINED, BINDING, BOUND, RUNNING, RELEASING, SUCCEEDED, FAILED, UNKNOWN = (
    _P.PENDING, _P.ALLOCATED, _P.PIPELINED, _P.BINDING, _P.BOUND, _P.RUNNING, _P.RELEASING,
    _P.SUCCEEDED, _P.FAILED, _P.UNKNOWN)

_ALLOCATED = frozenset({BOUND, BINDING, RUNNING, ALLOCATED})
_PREEMPTABLE = frozenset({BOUND, RUNNING})
_COMPLETED = frozenset({FAILED, SUCCEEDED})
_SCHEDULED = frozenset({RUNNING, BOUND, FAILED, SUCCEEDED})
# the sets themselves, for loops that test many statuses (every completed status is scheduled)
COMPLETED_STATUSES = _COMPLETED
SCHEDULED_STATUSES = _SCHEDULED


def pod_key(pod: dict) -> str:
    md = pod.get("metadata") or {}
    return f"{md.get('namespace', '')}/{md.get('name', '')}"


def _truthy(v: Any) -> bool:
    return isinstance(v, str) and v.strip().lower() in ("true", "1", "t", "yes") or v is True


def get_task_status(pod: dict, switches: Any = None) -> TaskStatus:
    """getTaskStatus; ``switches`` adds PR #5045's reconstruction and the annotation-persistence
    design's annotations.

    A pod without ``status.phase`` is treated as Pending (what API-server defaulting would set).
    """
    status = pod.get("status") or {}
    phase = status.get("phase") or "Pending"
    md = pod.get("metadata") or {}
    if phase == "Running":
        return RELEASING if md.get("deletionTimestamp") is not None else RUNNING
    if phase == "Pending":
        if md.get("deletionTimestamp") is not None:
            return RELEASING
        if not (pod.get("spec") or {}).get("nodeName"):
            if switches is not None:
                if switches.annotation_persistence:
                    ann = md.get("annotations") or {}
                    if _truthy(ann.get(PIPELINED_STATUS_ANNOTATION)) and ann.get(PIPELINED_NODE_ANNOTATION):
                        return PIPELINED
                if switches.reconstruct_pipelined and status.get("nominatedNodeName"):
                    return PIPELINED
            return PENDING
        return BOUND
    if phase == "Unknown":
        return UNKNOWN
    if phase == "Succeeded":
        return SUCCEEDED
    if phase == "Failed":
        return FAILED
    return UNKNOWN


def allocated_status(status: TaskStatus) -> bool:
    """{Bound, Binding, Running, Allocated} — Pipelined is NOT included."""
    return status in _ALLOCATED


def preemptable_status(status: TaskStatus) -> bool:
    return status in _PREEMPTABLE


def completed_status(status: TaskStatus) -> bool:
    return status in _COMPLETED


def scheduled_status(status: TaskStatus) -> bool:
    return status in _SCHEDULED


def is_terminated(status: TaskStatus) -> bool:
    """The cache's isTerminated (event_handlers.go:64-66)."""
    return status in _COMPLETED


def merge_errors(*errs: object) -> str | None:
    """Volcano's MergeErrors: "errors:  1: a, 2: b" or None."""
    msg = "errors: "
    i = 0
    for e in errs:
        if e is None or e == "":
            continue
        i += 1
        msg += (f"{msg and ''} {i}: " if i == 1 else f", {i}: ") + str(e)
    return msg if i else None


def job_terminated(job: Any) -> bool:
    return job.pod_group is None and not job.tasks
