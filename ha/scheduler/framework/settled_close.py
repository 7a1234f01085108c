"""A job's close verdict kept with its reused clone: a job the last session's job updater found with
nothing to write, and that nothing changed since, is not worked out again.

Volcano's job updater works out every session job's PodGroup status and compares it with the
status at open (``job_updater.go`` UpdateAll; ``session.go`` jobStatus, isPodGroupStatusUpdated).
At 10,000 jobs a session, nearly all running and unchanged, that was two thirds of a session's
close (a quarter of the session, in one process) for no write. The verdict "nothing to write, no event" is a function of

* the job's tasks part (statuses, counts, requests): the clone is the last session's, reused
  (snapshot_reuse.py: no change reported since, by the cache or by either session) -- a fresh
  clone has no verdict;
* the PodGroup's spec (minMember), its metadata (the allocated hyper-node annotation) and its
  status at open: the same objects as last time. The cache replaces a PodGroup, never writes into
  one but for the hyper-node annotation of a job whose updater wrote it (which keeps no verdict);
  a session writes a status only into its own copy (``job_info.writable_status``);
* the status the plugins leave at close: its fields but the conditions the same values, its
  conditions the same but for ``lastTransitionTime`` and ``transitionID`` (what the comparison
  ignores), and whether an Unschedulable condition carries this session's ``transitionID`` (what
  the phase reads) the same;
* the session: the job not marked dirty; no task Allocated, Pending or Pipelined (whose
  scheduling events depend on the session's fit errors).

When every one holds, the job updater's verdict is the last session's: nothing to write, no
event. The session's PodGroup of such a job keeps the status the plugins left instead of the one
worked out (nothing reads a session job after close; the next session copies the header again).
``HA_VERIFY_SNAPSHOT_REUSE=1`` (on in the test suite) works the verdict out anyway and raises
:class:`SettledCloseMismatch` when it is not "nothing".
"""
from __future__ import annotations

from typing import Any

from ha.scheduler.api import TaskStatus

__all__ = ["Settled", "SettledCloseMismatch", "conditions_differ", "same_fields", "settle", "unschedulable_now"]

UNSCHEDULABLE_TYPE = "Unschedulable"
_EVENTFUL = (TaskStatus.ALLOCATED, TaskStatus.PENDING, TaskStatus.PIPELINED)
_COND_IGNORED = frozenset(("lastTransitionTime", "transitionID"))
_NONE: tuple = ()


class SettledCloseMismatch(AssertionError):
    """A job kept as settled would have had something written at close."""


def same_fields(a: dict, b: dict, skip: frozenset) -> bool:
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


def conditions_differ(new: Any, old: Any) -> bool:
    """The condition lists differ but for each one's ``lastTransitionTime`` and ``transitionID``."""
    if len(new) != len(old):
        return True
    for n, o in zip(new, old):
        if n is not o and not same_fields(n, o, _COND_IGNORED):
            return True
    return False


def unschedulable_now(conditions: Any, session_uid: Any) -> bool:
    """An Unschedulable=True condition of this session (jobStatus's ``unschedulable``)."""
    for c in conditions:
        if (c.get("type") == UNSCHEDULABLE_TYPE and c.get("status") == "True"
                and c.get("transitionID") == session_uid):
            return True
    return False


_NO_CONDITIONS = {"conditions": None}
_NO_TRANSITION = {"lastTransitionTime": None, "transitionID": None}


class Settled:
    """What the verdict was worked out from (see the module's list). The status and its conditions
    are kept with the fields the comparison leaves out set to None: two such dicts are equal
    exactly when ``same_fields`` would find the originals the same (and it is one comparison in C
    instead of a loop in Python, 10,000 times a session)."""

    __slots__ = ("old", "spec", "meta", "rest", "conditions", "unschedulable")

    def __init__(self, old: dict, spec: Any, meta: Any, status: dict, unschedulable: bool) -> None:
        self.old = old
        self.spec = spec
        self.meta = meta
        self.rest = {**status, **_NO_CONDITIONS}
        self.conditions = [{**c, **_NO_TRANSITION} for c in status.get("conditions") or _NONE]
        self.unschedulable = unschedulable

    def holds(self, ssn: Any, job: Any, old: Any, status: dict) -> bool:
        """Whether the job's close is what it was when this verdict was taken."""
        changes = job._changes
        if changes is None or job.uid in changes:
            return False            # not a lent clone, or this session changed its tasks part
        pg = job.pod_group
        if old is not self.old or pg.get("spec") is not self.spec or pg.get("metadata") is not self.meta:
            return False
        if job.uid in ssn.dirty_jobs:
            return False
        idx = job.task_status_index
        for st in _EVENTFUL:
            if idx.get(st):
                return False
        if {**status, **_NO_CONDITIONS} != self.rest:
            return False
        conds = status.get("conditions") or _NONE
        kept = self.conditions
        if len(conds) != len(kept):
            return False
        for c, k in zip(conds, kept):
            if {**c, **_NO_TRANSITION} != k:
                return False
        return unschedulable_now(conds, ssn.uid) == self.unschedulable


def settle(ssn: Any, job: Any, old: Any, status: dict) -> Settled | None:
    """The verdict "nothing to write" of a job whose close wrote nothing and raised no event,
    worked out from ``status`` (the one the plugins left) and ``old`` (the one at open); None when
    it could not be trusted next time (no status at open, a task whose events depend on the
    session)."""
    if old is None or job._changes is None:
        return None
    idx = job.task_status_index
    for st in _EVENTFUL:
        if idx.get(st):
            return None
    pg = job.pod_group
    return Settled(old, pg.get("spec"), pg.get("metadata"), status,
                   unschedulable_now(status.get("conditions") or _NONE, ssn.uid))
