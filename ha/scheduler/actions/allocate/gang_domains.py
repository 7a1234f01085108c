"""Allocate's side of the gang domains of the gang-aware eviction design: the hook that places a
job a ``GangSearchSpaceFn`` constrains within one of its domains (``allocate_in_domains``, called
by the action for such a job), and ``undo_side_effects``, which puts back what a thrown-away run
of the action changed outside its statement (also used by ``allocate.dry_run_allocate``, the dry
run the gang path of preempt and reclaim, ``ha.scheduler.actions.utils.gang_path``, nominates
from)."""
from __future__ import annotations

from typing import Any

from ha.scheduler.framework.gang_eviction import PURPOSE_ALLOCATE
from ha.scheduler.framework.statement import OperationKind
from ha.scheduler.framework.util import PriorityQueue

__all__ = ["NOT_HANDLED", "allocate_in_domains", "undo_side_effects"]

NOT_HANDLED = object()


class undo_side_effects:
    """Puts back what a dry run of allocate changes outside its statement."""

    def __init__(self, job: Any, tasks: list[Any]):
        self.job, self.tasks = job, tasks

    def __enter__(self) -> None:
        self.node_names = {t.uid: (t.pod.get("spec") or {}).get("nodeName") for t in self.tasks}
        self.last_tx = {t.uid: t.last_transaction for t in self.tasks}
        self.fit = dict(self.job.nodes_fit_errors)

    def __exit__(self, *exc: Any) -> None:
        for t in self.tasks:
            spec = t.pod.setdefault("spec", {})
            spec["nodeName"] = self.node_names.get(t.uid) or ""
            t.last_transaction = self.last_tx.get(t.uid)
        self.job.nodes_fit_errors = self.fit


def allocate_in_domains(action: Any, job: Any, tasks: PriorityQueue) -> Any:
    """Allocate over the job's domains (an exhaustive search, where eviction takes the first fit):
    simulate every domain, keep the best — Ready over Pipelined, more tasks placed, more of them
    Allocated, earlier (preferred) domain — and run it for real. NOT_HANDLED when no plugin
    constrains the job."""
    ssn = action.ssn
    space = ssn.gang_valid_domains(job, PURPOSE_ALLOCATE)
    if not space:
        return NOT_HANDLED
    best: tuple | None = None
    members = tasks.items()
    for idx, dom in enumerate(space):
        if not dom:
            continue
        with undo_side_effects(job, members):
            stmt = action.allocate_resources_for_tasks(job, tasks.clone(), nodes=dom)
            if stmt is None:
                continue
            n_alloc = sum(1 for op in stmt.operations if op.name == OperationKind.ALLOCATE)
            n_pipe = sum(1 for op in stmt.operations if op.name == OperationKind.PIPELINE)
            score = (ssn.job_ready(job), n_alloc + n_pipe, n_alloc, -idx)
            stmt.discard()
        if best is None or score > best[0]:
            best = (score, idx)
    target = space[best[1]] if best is not None else space[0]
    return action.allocate_resources_for_tasks(job, tasks, nodes=target)
