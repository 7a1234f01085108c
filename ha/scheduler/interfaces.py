"""How the scheduler cache talks to the world (``cache/interface.go``): binder, evictor, status updater.

The cache calls these synchronously and in order; an implementation may queue the work (the
runtime's Redis-backed one does) — Volcano runs them in goroutines. ``RecordingIO`` is the in-memory
implementation for tests and the scenario runner: it records every call in order and can be told to
fail some of them.

``Clock`` is the model's only source of time (a PodGroup condition's lastTransitionTime, a job's
scheduleStartTimestamp): the live runtime gives a ``WallClock``, the scenario runner a
``FixedClock``, a simulation its virtual clock. The model never reads the system clock itself.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from ha.scheduler.api import TaskInfo, pod_key
from ha.scheduler.api.job_info import copy_object

__all__ = ["Binder", "Evictor", "StatusUpdater", "PodGetter", "IOError_", "RecordingIO", "IORecord",
           "Clock", "WallClock", "FixedClock"]


@runtime_checkable
class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the epoch, as the scheduler's time.Now() would give them."""
        ...


class WallClock:
    """The system's wall clock (the live scheduler's time.Now())."""

    def now(self) -> float:
        return time.time()


@dataclass(frozen=True)
class FixedClock:
    """Always the same instant: in-memory single sessions whose results must not depend on when
    they ran."""
    t: float = 0.0

    def now(self) -> float:
        return self.t


class IOError_(Exception):
    """An API error from an IO implementation (message like "409 Conflict: ..."); the cache treats
    any exception raised by an IO call as Volcano treats a returned ``error``."""


@runtime_checkable
class Binder(Protocol):
    def bind(self, tasks: list[TaskInfo]) -> dict[str, str]:
        """POST pods/binding for each task (target ``task.node_name``).

        Returns {task uid: error message} for the tasks that failed; {} when all succeeded."""


@runtime_checkable
class Evictor(Protocol):
    def evict(self, pod: dict, reason: str) -> None:
        """Volcano's default evictor: DisruptionTarget condition + delete. Raises on error."""


@runtime_checkable
class StatusUpdater(Protocol):
    def update_pod_status(self, pod: dict) -> dict:
        """Write ``pod['status']`` (conditions, nominatedNodeName) through the status subresource."""

    def update_pod_group(self, pg: dict) -> dict:
        """Write a PodGroup (its status)."""

    def patch_pod_annotations(self, namespace: str, name: str, annotations: dict[str, str | None]) -> dict:
        """Set (str) or remove (None) pod annotations — the annotation-persistence design's path."""


@runtime_checkable
class PodGetter(Protocol):
    def get_pod(self, namespace: str, name: str) -> dict | None:
        """The live pod from the API server, or None when it does not exist (resyncTask's GET)."""


@dataclass
class IORecord:
    op: str          # "bind" | "evict" | "update_pod_status" | "update_pod_group" | "patch_annotations"
    key: str         # "ns/name" of the pod or podgroup
    detail: dict = field(default_factory=dict)


class RecordingIO:
    """Binder + Evictor + StatusUpdater + PodGetter in memory, recording every call in order.

    * ``fail_bind[key] = "409 Conflict: ..."`` makes the bind of that pod fail (kept until removed);
      ``fail_evict`` / ``fail_status`` likewise raise IOError_.
    * ``pods[key]`` is the "API server" copy that ``get_pod`` returns (tests put pods there; a
      successful bind sets its nodeName, a status write replaces its status, an eviction deletes it
      when ``evict_deletes`` is true).
    """

    def __init__(self, *, evict_deletes: bool = False):
        self.records: list[IORecord] = []
        self.binds: dict[str, str] = {}            # key -> node, successful binds in order
        self.bind_attempts: list[tuple[str, str]] = []
        self.evictions: list[str] = []
        self.evict_reasons: dict[str, str] = {}
        self.status_writes: list[tuple[str, dict]] = []
        self.pod_group_writes: list[tuple[str, dict]] = []
        self.annotation_patches: list[tuple[str, dict]] = []
        self.fail_bind: dict[str, str] = {}
        self.fail_evict: dict[str, str] = {}
        self.fail_status: dict[str, str] = {}
        self.pods: dict[str, dict] = {}
        self.evict_deletes = evict_deletes

    # Binder
    def bind(self, tasks: list[TaskInfo]) -> dict[str, str]:
        errors: dict[str, str] = {}
        for t in tasks:
            key = f"{t.namespace}/{t.name}"
            self.bind_attempts.append((key, t.node_name))
            err = self.fail_bind.get(key)
            if err is None:
                live = self.pods.get(key)
                if live is not None and (live.get("spec") or {}).get("nodeName"):
                    err = f"409 Conflict: pod {key} is already assigned to node " \
                          f"{live['spec']['nodeName']!r}"
            if err is not None:
                errors[t.uid] = err
                self.records.append(IORecord("bind", key, {"node": t.node_name, "error": err}))
                continue
            self.binds[key] = t.node_name
            self.records.append(IORecord("bind", key, {"node": t.node_name}))
            live = self.pods.get(key)
            if live is not None:
                live.setdefault("spec", {})["nodeName"] = t.node_name
        return errors

    # Evictor
    def evict(self, pod: dict, reason: str) -> None:
        key = pod_key(pod)
        err = self.fail_evict.get(key)
        self.records.append(IORecord("evict", key, {"reason": reason, **({"error": err} if err else {})}))
        if err is not None:
            raise IOError_(err)
        self.evictions.append(key)
        self.evict_reasons[key] = reason
        if self.evict_deletes:
            self.pods.pop(key, None)

    # StatusUpdater
    def update_pod_status(self, pod: dict) -> dict:
        key = pod_key(pod)
        status = copy_object(pod.get("status") or {})
        err = self.fail_status.get(key)
        self.records.append(IORecord("update_pod_status", key,
                                     {"status": status, **({"error": err} if err else {})}))
        if err is not None:
            raise IOError_(err)
        self.status_writes.append((key, status))
        live = self.pods.get(key)
        if live is not None:
            live["status"] = copy_object(status)
        return pod

    def update_pod_group(self, pg: dict) -> dict:
        key = pod_key(pg)
        self.records.append(IORecord("update_pod_group", key, {"status": copy_object(pg.get("status") or {})}))
        self.pod_group_writes.append((key, copy_object(pg)))
        return pg

    def patch_pod_annotations(self, namespace: str, name: str, annotations: dict[str, str | None]) -> dict:
        key = f"{namespace}/{name}"
        err = self.fail_status.get(key)
        self.records.append(IORecord("patch_annotations", key,
                                     {"annotations": dict(annotations), **({"error": err} if err else {})}))
        if err is not None:
            raise IOError_(err)
        self.annotation_patches.append((key, dict(annotations)))
        live = self.pods.get(key)
        if live is not None:
            ann = live.setdefault("metadata", {}).setdefault("annotations", {})
            for k, v in annotations.items():
                if v is None:
                    ann.pop(k, None)
                else:
                    ann[k] = v
        return live or {}

    # PodGetter
    def get_pod(self, namespace: str, name: str) -> dict | None:
        return self.pods.get(f"{namespace}/{name}")

    # conveniences for assertions
    def nominated_node_name(self, key: str) -> str | None:
        """The last nominatedNodeName written for ``key`` (None if never written)."""
        for k, st in reversed(self.status_writes):
            if k == key and "nominatedNodeName" in st:
                return st.get("nominatedNodeName") or ""
        return None

    def ops(self, op: str | None = None) -> list[tuple[str, str]]:
        return [(r.op, r.key) for r in self.records if op is None or r.op == op]

    def __repr__(self) -> str:
        return f"RecordingIO({len(self.records)} records, binds={self.binds}, evictions={self.evictions})"

