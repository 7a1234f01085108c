"""Per-queue quota attributes shared by proportion and capacity (their ``queueAttr``), built
from the jobs of a session as both Volcano plugins do, and the rules both plugins apply to them
(:class:`QueueAttrPlugin`)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping

from ha.scheduler.api import QueueState, Resource, TaskStatus, allocated_status, exact_fields
from ha.scheduler.framework.events import EventHandler
from ha.scheduler.snapshot_reuse import verifying
from ha.scheduler.plugins.util import (
    INFINITY, MAX_FLOAT, PERMIT, REJECT, Plugin, exceeded_part, share,
)

PG_INQUEUE = "Inqueue"
PG_RUNNING = "Running"


@dataclass
class QueueAttr:
    queue_id: str
    name: str
    weight: int = 1
    share: float = 0.0
    deserved: Resource = field(default_factory=Resource)
    allocated: Resource = field(default_factory=Resource)
    request: Resource = field(default_factory=Resource)
    elastic: Resource = field(default_factory=Resource)   # Σ jobs' allocated above their minResources
    inqueue: Resource = field(default_factory=Resource)   # Σ minResources of Inqueue jobs (+ reserved of Running)
    capability: Resource = field(default_factory=Resource)
    real_capability: Resource | None = None            # min(capability, total − Σguarantee + guarantee)
    guarantee: Resource = field(default_factory=Resource)
    # capacity's hierarchy (enabledHierarchy): queue ids from the root down to the parent, children
    ancestors: list[str] = field(default_factory=list)
    children: dict[str, "QueueAttr"] = field(default_factory=dict)


# ----------------------------------------------------------------------- object accessors

def queue_spec(queue: Any) -> dict:
    return (queue.queue or {}).get("spec") or {}


def queue_priority(queue: Any) -> int:
    return queue.priority


def queue_is_open(queue: Any) -> bool:
    return queue.state == QueueState.OPEN


def queue_guarantee(queue: Any) -> Resource | None:
    g = queue_spec(queue).get("guarantee") or {}
    rl = g.get("resource") if isinstance(g, dict) else None
    return Resource.from_quantities(rl) if rl else None


def queue_capability(queue: Any) -> Resource | None:
    cap = queue_spec(queue).get("capability")
    return Resource.from_quantities(cap) if cap else None


def queue_deserved(queue: Any) -> Resource:
    return Resource.from_quantities(queue_spec(queue).get("deserved") or {})


def _pg_spec(job: Any) -> dict:
    return (job.pod_group or {}).get("spec") or {}


def pg_min_member(job: Any) -> int:
    return int(_pg_spec(job).get("minMember") or 0)


def pg_min_resources(job: Any) -> dict | None:
    return _pg_spec(job).get("minResources")


def job_min_resources(job: Any) -> Resource:
    """JobInfo.GetMinResources (scheduling gates are not modelled, so nothing is deducted)."""
    return job.get_min_resources()


def allocated_task_num(job: Any) -> int:
    return sum(len(ts) for st, ts in job.task_status_index.items() if allocated_status(st))


def inqueue_resource(job: Any, allocated: Resource) -> Resource:
    """util.GetInqueueResource: minResources not yet covered by what the job has allocated."""
    out = Resource()
    for name, q in (pg_min_resources(job) or {}).items():
        want = Resource.from_quantities({name: q}).get(name)
        if name == "cpu":
            out.milli_cpu = max(want - allocated.milli_cpu, 0.0)
        elif name == "memory":
            out.memory = max(want - allocated.memory, 0.0)
        elif name.startswith("count/") or name in ("pods", "ephemeral-storage"):
            continue  # count quotas and native resources are not scalar resources
        else:
            if out.scalar_resources is None:
                out.scalar_resources = {}
            have = (allocated.scalar_resources or {}).get(name)
            if have is None:
                out.scalar_resources[name] = want
            elif want - have > 0:
                out.scalar_resources[name] = want - have
    return out


# ----------------------------------------------------------------------- building

def new_queue_attr(queue: Any, total: Resource, total_guarantee: Resource, *, weight: int = 1) -> QueueAttr:
    attr = QueueAttr(queue_id=queue.uid, name=queue.name, weight=weight)
    cap = queue_capability(queue)
    if cap is not None:
        # a capability without cpu or memory leaves that dimension unlimited
        if cap.milli_cpu <= 0:
            cap.milli_cpu = MAX_FLOAT
        if cap.memory <= 0:
            cap.memory = MAX_FLOAT
    g = queue_guarantee(queue)
    if g is not None:
        attr.guarantee = g
    real = exceeded_part(total, total_guarantee).add(attr.guarantee)
    if cap is None:
        attr.capability = Resource()
    else:
        real.min_dimension_resource(cap, INFINITY)
        attr.capability = cap
    attr.real_capability = real
    return attr


def total_guarantee_of(queues: Any) -> Resource:
    total = Resource()
    for q in queues:
        g = queue_guarantee(q)
        if g is not None:
            total.add(g)
    return total


# what a job adds to its queue's attributes, in order: (target, amount); targets index
# (allocated, request, inqueue, elastic)
_ALLOCATED, _REQUEST, _INQUEUE, _ELASTIC = range(4)
_TARGETS = ("allocated", "request", "inqueue", "elastic")


class QueueAccount:
    """A job clone's account kept for the next session (the job's ``queue_account``): what it
    added to its queue's attributes, worked out from its tasks part and its PodGroup's status and
    spec at open. A reused clone (snapshot_reuse.py) has the same tasks part as when this was
    kept; with the same status and spec objects (the cache replaces a PodGroup, never writes into
    one) it adds the same amounts, replayed in the same order so the sums are the same floats."""

    __slots__ = ("status", "spec", "whole", "adds")

    def __init__(self, status: Any, spec: Any, whole: bool, adds: list[tuple[int, Resource]]) -> None:
        self.status = status
        self.spec = spec
        self.whole = whole
        self.adds = [(k, r.clone()) for k, r in adds]    # (some are the job's own sums)

    def holds(self, job: Any) -> bool:
        pg = job.pod_group
        changes = job._changes
        return (pg is not None and pg.get("status") is self.status and pg.get("spec") is self.spec
                and changes is not None and job.uid not in changes)


def job_account(job: Any, check: bool = False, sums: bool = True) -> tuple[bool, list[tuple[int, Resource]]]:
    """What a job adds to its queue's attributes: (whether every amount is a whole number, the
    adds in order). A job whose clone took its running sums (``sums_plain``: whole requests, the
    pod count their only scalar) adds its allocated sum at once instead of task by task
    (``sums=False``: task by task anyway); ``check`` compares that sum with its tasks added up."""
    whole = True
    adds: list[tuple[int, Resource]] = []
    if sums and getattr(job, "sums_plain", False):
        alloc = job.allocated_sum(check)
        adds.append((_ALLOCATED, alloc))
        adds.append((_REQUEST, alloc))
        pending = job.task_status_index.get(TaskStatus.PENDING)
        if pending:
            for t in pending.values():   # whole: the clone found every request of the job so
                adds.append((_REQUEST, t.resreq))
    else:
        for status, tasks in job.task_status_index.items():
            if allocated_status(status):
                for t in tasks.values():
                    adds.append((_ALLOCATED, t.resreq))
                    adds.append((_REQUEST, t.resreq))
                    whole = whole and (not sums or _whole(t.resreq))
            elif status == TaskStatus.PENDING:
                for t in tasks.values():
                    adds.append((_REQUEST, t.resreq))
                    whole = whole and (not sums or _whole(t.resreq))
    phase = job.pod_group_phase
    if phase == PG_INQUEUE:
        adds.append((_INQUEUE, job_min_resources(job)))
    # a Running job that still has minResources to fill keeps them reserved (Spark-driver guard)
    if (phase == PG_RUNNING and pg_min_resources(job) is not None
            and allocated_task_num(job) >= pg_min_member(job)):
        adds.append((_INQUEUE, inqueue_resource(job, job.allocated)))
    adds.append((_ELASTIC, job.get_elastic_resources()))
    return whole, adds


def account_job(attr: QueueAttr, job: Any, check: bool = False, sums: bool = True) -> bool:
    """Add a job's allocated / requested / inqueue / elastic resources to its queue's attributes
    (``job_account``). Returns whether every amount added was a whole number: whole amounts add
    up exactly in any grouping while the totals stay below 2**53, which the caller checks.

    A reused job clone whose kept account holds (:class:`QueueAccount`) replays it; ``check``
    works it out anyway and raises ``AssertionError`` if the two differ."""
    kept = getattr(job, "queue_account", None) if sums else None
    if kept is not None and kept.holds(job):
        whole, adds = kept.whole, kept.adds
        if check:
            _check_account(job, kept, *job_account(job, check, sums))
    else:
        whole, adds = job_account(job, check, sums)
        if sums and hasattr(job, "queue_account"):
            job.queue_account = (QueueAccount(_pg_part(job, "status"), _pg_part(job, "spec"), whole, adds)
                                 if job._changes is not None and job.uid not in job._changes else None)
    targets = (attr.allocated, attr.request, attr.inqueue, attr.elastic)
    for k, r in adds:
        targets[k].add(r)
    return whole


def _pg_part(job: Any, key: str) -> Any:
    pg = job.pod_group
    return pg.get(key) if pg is not None else None


def _check_account(job: Any, kept: QueueAccount, whole: bool, adds: list[tuple[int, Resource]]) -> None:
    got = [(_TARGETS[k], exact_fields(r)) for k, r in kept.adds]
    want = [(_TARGETS[k], exact_fields(r)) for k, r in adds]
    if got != want or kept.whole != whole:
        raise AssertionError(f"job {job.uid}: the queue account kept from the last session {got} "
                             f"(whole {kept.whole}) differs from its own now {want} (whole {whole})")


_EXACT = float(2 ** 53)


def _exact(r: Resource) -> bool:
    return (r.milli_cpu < _EXACT and r.memory < _EXACT
            and not any(v >= _EXACT for v in (r.scalar_resources or {}).values()))


def _whole(r: Resource) -> bool:
    return (not (r.milli_cpu % 1.0 or r.memory % 1.0) and r.milli_cpu >= 0.0 and r.memory >= 0.0
            and not any(v % 1.0 or v < 0.0 for v in (r.scalar_resources or {}).values()))


def proportion_share(attr: QueueAttr) -> float:
    """max over deserved's dimensions of allocated/deserved."""
    res = 0.0
    for rn in attr.deserved.resource_names():
        res = max(res, share(attr.allocated.get(rn), attr.deserved.get(rn)))
    return res


def open_queue_admits(opts: Mapping[str, QueueAttr], queue: Any, task: Any, limit: str,
                      fits: Callable[[Resource, Resource, Resource], tuple[bool, list[str]]]) -> bool:
    """Allocatable / Preemptive: False for a closed or unknown queue, else whether
    ``fits(allocated + request, <limit attribute>, request)``."""
    if not queue_is_open(queue):
        return False
    attr = opts.get(queue.uid)
    if attr is None:
        return False
    ok, _ = fits(attr.allocated.clone().add(task.resreq), getattr(attr, limit), task.resreq)
    return ok


def job_fits_real_capability(attr: QueueAttr, min_req: Resource) -> bool:
    """minResources + allocated + inqueue − elastic ≤ real capability on minResources' dimensions."""
    r = min_req.clone().add(attr.allocated).add(attr.inqueue).sub(attr.elastic)
    ok, _ = r.less_equal_with_dimension_and_resources_name(attr.real_capability, min_req)
    return ok


def enqueue_within_real_capability(attr: QueueAttr, job: Any) -> int:
    """JobEnqueueable's quota rule: PERMIT when minResources + allocated + inqueue − elastic fit
    the real capability (on minResources' dimensions), and count the job as inqueue; PERMIT
    without a real capability or minResources."""
    if attr.real_capability is None or pg_min_resources(job) is None:
        return PERMIT
    min_req = job_min_resources(job)
    if not job_fits_real_capability(attr, min_req):
        return REJECT
    attr.inqueue.add(min_req)
    return PERMIT


def reclaimees_by_queue(jobs: Mapping[Any, Any], opts: Mapping[str, QueueAttr],
                        reclaimees: list[Any]) -> Iterator[tuple[Any, QueueAttr, Resource]]:
    """(task, its queue's attributes, a running copy of that queue's allocated) for every
    reclaimee of a known queue; the copy is shared by the queue's tasks, so a victim the
    caller subtracts counts for the next candidate."""
    allocations: dict[str, Resource] = {}
    for t in reclaimees:
        job = jobs[t.job]
        attr = opts.get(job.queue)
        if attr is None:
            continue
        allocated = allocations.get(job.queue)
        if allocated is None:
            allocated = allocations[job.queue] = attr.allocated.clone()
        yield t, attr, allocated


# ----------------------------------------------------------------------- the plugins' common part

class QueueAttrPlugin(Plugin):
    """What proportion and capacity share: ``queue_opts`` built at session open from the jobs of
    known queues, Allocate/Deallocate handlers keeping allocated and share current, and the reset
    at session close. A plugin sets ``queue_share`` and may extend ``new_attr``."""

    queue_share = staticmethod(proportion_share)

    def __init__(self, arguments: Mapping[str, Any] | None = None):
        super().__init__(arguments)
        self.total_resource = Resource()
        self.total_guarantee = Resource()
        self.queue_opts: dict[str, QueueAttr] = {}

    def _update_share(self, attr: QueueAttr) -> None:
        attr.share = self.queue_share(attr)

    def new_attr(self, queue: Any) -> QueueAttr:
        return new_queue_attr(queue, self.total_resource, self.total_guarantee)

    def build_queue_attrs(self, ssn: Any) -> None:
        self.total_resource = ssn.total_resource.clone()
        self.total_guarantee = total_guarantee_of(ssn.queues.values())
        check = verifying(ssn)
        for sums in (True, False):
            self.queue_opts = {}
            whole = True
            for job in ssn.jobs.values():
                queue = ssn.queues.get(job.queue)
                if queue is None:
                    continue  # jobs of unknown queues are never scheduled
                attr = self.queue_opts.get(job.queue)
                if attr is None:
                    attr = self.queue_opts[job.queue] = self.new_attr(queue)
                whole = account_job(attr, job, check, sums) and whole
            # a job's sum added at once equals its tasks added one by one while every partial
            # sum is a whole number below 2**53 (requests are non-negative: the totals bound them)
            if not sums or (whole and all(_exact(a.allocated) and _exact(a.request)
                                          for a in self.queue_opts.values())):
                break

    def add_share_handlers(self, ssn: Any) -> None:
        """Allocate adds the task's request to its queue's allocated, Deallocate subtracts it."""
        opts = self.queue_opts

        def handler(move: Callable[[Resource, Resource], Any]) -> Callable[[Any], None]:
            def on_event(event: Any) -> None:
                job = ssn.jobs.get(event.task.job)
                attr = opts.get(job.queue) if job is not None else None
                if attr is not None:
                    move(attr.allocated, event.task.resreq)
                    self._update_share(attr)
            return on_event

        ssn.add_event_handler(EventHandler(allocate_func=handler(Resource.add),
                                           deallocate_func=handler(Resource.sub)))

    def on_session_close(self, ssn: Any) -> None:
        self.total_resource = Resource()
        self.total_guarantee = Resource()
        self.queue_opts = {}
