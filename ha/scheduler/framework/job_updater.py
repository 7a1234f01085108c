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
from ha.scheduler.api.helpers import completed_status, scheduled_status
from ha.scheduler.api.hypernode_info import JOB_ALLOCATED_HYPERNODE_ANNOTATION

__all__ = ["JobUpdater", "job_status", "get_pod_group_phase", "is_pod_group_status_updated"]

PG_PENDING = "Pending"
PG_INQUEUE = "Inqueue"
PG_RUNNING = "Running"
PG_UNKNOWN = "Unknown"
PG_COMPLETED = "Completed"
UNSCHEDULABLE_TYPE = "Unschedulable"


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
        if scheduled_status(s):
            scheduled += len(tasks)
        if completed_status(s):
            completed += len(tasks)
    min_member = int(((job.pod_group or {}).get("spec") or {}).get("minMember") or 0)
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
    for c in status.get("conditions") or ():
        if (c.get("type") == UNSCHEDULABLE_TYPE and c.get("status") == "True"
                and c.get("transitionID") == ssn.uid):
            unschedulable = True
            break
    status["phase"] = get_pod_group_phase(job, unschedulable)
    idx = job.task_status_index
    status["running"] = len(idx.get(TaskStatus.RUNNING) or ())
    status["failed"] = len(idx.get(TaskStatus.FAILED) or ())
    status["succeeded"] = len(idx.get(TaskStatus.SUCCEEDED) or ())
    return status


_COND_IGNORED = ("lastTransitionTime", "transitionID")


def _conditions_updated(new: list, old: list) -> bool:
    if len(new) != len(old):
        return True
    for n, o in zip(new, old):
        nn = {k: v for k, v in n.items() if k not in _COND_IGNORED}
        oo = {k: v for k, v in o.items() if k not in _COND_IGNORED}
        if nn != oo:
            return True
    return False


def _norm(status: dict) -> dict:
    out = {k: v for k, v in status.items() if k != "conditions"}
    for k in ("running", "succeeded", "failed"):
        out[k] = int(out.get(k) or 0)
    out["phase"] = out.get("phase") or ""
    return out


def is_pod_group_status_updated(new: dict, old: dict) -> bool:
    return _norm(new) != _norm(old) or _conditions_updated(list(new.get("conditions") or []),
                                                          list(old.get("conditions") or []))


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
        writer = getattr(self.ssn.cache, "status_writer", None)
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
        old = ssn.pod_group_old_state.status.get(job.uid)
        update_pg = old is None or is_pod_group_status_updated(new_status, old)
        # isJobAllocatedHyperNodeChanged / DirtyJobs (job_updater.go:106-125)
        key = JOB_ALLOCATED_HYPERNODE_ANNOTATION
        old_hn = (ssn.pod_group_old_state.annotations.get(job.uid) or {}).get(key, "")
        update_ann = old_hn != ((job.pod_group.get("metadata") or {}).get("annotations") or {}).get(key, "")
        update_info = job.uid in ssn.dirty_jobs
        args = (job, update_pg, update_ann, update_info) if update_ann or update_info else (job, update_pg)
        plan = getattr(ssn.cache, "job_status_write", None)
        try:
            if plan is None:      # a cache without the two steps writes at once
                ssn.cache.update_job_status(*args)
                return None
            write = plan(*args)
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
