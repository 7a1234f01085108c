"""Session-close write-back of PodGroup status (``framework/job_updater.go``, ``session.go``
``jobStatus`` / ``getPodGroupPhase``).

For **every** session job: compute the PodGroup status, decide whether it changed compared with
the status recorded at session open (conditions compared without ``lastTransitionTime`` and
``transitionID``), and hand the job to the cache's ``UpdateJobStatus`` (``job_status_write``), which
updates the PodGroup when asked and records the job's scheduling events (``RecordJobStatusEvent``:
pod conditions and — in v1.14.0 — the nomination of pipelined-after-eviction tasks). The API
writes of all jobs run together at the end, in parallel in a live instance.
"""
from __future__ import annotations

from typing import Any, Callable

from ha.scheduler.api import TaskStatus
from ha.scheduler.api.helpers import COMPLETED_STATUSES as _COMPLETED, SCHEDULED_STATUSES as _SCHEDULED
from ha.scheduler.api.hypernode_info import JOB_ALLOCATED_HYPERNODE_ANNOTATION

__all__ = ["JobUpdater", "job_status", "get_pod_group_phase", "is_pod_group_status_updated"]

PG_PENDING = "Pending"
PG_INQUEUE = "Inqueue"
PG_RUNNING = "Running"
PG_UNKNOWN = "Unknown"
PG_COMPLETED = "Completed"
UNSCHEDULABLE_TYPE = "Unschedulable"


_EMPTY: dict = {}


def _status_of(job: Any) -> dict:
    pg = job.pod_group
    return pg.setdefault("status", {}) if isinstance(pg, dict) else {}


def get_pod_group_phase(job: Any, unschedulable: bool) -> str:
    idx = job.task_status_index
    if idx.get(TaskStatus.RUNNING) and unschedulable:
        return PG_UNKNOWN
    scheduled = 0
    completed = 0
    for s, tasks in idx.items():
        if s in _SCHEDULED:
            scheduled += len(tasks)
            if s in _COMPLETED:       # (every completed status is a scheduled one)
                completed += len(tasks)
    min_member = int(((job.pod_group or _EMPTY).get("spec") or _EMPTY).get("minMember") or 0)
    if scheduled >= min_member:
        if scheduled == completed:
            return PG_COMPLETED
        return PG_RUNNING
    phase = _status_of(job).get("phase") or ""
    if phase != PG_INQUEUE:
        return PG_PENDING
    return phase


def job_status(ssn: Any, job: Any) -> dict:
    """The PodGroup status the session ends with (a new dict; conditions are kept)."""
    status = dict(_status_of(job))
    unschedulable = False
    uid = ssn.uid
    for c in status.get("conditions") or ():
        if (c.get("type") == UNSCHEDULABLE_TYPE and c.get("status") == "True"
                and c.get("transitionID") == uid):
            unschedulable = True
            break
    status["phase"] = get_pod_group_phase(job, unschedulable)
    idx = job.task_status_index
    status["running"] = len(idx.get(TaskStatus.RUNNING) or ())
    status["failed"] = len(idx.get(TaskStatus.FAILED) or ())
    status["succeeded"] = len(idx.get(TaskStatus.SUCCEEDED) or ())
    return status


_COND_IGNORED = frozenset(("lastTransitionTime", "transitionID"))
# the fields the comparison normalises (absent = 0 / ""), or compares apart (conditions)
_COUNTS = ("running", "succeeded", "failed")
_NORMALISED = frozenset(("conditions", "phase") + _COUNTS)


def _same_fields(a: dict, b: dict, skip: frozenset) -> bool:
    """``{k: v for k in a if k not in skip} == {the same of b}``, without building either."""
    for k, v in a.items():
        if k in skip:
            continue
        if k not in b:
            return False
        w = b[k]
        if not (w is v or w == v):
            return False
    for k in b:
        if k not in skip and k not in a:
            return False
    return True


def _conditions_updated(new: list, old: list) -> bool:
    """The lists differ but for each condition's ``lastTransitionTime`` and ``transitionID``."""
    if len(new) != len(old):
        return True
    for n, o in zip(new, old):
        if n is not o and not _same_fields(n, o, _COND_IGNORED):
            return True
    return False


def is_pod_group_status_updated(new: dict, old: dict) -> bool:
    """Whether the status changed: its fields but the conditions compared as they are, but for
    ``running`` / ``succeeded`` / ``failed`` (absent = 0) and ``phase`` (absent = ""); the
    conditions without their transition fields (session.go isPodGroupStatusUpdated)."""
    if (new.get("phase") or "") != (old.get("phase") or ""):
        return True
    for k in _COUNTS:
        if int(new.get(k) or 0) != int(old.get(k) or 0):
            return True
    if not _same_fields(new, old, _NORMALISED):
        return True
    return _conditions_updated(new.get("conditions") or _NONE, old.get("conditions") or _NONE)


_NONE: tuple = ()


class JobUpdater:
    """``UpdateAll``: every session job's status worked out in turn, the API writes that follow
    (``cache.job_status_write``) handed together to the cache's ``status_writer`` -- in order, in
    this thread, when it has none (the simulation, the tests); in parallel in a live instance
    (``ha.runtime.environment``'s status writer), as Volcano's ``workqueue.ParallelizeUntil(16,
    ...)`` does: a writer has ``run(calls)``, which returns when every call is done. A job's own
    writes stay in their order; a failed one is the session's recorded error."""

    def __init__(self, ssn: Any):
        self.ssn = ssn
        self.job_queue = list(ssn.jobs.values())

    def update_all(self) -> None:
        calls = []
        for job in self.job_queue:
            call = self.update_job(job)
            if call is not None:
                calls.append(call)
        writer = self.ssn.cache.status_writer
        if writer is None:
            for call in calls:
                call()
        else:
            writer.run(calls)

    def update_job(self, job: Any) -> Callable[[], None] | None:
        """The job's new status into its PodGroup; returns the call that writes what changed
        (None: nothing to write)."""
        ssn = self.ssn
        if job.pod_group is None:
            return None
        new_status = job_status(ssn, job)
        job.pod_group["status"] = new_status
        old_state = ssn.pod_group_old_state
        old = old_state.status.get(job.uid)
        update_pg = old is None or is_pod_group_status_updated(new_status, old)
        # isJobAllocatedHyperNodeChanged / DirtyJobs (job_updater.go:106-125)
        key = JOB_ALLOCATED_HYPERNODE_ANNOTATION
        old_hn = (old_state.annotations.get(job.uid) or _EMPTY).get(key, "")
        update_ann = old_hn != ((job.pod_group.get("metadata") or _EMPTY).get("annotations") or _EMPTY).get(key, "")
        update_info = job.uid in ssn.dirty_jobs
        args = (job, update_pg, update_ann, update_info) if update_ann or update_info else (job, update_pg)
        try:
            write = ssn.cache.job_status_write(*args)
        except Exception as e:  # noqa: BLE001 - Volcano logs a failed update and goes on
            ssn.record_error(f"failed to update job <{job.namespace}/{job.name}>: {e}")
            return None
        if write is None:
            return None

        def call() -> None:
            try:
                write()
            except Exception as e:  # noqa: BLE001
                ssn.record_error(f"failed to update job <{job.namespace}/{job.name}>: {e}")
        return call
