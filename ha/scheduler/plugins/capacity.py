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

from ha.scheduler.plugins import register
from ha.scheduler.plugins.queue_attrs import (
    QueueAttr, QueueAttrPlugin, enqueue_within_real_capability, open_queue_admits, proportion_share,
    queue_deserved, queue_is_open, queue_priority, reclaimees_by_queue,
)
from ha.scheduler.plugins.util import (
    INFINITY, PERMIT, REJECT, ZERO, Resource, intersection, intersection_without_pods, res_max,
)

PLUGIN_NAME = "capacity"


def capacity_share(attr: QueueAttr) -> float:
    # A queue without a deserved is best-effort: share 1, so it goes after every queue below 1.
    if attr.deserved.is_empty():
        return 1.0
    return proportion_share(attr)


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
    for t, attr, allocated in reclaimees_by_queue(jobs, opts, reclaimees):
        if not intersection_without_pods(t.resreq, reclaimer.init_resreq):
            continue  # evicting it frees nothing the reclaimer asks for
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
class CapacityPlugin(QueueAttrPlugin):
    plugin_name = PLUGIN_NAME
    queue_share = staticmethod(capacity_share)

    def new_attr(self, queue: Any) -> QueueAttr:
        attr = super().new_attr(queue)
        attr.deserved = queue_deserved(queue)
        return attr

    def build_queue_attrs(self, ssn: Any) -> None:
        super().build_queue_attrs(ssn)
        for attr in self.queue_opts.values():
            if attr.real_capability is not None:
                attr.deserved.min_dimension_resource(attr.real_capability, INFINITY)
            attr.deserved = res_max(attr.deserved, attr.guarantee)
            self._update_share(attr)

    def on_session_open(self, ssn: Any) -> None:
        self.build_queue_attrs(ssn)
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
            return open_queue_admits(opts, queue, task, "deserved",
                                     Resource.less_equal_partly_with_dimension_zero_filtered)

        ssn.add_preemptive_fn(self.name(), preemptive)

        def allocatable(queue: Any, candidate: Any) -> bool:
            return open_queue_admits(opts, queue, candidate, "real_capability",
                                     Resource.less_equal_with_dimension_and_resources_name)

        ssn.add_allocatable_fn(self.name(), allocatable)

        def job_enqueueable(job: Any) -> int:
            queue = ssn.queues.get(job.queue)
            attr = opts.get(job.queue)
            if queue is None or attr is None or not queue_is_open(queue):
                return REJECT
            return enqueue_within_real_capability(attr, job)

        ssn.add_job_enqueueable_fn(self.name(), job_enqueueable)
        self.add_share_handlers(ssn)
