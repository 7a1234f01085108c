"""JobInfo (``api/job_info.go`` :320-1200): a PodGroup and its tasks, with Volcano's counters."""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Iterable

from .duration import parse_go_duration
from .helpers import JDB_MAX_UNAVAILABLE, JDB_MIN_AVAILABLE, PREEMPTABLE_KEY, REVOCABLE_ZONE_KEY
from .resource import PODS, ZERO, Resource, exact_fields, positive_part
from .task_info import TaskInfo, _parse_bool
from .types import (POD_REASON_SCHEDULABLE, POD_REASON_UNSCHEDULABLE, FitErrors, TaskStatus)

__all__ = ["JobInfo", "DisruptionBudget", "copy_object", "PodGroupPhase", "new_job_info"]

log = logging.getLogger(__name__)

_S = TaskStatus
PENDING, ALLOCATED, PIPELINED, BINDING, BOUND, RUNNING, SUCCEEDED = (
    _S.PENDING, _S.ALLOCATED, _S.PIPELINED, _S.BINDING, _S.BOUND, _S.RUNNING, _S.SUCCEEDED)
_ALLOCATED = frozenset({BOUND, BINDING, RUNNING, ALLOCATED})
_READY = _ALLOCATED | {SUCCEEDED}
_VALID = _ALLOCATED | {SUCCEEDED, PIPELINED, PENDING}
_EMPTY: dict = {}


class PodGroupPhase:
    PENDING = "Pending"
    RUNNING = "Running"
    UNKNOWN = "Unknown"
    INQUEUE = "Inqueue"
    COMPLETED = "Completed"


# scheduling/v1beta1 JobWaitingTime: a PodGroup's own SLA waiting time (plugins/sla)
JOB_WAITING_TIME = "sla-waiting-time"

# PodGroup condition types / reasons the job updater writes (scheduling/v1beta1)
POD_GROUP_READY = "pod group is ready"
POD_GROUP_NOT_READY = "pod group is not ready"


def copy_object(o: Any) -> Any:
    """Deep copy of a msgpack-shaped object (dicts, lists, scalars) — much faster than deepcopy."""
    if isinstance(o, dict):
        return {k: copy_object(v) for k, v in o.items()}
    if isinstance(o, list):
        return [copy_object(v) for v in o]
    return o


def copy_pod_group(pg: dict) -> dict:
    """A job clone's PodGroup: its own top level, all under it shared with the cache's PodGroup.
    A session changes a PodGroup only by putting a new status in place (``writable_status``; the
    job updater's new status), never by writing into the shared one, so nothing it does reaches
    the cache's; at 10,000 jobs a session, a deep copy of each was a third of a snapshot."""
    return dict(pg)


def writable_status(pg: dict) -> dict:
    """The status of a job clone's PodGroup, to write into: a copy of the status and of its
    conditions list put in its place (the status may be the cache's). A condition is replaced,
    never written into, so the condition dicts stay shared."""
    status = dict(pg.get("status") or _EMPTY)
    conds = status.get("conditions")
    if conds is not None:
        status["conditions"] = list(conds)
    pg["status"] = status
    return status


_EXACT = float(2 ** 53)


def _not_whole(v: float | None) -> bool:
    return v is None or bool(v % 1.0) or not 0.0 <= v < _EXACT


def _exact_sum(r: Resource, counted: bool) -> bool:
    """A running sum of plain requests that adding them up again reproduces: whole amounts below
    2**53, and as scalars the pod count if any task was ``counted`` into it, else none (a nil map:
    a sum whose last task left keeps a zero count, which adding up again would not)."""
    m, b, sk = r.milli_cpu, r.memory, r.scalar_resources
    if m % 1.0 or b % 1.0 or not (0.0 <= m < _EXACT and 0.0 <= b < _EXACT) or r.max_task_num:
        return False
    if not counted:
        return sk is None
    return sk is not None and len(sk) == 1 and not _not_whole(sk.get(PODS))


def _sums(tasks: dict) -> tuple[Resource, Resource]:
    """(allocated, total request) of ``tasks`` added up in order, as add_task_info does."""
    allocated, total = Resource(), Resource()
    for t in tasks.values():
        total.add(t.resreq)
        if t.status in _ALLOCATED:
            allocated.add(t.resreq)
    return allocated, total


def same_sums(job: "JobInfo") -> str | None:
    """None if the job's running sums equal its tasks added up in order, else what differs."""
    a, tr = _sums(job.tasks)
    for what, kept, fresh in (("allocated", job.allocated, a), ("total_request", job.total_request, tr)):
        if exact_fields(kept) != exact_fields(fresh):
            return f"{what}: kept {kept} != added up {fresh}"
    return None


@dataclass
class DisruptionBudget:
    min_available: str = ""
    max_unavailable: str = ""

    def clone(self) -> "DisruptionBudget":
        return DisruptionBudget(self.min_available, self.max_unavailable)


class JobInfo:
    """Volcano's JobInfo. ``pod_group`` is the PodGroup dict (docs/object-shapes.md) or None."""

    __slots__ = (
        "uid", "pg_uid", "name", "namespace", "queue", "priority", "min_available", "waiting_time",
        "job_fit_errors", "nodes_fit_errors", "task_status_index", "tasks", "task_min_available",
        "task_min_available_total", "allocated", "total_request", "creation_timestamp", "pod_group",
        "schedule_start_timestamp", "preemptable", "revocable_zone", "budget", "allocated_hyper_node",
        "sub_job_allocated_hyper_node", "sums_plain", "_changes", "settled_close", "queue_account",
        "__weakref__",
    )

    def __init__(self, uid: str, *tasks: TaskInfo):
        self.uid = uid
        self.pg_uid = ""
        self.name = ""
        self.namespace = ""
        self.queue = ""
        self.priority = 0
        self.min_available = 0
        self.waiting_time: float | None = None
        self.job_fit_errors = ""
        self.nodes_fit_errors: dict[str, FitErrors] = {}
        self.task_status_index: dict[TaskStatus, dict[str, TaskInfo]] = {}
        self.tasks: dict[str, TaskInfo] = {}
        self.task_min_available: dict[str, int] = {}
        self.task_min_available_total = 0
        self.allocated = Resource()
        self.total_request = Resource()
        self.creation_timestamp = 0.0
        self.pod_group: dict | None = None
        self.schedule_start_timestamp = 0.0
        self.preemptable = False
        self.revocable_zone = ""
        self.budget = DisruptionBudget()
        self.allocated_hyper_node = ""
        # the default sub-job's AllocatedHyperNode (Go keeps it apart from the job's)
        self.sub_job_allocated_hyper_node = ""
        # a snapshot's clone that took its job's running sums (clone()): ``allocated`` is its
        # allocated tasks added up, exactly, until a task of it changes
        self.sums_plain = False
        # the snapshot's reuse of unchanged job clones (snapshot_reuse.py): a cache job reports a
        # change of its tasks part to the cache's set of jobs changed since the last snapshot, a
        # session's clone to the set of clones that session changed; None costs one test
        self._changes: set[str] | None = None
        # the last session's close verdict on this clone, kept while it holds
        # (framework/settled_close.py); a fresh clone has none
        self.settled_close = None
        # its account of its queue's attributes at the last session's open, kept while it holds
        # (plugins/queue_attrs.py QueueAccount)
        self.queue_account = None
        for t in tasks:
            self.add_task_info(t)

    def report_change(self) -> None:
        """A change of this job's tasks part: the mutators below, and a task field written in place
        (the cache's and the session's few such writes call it themselves)."""
        if self._changes is not None:
            self._changes.add(self.uid)

    # ---- PodGroup -----------------------------------------------------------------------------
    def set_pod_group(self, pg: dict) -> None:
        md = pg.get("metadata") or _EMPTY
        spec = pg.get("spec") or _EMPTY
        self.name = md.get("name", "")
        self.namespace = md.get("namespace", "")
        self.min_available = int(spec.get("minMember") or 0)
        self.queue = spec.get("queue") or ""
        self.creation_timestamp = float(md.get("creationTimestamp") or 0.0)
        self.waiting_time = self._extract_waiting_time(md)
        self.preemptable = self._extract_preemptable(md)
        self.revocable_zone = self._extract_revocable_zone(md)
        self.budget = self._extract_budget(md)
        self.parse_min_member_info(pg)
        self.pg_uid = md.get("uid", "")
        self.pod_group = pg

    @staticmethod
    def _extract_waiting_time(md: dict) -> float | None:
        """extractWaitingTime: the ``sla-waiting-time`` annotation as seconds; None when absent,
        unparsable or not positive (Volcano logs and ignores it)."""
        raw = (md.get("annotations") or _EMPTY).get(JOB_WAITING_TIME)
        if raw is None:
            return None
        try:
            secs = parse_go_duration(raw)
        except ValueError:
            return None
        return secs if secs > 0 else None

    def unset_pod_group(self) -> None:
        self.pod_group = None

    @staticmethod
    def _extract_preemptable(md: dict) -> bool:
        for src in (md.get("annotations"), md.get("labels")):
            if src and PREEMPTABLE_KEY in src:
                b = _parse_bool(str(src[PREEMPTABLE_KEY]))
                return bool(b)
        return False

    @staticmethod
    def _extract_revocable_zone(md: dict) -> str:
        ann = md.get("annotations") or _EMPTY
        if REVOCABLE_ZONE_KEY in ann:
            return "*" if ann[REVOCABLE_ZONE_KEY] == "*" else ""
        if PREEMPTABLE_KEY in ann and _parse_bool(str(ann[PREEMPTABLE_KEY])):
            return "*"
        return ""

    @staticmethod
    def _extract_budget(md: dict) -> DisruptionBudget:
        ann = md.get("annotations") or _EMPTY
        if JDB_MIN_AVAILABLE in ann:
            return DisruptionBudget(ann[JDB_MIN_AVAILABLE], "")
        if JDB_MAX_UNAVAILABLE in ann:
            return DisruptionBudget("", ann[JDB_MAX_UNAVAILABLE])
        return DisruptionBudget()

    def parse_min_member_info(self, pg: dict) -> None:
        mtm = (pg.get("spec") or _EMPTY).get("minTaskMember") or {}
        self.task_min_available = {k: int(v) for k, v in mtm.items()}
        self.task_min_available_total = sum(self.task_min_available.values())

    @property
    def pod_group_phase(self) -> str:
        if self.pod_group is None:
            return ""
        return (self.pod_group.get("status") or _EMPTY).get("phase") or ""

    def get_min_resources(self) -> Resource:
        if self.pod_group is None:
            return Resource()
        mr = (self.pod_group.get("spec") or _EMPTY).get("minResources")
        return Resource.from_quantities(mr) if mr else Resource()

    def get_elastic_resources(self) -> Resource:
        if self.allocated is None:
            return Resource()
        if self.pod_group is None or not (self.pod_group.get("spec") or _EMPTY).get("minResources"):
            return positive_part(self.allocated)     # the diff with the empty minimum, uncopied
        inc, _ = self.allocated.diff(self.get_min_resources(), ZERO)
        return inc

    # ---- tasks --------------------------------------------------------------------------------
    def add_task_info(self, ti: TaskInfo) -> None:
        self.sums_plain = False
        self.report_change()
        self.tasks[ti.uid] = ti
        idx = self.task_status_index.get(ti.status)
        if idx is None:
            idx = self.task_status_index[ti.status] = {}
        idx[ti.uid] = ti
        self.total_request.add(ti.resreq)
        if ti.status in _ALLOCATED:
            self.allocated.add(ti.resreq)

    def update_task_status(self, task: TaskInfo, status: TaskStatus) -> None:
        """Delete the stored task (if any), set the status, re-add the *given* object."""
        if task.uid in self.tasks:
            self.delete_task_info(task)
        task.status = status
        self.add_task_info(task)

    def delete_task_info(self, ti: TaskInfo) -> None:
        self.sums_plain = False
        self.report_change()
        task = self.tasks.get(ti.uid)
        if task is None:
            log.debug("failed to find task <%s/%s> in job <%s/%s>", ti.namespace, ti.name,
                      self.namespace, self.name)
            return
        self.total_request.sub(task.resreq)
        if task.status in _ALLOCATED:
            self.allocated.sub(task.resreq)
        del self.tasks[task.uid]
        idx = self.task_status_index.get(task.status)
        if idx is not None:
            idx.pop(task.uid, None)
            if not idx:
                del self.task_status_index[task.status]

    def replace_task_info(self, stored: TaskInfo, ti: TaskInfo) -> None:
        """``delete_task_info(stored)`` + ``add_task_info(ti)`` in one step, for the informer's
        update of a task that keeps its uid and status (``stored`` is ``self.tasks[ti.uid]``).
        Same resulting state, dict orders included (the task moves to the end of ``tasks`` and
        of its status index, whose status key moves to the end if it was the only entry), and
        the same resource arithmetic (sub then add, so float sums match exactly). ``stored`` may
        be ``ti`` itself (kept in place by the cache)."""
        self.sums_plain = False
        self.report_change()
        uid, st = ti.uid, ti.status
        tasks = self.tasks
        index = self.task_status_index
        idx = index.get(st)
        if (tasks.get(uid) is not stored or stored.uid != uid or stored.status != st
                or idx is None or uid not in idx):
            self.delete_task_info(stored)   # not the case this is for: the general path
            self.add_task_info(ti)
            return
        # a task kept in place (the cache's update of an unchanged task): only the orders move;
        # sub then add of its own request would leave the sums as they are (requests are whole
        # numbers of milli-units and bytes, exact in float arithmetic)
        kept = stored is ti
        allocated = st in _ALLOCATED
        if not kept:
            self.total_request.sub(stored.resreq)
            if allocated:
                self.allocated.sub(stored.resreq)
        del tasks[uid]
        tasks[uid] = ti
        if len(idx) == 1:
            del index[st]
            index[st] = {uid: ti}
        else:
            del idx[uid]
            idx[uid] = ti
        if not kept:
            self.total_request.add(ti.resreq)
            if allocated:
                self.allocated.add(ti.resreq)

    def copy_header(self, info: "JobInfo") -> None:
        """Copy everything but the tasks part (tasks, status index, sums) into ``info``, as
        ``clone`` does: what a session changes in every job clone it has without reporting it."""
        info.uid = self.uid
        info.pg_uid = self.pg_uid
        info.name = self.name
        info.namespace = self.namespace
        info.queue = self.queue
        info.priority = self.priority
        info.min_available = self.min_available
        info.waiting_time = self.waiting_time
        info.job_fit_errors = self.job_fit_errors
        info.nodes_fit_errors = {}
        info.task_min_available = dict(self.task_min_available)
        info.task_min_available_total = self.task_min_available_total
        info.creation_timestamp = self.creation_timestamp
        info.pod_group = copy_pod_group(self.pod_group) if self.pod_group is not None else None
        info.schedule_start_timestamp = self.schedule_start_timestamp
        info.preemptable = self.preemptable
        info.revocable_zone = self.revocable_zone
        info.budget = self.budget.clone()
        info.allocated_hyper_node = self.allocated_hyper_node
        info.sub_job_allocated_hyper_node = self.sub_job_allocated_hyper_node

    def clone(self) -> "JobInfo":
        """Deep copy; every task cloned (Volcano's TaskInfo.Clone); NodesFitErrors starts empty."""
        info = JobInfo.__new__(JobInfo)
        self.copy_header(info)
        info._changes = None
        info.settled_close = None
        info.queue_account = None
        info.task_status_index = {}
        info.tasks = {}
        # add_task_info for each task clone, in order, with the two sums left for below
        tasks = info.tasks
        index = info.task_status_index
        # plain: every request whole and non-negative, its only scalar the pod count (what
        # get_pod_resource_request gives a pod without extended resources)
        plain = True
        for uid, t in self.tasks.items():
            c = t.clone()
            tasks[uid] = c
            idx = index.get(c.status)
            if idx is None:
                idx = index[c.status] = {}
            idx[uid] = c
            if plain:
                r = c.resreq
                m, b, sk = r.milli_cpu, r.memory, r.scalar_resources
                if m % 1.0 or b % 1.0 or m < 0.0 or b < 0.0 or sk is None or len(sk) != 1:
                    plain = False
                else:
                    p = sk.get(PODS)
                    if p is None or p % 1.0 or p < 0.0:
                        plain = False
        a, tr = self.allocated, self.total_request
        if plain and _exact_sum(tr, bool(tasks)) and _exact_sum(
                a, any(s in _ALLOCATED for s in index)):
            # whole amounts below 2**53 add up exactly in any order, and the pod count is the
            # only scalar either way: this job's own running sums are what adding its tasks up
            # again would give, field for field
            info.allocated = a.clone()
            info.total_request = tr.clone()
            info.sums_plain = True
        else:
            info.allocated, info.total_request = _sums(tasks)
            info.sums_plain = False
        return info

    def allocated_sum(self, check: bool = False) -> Resource:
        """The allocated tasks' requests added up in status-index order, a new Resource (drf's
        and proportion's figure of a job at session open): the running sum's copy when it is
        that exactly (``sums_plain``), else added up. ``check``: add up anyway and raise
        ``AssertionError`` if a copy would have differed."""
        if self.sums_plain and not check:
            return self.allocated.clone()
        out = Resource()
        for status, tasks in self.task_status_index.items():
            if status in _ALLOCATED:
                for t in tasks.values():
                    out.add(t.resreq)
        if check and self.sums_plain and exact_fields(self.allocated) != exact_fields(out):
            raise AssertionError(f"job {self.uid}: allocated sum {self.allocated} != its tasks added up {out}")
        return out

    # ---- counters -----------------------------------------------------------------------------
    def _n(self, status: TaskStatus) -> int:
        idx = self.task_status_index.get(status)
        return len(idx) if idx else 0

    # (every session asks each of 10,000 jobs these several times: one pass over the few statuses
    # a job's tasks are in, instead of a look-up per status counted)
    def ready_task_num(self) -> int:
        n = 0
        for s, ts in self.task_status_index.items():
            if s in _READY:
                n += len(ts)
        return n

    def waiting_task_num(self) -> int:
        return self._n(PIPELINED)

    def pending_best_effort_task_num(self) -> int:
        idx = self.task_status_index.get(PENDING)
        return sum(1 for t in idx.values() if t.best_effort) if idx else 0

    def allocated_task_num(self) -> int:
        n = 0
        for s, ts in self.task_status_index.items():
            if s in _ALLOCATED:
                n += len(ts)
        return n

    def valid_task_num(self) -> int:
        n = 0
        for s, ts in self.task_status_index.items():
            if s in _VALID:
                n += len(ts)
        return n

    # (the pending best-effort tasks, a walk over the pending ones, are counted only when the
    # other counts fall short: every count is at least 0; gang's job order asks is_ready of both
    # jobs at every comparison)
    def is_ready(self) -> bool:
        n = self.ready_task_num()
        return n >= self.min_available or n + self.pending_best_effort_task_num() >= self.min_available

    def is_pipelined(self) -> bool:
        n = self.waiting_task_num() + self.ready_task_num()
        return n >= self.min_available or n + self.pending_best_effort_task_num() >= self.min_available

    def is_starving(self) -> bool:
        return self.waiting_task_num() + self.ready_task_num() < self.min_available

    # ---- network topology (job_info.go:1197-1338; no sub-group policies: the default sub-job
    # carries the PodGroup's networkTopology) ----------------------------------------------------
    def network_topology(self) -> dict | None:
        """``spec.networkTopology`` of the PodGroup, or None. A missing ``mode`` key reads as the
        CRD default ``hard``; an explicit ``""`` stays ``""`` (neither hard nor soft)."""
        if self.pod_group is None:
            return None
        nt = (self.pod_group.get("spec") or _EMPTY).get("networkTopology")
        return nt if isinstance(nt, dict) else None

    def with_network_topology(self) -> bool:
        return self.network_topology() is not None

    contains_network_topology = with_network_topology

    def is_hard_topology_mode(self) -> tuple[bool, int]:
        """(hard, highestTierAllowed): hard needs a non-nil highestTierAllowed."""
        nt = self.network_topology()
        if nt is None or nt.get("highestTierAllowed") is None:
            return False, 0
        return nt.get("mode", "hard") == "hard", int(nt["highestTierAllowed"])

    def is_soft_topology_mode(self) -> bool:
        nt = self.network_topology()
        return nt is not None and nt.get("mode", "hard") == "soft"

    def contains_hard_topology(self) -> bool:
        return self.is_hard_topology_mode()[0]

    def pending_min_resources(self) -> Resource:
        """The default sub-job's ``GetMinResources``: Σ InitResreq of its Pending tasks."""
        r = Resource()
        for t in (self.task_status_index.get(TaskStatus.PENDING) or _EMPTY).values():
            r.add(t.init_resreq)
        return r

    def is_pending(self) -> bool:
        # pod_group_phase in (Pending, ""), without the property: enqueue, allocate and backfill
        # ask it of every job each session
        pg = self.pod_group
        if pg is None:
            return True
        phase = (pg.get("status") or _EMPTY).get("phase")
        return not phase or phase == PodGroupPhase.PENDING

    def has_pending_tasks(self) -> bool:
        return self._n(PENDING) != 0

    # ---- per-role checks ----------------------------------------------------------------------
    def _role_counts(self, statuses: Iterable[TaskStatus], *, pending_empty: bool) -> dict[str, int]:
        wanted = set(statuses)
        out: dict[str, int] = {}
        for s, ts in self.task_status_index.items():
            if s in _ALLOCATED or s in wanted:
                for t in ts.values():
                    out[t.task_role] = out.get(t.task_role, 0) + 1
            elif pending_empty and s == PENDING:
                for t in ts.values():
                    if t.init_resreq.is_empty():
                        out[t.task_role] = out.get(t.task_role, 0) + 1
        return out

    def get_job_allocated_roles(self) -> dict[str, int]:
        return self._role_counts((SUCCEEDED,), pending_empty=True)

    def _no_role_minimum(self) -> bool:
        """No role asks for a task (minTaskMember empty or nothing above 0): the per-role checks
        below then hold whatever the counts are (and nothing starves) -- the same answers
        without counting every task of every job, several times a session."""
        tma = self.task_min_available
        return not tma or all(m <= 0 for m in tma.values())

    def check_task_valid(self) -> bool:
        if self.min_available < self.task_min_available_total or self._no_role_minimum():
            return True
        actual = self._role_counts((SUCCEEDED, PIPELINED, PENDING), pending_empty=False)
        for role, m in self.task_min_available.items():
            if m == 0:
                continue
            if actual.get(role, 0) < m:
                return False
        return True

    def check_task_ready(self) -> bool:
        if self.min_available < self.task_min_available_total or self._no_role_minimum():
            return True
        occ = self.get_job_allocated_roles()
        return all(occ.get(role, 0) >= m for role, m in self.task_min_available.items())

    def check_task_pipelined(self) -> bool:
        if self.min_available < self.task_min_available_total or self._no_role_minimum():
            return True
        occ = self._role_counts((SUCCEEDED, PIPELINED), pending_empty=True)
        return all(occ.get(role, 0) >= m for role, m in self.task_min_available.items())

    def check_task_starving(self) -> bool:
        if self.min_available < self.task_min_available_total:
            return True
        if self._no_role_minimum():
            return False
        occ = self._role_counts((SUCCEEDED, PIPELINED), pending_empty=False)
        return any(occ.get(role, 0) < m for role, m in self.task_min_available.items())

    # ---- fit errors ---------------------------------------------------------------------------
    def reset_fit_err(self) -> None:
        self.job_fit_errors = ""
        self.nodes_fit_errors = {}

    def fit_failed_roles(self, sub_job: str | None = None) -> set[str]:
        return {self.tasks[tid].task_role for tid in self.nodes_fit_errors if tid in self.tasks}

    def task_has_fit_errors(self, task: TaskInfo, sub_job: str | None = None) -> bool:
        if not task.task_role:
            return False
        return task.task_role in self.fit_failed_roles(sub_job)

    def default_sub_job_id(self) -> str:
        """This model has no sub-group policies: every job is its own single (default) sub-job."""
        return self.uid

    def contains_sub_job_policy(self) -> bool:
        return False

    def need_continue_allocating(self, sub_job: str | None = None) -> bool:
        """Whether allocation goes on after a task failed its predicates (job_info.go:921-969)."""
        n = len(self.tasks)
        if self.min_available == n:
            return False
        # the default sub-job holds every task and min = MinAvailable
        if self.min_available >= n:
            return False
        failed = self.fit_failed_roles(sub_job)
        pending: dict[str, int] = {}
        for t in (self.task_status_index.get(PENDING) or _EMPTY).values():
            pending[t.task_role] = pending.get(t.task_role, 0) + 1
        if self.min_available < self.task_min_available_total:
            left = sum(c for role, c in pending.items() if role not in failed)
            return self.ready_task_num() + left >= self.min_available
        allocated = self.get_job_allocated_roles()
        for role in failed:
            m = self.task_min_available.get(role, 0)
            if m == 0:
                continue
            if allocated.get(role, 0) < m:
                return False
        return True

    def task_scheduling_reason(self, tid: str) -> tuple[str, str, str]:
        """(reason, message, nominated_node_name) as v1.14.0 computes it at session close.

        The nomination is returned only for a Pipelined context with ``eviction_occurred``
        (read from ``last_transaction`` when set). PR #5045 drops it: callers on that profile
        ignore the third value."""
        t = self.tasks.get(tid)
        if t is None:
            return "", "", ""
        ctx = t.last_transaction if t.last_transaction is not None else t.get_transaction_context()
        msg = self.job_fit_errors
        st = ctx.status
        if st == ALLOCATED:
            return (POD_REASON_SCHEDULABLE,
                    f"Pod {t.namespace}/{t.name} can possibly be assigned to {ctx.node_name}, "
                    f"once minAvailable is satisfied", "")
        if st == PIPELINED:
            msg = (f"Pod {t.namespace}/{t.name} can possibly be assigned to {ctx.node_name}, "
                   f"once resource is released and minAvailable is satisfied")
            return POD_REASON_UNSCHEDULABLE, msg, (ctx.node_name if ctx.eviction_occurred else "")
        if st == PENDING:
            fe = self.nodes_fit_errors.get(tid)
            if fe is not None:
                return POD_REASON_UNSCHEDULABLE, fe.error(), ""
            return POD_REASON_UNSCHEDULABLE, msg, ""
        return str(st), msg, ""

    def fit_error(self) -> str:
        hist: dict[str, int] = {}
        for s, ts in self.task_status_index.items():
            hist[str(s)] = hist.get(str(s), 0) + len(ts)
        hist["minAvailable"] = self.min_available
        pg_status = POD_GROUP_READY if self.is_ready() else POD_GROUP_NOT_READY
        msg = f"{pg_status}, {', '.join(sorted(f'{v} {k}' for k, v in hist.items()))}"
        reasons: dict[str, int] = {}
        for uid in (self.task_status_index.get(PENDING) or _EMPTY):
            r = self.task_scheduling_reason(uid)[0]
            reasons[r] = reasons.get(r, 0) + 1
        if reasons:
            msg += "; Pending: " + ", ".join(sorted(f"{v} {k}" for k, v in reasons.items()))
        if self.job_fit_errors:
            msg += ". Origin reason is: " + self.job_fit_errors
        else:
            for t in self.tasks.values():
                fe = self.nodes_fit_errors.get(t.uid)
                if fe is not None:
                    msg += f". Origin reason is {t.name}: {fe.error()}"
                    break
        return msg

    def __repr__(self) -> str:
        return (f"Job({self.uid}: queue {self.queue!r}, minAvailable {self.min_available}, "
                f"tasks {len(self.tasks)}, phase {self.pod_group_phase!r})")


def new_job_info(uid: str, *tasks: TaskInfo) -> JobInfo:
    return JobInfo(uid, *tasks)

