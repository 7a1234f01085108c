"""Per-queue quota attributes shared by proportion and capacity (their ``queueAttr``), built
from the jobs of a session as both Volcano plugins do."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ha.scheduler.api import QueueState, Resource, TaskStatus, allocated_status
from ha.scheduler.plugins.util import INFINITY, MAX_FLOAT, exceeded_part, share

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


def account_job(attr: QueueAttr, job: Any) -> None:
    """Add a job's allocated / requested / inqueue / elastic resources to its queue's attributes."""
    for status, tasks in job.task_status_index.items():
        if allocated_status(status):
            for t in tasks.values():
                attr.allocated.add(t.resreq)
                attr.request.add(t.resreq)
        elif status == TaskStatus.PENDING:
            for t in tasks.values():
                attr.request.add(t.resreq)
    phase = job.pod_group_phase
    if phase == PG_INQUEUE:
        attr.inqueue.add(job_min_resources(job))
    # a Running job that still has minResources to fill keeps them reserved (Spark-driver guard)
    if (phase == PG_RUNNING and pg_min_resources(job) is not None
            and allocated_task_num(job) >= pg_min_member(job)):
        attr.inqueue.add(inqueue_resource(job, job.allocated))
    attr.elastic.add(job.get_elastic_resources())


def proportion_share(attr: QueueAttr) -> float:
    """max over deserved's dimensions of allocated/deserved."""
    res = 0.0
    for rn in attr.deserved.resource_names():
        res = max(res, share(attr.allocated.get(rn), attr.deserved.get(rn)))
    return res
