"""capacity: per-queue deserved / capability / guarantee (Volcano ``plugins/capacity/capacity.go``,
flat queues only — ``enabledHierarchy`` is not supported).

* deserved = ``spec.deserved`` clipped to the real capability (Infinity default), raised to the
  guarantee. share = max(allocated / deserved); a queue without a deserved has share 1.
* QueueOrder: spec.priority, then share; on equal shares a queue with a deserved goes first.
* Reclaimable (#4936): over a running copy of each victim queue's allocated, skip candidates that
  share no dimension with the reclaimer's request, skip those whose eviction would take the queue
  below its guarantee; a candidate with no dimension in common with deserved is a victim at once;
  otherwise only while the queue's allocated exceeds deserved on a dimension the candidate uses.
* Preemptive: queue Open and allocated + request ≤ deserved on *some* requested dimension.
* Allocatable: queue Open and allocated + request ≤ real capability (not deserved: the
  asymmetry behind #4947).
* JobEnqueueable: minResources + allocated + inqueue − elastic ≤ real capability.
* Allocate/Deallocate handlers keep ``allocated`` and the share current.
"""
from __future__ import annotations

from typing import Any, Mapping

from ha.scheduler.framework.events import EventHandler
from ha.scheduler.plugins import register
from ha.scheduler.plugins.queue_attrs import (
    QueueAttr, account_job, job_min_resources, new_queue_attr, pg_min_resources, queue_deserved,
    queue_is_open, queue_priority, total_guarantee_of,
)
from ha.scheduler.plugins.util import (
    INFINITY, PERMIT, REJECT, ZERO, Resource, intersection, intersection_without_pods, res_max, share,
)

PLUGIN_NAME = "capacity"


def capacity_share(attr: QueueAttr) -> float:
    # A queue without a deserved is best-effort: share 1, so it goes after every queue below 1.
    if attr.deserved.is_empty():
        return 1.0
    res = 0.0
    for rn in attr.deserved.resource_names():
        res = max(res, share(attr.allocated.get(rn), attr.deserved.get(rn)))
    return res


def compare_share_with_deserved(l: QueueAttr | None, r: QueueAttr | None) -> int:
    ls = l.share if l else 1.0
    rs = r.share if r else 1.0
    if ls == rs:
        lh = l is not None and not l.deserved.is_empty()
        rh = r is not None and not r.deserved.is_empty()
        if lh == rh:
            return 0
        return -1 if lh else 1
    return -1 if ls < rs else 1


def capacity_victims(jobs: Mapping[str, Any], opts: Mapping[str, QueueAttr], reclaimer: Any,
                     reclaimees: list[Any]) -> list[Any]:
    victims = []
    allocations: dict[str, Any] = {}
    for t in reclaimees:
        job = jobs[t.job]
        attr = opts.get(job.queue)
        if attr is None:
            continue
        if not intersection_without_pods(t.resreq, reclaimer.init_resreq):
            continue  # evicting it frees nothing the reclaimer asks for
        if job.queue not in allocations:
            allocations[job.queue] = attr.allocated.clone()
        allocated = allocations[job.queue]
        if not attr.guarantee.less_equal(allocated.clone().sub(t.resreq), ZERO):
            continue  # would drop the queue below its guarantee
        if not intersection(t.resreq, attr.deserved):
            allocated.sub(t.resreq)
            victims.append(t)
            continue
        exceeds, _ = allocated.greater_partly_with_relevant_dimensions(attr.deserved, t.resreq)
        if exceeds:
            allocated.sub(t.resreq)
            victims.append(t)
    return victims


@register(PLUGIN_NAME)
class CapacityPlugin:
    def __init__(self, arguments: Mapping[str, Any] | None = None):
        self.arguments = dict(arguments or {})
        self.total_resource = Resource()
        self.total_guarantee = Resource()
        self.queue_opts: dict[str, QueueAttr] = {}

    def name(self) -> str:
        return PLUGIN_NAME

    def _update_share(self, attr: QueueAttr) -> None:
        attr.share = capacity_share(attr)

    def _build_queue_attrs(self, ssn: Any) -> None:
        self.total_guarantee = total_guarantee_of(ssn.queues.values())
        self.queue_opts = {}
        for job in ssn.jobs.values():
            queue = ssn.queues.get(job.queue)
            if queue is None:
                continue
            if job.queue not in self.queue_opts:
                attr = new_queue_attr(queue, self.total_resource, self.total_guarantee)
                attr.deserved = queue_deserved(queue)
                self.queue_opts[job.queue] = attr
            account_job(self.queue_opts[job.queue], job)
        for attr in self.queue_opts.values():
            if attr.real_capability is not None:
                attr.deserved.min_dimension_resource(attr.real_capability, INFINITY)
            attr.deserved = res_max(attr.deserved, attr.guarantee)
            self._update_share(attr)

    def on_session_open(self, ssn: Any) -> None:
        self.total_resource = ssn.total_resource.clone()
        self._build_queue_attrs(ssn)
        opts = self.queue_opts

        def queue_order(l: Any, r: Any) -> int:
            lp, rp = queue_priority(l), queue_priority(r)
            if lp != rp:
                return rp - lp
            return compare_share_with_deserved(opts.get(l.uid), opts.get(r.uid))

        ssn.add_queue_order_fn(self.name(), queue_order)

        def reclaimable(reclaimer: Any, reclaimees: list[Any]) -> tuple[list[Any], int]:
            return capacity_victims(ssn.jobs, opts, reclaimer, reclaimees), PERMIT

        ssn.add_reclaimable_fn(self.name(), reclaimable)

        def preemptive(queue: Any, task: Any) -> bool:
            if not queue_is_open(queue):
                return False
            attr = opts.get(queue.uid)
            if attr is None:
                return False
            future_used = attr.allocated.clone().add(task.resreq)
            ok, _ = future_used.less_equal_partly_with_dimension_zero_filtered(attr.deserved, task.resreq)
            return ok

        ssn.add_preemptive_fn(self.name(), preemptive)

        def allocatable(queue: Any, candidate: Any) -> bool:
            if not queue_is_open(queue):
                return False
            attr = opts.get(queue.uid)
            if attr is None:
                return False
            future_used = attr.allocated.clone().add(candidate.resreq)
            ok, _ = future_used.less_equal_with_dimension_and_resources_name(attr.real_capability,
                                                                            candidate.resreq)
            return ok

        ssn.add_allocatable_fn(self.name(), allocatable)

        def job_enqueueable(job: Any) -> int:
            queue = ssn.queues.get(job.queue)
            attr = opts.get(job.queue)
            if queue is None or attr is None or not queue_is_open(queue):
                return REJECT
            if attr.real_capability is None or pg_min_resources(job) is None:
                return PERMIT
            min_req = job_min_resources(job)
            r = min_req.clone().add(attr.allocated).add(attr.inqueue).sub(attr.elastic)
            ok, _ = r.less_equal_with_dimension_and_resources_name(attr.real_capability, min_req)
            if not ok:
                return REJECT
            attr.inqueue.add(min_req)
            return PERMIT

        ssn.add_job_enqueueable_fn(self.name(), job_enqueueable)

        def _attr_of(task: Any) -> QueueAttr | None:
            job = ssn.jobs.get(task.job)
            return opts.get(job.queue) if job is not None else None

        def on_allocate(event: Any) -> None:
            attr = _attr_of(event.task)
            if attr is not None:
                attr.allocated.add(event.task.resreq)
                self._update_share(attr)

        def on_deallocate(event: Any) -> None:
            attr = _attr_of(event.task)
            if attr is not None:
                attr.allocated.sub(event.task.resreq)
                self._update_share(attr)

        ssn.add_event_handler(EventHandler(allocate_func=on_allocate, deallocate_func=on_deallocate))

    def on_session_close(self, ssn: Any) -> None:
        self.total_resource = Resource()
        self.total_guarantee = Resource()
        self.queue_opts = {}
