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

from typing import Any

from ha.scheduler.api import TaskStatus
from ha.scheduler.api.helpers import COMPLETED_STATUSES as _COMPLETED, SCHEDULED_STATUSES as _SCHEDULED
from ha.scheduler.api.hypernode_info import JOB_ALLOCATED_HYPERNODE_ANNOTATION
from ha.scheduler.framework.settled_close import (SettledCloseMismatch, conditions_differ, same_fields,
                                                  settle, unschedulable_now)
from ha.scheduler.snapshot_reuse import verifying

__all__ = ["JobUpdater", "job_status", "get_pod_group_phase", "is_pod_group_status_updated"]

PG_PENDING = "Pending"
PG_INQUEUE = "Inqueue"
PG_RUNNING = "Running"
PG_UNKNOWN = "Unknown"
PG_COMPLETED = "Completed"
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
    unschedulable = unschedulable_now(status.get("conditions") or _NONE, ssn.uid)
    status["phase"] = get_pod_group_phase(job, unschedulable)
    idx = job.task_status_index
    status["running"] = len(idx.get(TaskStatus.RUNNING) or ())
    status["failed"] = len(idx.get(TaskStatus.FAILED) or ())
    status["succeeded"] = len(idx.get(TaskStatus.SUCCEEDED) or ())
    return status


# the fields the comparison normalises (absent = 0 / ""), or compares apart (conditions)
_COUNTS = ("running", "succeeded", "failed")
_NORMALISED = frozenset(("conditions", "phase") + _COUNTS)


def is_pod_group_status_updated(new: dict, old: dict) -> bool:
    """Whether the status changed: its fields but the conditions compared as they are, but for
    ``running`` / ``succeeded`` / ``failed`` (absent = 0) and ``phase`` (absent = ""); the
    conditions without their transition fields (session.go isPodGroupStatusUpdated)."""
    if (new.get("phase") or "") != (old.get("phase") or ""):
        return True
    for k in _COUNTS:
        if int(new.get(k) or 0) != int(old.get(k) or 0):
            return True
    if not same_fields(new, old, _NORMALISED):
        return True
    return conditions_differ(new.get("conditions") or _NONE, old.get("conditions") or _NONE)


_NONE: tuple = ()


class _JobWrite:
    """One job's write-back (the cache's ``StatusWrite``) with the job updater's error handling:
    a failed PodGroup write is the session's recorded error, and the job's events are not sent
    then. Called, it does the whole job; ``head_call`` does only the head (``head_ok`` says
    whether the events may follow)."""
    __slots__ = ("ssn", "job", "write", "head_ok")

    def __init__(self, ssn: Any, job: Any, write: Any):
        self.ssn, self.job, self.write = ssn, job, write
        self.head_ok = write.head is None

    def _failed(self, e: Exception) -> None:
        job = self.job
        self.ssn.record_error(f"failed to update job <{job.namespace}/{job.name}>: {e}")

    def __call__(self) -> None:
        try:
            self.write()
        except Exception as e:  # noqa: BLE001 - Volcano logs a failed update and goes on
            self._failed(e)

    def head_call(self) -> None:
        try:
            self.write.head()
        except Exception as e:  # noqa: BLE001
            self._failed(e)
            return
        self.head_ok = True


class JobUpdater:
    """``UpdateAll``: every session job's status worked out in turn, the API writes that follow
    (``cache.job_status_write``) handed together to the cache's ``status_writer`` -- in order, in
    this thread, when it has none (the simulation, the tests); in parallel in a live instance
    (``ha.runtime.environment``'s status writer), as Volcano's ``workqueue.ParallelizeUntil(16,
    ...)`` does: a writer has ``run(calls)``, which returns when every call is done. A writer
    with ``batch_events`` runs only the PodGroup writes so, and then sends every job's condition
    writes in one request. A job's own writes stay in their order; a failed PodGroup write is
    the session's recorded error (and the job's conditions are not written)."""

    def __init__(self, ssn: Any):
        self.ssn = ssn
        self.job_queue = list(ssn.jobs.values())
        self.verify = verifying(ssn)
        self.settled = 0        # jobs whose last verdict held (settled_close.py)

    def update_all(self) -> None:
        calls = []
        for job in self.job_queue:
            call = self.update_job(job)
            if call is not None:
                calls.append(call)
        cache = self.ssn.cache
        pool = getattr(cache, "job_clones", None)
        if pool is not None:
            pool.stats["settled_close"] += self.settled
        writer = cache.status_writer
        if writer is None:
            for call in calls:
                call()
        elif getattr(writer, "batch_events", False) and \
                hasattr(cache.status_updater, "update_pod_status_many"):
            # the PodGroup writes on the workers, then every job's condition writes in one
            # request: an order the parallel calls could have taken too (each job's own writes
            # stay in theirs), without a thousand replies to wait for one by one
            writer.run([c.head_call for c in calls if c.write.head is not None])
            cache.write_unschedulable_many([ev for c in calls if c.head_ok for ev in c.write.events])
        else:
            writer.run(calls)

    def update_job(self, job: Any) -> "_JobWrite | None":
        """The job's new status into its PodGroup; returns the call that writes what changed
        (None: nothing to write). A reused job clone whose last verdict was "nothing" and whose
        close is what it was then is not worked out again (settled_close.py)."""
        ssn = self.ssn
        pg = job.pod_group
        if pg is None:
            return None
        old_state = ssn.pod_group_old_state
        old = old_state.status.get(job.uid)
        status = _status_of(job)        # as the plugins left it
        verdict = job.settled_close
        if verdict is not None:
            job.settled_close = None
            if verdict.holds(ssn, job, old, status):
                if self.verify:
                    self._verify_settled(job, old, status)
                job.settled_close = verdict
                self.settled += 1
                return None
        new_status = job_status(ssn, job)
        pg["status"] = new_status
        update_pg = old is None or is_pod_group_status_updated(new_status, old)
        # isJobAllocatedHyperNodeChanged / DirtyJobs (job_updater.go:106-125)
        update_ann = self._annotation_changed(job)
        update_info = job.uid in ssn.dirty_jobs
        args = (job, update_pg, update_ann, update_info) if update_ann or update_info else (job, update_pg)
        try:
            write = ssn.cache.job_status_write(*args)
        except Exception as e:  # noqa: BLE001 - Volcano logs a failed update and goes on
            ssn.record_error(f"failed to update job <{job.namespace}/{job.name}>: {e}")
            return None
        if write is None:
            if not (update_pg or update_ann or update_info):
                job.settled_close = settle(ssn, job, old, status)
            return None
        return _JobWrite(ssn, job, write)

    def _annotation_changed(self, job: Any) -> bool:
        key = JOB_ALLOCATED_HYPERNODE_ANNOTATION
        old_hn = (self.ssn.pod_group_old_state.annotations.get(job.uid) or _EMPTY).get(key, "")
        return old_hn != ((job.pod_group.get("metadata") or _EMPTY).get("annotations") or _EMPTY).get(key, "")

    def _verify_settled(self, job: Any, old: Any, status: dict) -> None:
        """Work the kept verdict out again, writing nothing: raise if it is not "nothing"."""
        ssn = self.ssn
        pg = job.pod_group
        new_status = job_status(ssn, job)
        what = []
        if old is None or is_pod_group_status_updated(new_status, old):
            what.append(f"the PodGroup status ({old!r} -> {new_status!r})")
        if self._annotation_changed(job):
            what.append("the allocated hyper-node annotation")
        if job.uid in ssn.dirty_jobs:
            what.append("the job's hyper-node fields (a dirty job)")
        events = ssn.cache._job_status_events(job) if hasattr(ssn.cache, "_job_status_events") else []
        if events:
            what.append(f"{len(events)} scheduling event(s)")
        pg["status"] = status
        if what:
            raise SettledCloseMismatch(f"job {job.uid}: kept as settled at close, but the job updater "
                                       f"would write {', '.join(what)}")
