"""The gang-aware eviction design's pipeline shared by preempt and reclaim (search space, then
first fit over the domains) and the sticky-domain retrofit of the legacy loops. Allocate's own
side of the design -- its domain hook and the dry run used in step c below -- is
``ha.scheduler.actions.allocate.gang_domains``.

Gang path (``preempt.gangAwareEnable`` / ``reclaim.gangAwareEnable``), per starving job:

1. the gang = the Pending tasks needed to reach ``minAvailable`` (role deficits first);
2. domains = ``ssn.gang_valid_domains(job, PURPOSE_EVICT)`` (the whole cluster when no plugin has
   an opinion); first fit over them, in order:
   a. need = gang request − Σ FutureIdle of the domain, on the requested dimensions;
   b. victims = ``ssn.gang_victim_selector`` (default: the bundle algorithm) over the candidate
      tasks in the domain (preempt: Bound/Running, preemptable, same queue, other job; reclaim:
      Running, preemptable, other Reclaimable queue); fail the domain unless they cover the need;
   c. evict them in a new statement, dry-run ``allocate`` of the whole gang restricted to the
      domain, then Pipeline (nominate) every task of the gang where the dry run put it;
   d. commit if JobPipelined, else discard and try the next domain.

Everything else about the legacy actions is untouched when the flag is off.
"""
from __future__ import annotations

from typing import Any, Callable

from ha.scheduler.actions.allocate import dry_run_allocate
from ha.scheduler.api import Resource, TaskStatus, preemptable_status
from ha.scheduler.conf import GANG_AWARE_KEY
from ha.scheduler.framework.gang_eviction import (PURPOSE_EVICT, ROI_THRESHOLD, GangEvictionContext,
                                                  SearchSpace, covers, needed_dims)
from ha.scheduler.framework.statement import StatementError
from ha.scheduler.framework.util import PriorityQueue

__all__ = ["GANG_AWARE_KEY", "gang_aware_enabled", "gang_tasks_to_place", "domain_need",
           "execute_gang_path", "StickyDomains", "GANG_INTEGRITY_OVERRIDES"]

PRIORITY_BEFORE_ROI_KEY = "gangPriorityBeforeROI"
ROI_THRESHOLD_KEY = "gangROIThreshold"


def _permit_all(evictor: Any, evictees: list[Any]) -> tuple[list[Any], int]:
    return list(evictees), 1


# In the gang path the framework guards gang integrity with bundles (the design relaxes the gang
# plugin's constraints): its minMember cut-off would reject every Whole bundle, so for the
# batched call it approves every candidate (it still votes, so a tier is not left empty).
GANG_INTEGRITY_OVERRIDES: dict[str, Callable] = {"gang": _permit_all}


def _arg_bool(ssn: Any, action: str, key: str) -> bool:
    """``<key>`` or ``<action>.<key>`` in the action's arguments, or ``<action>.<key>`` in any
    plugin's arguments (the gang-aware design's example configuration puts it there)."""
    args = ssn.conf.action_arguments(action)
    if args.get_bool(key, False) or args.get_bool(f"{action}.{key}", False):
        return True
    for tier in ssn.tiers:
        for opt in tier.plugins:
            v = (opt.arguments or {}).get(f"{action}.{key}")
            if v is True or (isinstance(v, str) and v.lower() == "true"):
                return True
    return False


def gang_aware_enabled(ssn: Any, action: str) -> bool:
    return _arg_bool(ssn, action, GANG_AWARE_KEY)


# -- the gang ---------------------------------------------------------------------------------------

def gang_tasks_to_place(ssn: Any, job: Any) -> list[Any]:
    """The Pending, non-gated, non-BestEffort tasks that bring the job to ``minAvailable``:
    per-role deficits first, then the global deficit, each in TaskOrder."""
    pending = [t for t in (job.task_status_index.get(TaskStatus.PENDING) or {}).values()
               if not t.sch_gated and not t.resreq.is_empty()]
    q = PriorityQueue(ssn.task_order_fn, pending)
    ordered = []
    while not q.empty():
        ordered.append(q.pop())
    deficit = job.min_available - (job.ready_task_num() + job.waiting_task_num())
    if deficit <= 0:
        return []
    chosen: list[Any] = []
    if job.task_min_available and job.min_available >= job.task_min_available_total:
        have: dict[str, int] = {}
        for st, ts in job.task_status_index.items():
            if st in (TaskStatus.BOUND, TaskStatus.BINDING, TaskStatus.RUNNING, TaskStatus.ALLOCATED,
                      TaskStatus.SUCCEEDED, TaskStatus.PIPELINED):
                for t in ts.values():
                    have[t.task_role] = have.get(t.task_role, 0) + 1
        for role, m in job.task_min_available.items():
            need = m - have.get(role, 0)
            for t in ordered:
                if need <= 0:
                    break
                if t.task_role == role and t not in chosen:
                    chosen.append(t)
                    need -= 1
    for t in ordered:
        if len(chosen) >= deficit:
            break
        if t not in chosen:
            chosen.append(t)
    return chosen


def domain_need(tasks: list[Any], domain: list[Any]) -> Resource:
    """Gang request minus the domain's FutureIdle, per requested dimension, never negative."""
    req = Resource()
    for t in tasks:
        req.add(t.init_resreq)
    free = Resource()
    for n in domain:
        free.add(n.future_idle())
    need = Resource()
    for k, v in needed_dims(req):
        short = v - free.get(k)
        if short > 0:
            if k == "cpu":
                need.milli_cpu = short
            elif k == "memory":
                need.memory = short
            else:
                need.add_scalar(k, short)
    return need


# -- candidates -------------------------------------------------------------------------------------

def _candidate_filter(ssn: Any, kind: str, preemptor_job: Any, preemptor: Any) -> Callable[[Any], bool]:
    if kind == "preempt":
        def ok(t: Any) -> bool:
            if not preemptable_status(t.status) or not t.preemptable:
                return False
            if preemptor.best_effort and not t.best_effort:
                return False
            j = ssn.jobs.get(t.job)
            return j is not None and j.queue == preemptor_job.queue and t.job != preemptor_job.uid
        return ok

    def ok_reclaim(t: Any) -> bool:
        if t.status != TaskStatus.RUNNING or not t.preemptable:
            return False
        j = ssn.jobs.get(t.job)
        if j is None or j.queue == preemptor_job.queue:
            return False
        q = ssn.queues.get(j.queue)
        return q is not None and q.reclaimable()
    return ok_reclaim


def _local_candidates(ssn: Any, domain: list[Any], flt: Callable[[Any], bool]) -> dict[Any, list[Any]]:
    out: dict[Any, list[Any]] = {}
    for n in domain:
        for t in list(n.tasks.values()):
            if flt(t):
                out.setdefault(t.job, []).append(t.clone())
    return out


# -- the gang path ----------------------------------------------------------------------------------

def _starving_jobs(ssn: Any, kind: str) -> list[Any]:
    """Preemptor jobs as the legacy actions collect them, queues in QueueOrder, jobs in JobOrder."""
    by_queue: dict[Any, PriorityQueue] = {}
    for job in list(ssn.jobs.values()):
        if job.is_pending():
            continue
        vr = ssn.job_valid(job)
        if vr is not None and not vr.passed:
            continue
        if job.queue not in ssn.queues or not ssn.job_starving(job):
            continue
        by_queue.setdefault(job.queue, PriorityQueue(ssn.job_order_fn)).push(job)
    qq = PriorityQueue(ssn.queue_order_fn, [ssn.queues[q] for q in by_queue])
    out = []
    while not qq.empty():
        queue = qq.pop()
        if kind == "reclaim" and ssn.overused(queue):
            continue
        jq = by_queue[queue.uid]
        while not jq.empty():
            out.append(jq.pop())
    return out


def execute_gang_path(ssn: Any, kind: str) -> None:
    """``executeGangPath`` for ``kind`` "preempt" or "reclaim"."""
    priority_first = _arg_bool(ssn, kind, PRIORITY_BEFORE_ROI_KEY)
    threshold = ssn.conf.action_arguments(kind).get_float(ROI_THRESHOLD_KEY, ROI_THRESHOLD)
    for job in _starving_jobs(ssn, kind):
        if not ssn.job_starving(job):
            continue
        tasks = gang_tasks_to_place(ssn, job)
        if not tasks:
            continue
        if any(t.preemption_policy == "Never" for t in tasks):
            continue
        queue = ssn.queues[job.queue]
        if kind == "reclaim" and not all(ssn.preemptive(queue, t) for t in tasks):
            continue
        if any(ssn.pre_predicate_fn(t) is not None for t in tasks):
            continue
        space = ssn.gang_valid_domains(job, PURPOSE_EVICT)
        if not space:
            space = SearchSpace([list(ssn.node_list)], hard=False, names=["cluster"])
        for domain in space:
            if gang_evict_in_domain(ssn, kind, job, tasks, domain, threshold=threshold,
                                    priority_before_roi=priority_first):
                break


def gang_evict_in_domain(ssn: Any, kind: str, job: Any, tasks: list[Any], domain: list[Any], *,
                         threshold: float = ROI_THRESHOLD, priority_before_roi: bool = False) -> bool:
    if not domain:
        return False
    stmt = ssn.statement()
    need = domain_need(tasks, domain)
    if needed_dims(need):
        flt = _candidate_filter(ssn, kind, job, tasks[0])
        local = _local_candidates(ssn, domain, flt)
        candidates = [ssn.jobs[j] for j in sorted(local, key=str) if j in ssn.jobs]
        ctx = GangEvictionContext(
            kind=kind, preemptor_task=tasks[0], domain=domain, local_tasks=local, ssn=ssn,
            evictable=lambda p, ts: ssn.gang_evictable(kind, p, ts, GANG_INTEGRITY_OVERRIDES),
            threshold=threshold, priority_before_roi=priority_before_roi)
        victims = ssn.gang_victim_selector(job, need, candidates, ctx)
        by_uid = {t.uid: t for ts in local.values() for t in ts}
        chosen = [by_uid[u] for us in victims.values() for u in us if u in by_uid]
        freed = Resource()
        for t in chosen:
            freed.add(t.resreq)
        if not covers(freed, need):
            return False
        for v in chosen:
            try:
                stmt.evict(v, kind)
            except StatementError as e:
                ssn.record_error(f"gang {kind}: failed to evict {v.pod_key} for {job.uid}: {e}")
                stmt.discard()
                return False
    placements = dry_run_allocate(ssn, job, tasks, domain)
    if placements is None:
        stmt.discard()
        return False
    evicted = bool(stmt.operations)
    for task, node in placements:
        try:
            stmt.pipeline(task, node, evicted)
        except StatementError as e:
            ssn.record_error(f"gang {kind}: failed to pipeline {task.pod_key} on {node}: {e}")
            stmt.un_pipeline(task)
            stmt.discard()
            return False
    if ssn.job_pipelined(job):
        stmt.commit()
        return True
    stmt.discard()
    return False


# -- sticky-domain retrofit -------------------------------------------------------------------------

class StickyDomains:
    """Sticky domains, the retrofit of the legacy task-by-task loops: the first task of a job with a
    *hard* topology constraint that gets a placement pins the domain it got it in (domains tried in
    the plugin's order); later tasks of the job search only that domain; a later task that fails
    there fails the job for this cycle (``failed``). Soft constraints and unconstrained jobs: all
    nodes."""

    def __init__(self, ssn: Any):
        self.ssn = ssn
        self.active = bool(getattr(ssn, "gang_search_space_fns", None))
        self.pinned: dict[Any, frozenset[str]] = {}
        self.failed_jobs: set[Any] = set()

    def failed(self, job_uid: Any) -> bool:
        return job_uid in self.failed_jobs

    def _domains(self, job: Any) -> list[frozenset[str]] | None:
        if job.uid in self.pinned:
            return [self.pinned[job.uid]]
        space = self.ssn.gang_valid_domains(job, PURPOSE_EVICT)
        if not space or not getattr(space, "hard", True):
            return None
        return [frozenset(n.name for n in d) for d in space]

    def run(self, job: Any, nodes: list[Any], attempt: Callable[[list[Any]], bool]) -> bool:
        if not self.active or job is None:
            return attempt(nodes)
        if job.uid in self.failed_jobs:
            return False
        doms = self._domains(job)
        if doms is None:
            return attempt(nodes)
        for d in doms:
            sub = [n for n in nodes if n.name in d]
            if sub and attempt(sub):
                self.pinned.setdefault(job.uid, d)
                return True
        if job.uid in self.pinned:
            self.failed_jobs.add(job.uid)  # fail fast: no split gang
        return False
