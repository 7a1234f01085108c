"""capacity: per-queue deserved / capability / guarantee (Volcano ``plugins/capacity/capacity.go``),
flat or, with ``enabledHierarchy``, as a tree of queues under ``root``.

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

Hierarchy (``enabledHierarchy: true`` on the capacity option; ``buildHierarchicalQueueAttrs``):
* every queue of the session gets attributes; its parent is ``spec.parent`` or ``root``; a
  parent that does not exist, a cycle, a job in a non-leaf queue or no ``root`` queue make the
  plugin refuse everything (allocatable / preemptive false, enqueue and reclaim Reject);
* deserved, capability and guarantee come from the spec as they are (no clipping); a job's
  allocated / request / inqueue / elastic count in its queue and every ancestor;
* root: capability and deserved default to the cluster total, its real capability is the
  total, its guarantee defaults to Σ of its children's; then, top-down, a child's capability
  inherits cpu / memory (when ≤ 0) and missing scalars from its parent, and its real capability
  is min(capability, parent's real capability − Σ siblings' guarantee + its guarantee);
* Allocatable and JobEnqueueable: leaf queues only, checked on the queue and every ancestor;
  an enqueued job's minResources count as inqueue up the tree. Allocate / Deallocate move
  allocated up the tree too (the ancestors' shares are not recomputed, as in Volcano);
* QueueOrder: priority, then leaves before inner queues; two inner queues by share; two leaves
  by the shares of their ancestors just below the deepest common one. VictimQueueOrder: the
  victim queue sharing the deeper common ancestor with the preemptor's queue first.
"""
from __future__ import annotations

from typing import Any, Mapping

from ha.scheduler.framework.events import EventHandler
from ha.scheduler.plugins.factory import register
from ha.scheduler.plugins.queue_attrs import (
    QueueAttr, QueueAttrPlugin, account_job, enqueue_within_real_capability, job_fits_real_capability,
    job_min_resources, open_queue_admits, pg_min_resources, proportion_share, queue_capability,
    queue_deserved, queue_guarantee, queue_is_open, queue_priority, reclaimees_by_queue,
)
from ha.scheduler.plugins.util import (
    INFINITY, PERMIT, REJECT, ZERO, Resource, exceeded_part, intersection, intersection_without_pods,
    res_max,
)

PLUGIN_NAME = "capacity"
ROOT_QUEUE = "root"


def hierarchy_enabled(ssn: Any, name: str) -> bool:
    """Session.HierarchyEnabled: the first option of that plugin has enabledHierarchy true."""
    for tier in ssn.tiers:
        for opt in tier.plugins:
            if opt.name == name:
                return opt.enabled_hierarchy is True
    return False


def queue_level(l: QueueAttr, r: QueueAttr) -> int:
    """getQueueLevel: the index of the deepest common entry of the two ancestor lists."""
    level = 0
    for i in range(min(len(l.ancestors), len(r.ancestors))):
        if l.ancestors[i] != r.ancestors[i]:
            return level
        level = i
    return level


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

    def __init__(self, arguments: Any = None):
        super().__init__(arguments)
        self.hierarchy = False

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

    # -- the hierarchy ------------------------------------------------------------------------
    @staticmethod
    def new_hierarchical_attr(queue: Any) -> QueueAttr:
        attr = QueueAttr(queue_id=queue.uid, name=queue.name, deserved=queue_deserved(queue),
                         real_capability=Resource())
        cap = queue_capability(queue)
        if cap is not None:
            attr.capability = cap
        g = queue_guarantee(queue)
        if g is not None:
            attr.guarantee = g
        return attr

    def _link_ancestors(self, ssn: Any, queue: Any, visiting: set[str]) -> str | None:
        """updateAncestors: link ``queue`` under its parent (built first); an error or None."""
        if queue.name == ROOT_QUEUE:
            return None
        if queue.uid in visiting:
            return f"cycle detected in queue hierarchy for queue {queue.name}"
        visiting.add(queue.uid)
        try:
            parent = queue.parent or ROOT_QUEUE
            pinfo = ssn.queues.get(parent)
            if pinfo is None:
                return f"the queue {queue.name} has invalid parent queue {parent}"
            if pinfo.uid not in self.queue_opts:
                self.queue_opts[pinfo.uid] = self.new_hierarchical_attr(pinfo)
                err = self._link_ancestors(ssn, pinfo, visiting)
                if err:
                    return err
            pattr = self.queue_opts[pinfo.uid]
            pattr.children[queue.uid] = self.queue_opts[queue.uid]
            self.queue_opts[queue.uid].ancestors = pattr.ancestors + [pinfo.uid]
            return None
        finally:
            visiting.discard(queue.uid)

    def _check_hierarchical_queue(self, attr: QueueAttr) -> None:
        """checkHierarchicalQueue: children's capability inheritance and real capability."""
        total_guarantee, total_deserved = Resource(), Resource()
        for child in attr.children.values():
            total_deserved.add(child.deserved)
            total_guarantee.add(child.guarantee)
            if child.capability.milli_cpu <= 0:
                child.capability.milli_cpu = attr.capability.milli_cpu
            if child.capability.memory <= 0:
                child.capability.memory = attr.capability.memory
            if attr.capability.scalar_resources is not None:
                if child.capability.scalar_resources is None:
                    child.capability.scalar_resources = {}
                for k, v in attr.capability.scalar_resources.items():
                    child.capability.scalar_resources.setdefault(k, v)
        if attr.name == ROOT_QUEUE:
            if attr.guarantee.is_empty():
                attr.guarantee = total_guarantee
            if attr.deserved.is_empty():
                attr.deserved = total_deserved
            self.total_guarantee = attr.guarantee
        for child in attr.children.values():
            real = exceeded_part(attr.real_capability, total_guarantee).add(child.guarantee)
            real.min_dimension_resource(child.capability, INFINITY)
            child.real_capability = real
        for child in attr.children.values():
            self._check_hierarchical_queue(child)

    def build_hierarchical_queue_attrs(self, ssn: Any) -> bool:
        """buildHierarchicalQueueAttrs; False when the tree is unusable (the plugin then refuses)."""
        self.total_resource = ssn.total_resource.clone()
        self.total_guarantee = Resource()
        self.queue_opts = {}
        for uid in sorted(ssn.queues):
            queue = ssn.queues[uid]
            if uid in self.queue_opts:
                continue
            self.queue_opts[uid] = self.new_hierarchical_attr(queue)
            if self._link_ancestors(ssn, queue, set()) is not None:
                return False
        for job in ssn.jobs.values():
            attr = self.queue_opts.get(job.queue)
            if attr is None:
                continue  # jobs of unknown queues are never scheduled
            if attr.children:
                return False  # a job in an inner queue
            before = (attr.allocated.clone(), attr.request.clone(), attr.inqueue.clone(), attr.elastic.clone())
            account_job(attr, job, sums=False)   # the deltas below: task by task, as before
            deltas = (attr.allocated.clone().sub(before[0]), attr.request.clone().sub(before[1]),
                      attr.inqueue.clone().sub(before[2]), attr.elastic.clone().sub(before[3]))
            for anc in attr.ancestors:
                a = self.queue_opts[anc]
                a.allocated.add(deltas[0])
                a.request.add(deltas[1])
                a.inqueue.add(deltas[2])
                a.elastic.add(deltas[3])
        root = self.queue_opts.get(ROOT_QUEUE)
        if root is None:
            return False
        if root.capability.is_empty():
            root.capability = self.total_resource.clone()
        if root.deserved.is_empty():
            root.deserved = self.total_resource.clone()
        root.real_capability = self.total_resource.clone()
        self._check_hierarchical_queue(root)
        for attr in self.queue_opts.values():
            self._update_share(attr)
        return True

    def chain(self, queue_id: str) -> list[QueueAttr]:
        """The queue and its ancestors, leaf first (the order Volcano checks them in)."""
        attr = self.queue_opts[queue_id]
        return [attr] + [self.queue_opts[a] for a in reversed(attr.ancestors)]

    def is_leaf(self, queue_id: str) -> bool:
        attr = self.queue_opts.get(queue_id)
        return attr is not None and not attr.children

    # -- session ------------------------------------------------------------------------------
    def on_session_open(self, ssn: Any) -> None:
        self.hierarchy = hierarchy_enabled(ssn, self.name())
        ready = True
        if self.hierarchy:
            ready = self.build_hierarchical_queue_attrs(ssn)
        else:
            self.build_queue_attrs(ssn)
        opts = self.queue_opts
        hierarchy = self.hierarchy

        if hierarchy:
            def queue_order(l: Any, r: Any) -> int:
                lp, rp = queue_priority(l), queue_priority(r)
                if lp != rp:
                    return rp - lp
                la, ra = opts.get(l.uid), opts.get(r.uid)
                if la is None or ra is None:
                    return compare_share_with_deserved(la, ra)
                ll, rl = not la.children, not ra.children
                if ll != rl:
                    return -1 if ll else 1
                if not ll:
                    return compare_share_with_deserved(la, ra)
                level = queue_level(la, ra)
                lpid = la.ancestors[level + 1] if level + 1 < len(la.ancestors) else la.queue_id
                rpid = ra.ancestors[level + 1] if level + 1 < len(ra.ancestors) else ra.queue_id
                return compare_share_with_deserved(opts.get(lpid), opts.get(rpid))

            def victim_queue_order(l: Any, r: Any, preemptor: Any) -> int:
                pa = opts.get(preemptor.uid)
                la, ra = opts.get(l.uid), opts.get(r.uid)
                if pa is None or la is None or ra is None:
                    return 0
                ll, rl = queue_level(la, pa), queue_level(ra, pa)
                return 0 if ll == rl else (-1 if ll > rl else 1)

            if ready:
                ssn.add_queue_order_fn(self.name(), queue_order)
                ssn.add_victim_queue_order_fn(self.name(), victim_queue_order)
        else:
            def queue_order(l: Any, r: Any) -> int:
                lp, rp = queue_priority(l), queue_priority(r)
                if lp != rp:
                    return rp - lp
                return compare_share_with_deserved(opts.get(l.uid), opts.get(r.uid))

            ssn.add_queue_order_fn(self.name(), queue_order)

        def reclaimable(reclaimer: Any, reclaimees: list[Any]) -> tuple[list[Any], int]:
            if not ready:
                return [], REJECT
            return capacity_victims(ssn.jobs, opts, reclaimer, reclaimees), PERMIT

        ssn.add_reclaimable_fn(self.name(), reclaimable)

        def preemptive(queue: Any, task: Any) -> bool:
            if not ready:
                return False
            return open_queue_admits(opts, queue, task, "deserved",
                                     Resource.less_equal_partly_with_dimension_zero_filtered)

        ssn.add_preemptive_fn(self.name(), preemptive)

        def allocatable(queue: Any, candidate: Any) -> bool:
            if not hierarchy:
                return open_queue_admits(opts, queue, candidate, "real_capability",
                                         Resource.less_equal_with_dimension_and_resources_name)
            if not queue_is_open(queue) or not ready or not self.is_leaf(queue.uid):
                return False
            for attr in self.chain(queue.uid):
                ok, _ = attr.allocated.clone().add(candidate.resreq).less_equal_with_dimension_and_resources_name(
                    attr.real_capability, candidate.resreq)
                if not ok:
                    return False
            return True

        ssn.add_allocatable_fn(self.name(), allocatable)

        def job_enqueueable(job: Any) -> int:
            if not ready:
                return REJECT
            if hierarchy and not self.is_leaf(job.queue):
                return REJECT
            queue = ssn.queues.get(job.queue)
            attr = opts.get(job.queue)
            if queue is None or attr is None or not queue_is_open(queue):
                return REJECT
            if not hierarchy:
                return enqueue_within_real_capability(attr, job)
            if pg_min_resources(job) is None:
                return PERMIT
            min_req = job_min_resources(job)
            chain = self.chain(job.queue)
            if not all(job_fits_real_capability(a, min_req) for a in chain):
                return REJECT
            for a in chain:
                a.inqueue.add(min_req)
            return PERMIT

        ssn.add_job_enqueueable_fn(self.name(), job_enqueueable)
        self.add_share_handlers(ssn)
        if hierarchy:
            self._add_ancestor_handlers(ssn)

    def _add_ancestor_handlers(self, ssn: Any) -> None:
        """Allocate / Deallocate also move the ancestors' allocated (their shares stay)."""
        opts = self.queue_opts

        def handler(sign: int):
            def on_event(event: Any) -> None:
                job = ssn.jobs.get(event.task.job)
                attr = opts.get(job.queue) if job is not None else None
                if attr is None:
                    return
                for anc in attr.ancestors:
                    a = opts[anc]
                    if sign > 0:
                        a.allocated.add(event.task.resreq)
                    else:
                        a.allocated.sub(event.task.resreq)
            return on_event

        ssn.add_event_handler(EventHandler(allocate_func=handler(1), deallocate_func=handler(-1)))
