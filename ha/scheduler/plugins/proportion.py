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

from ha.scheduler.plugins.factory import register
from ha.scheduler.plugins.queue_attrs import (
    QueueAttr, QueueAttrPlugin, enqueue_within_real_capability, new_queue_attr, open_queue_admits,
    proportion_share, queue_is_open, queue_priority, reclaimees_by_queue,
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
class ProportionPlugin(QueueAttrPlugin):
    plugin_name = PLUGIN_NAME
    queue_share = staticmethod(proportion_share)

    def new_attr(self, queue: Any) -> QueueAttr:
        return new_queue_attr(queue, self.total_resource, self.total_guarantee, weight=int(queue.weight))

    def on_session_open(self, ssn: Any) -> None:
        self.build_queue_attrs(ssn)
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
            for t, attr, allocated in reclaimees_by_queue(ssn.jobs, opts, reclaimees):
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
            return open_queue_admits(opts, queue, candidate, "deserved",
                                     Resource.less_equal_with_dimension_and_resources_name)

        ssn.add_allocatable_fn(self.name(), queue_allocatable)
        ssn.add_preemptive_fn(self.name(), queue_allocatable)

        def job_enqueueable(job: Any) -> int:
            queue = ssn.queues.get(job.queue)
            if queue is None or not queue_is_open(queue):
                return REJECT
            attr = opts.get(job.queue)
            if attr is None:
                return PERMIT
            return enqueue_within_real_capability(attr, job)

        ssn.add_job_enqueueable_fn(self.name(), job_enqueueable)
        self.add_share_handlers(ssn)
