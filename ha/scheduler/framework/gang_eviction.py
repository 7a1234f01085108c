"""The gang-aware eviction design: search purposes, bundles, ROI and the default
``GangVictimSelectorFn`` (``SelectGangVictimsInDomain``, the design's victim selection).

* A candidate job's tasks inside the domain are split into a **Safe** bundle (surplus above
  ``minAvailable`` — global and per role — or every local task of a gang that is already broken)
  and a **Whole** bundle (the core tasks; evicting any of them restarts the gang).
* Bundles are sorted by five keys: gang state (Safe first), ``VictimQueueOrderFn``, ROI (only when
  the two ROIs differ by more than the threshold, 0.05), ``JobOrderFn`` (lower priority evicted
  first), job creation time.
* The sorted bundles are flattened and validated by ONE batched Preemptable/Reclaimable call;
  a Whole bundle with any rejected task is dropped, a Safe bundle shrinks to its approved tasks.
* Valid bundles are re-sorted (shrunk Safe bundles changed their ROI) and taken greedily until the
  freed resources cover the need on every requested dimension; a Whole bundle is taken entire, a
  Safe bundle only up to the task that covers the need (its tasks are evictable one by one).

ROI = Local Gain / Global Cost over the dimensions the preemptor requests (``pods`` excluded):
Local Gain = Σ min(local_i, need_i)/need_i, Global Cost = Σ global_i/need_i.

The Global cost of a Whole bundle is the job's whole running footprint (``job.allocated``: the gang
restarts); that of a Safe bundle is its own tasks (seed: "zero gang cost"; a literal zero would make
every Safe ROI infinite and the ROI key meaningless between Safe bundles, so the tasks themselves
are the cost — for requested-only resources this gives ROI 1.0 unless the bundle overshoots).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cmp_to_key
from typing import Any, Callable, Iterable

from ha.scheduler.api import MIN_RESOURCE, Resource, TaskStatus
from ha.scheduler.api.resource import PODS

__all__ = ["PURPOSE_ALLOCATE", "PURPOSE_EVICT", "SAFE", "WHOLE", "ROI_THRESHOLD", "SearchSpace",
           "Bundle", "GangEvictionContext", "BundleSelection", "needed_dims", "local_gain_score",
           "global_cost_score", "calculate_roi", "create_bundles", "compare_bundles", "sort_bundles",
           "run_bundle_selection", "select_gang_victims_in_domain", "covers", "sum_resources"]

PURPOSE_ALLOCATE = 0
PURPOSE_EVICT = 1

SAFE = 0
WHOLE = 1
ROI_THRESHOLD = 0.05

_READY = frozenset({TaskStatus.BOUND, TaskStatus.BINDING, TaskStatus.RUNNING, TaskStatus.ALLOCATED,
                    TaskStatus.SUCCEEDED})


class SearchSpace(list):
    """``OrderedValidDomains``: domains (lists of NodeInfo) best first. ``hard`` is False for a
    soft topology constraint (the sticky-domain retrofit then keeps the whole cluster);
    ``names`` label the domains (hypernode names) for errors and tests."""

    def __init__(self, domains: Iterable[list[Any]] = (), *, hard: bool = True,
                 names: Iterable[str] | None = None):
        super().__init__(list(d) for d in domains)
        self.hard = hard
        self.names = list(names) if names is not None else [f"domain-{i}" for i in range(len(self))]


# -- resources ------------------------------------------------------------------------------------

def needed_dims(needed: Resource) -> list[tuple[str, float]]:
    """The requested dimensions (value > epsilon), ``pods`` excluded."""
    out = []
    if needed.milli_cpu >= MIN_RESOURCE:
        out.append(("cpu", needed.milli_cpu))
    if needed.memory >= MIN_RESOURCE:
        out.append(("memory", needed.memory))
    for k, v in (needed.scalar_resources or {}).items():
        if k != PODS and v >= MIN_RESOURCE:
            out.append((k, v))
    return out


def local_gain_score(local: Resource, needed: Resource) -> float:
    return sum(min(local.get(k), n) / n for k, n in needed_dims(needed))


def global_cost_score(global_: Resource, needed: Resource) -> float:
    return sum(global_.get(k) / n for k, n in needed_dims(needed))


def calculate_roi(local: Resource, global_: Resource, needed: Resource) -> float:
    gain = local_gain_score(local, needed)
    cost = global_cost_score(global_, needed)
    if cost <= 0.0:
        return math.inf if gain > 0.0 else 0.0
    return gain / cost


def sum_resources(tasks: Iterable[Any]) -> Resource:
    r = Resource()
    for t in tasks:
        r.add(t.resreq)
    return r


def covers(freed: Resource, needed: Resource) -> bool:
    """Every requested dimension of ``needed`` is freed (within Volcano's epsilon)."""
    return all(freed.get(k) + MIN_RESOURCE > n for k, n in needed_dims(needed))


# -- bundles ----------------------------------------------------------------------------------------

@dataclass
class Bundle:
    kind: int                       # SAFE or WHOLE
    job: Any                        # JobInfo
    tasks: list[Any]                # TaskInfo, in victim order
    global_resources: Resource      # the cost basis (see the module docstring)
    broken: bool = False            # the gang is already broken (Case A)

    @property
    def local_resources(self) -> Resource:
        return sum_resources(self.tasks)

    def roi(self, needed: Resource) -> float:
        g = self.local_resources if self.kind == SAFE else self.global_resources
        return calculate_roi(self.local_resources, g, needed)

    @property
    def kind_name(self) -> str:
        return "safe" if self.kind == SAFE else "whole"

    def task_names(self) -> list[str]:
        return [t.name for t in self.tasks]

    def __repr__(self) -> str:
        return f"Bundle({self.kind_name} {self.job.uid}: {', '.join(self.task_names())})"


def _pod_index(name: str) -> int:
    parts = name.split("-")
    try:
        return int(parts[-1]) if len(parts) >= 2 else -1
    except ValueError:
        return -1


def _victim_task_key(needed: Resource) -> Callable[[Any], tuple]:
    """Within a job (the victim order before bundling): coverage of the need (higher first), task
    priority (lower first), size in need units (smaller first: least waste), creation time
    (youngest first); then the pod-name index and name, youngest-looking first, for a stable order."""

    def key(t: Any) -> tuple:
        return (-local_gain_score(t.resreq, needed), t.priority, global_cost_score(t.resreq, needed),
                -float(t.creation_timestamp or 0.0), -_pod_index(t.name), _neg_str(t.name))

    return key


def _neg_str(s: str) -> tuple:
    return tuple(-ord(c) for c in s)


def _role_ready(job: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for st, ts in job.task_status_index.items():
        if st in _READY:
            for t in ts.values():
                out[t.task_role] = out.get(t.task_role, 0) + 1
    return out


def create_bundles(job: Any, local_tasks: list[Any], needed: Resource) -> list[Bundle]:
    """Phase 1: split a job's local tasks into a Safe and a Whole bundle (either may be absent)."""
    if not local_tasks:
        return []
    tasks = sorted(local_tasks, key=_victim_task_key(needed))
    ready = job.ready_task_num()
    global_min = job.min_available
    global_surplus = ready - global_min
    # elastic jobs (minAvailable < Σ role mins): role constraints are ignored for safety checks
    enforce_roles = bool(job.task_min_available) and global_min >= job.task_min_available_total
    role_surplus: dict[str, int] = {}
    if enforce_roles:
        rr = _role_ready(job)
        role_surplus = {role: rr.get(role, 0) - m for role, m in job.task_min_available.items()}
    footprint = job.allocated.clone()
    broken = global_surplus < 0 or any(v < 0 for v in role_surplus.values())
    if broken:
        # Case A: already broken — evicting costs no gang restart
        return [Bundle(SAFE, job, tasks, sum_resources(tasks), broken=True)]
    safe, core = [], []
    for t in tasks:
        role_ok = (not enforce_roles) or t.task_role not in role_surplus or role_surplus[t.task_role] > 0
        if global_surplus > 0 and role_ok:
            safe.append(t)
            global_surplus -= 1
            if enforce_roles and t.task_role in role_surplus:
                role_surplus[t.task_role] -= 1
        else:
            core.append(t)
    out = []
    if safe:
        out.append(Bundle(SAFE, job, safe, sum_resources(safe)))
    if core:
        out.append(Bundle(WHOLE, job, core, footprint))
    return out


# -- ordering ---------------------------------------------------------------------------------------

def _job_order_vote(ssn: Any, l: Any, r: Any) -> int:
    """JobOrderFn plugins only (no creation-time fallback): <0 when l is scheduled first."""
    if ssn is None:
        return 0
    fn = getattr(ssn, "job_order_compare", None)
    if fn is not None:
        return fn(l, r)
    return 0


def compare_bundles(a: Bundle, b: Bundle, needed: Resource, *, ssn: Any = None, preemptor_queue: Any = None,
                    threshold: float = ROI_THRESHOLD, priority_before_roi: bool = False) -> int:
    """The bundles' sort: <0 when ``a`` is evicted before ``b``."""
    # 1. gang state: Safe/Broken before Whole
    if a.kind != b.kind:
        return -1 if a.kind < b.kind else 1
    # 2. queue hierarchy (VictimQueueOrderFn), only between different queues
    if ssn is not None and a.job.queue != b.job.queue:
        qa, qb = ssn.queues.get(a.job.queue), ssn.queues.get(b.job.queue)
        if qa is not None and qb is not None:
            a_first = ssn.victim_queue_order_fn(qa, qb, preemptor_queue)
            b_first = ssn.victim_queue_order_fn(qb, qa, preemptor_queue)
            if a_first != b_first:
                return -1 if a_first else 1

    def roi_key() -> int:
        ra, rb = a.roi(needed), b.roi(needed)
        if ra == rb:
            return 0
        if math.isinf(ra) or math.isinf(rb) or abs(ra - rb) > threshold:
            return -1 if ra > rb else 1
        return 0

    def job_key() -> int:
        # a job scheduled first (higher priority) is evicted last
        j = _job_order_vote(ssn, a.job, b.job)
        return 0 if j == 0 else (1 if j < 0 else -1)

    keys = (job_key, roi_key) if priority_before_roi else (roi_key, job_key)
    for k in keys:
        r = k()
        if r != 0:
            return r
    # 5. creation time (seed: A.CreationTime < B.CreationTime first), then a stable tie-break
    ca, cb = float(a.job.creation_timestamp or 0.0), float(b.job.creation_timestamp or 0.0)
    if ca != cb:
        return -1 if ca < cb else 1
    if a.job.uid != b.job.uid:
        return -1 if str(a.job.uid) < str(b.job.uid) else 1
    return 0


def sort_bundles(bundles: list[Bundle], needed: Resource, **kw: Any) -> list[Bundle]:
    return sorted(bundles, key=cmp_to_key(lambda a, b: compare_bundles(a, b, needed, **kw)))


# -- selection --------------------------------------------------------------------------------------

@dataclass
class GangEvictionContext:
    """What the selector needs besides (preemptor, needed, candidates).

    ``local_tasks``: job uid -> the candidate tasks of that job inside the domain (already filtered
    by the action: status, preemptable, queue rules). ``evictable(preemptor_task, tasks)`` is the
    batched Preemptable/Reclaimable call."""
    kind: str                                        # "preempt" or "reclaim"
    preemptor_task: Any
    domain: list[Any]
    local_tasks: dict[Any, list[Any]]
    evictable: Callable[[Any, list[Any]], list[Any]]
    ssn: Any = None
    threshold: float = ROI_THRESHOLD
    priority_before_roi: bool = False


@dataclass
class BundleSelection:
    """The whole trace of one selection (tests and diagnostics read it)."""
    initial: list[Bundle] = field(default_factory=list)      # after phase 2
    allowed: set = field(default_factory=set)                # task uids approved in phase 3
    valid: list[Bundle] = field(default_factory=list)        # after phases 3-4
    selected: list[Bundle] = field(default_factory=list)     # phase 5
    freed: Resource = field(default_factory=Resource)
    covered: bool = False

    @property
    def victims(self) -> dict[Any, list[Any]]:
        out: dict[Any, list[Any]] = {}
        for b in self.selected:
            out.setdefault(b.job.uid, []).extend(t.uid for t in b.tasks)
        return out

    def victim_tasks(self) -> list[Any]:
        return [t for b in self.selected for t in b.tasks]


def run_bundle_selection(preemptor_job: Any, needed: Resource, candidates: list[Any],
                         ctx: GangEvictionContext) -> BundleSelection:
    ssn = ctx.ssn
    pq = ssn.queues.get(preemptor_job.queue) if ssn is not None else None
    kw = dict(ssn=ssn, preemptor_queue=pq, threshold=ctx.threshold,
              priority_before_roi=ctx.priority_before_roi)
    sel = BundleSelection()
    bundles: list[Bundle] = []
    for job in candidates:
        bundles.extend(create_bundles(job, list(ctx.local_tasks.get(job.uid) or ()), needed))
    sel.initial = sort_bundles(bundles, needed, **kw)
    ordered = [t for b in sel.initial for t in b.tasks]
    if not ordered:
        return sel
    allowed = {t.uid for t in ctx.evictable(ctx.preemptor_task, ordered)}  # ONE batched call
    sel.allowed = allowed
    valid: list[Bundle] = []
    for b in sel.initial:
        ok = [t for t in b.tasks if t.uid in allowed]
        if len(ok) == len(b.tasks):
            valid.append(b)
        elif b.kind == SAFE and ok:
            valid.append(Bundle(b.kind, b.job, ok, sum_resources(ok), broken=b.broken))
        # a Whole bundle with any rejected task is dropped (atomic enforcement)
    sel.valid = sort_bundles(valid, needed, **kw)
    freed = Resource()
    for b in sel.valid:
        if covers(freed, needed):  # nothing needed -> nothing selected
            break
        if b.kind == SAFE:
            # surplus tasks are evictable one by one: take only the prefix that covers the need
            part: list[Any] = []
            for t in b.tasks:
                if covers(freed, needed):
                    break
                part.append(t)
                freed.add(t.resreq)
            sel.selected.append(b if len(part) == len(b.tasks) else
                                Bundle(SAFE, b.job, part, sum_resources(part), broken=b.broken))
            continue
        sel.selected.append(b)
        freed.add(b.local_resources)
    sel.freed = freed
    sel.covered = covers(freed, needed)
    return sel


def select_gang_victims_in_domain(preemptor_job: Any, needed: Resource, candidates: list[Any],
                                  ctx: GangEvictionContext) -> dict[Any, list[Any]]:
    """The default ``GangVictimSelectorFn``: {job uid: [task uid, ...]}."""
    return run_bundle_selection(preemptor_job, needed, candidates, ctx).victims
