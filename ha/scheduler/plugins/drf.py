"""drf: dominant resource fairness between jobs (Volcano ``plugins/drf/drf.go``, no hierarchy,
no namespace fairness).

* A job's share is the largest ``allocated / total`` over the cluster total's dimensions
  (``pods`` included when nodes declare it); allocated = tasks in an allocated status.
* JobOrder: lower share first.
* Preemptable: a candidate is a victim when the preemptor job's share after adding its request is
  ≤ the victim job's share after removing the candidate (removals accumulate per job, in order).
* Allocate/Deallocate handlers keep shares current. Pipeline fires AllocateFunc too, so a
  pipelined task counts for the rest of the session.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from ha.scheduler.framework.events import EventHandler
from ha.scheduler.plugins.factory import register
from ha.scheduler.plugins.util import PERMIT, Resource, share
from ha.scheduler.snapshot_reuse import verifying

PLUGIN_NAME = "drf"
SHARE_DELTA = 0.000001


@dataclass
class DrfAttr:
    allocated: Resource = field(default_factory=Resource)
    share: float = 0.0
    dominant_resource: str = ""


def calculate_share(allocated: Resource, total: Resource,
                    dims: list[tuple[str, float]] | None = None) -> tuple[str, float]:
    """(dominant resource, share) of ``allocated`` in ``total``; ``dims``: ``total_dims(total)``,
    when the same total serves many jobs."""
    res, dominant = 0.0, ""
    for rn, tq in (dims if dims is not None else total_dims(total)):
        s = share(allocated.get(rn), tq)
        if s > res:
            res, dominant = s, rn
    return dominant, res


def total_dims(total: Resource) -> list[tuple[str, float]]:
    """The total's dimensions, in ``resource_names`` order, with their amounts."""
    return [(rn, total.get(rn)) for rn in total.resource_names()]


@register(PLUGIN_NAME)
class DrfPlugin:
    argument_keys: tuple[str, ...] = ()

    def __init__(self, arguments: Mapping[str, Any] | None = None):
        self.arguments = dict(arguments or {})
        self.total_resource = Resource()
        self._dims = total_dims(self.total_resource)   # the session's total, for every job's share
        self.job_attrs: dict[str, DrfAttr] = {}

    def name(self) -> str:
        return PLUGIN_NAME

    def _update_share(self, attr: DrfAttr) -> None:
        attr.dominant_resource, attr.share = calculate_share(attr.allocated, self.total_resource, self._dims)

    def _attr(self, job_id: str) -> DrfAttr:
        # Jobs appear only at session open in Volcano; tolerate strays instead of crashing
        # (a stray's DrfAttr is built only for it: preempt asks this of every candidate victim).
        attr = self.job_attrs.get(job_id)
        if attr is None:
            attr = self.job_attrs[job_id] = DrfAttr()
        return attr

    def share_of(self, job_id: str) -> float:
        return self._attr(job_id).share

    def on_session_open(self, ssn: Any) -> None:
        self.total_resource = ssn.total_resource.clone()
        self._dims = total_dims(self.total_resource)
        self.job_attrs = {}
        check = verifying(ssn)
        for job in ssn.jobs.values():
            # the job's allocated tasks added up (its clone's running sum where that is exact)
            attr = DrfAttr(allocated=job.allocated_sum(check))
            self._update_share(attr)
            self.job_attrs[job.uid] = attr

        def preemptable(preemptor: Any, preemptees: list[Any]) -> tuple[list[Any], int]:
            victims = []
            lalloc = self._attr(preemptor.job).allocated.clone().add(preemptor.resreq)
            # the session's total (a clone nothing changes) and its dimensions, taken at open
            _, ls = calculate_share(lalloc, self.total_resource, self._dims)
            allocations: dict[str, Resource] = {}
            for t in preemptees:
                if t.job not in allocations:
                    allocations[t.job] = self._attr(t.job).allocated.clone()
                ralloc = allocations[t.job].sub(t.resreq)
                _, rs = calculate_share(ralloc, self.total_resource, self._dims)
                if ls < rs or abs(ls - rs) <= SHARE_DELTA:
                    victims.append(t)
            return victims, PERMIT

        ssn.add_preemptable_fn(self.name(), preemptable)

        def job_order(l: Any, r: Any) -> int:
            ls, rs = self.share_of(l.uid), self.share_of(r.uid)
            if ls == rs:
                return 0
            return -1 if ls < rs else 1

        ssn.add_job_order_fn(self.name(), job_order)

        def on_allocate(event: Any) -> None:
            attr = self._attr(event.task.job)
            attr.allocated.add(event.task.resreq)
            self._update_share(attr)

        def on_deallocate(event: Any) -> None:
            attr = self._attr(event.task.job)
            attr.allocated.sub(event.task.resreq)
            self._update_share(attr)

        ssn.add_event_handler(EventHandler(allocate_func=on_allocate, deallocate_func=on_deallocate))

    def on_session_close(self, ssn: Any) -> None:
        self.total_resource = Resource()
        self._dims = []
        self.job_attrs = {}
