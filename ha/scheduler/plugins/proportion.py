"""proportion: weighted fair share between queues (Volcano ``plugins/proportion/proportion.go``).

``deserved`` is found by water-filling: each round every queue not yet met receives
``remaining × weight / Σweight``, clipped to its real capability (Infinity default) and its request
(Zero default), raised to its guarantee. A queue is met when its request fits its deserved or its
deserved stops changing; the loop ends when the remainder is empty or stops changing.

Registered: QueueOrder (spec.priority, then lower share), Reclaimable (victims while the victim
queue's running allocated exceeds deserved), Overused (deserved ≤ allocated), Allocatable and
Preemptive (queue Open and allocated + request ≤ deserved on the requested dimensions),
JobEnqueueable (minResources + allocated + inqueue − elastic ≤ real capability), and event handlers
keeping ``allocated`` and the share current.
"""
from __future__ import annotations

from typing import Any, Mapping

from ha.scheduler.framework.events import EventHandler
from ha.scheduler.plugins import register
from ha.scheduler.plugins.queue_attrs import (
    QueueAttr, account_job, job_min_resources, new_queue_attr, pg_min_resources, proportion_share,
    queue_is_open, queue_priority, total_guarantee_of,
)
from ha.scheduler.plugins.util import (
    INFINITY, PERMIT, REJECT, ZERO, Resource, exceeded_part, res_max, semantic_equal,
)

PLUGIN_NAME = "proportion"


def compute_deserved(attrs: Mapping[str, QueueAttr], total: Any) -> None:
    """Water-filling of ``total`` over ``attrs`` by weight (mutates each attr's deserved/share)."""
    remaining = total.clone()
    met: set[str] = set()
    while True:
        total_weight = sum(a.weight for a in attrs.values() if a.queue_id not in met)
        if total_weight == 0:
            break
        old_remaining = remaining.clone()
        increased, decreased = Resource(), Resource()
        for a in attrs.values():
            if a.queue_id in met:
                continue
            old_deserved = a.deserved.clone()
            a.deserved.add(remaining.clone().multi(a.weight / total_weight))
            if a.real_capability is not None:
                a.deserved.min_dimension_resource(a.real_capability, INFINITY)
            a.deserved.min_dimension_resource(a.request, ZERO)
            a.deserved = res_max(a.deserved, a.guarantee)
            a.share = proportion_share(a)
            if a.request.less_equal(a.deserved, ZERO):
                met.add(a.queue_id)
            elif semantic_equal(a.deserved, old_deserved):
                met.add(a.queue_id)  # capped by capability
            inc, dec = a.deserved.diff(old_deserved, ZERO)
            increased.add(inc)
            decreased.add(dec)
        remaining = exceeded_part(remaining.clone().add(decreased), increased)
        if remaining.is_empty() or semantic_equal(remaining, old_remaining):
            break


@register(PLUGIN_NAME)
class ProportionPlugin:
    def __init__(self, arguments: Mapping[str, Any] | None = None):
        self.arguments = dict(arguments or {})
        self.total_resource = Resource()
        self.total_guarantee = Resource()
        self.queue_opts: dict[str, QueueAttr] = {}

    def name(self) -> str:
        return PLUGIN_NAME

    def _update_share(self, attr: QueueAttr) -> None:
        attr.share = proportion_share(attr)

    def on_session_open(self, ssn: Any) -> None:
        self.total_resource = ssn.total_resource.clone()
        self.total_guarantee = total_guarantee_of(ssn.queues.values())
        self.queue_opts = {}
        for job in ssn.jobs.values():
            queue = ssn.queues.get(job.queue)
            if queue is None:
                continue  # jobs of unknown queues are never scheduled
            if job.queue not in self.queue_opts:
                self.queue_opts[job.queue] = new_queue_attr(
                    queue, self.total_resource, self.total_guarantee, weight=int(queue.weight))
            account_job(self.queue_opts[job.queue], job)

        compute_deserved(self.queue_opts, self.total_resource)
        opts = self.queue_opts

        def queue_order(l: Any, r: Any) -> int:
            lp, rp = queue_priority(l), queue_priority(r)
            if lp != rp:
                return rp - lp
            la, ra = opts.get(l.uid), opts.get(r.uid)
            ls = la.share if la else 0.0
            rs = ra.share if ra else 0.0
            if ls == rs:
                return 0
            return -1 if ls < rs else 1

        ssn.add_queue_order_fn(self.name(), queue_order)

        def reclaimable(reclaimer: Any, reclaimees: list[Any]) -> tuple[list[Any], int]:
            victims = []
            allocations: dict[str, Any] = {}
            for t in reclaimees:
                job = ssn.jobs[t.job]
                attr = opts.get(job.queue)
                if attr is None:
                    continue
                if job.queue not in allocations:
                    allocations[job.queue] = attr.allocated.clone()
                allocated = allocations[job.queue]
                if not allocated.less_equal(attr.deserved, ZERO):
                    allocated.sub(t.resreq)
                    victims.append(t)
            return victims, PERMIT

        ssn.add_reclaimable_fn(self.name(), reclaimable)

        def overused(queue: Any) -> bool:
            attr = opts.get(queue.uid)
            return attr is not None and attr.deserved.less_equal(attr.allocated, ZERO)

        ssn.add_overused_fn(self.name(), overused)

        def queue_allocatable(queue: Any, candidate: Any) -> bool:
            if not queue_is_open(queue):
                return False
            attr = opts.get(queue.uid)
            if attr is None:
                return False
            future_used = attr.allocated.clone().add(candidate.resreq)
            ok, _ = future_used.less_equal_with_dimension_and_resources_name(attr.deserved, candidate.resreq)
            return ok

        ssn.add_allocatable_fn(self.name(), queue_allocatable)
        ssn.add_preemptive_fn(self.name(), queue_allocatable)

        def job_enqueueable(job: Any) -> int:
            queue = ssn.queues.get(job.queue)
            attr = opts.get(job.queue)
            if queue is None or not queue_is_open(queue):
                return REJECT
            if attr is None or attr.real_capability is None:
                return PERMIT
            if pg_min_resources(job) is None:
                return PERMIT
            min_req = job_min_resources(job)
            r = min_req.clone().add(attr.allocated).add(attr.inqueue).sub(attr.elastic)
            ok, _ = r.less_equal_with_dimension_and_resources_name(attr.real_capability, min_req)
            if ok:
                attr.inqueue.add(min_req)
                return PERMIT
            return REJECT

        ssn.add_job_enqueueable_fn(self.name(), job_enqueueable)

        def on_allocate(event: Any) -> None:
            attr = opts.get(ssn.jobs[event.task.job].queue) if event.task.job in ssn.jobs else None
            if attr is not None:
                attr.allocated.add(event.task.resreq)
                self._update_share(attr)

        def on_deallocate(event: Any) -> None:
            attr = opts.get(ssn.jobs[event.task.job].queue) if event.task.job in ssn.jobs else None
            if attr is not None:
                attr.allocated.sub(event.task.resreq)
                self._update_share(attr)

        ssn.add_event_handler(EventHandler(allocate_func=on_allocate, deallocate_func=on_deallocate))

    def on_session_close(self, ssn: Any) -> None:
        self.total_resource = Resource()
        self.total_guarantee = Resource()
        self.queue_opts = {}
