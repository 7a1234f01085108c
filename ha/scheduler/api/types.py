"""Status enums and small value types (``api/types.go``, ``api/unschedule_info.go``)."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from enum import IntEnum, IntFlag

__all__ = [
    "TaskStatus", "NodePhase", "NodeState", "StatusCode", "Status", "StatusSets", "ValidateResult",
    "FitError", "FitErrors", "TaskNodeError", "FatalCacheError", "CacheError",
    "POD_REASON_UNSCHEDULABLE", "POD_REASON_SCHEDULABLE", "POD_REASON_SCHEDULER_ERROR",
    "NODE_POD_NUMBER_EXCEEDED", "NODE_RESOURCE_FIT_FAILED", "ALL_NODE_UNAVAILABLE_MSG",
    "wrap_insufficient_resource_reason", "validate_status_update",
]


class TaskStatus(IntFlag):
    """Volcano's TaskStatus bit values (types.go:36-68)."""
    PENDING = 1
    ALLOCATED = 2
    PIPELINED = 4
    BINDING = 8
    BOUND = 16
    RUNNING = 32
    RELEASING = 64
    SUCCEEDED = 128
    FAILED = 256
    UNKNOWN = 512

    def __str__(self) -> str:  # Volcano's String(): "Pending", ...; anything else is "Unknown"
        return _STATUS_NAMES.get(int(self), "Unknown")

    @property
    def volcano_name(self) -> str:
        return _STATUS_NAMES.get(int(self), "Unknown")

    @classmethod
    def parse(cls, name: str) -> "TaskStatus":
        """From Volcano's spelling ("Pipelined") or ours ("PIPELINED")."""
        try:
            return _STATUS_BY_NAME[name.lower()]
        except KeyError:
            raise ValueError(f"unknown task status {name!r}; known: "
                             f"{', '.join(_STATUS_NAMES.values())}") from None


_STATUS_NAMES = {1: "Pending", 2: "Allocated", 4: "Pipelined", 8: "Binding", 16: "Bound",
                 32: "Running", 64: "Releasing", 128: "Succeeded", 256: "Failed", 512: "Unknown"}
_STATUS_BY_NAME = {v.lower(): TaskStatus(k) for k, v in _STATUS_NAMES.items()}


def validate_status_update(old: TaskStatus, new: TaskStatus) -> None:
    """Volcano accepts every transition (types.go:117-119)."""
    return None


class NodePhase(IntEnum):
    READY = 1
    NOT_READY = 2

    def __str__(self) -> str:
        return "Ready" if self is NodePhase.READY else "NotReady"


@dataclass
class NodeState:
    phase: NodePhase
    reason: str = ""


class StatusCode(IntEnum):
    """Plugin status codes (types.go)."""
    SUCCESS = 0
    ERROR = 1
    UNSCHEDULABLE = 2
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3
    WAIT = 4
    SKIP = 5


@dataclass
class Status:
    code: StatusCode = StatusCode.SUCCESS
    reason: str = ""
    plugin: str = ""

    def __str__(self) -> str:
        return self.reason

    def is_success(self) -> bool:
        return self.code == StatusCode.SUCCESS

    def is_wait(self) -> bool:
        return self.code == StatusCode.WAIT

    def is_skip(self) -> bool:
        return self.code == StatusCode.SKIP

    def as_error(self) -> str | None:
        if self.is_success() or self.is_wait() or self.is_skip():
            return None
        return self.reason


class StatusSets(list):
    """A list of Status with Volcano's helpers (None entries are allowed, as in Go)."""

    def contains_unschedulable(self) -> bool:
        return any(s is not None and s.code == StatusCode.UNSCHEDULABLE for s in self)

    def contains_unschedulable_and_unresolvable(self) -> bool:
        return any(s is not None and s.code == StatusCode.UNSCHEDULABLE_AND_UNRESOLVABLE for s in self)

    def contains_error_skip_or_wait(self) -> bool:
        return any(s is not None and s.code in (StatusCode.ERROR, StatusCode.SKIP, StatusCode.WAIT)
                   for s in self)

    def message(self) -> str:
        return ",".join(s.reason for s in self if s is not None and s.reason)

    def reasons(self) -> list[str]:
        return [s.reason for s in self if s is not None and s.reason]


@dataclass
class ValidateResult:
    passed: bool
    reason: str = ""
    message: str = ""


# unschedule_info.go
NODE_POD_NUMBER_EXCEEDED = "node(s) pod number exceeded"
NODE_RESOURCE_FIT_FAILED = "node(s) resource fit failed"
ALL_NODE_UNAVAILABLE_MSG = "all nodes are unavailable"
POD_REASON_UNSCHEDULABLE = "Unschedulable"
POD_REASON_SCHEDULABLE = "Schedulable"
POD_REASON_SCHEDULER_ERROR = "SchedulerError"


class FitError(Exception):
    """Why one task does not fit one node. The message is formatted when asked for: a scan of
    5,000 nodes makes 5,000 of these, and almost none is ever printed."""

    def __init__(self, task_namespace: str, task_name: str, node_name: str,
                 status: list[Status] | None = None):
        self.task_namespace = task_namespace
        self.task_name = task_name
        self.node_name = node_name
        self.status = StatusSets(status or [])
        super().__init__()

    @classmethod
    def new(cls, task, node, *messages: str) -> "FitError":
        """NewFitError(task, node, messages...): each message becomes an Error status."""
        return cls(task.namespace, task.name, node.name,
                   [Status(StatusCode.ERROR, m) for m in messages])

    @classmethod
    def with_status(cls, task, node, *sts: Status) -> "FitError":
        return cls(task.namespace, task.name, node.name, list(sts))

    def reasons(self) -> list[str]:
        return self.status.reasons()

    def error(self) -> str:
        return (f"task {self.task_namespace}/{self.task_name} on node {self.node_name} fit failed: "
                f"{', '.join(self.reasons())}")

    def __str__(self) -> str:
        return self.error()

    def __repr__(self) -> str:
        return f"FitError({self.error()!r})"


class FitErrors:
    """Per-node fit errors of one task, summarised like Volcano's ``FitErrors.Error()``.

    Besides ``set_node_error`` (one FitError a node), a scan can hand over its verdicts in bulk
    (``set_scan``): node names in scan order, each with an index into a small table of statuses
    (every node that failed for the same reason shares it) or ``-1`` with a FitError of its own.
    ``nodes`` materialises the per-node FitErrors in scan order only when read; ``error()`` and
    ``get_unschedulable_and_unresolvable_nodes()`` work on the table directly. The summary is
    computed once and kept until the errors change."""

    def __init__(self) -> None:
        self._nodes: dict[str, FitError] = {}
        # (task ns, task name, names, codes, statuses, own, counts per code or None)
        self._scan: tuple | None = None
        self.hyper_node = ""
        self.err = ""
        self._msg: str | None = None

    # -- contents -----------------------------------------------------------------------------
    @property
    def nodes(self) -> dict[str, FitError]:
        if self._scan is not None:
            ns, name, names, codes, statuses, own, _ = self._scan
            self._scan = None
            out: dict[str, FitError] = {}
            for node, code in zip(names, codes):
                out[node] = own[node] if code < 0 else FitError(ns, name, node, [statuses[code]])
            out.update(self._nodes)
            self._nodes = out
        return self._nodes

    def set_scan(self, task_namespace: str, task_name: str, names: list[str], codes: list[int],
                 statuses: list[Status], own: dict[str, FitError],
                 counts: list[int] | None = None) -> None:
        """Every node of one scan at once (see the class docstring); replaces what was set.
        ``counts``: how many nodes carry each status (``counts[c]``: the codes equal to c), when
        the caller has them at hand; else they are counted from ``codes`` when needed."""
        self._nodes = {}
        self._scan = (task_namespace, task_name, list(names), list(codes), list(statuses), dict(own),
                      None if counts is None else list(counts))
        self._msg = None

    def set_error(self, err: str) -> None:
        self.err = err
        self._msg = None

    def set_hyper_node(self, hyper_node: str) -> None:
        self.hyper_node = hyper_node
        self._msg = None

    def set_node_error(self, node_name: str, err: BaseException | str) -> None:
        if isinstance(err, FitError):
            err.node_name = node_name
            fe = err
        else:
            fe = FitError("", "", node_name, [Status(StatusCode.ERROR, str(err))])
        self.nodes[node_name] = fe
        self._msg = None

    def __len__(self) -> int:
        # with a scan pending, _nodes is empty: set_scan clears it and set_node_error materialises
        return len(self._scan[2]) if self._scan is not None else len(self._nodes)

    def _reason_counts(self) -> dict[str, int]:
        hist: dict[str, int] = {}
        if self._scan is not None:
            _, _, _, codes, statuses, own, counts = self._scan
            per_code = enumerate(counts) if counts is not None else Counter(codes).items()
            for c, k in per_code:
                if c >= 0 and k:
                    r = statuses[c].reason
                    if r:
                        hist[r] = hist.get(r, 0) + k
            fes = list(own.values())
        else:
            fes = list(self._nodes.values())
        for fe in fes:
            for r in fe.reasons():
                hist[r] = hist.get(r, 0) + 1
        return hist

    def get_unschedulable_and_unresolvable_nodes(self) -> set[str]:
        if self._scan is not None:
            _, _, names, codes, statuses, own, _ = self._scan
            hit = {c for c, st in enumerate(statuses) if st.code == StatusCode.UNSCHEDULABLE_AND_UNRESOLVABLE}
            return ({n for n, c in zip(names, codes) if c in hit}
                    | {n for n, fe in own.items() if fe.status.contains_unschedulable_and_unresolvable()})
        return {fe.node_name for fe in self._nodes.values()
                if fe.status.contains_unschedulable_and_unresolvable()}

    def error(self) -> str:
        if self._msg is not None:
            return self._msg
        if not self.err:
            self.err = f"0/{len(self)} nodes are unavailable"
        if not len(self):
            return self.err
        parts = sorted(f"{v} {k}" for k, v in self._reason_counts().items())
        msg = f"{self.err}: {', '.join(parts)}."
        if self.hyper_node:
            msg = f"In hyperNode {self.hyper_node}: {msg}"
        self._msg = msg
        return msg

    def __str__(self) -> str:
        return self.error()

    def __repr__(self) -> str:
        return f"FitErrors({self.error()!r})"


def wrap_insufficient_resource_reason(resources: list[str]) -> str:
    return "Insufficient " + resources[0] if resources else ""


class CacheError(Exception):
    """An error a Volcano cache/node function returns (Go ``error``); the message is Volcano's."""


class TaskNodeError(CacheError):
    """NodeInfo.AddTask failed ("already on node", "not enough to put task", ...)."""


class FatalCacheError(BaseException):
    """Where Volcano calls ``klog.Fatalf`` (the scheduler process exits).

    Deliberately a BaseException: a generic ``except Exception`` in a scheduling loop must not
    swallow it — the runner catches it explicitly and counts "the scheduler would have crashed".
    """
