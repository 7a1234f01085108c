"""Statement: the per-job transaction of Allocate / Pipeline / Evict (``framework/statement.go``).

Every mutating call changes only the session; the cache is touched at ``commit``. Commit runs the
operations in order, ``discard`` in reverse; neither clears the operation list in v1.14.0
(calling either twice repeats every handler — kept on purpose; docs/volcano-semantics.md,
"Statement").

Behaviour switches (``ssn.switches``, PR #5045's design and its code / PR #5663):

* ``cache_pipeline`` — the PR's Statement: commit of a Pipeline calls ``cache.pipeline`` (and
  un-pipelines the session task if that fails); ``un_pipeline`` is a *recorded* operation whose
  commit calls ``cache.unpipeline`` and whose discard re-pipelines. Off: v1.14.0, where the commit
  of a Pipeline does nothing and ``un_pipeline`` records nothing.
* ``repipeline_guard`` — ``pipeline`` of a task already Pipelined on that host is a no-op.
* ``update_task_on_allocate`` — ``allocate`` of a task already on the node (Pipelined there)
  uses ``node.update_task`` instead of ``node.add_task``, which refuses a task already on the
  node, so a Pipelined task can become Allocated. The annotation-persistence design's
  ``annotation_persistence`` implies the same ("prevent duplicate AddTask for pipelined → final
  allocation"); its "unallocate from a pipelined origin restores Pipelined" is not modelled.
* ``sync_nominated_node`` — ``pipeline`` sets ``task.nominated_node_name = host``;
  ``_unpipeline`` / ``_unallocate`` clear it, so that the next snapshot sees the nomination without
  waiting for the asynchronous status write to come back through the informer.
* ``commit_pipelined_only`` is applied through :meth:`Statement.commit_pipelined` (PR #5663's
  ``CommitPipelined``: keep Pipeline ops, roll back Allocate and Evict, clear the list).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from ha.scheduler.api import TaskStatus
from ha.scheduler.profiles import switch_on as _sw
from ha.scheduler.api.types import CacheError  # FatalCacheError (klog.Fatalf) always propagates

log = logging.getLogger(__name__)

__all__ = ["Statement", "Operation", "OperationKind", "StatementError", "save_operations"]


class OperationKind(IntEnum):
    EVICT = 0
    PIPELINE = 1
    UNPIPELINE = 2  # PR #5045 only (inserted between Pipeline and Allocate)
    ALLOCATE = 3


@dataclass
class Operation:
    name: OperationKind
    task: Any
    reason: str = ""  # Evict: the reason; UnPipeline: the node it was pipelined on


class StatementError(Exception):
    """A Statement call failed (Go returns an ``error``); the session may be partially changed."""


class Statement:
    def __init__(self, ssn: Any):
        self.ssn = ssn
        self.operations: list[Operation] = []

    # -- helpers ---------------------------------------------------------------------------------
    def _set_eviction_status(self, reclaimee, status, word: str, verb: str) -> None:
        """Evict and unevict differ only in the status they set: job status, then the node's copy."""
        job = self._job(reclaimee)
        if job is not None:
            try:
                job.update_task_status(reclaimee, status)
            except CacheError as e:
                self._err(f"failed to update task {reclaimee.pod_key} to {word} when {verb}: {e}")
        else:
            self._err(f"failed to find job {reclaimee.job} when {verb}")
        node = self.ssn.nodes.get(reclaimee.node_name)
        if node is not None:
            try:
                node.update_task(reclaimee)
            except CacheError as e:
                raise StatementError(f"failed to update task {reclaimee.pod_key} in node "
                                     f"{reclaimee.node_name}: {e}") from e

    def _job(self, task: Any) -> Any:
        return self.ssn.jobs.get(task.job)

    def _err(self, msg: str) -> None:
        if self.ssn is not None and hasattr(self.ssn, "record_error"):
            self.ssn.record_error(msg)
        else:
            log.warning(msg)

    def _fire_allocate(self, task: Any) -> list[Any]:
        return self.ssn.fire_allocate(task)

    def _fire_deallocate(self, task: Any) -> list[Any]:
        return self.ssn.fire_deallocate(task)

    # -- Evict -----------------------------------------------------------------------------------
    def evict(self, reclaimee: Any, reason: str) -> None:
        """Releasing in the session (Idle/Used unchanged, Releasing += r); DeallocateFunc."""
        self._set_eviction_status(reclaimee, TaskStatus.RELEASING, "Releasing", "evicting")
        self._fire_deallocate(reclaimee)
        self.operations.append(Operation(OperationKind.EVICT, reclaimee, reason))

    def _evict_commit(self, reclaimee: Any, reason: str) -> None:
        try:
            self.ssn.cache.evict(reclaimee, reason)
            self.ssn.evict_log.append((reclaimee.pod_key, reason))
        except (CacheError, ValueError, KeyError) as e:
            try:
                self._unevict(reclaimee)
            except (CacheError, StatementError) as e2:
                self._err(f"failed to unevict task {reclaimee.pod_key}: {e2}")
            raise StatementError(str(e)) from e

    def _unevict(self, reclaimee: Any) -> None:
        """Always back to Running, even if the task was Bound (docs/volcano-semantics.md, "Statement")."""
        self._set_eviction_status(reclaimee, TaskStatus.RUNNING, "Running", "unevicting")
        self._fire_allocate(reclaimee)

    # -- Pipeline --------------------------------------------------------------------------------
    def pipeline(self, task: Any, hostname: str, eviction_occurred: bool = False) -> None:
        """Pipelined in the session (node Pipelined += r); AllocateFunc. On any error raise
        StatementError and record nothing, leaving the partial state (callers un-pipeline)."""
        if _sw(self.ssn, "repipeline_guard") and task.status == TaskStatus.PIPELINED and task.node_name == hostname:
            return
        errs: list[str] = []
        job = self._job(task)
        if job is not None:
            try:
                job.update_task_status(task, TaskStatus.PIPELINED)
            except CacheError as e:
                errs.append(str(e))
        else:
            errs.append(f"failed to find job {task.job} when pipeline")
        task.node_name = hostname
        # v1.14.0 carries EvictionOccurred; PR #5045 dropped the parameter (harmless to keep).
        task.eviction_occurred = eviction_occurred
        if _sw(self.ssn, "sync_nominated_node"):
            task.nominated_node_name = hostname
        node = self.ssn.nodes.get(hostname)
        if node is not None:
            try:
                node.add_task(task)
            except CacheError as e:
                errs.append(str(e))
        else:
            errs.append(f"failed to find node {hostname} when pipeline")
        for e in self._fire_allocate(task):
            errs.append(str(e))
        if errs:
            raise StatementError(f"task {task.pod_key} pipeline to node {hostname} failed "
                                 f"({len(errs)} errors): {'; '.join(errs)}")
        self.operations.append(Operation(OperationKind.PIPELINE, task))

    def _pipeline_commit(self, task: Any) -> None:
        """``cache.pipeline``: the cache decides by its switches what that means — nothing in
        v1.14.0 (the decision is lost with the session: docs/volcano-semantics.md, "Closing a session"),
        a persisted reservation with ``cache_pipeline``,
        only the nomination with ``sync_nominated_node`` alone."""
        self.ssn.cache.pipeline(task, task.node_name)
        self.ssn.pipeline_log.append((task.pod_key, task.node_name))

    def un_pipeline(self, task: Any) -> None:
        """v1.14.0 ``UnPipeline`` (not recorded). With ``cache_pipeline`` the PR's public
        ``UnPipeline``: same session effect, recorded with the original node as reason."""
        orig = task.node_name
        self._unpipeline(task)
        if _sw(self.ssn, "cache_pipeline"):
            self.operations.append(Operation(OperationKind.UNPIPELINE, task, orig))

    unpipeline = un_pipeline

    def un_pipeline_in_session(self, task: Any) -> None:
        """ba1e9c5bd's ``UnPipeline`` (the PR description's fix for a task competing with its own
        reservation on its nominated node, switch ``fastpath_unpipeline``): the session effect of
        un-pipelining, recorded nowhere — neither commit nor discard sees it, and the cache keeps
        the task's reservation until a commit re-places the task."""
        self._unpipeline(task)

    def _unpipeline(self, task: Any) -> None:
        job = self._job(task)
        if job is not None:
            try:
                job.update_task_status(task, TaskStatus.PENDING)
            except CacheError as e:
                self._err(f"failed to update task {task.pod_key} to Pending when unpipeline: {e}")
        else:
            self._err(f"failed to find job {task.job} when unpipeline")
        node = self.ssn.nodes.get(task.node_name)
        if node is not None:
            try:
                node.remove_task(task)
            except CacheError as e:
                self._err(f"failed to remove task {task.pod_key} from node {task.node_name}: {e}")
        else:
            self._err(f"failed to find node {task.node_name!r} when unpipeline")
        self._fire_deallocate(task)
        task.node_name = ""
        if _sw(self.ssn, "sync_nominated_node"):
            task.nominated_node_name = ""
        task.job_allocated_hyper_node = ""

    # -- Allocate --------------------------------------------------------------------------------
    def allocate(self, task: Any, node_info: Any) -> None:
        """Allocated in the session (Idle -= r, Used += r); AllocateFunc; sets the *shared* pod's
        spec.nodeName (never reset: docs/volcano-semantics.md S9). Raises StatementError on failure
        (caller un-allocates)."""
        errs: list[str] = []
        hostname = node_info.name
        pod = task.pod
        if isinstance(pod, dict):
            pod.setdefault("spec", {})["nodeName"] = hostname
        job = self._job(task)
        if job is not None:
            try:
                job.update_task_status(task, TaskStatus.ALLOCATED)
            except CacheError as e:
                errs.append(str(e))
        else:
            errs.append(f"failed to find job {task.job} when allocating")
        task.node_name = hostname
        node = self.ssn.nodes.get(hostname)
        if node is not None:
            try:
                on_node = task.pod_key in node.tasks
                if on_node and (_sw(self.ssn, "update_task_on_allocate") or _sw(self.ssn, "annotation_persistence")):
                    node.update_task(task)  # Pipelined -> Allocated on the same node
                else:
                    node.add_task(task)
            except CacheError as e:
                errs.append(str(e))
        else:
            errs.append(f"failed to find node {hostname} when allocating")
        for e in self._fire_allocate(task):
            errs.append(str(e))
        if errs:
            raise StatementError(f"task {task.pod_key} allocate to node {hostname} failed "
                                 f"({len(errs)} errors): {'; '.join(errs)}")
        self.operations.append(Operation(OperationKind.ALLOCATE, task))

    def un_allocate(self, task: Any) -> None:
        self._unallocate(task)

    unallocate = un_allocate

    def _allocate_commit(self, task: Any) -> None:
        ctx = self.ssn.create_bind_context(task)
        self.ssn.cache.add_bind_task(ctx.task)
        self.ssn.bind_log.append((task.pod_key, task.node_name))
        job = self._job(task)
        if job is None:
            raise StatementError(f"failed to find job {task.job}")
        job.update_task_status(task, TaskStatus.BINDING)

    def _unallocate(self, task: Any) -> None:
        job = self._job(task)
        if job is not None:
            try:
                job.update_task_status(task, TaskStatus.PENDING)
            except CacheError as e:
                self._err(f"failed to update task {task.pod_key} to Pending when unallocating: {e}")
        else:
            self._err(f"failed to find job {task.job} when unallocating")
        node = self.ssn.nodes.get(task.node_name)
        if node is not None:
            try:
                node.remove_task(task)
            except CacheError as e:
                self._err(f"failed to remove task {task.pod_key} from node {task.node_name}: {e}")
        self._fire_deallocate(task)
        task.node_name = ""
        if _sw(self.ssn, "sync_nominated_node"):
            task.nominated_node_name = ""
        task.job_allocated_hyper_node = ""

    # -- Commit / Discard ------------------------------------------------------------------------
    def discard(self) -> None:
        """Undo in reverse order; each task first saves its context as LastTransaction."""
        ops = list(self.operations)
        for op in reversed(ops):
            op.task.generate_last_tx_context()
            try:
                if op.name == OperationKind.EVICT:
                    self._unevict(op.task)
                elif op.name == OperationKind.PIPELINE:
                    self._unpipeline(op.task)
                elif op.name == OperationKind.UNPIPELINE:
                    self.pipeline(op.task, op.reason)
                elif op.name == OperationKind.ALLOCATE:
                    self._unallocate(op.task)
            except StatementError as e:
                self._err(f"discard of {op.name.name} {op.task.pod_key} failed: {e}")

    def commit(self) -> None:
        """Apply to the cache in order; each task first clears its LastTransaction."""
        ops = list(self.operations)
        for op in ops:
            op.task.clear_last_tx_context()
            if op.name == OperationKind.EVICT:
                try:
                    self._evict_commit(op.task, op.reason)
                except StatementError as e:
                    self._err(f"failed to evict task {op.task.pod_key}: {e}")
            elif op.name == OperationKind.PIPELINE:
                try:
                    self._pipeline_commit(op.task)
                except (CacheError, ValueError, KeyError) as e:
                    self._unpipeline(op.task)
                    self._err(f"failed to pipeline task {op.task.pod_key}: {e}")
            elif op.name == OperationKind.UNPIPELINE:
                try:
                    self.ssn.cache.unpipeline(op.task)
                except (CacheError, ValueError, KeyError) as e:
                    try:
                        self.pipeline(op.task, op.reason)
                    except StatementError as e2:
                        self._err(f"failed to repipeline task {op.task.pod_key}: {e2}")
                    self._err(f"failed to unpipeline task {op.task.pod_key}: {e}")
            elif op.name == OperationKind.ALLOCATE:
                try:
                    self._allocate_commit(op.task)
                except (CacheError, StatementError, ValueError, KeyError) as e:
                    self._unallocate(op.task)
                    self._err(f"failed to allocate task {op.task.pod_key}: {e}")

    def commit_pipelined(self) -> None:
        """PR #5663 ``CommitPipelined``: for a JobPipelined-but-not-ready job keep only the
        Pipeline operations (in the session; their commit runs as in ``commit``), roll back
        Allocate and Evict in reverse, then clear the list."""
        ops = list(self.operations)
        for op in reversed(ops):
            if op.name == OperationKind.PIPELINE:
                op.task.clear_last_tx_context()
                try:
                    self._pipeline_commit(op.task)
                except (CacheError, ValueError, KeyError) as e:
                    self._unpipeline(op.task)
                    self._err(f"failed to pipeline task {op.task.pod_key}: {e}")
                continue
            op.task.generate_last_tx_context()
            try:
                if op.name == OperationKind.EVICT:
                    self._unevict(op.task)
                elif op.name == OperationKind.ALLOCATE:
                    self._unallocate(op.task)
                elif op.name == OperationKind.UNPIPELINE:
                    self.pipeline(op.task, op.reason)
            except StatementError as e:
                self._err(f"rollback of {op.name.name} {op.task.pod_key} failed: {e}")
        self.operations = []

    # -- Save / Recover --------------------------------------------------------------------------
    def recover_operations(self, saved: "Statement | None") -> None:
        """Replay saved operations (with the saved clones, which replace the originals in the
        job). With ``repipeline_guard`` a Pipeline clone already Pipelined on its node is
        silently dropped (S3)."""
        if saved is None:
            raise StatementError("statement is nil")
        for op in saved.operations:
            if op.name == OperationKind.EVICT:
                self.evict(op.task, op.reason)
            elif op.name == OperationKind.PIPELINE:
                self.pipeline(op.task, op.task.node_name, False)
            elif op.name == OperationKind.UNPIPELINE:
                self.un_pipeline(op.task)
            elif op.name == OperationKind.ALLOCATE:
                node = self.ssn.nodes.get(op.task.node_name)
                try:
                    if node is None:
                        raise StatementError(f"failed to find node {op.task.node_name}")
                    self.allocate(op.task, node)
                except StatementError:
                    self._unallocate(op.task)
                    raise

    def __len__(self) -> int:
        return len(self.operations)

    def __repr__(self) -> str:
        return "Statement(" + ", ".join(f"{o.name.name} {o.task.pod_key}@{o.task.node_name or o.reason}"
                                        for o in self.operations) + ")"


def save_operations(*stmts: Statement) -> Statement:
    """``SaveOperations``: a statement (no session) holding clones of the operations' tasks."""
    out = Statement(None)
    for s in stmts:
        for op in s.operations:
            out.operations.append(Operation(op.name, op.task.clone(), op.reason))
    return out

