"""A seeded workload generator: gang jobs (a PodGroup with ``minMember`` = gang size, and its pods)
arriving as a Poisson (or constant-rate) process across queues and priority classes.

All randomness comes from ONE ``numpy.random.Generator`` seeded by the experiment seed, drawn in a
fixed order per job (gap, size, runtime, queue, priority class), so the same seed gives the same
plan on every machine. :meth:`WorkloadGenerator.plan` is pure; the cluster actor creates the
objects at their arrival times.

Also here: builders for the initial objects (nodes, queues, priority classes) in
docs/object-shapes.md shape.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping, Sequence

import numpy as np

from ha.errors import BadInput

__all__ = ["WorkloadConfig", "JobSpec", "WorkloadGenerator", "make_nodes", "make_node",
           "make_queue", "make_priority_class", "RUNTIME_ANNOTATION", "JOB_ANNOTATION",
           "GROUP_ANNOTATION", "ATTEMPT_ANNOTATION", "SLOT_ANNOTATION", "podgroup_object",
           "pod_object"]

RUNTIME_ANNOTATION = "ha-testbed/runtime-ms"       # how long the kubelet runs the pod
JOB_ANNOTATION = "ha-testbed/job"                  # the job (PodGroup) a pod belongs to
GROUP_ANNOTATION = "scheduling.k8s.io/group-name"  # Volcano's link pod -> PodGroup
ATTEMPT_ANNOTATION = "ha-testbed/attempt"          # 0 for the original pod, +1 per re-creation
SLOT_ANNOTATION = "ha-testbed/slot"                # the task slot a pod fills (re-creations keep it)


@dataclass(frozen=True)
class WorkloadConfig:
    rate_per_s: float = 1.0
    arrivals: str = "poisson"                      # "poisson" | "constant"
    gang_size: tuple[int, int] = (1, 1)
    runtime_s: tuple[float, float] = (10.0, 10.0)
    queues: tuple[str, ...] = ("default",)
    priority_classes: Mapping[str, int] = field(default_factory=dict)
    request: Mapping[str, Any] = field(default_factory=lambda: {"cpu": "1", "memory": "1Gi"})
    namespace: str = "default"
    duration_s: float = 60.0                       # no arrivals after this
    max_gangs: int | None = None
    scheduler_name: str = "volcano"
    name_prefix: str = "job"
    termination_grace_s: int = 1                   # short: evictions finish quickly in experiments
    network_topology: Mapping[str, Any] | None = None   # every PodGroup's spec.networkTopology

    def __post_init__(self):
        if self.arrivals not in ("poisson", "constant"):
            raise BadInput(f"workload.arrivals: expected poisson or constant, got {self.arrivals!r}")
        if not self.rate_per_s > 0:
            raise BadInput(f"workload.rate: must be > 0/s, got {self.rate_per_s}")
        lo, hi = self.gang_size
        if lo < 1 or lo > hi:
            raise BadInput(f"workload.gang_size: expected 1 <= min <= max, got {self.gang_size}")
        if self.runtime_s[0] < 0 or self.runtime_s[0] > self.runtime_s[1]:
            raise BadInput(f"workload.runtime: expected 0 <= min <= max, got {self.runtime_s}")
        if not self.queues:
            raise BadInput("workload.queues: at least one queue is needed")

    @classmethod
    def from_experiment(cls, wl, *, duration_s: float, queues: Sequence[str] | None = None,
                        scheduler_name: str = "volcano") -> "WorkloadConfig":
        """From ``ha.experiment.config.Workload`` (an empty queue list means every queue given)."""
        qs = tuple(wl.queues) or tuple(queues or ("default",))
        return cls(rate_per_s=wl.rate, arrivals=wl.arrivals, gang_size=tuple(wl.gang_size),
                   runtime_s=tuple(wl.runtime), queues=qs, priority_classes=dict(wl.priority_classes),
                   request=dict(wl.request), namespace=wl.namespace,
                   duration_s=duration_s if getattr(wl, "until", None) is None else min(wl.until, duration_s),
                   max_gangs=wl.max_gangs, scheduler_name=scheduler_name,
                   network_topology=wl.network_topology.to_spec() if getattr(wl, "network_topology", None) else None)


@dataclass(frozen=True)
class JobSpec:
    index: int
    name: str
    namespace: str
    arrival_s: float           # seconds after the workload starts
    size: int
    runtime_ms: int
    queue: str
    priority_class: str | None


class WorkloadGenerator:
    def __init__(self, config: WorkloadConfig, seed: int):
        self.config = config
        self.seed = int(seed)

    def jobs(self) -> Iterator[JobSpec]:
        """The arrival plan, in arrival order (deterministic for a given config and seed)."""
        cfg = self.config
        rng = np.random.default_rng(self.seed)
        pcs = sorted(cfg.priority_classes)          # sorted: dict order must not change the plan
        t = 0.0
        i = 0
        while cfg.max_gangs is None or i < cfg.max_gangs:
            gap = rng.exponential(1.0 / cfg.rate_per_s) if cfg.arrivals == "poisson" else 1.0 / cfg.rate_per_s
            t += float(gap)
            if t > cfg.duration_s:
                return
            size = int(rng.integers(cfg.gang_size[0], cfg.gang_size[1] + 1))
            runtime = float(rng.uniform(cfg.runtime_s[0], cfg.runtime_s[1]))
            queue = cfg.queues[int(rng.integers(0, len(cfg.queues)))]
            pc = pcs[int(rng.integers(0, len(pcs)))] if pcs else None
            yield JobSpec(index=i, name=f"{cfg.name_prefix}-{i:05d}", namespace=cfg.namespace,
                          arrival_s=t, size=size, runtime_ms=int(round(runtime * 1000)),
                          queue=queue, priority_class=pc)
            i += 1

    def plan(self) -> list[JobSpec]:
        return list(self.jobs())

    def objects(self, job: JobSpec) -> tuple[dict, list[dict]]:
        """The PodGroup and the pods of one job."""
        cfg = self.config
        pg = podgroup_object(job.name, job.namespace, min_member=job.size, queue=job.queue,
                             priority_class=job.priority_class)
        if cfg.network_topology:
            pg["spec"]["networkTopology"] = dict(cfg.network_topology)
        pods = [pod_object(f"{job.name}-{k}", job.namespace, job=job.name,
                           request=cfg.request, runtime_ms=job.runtime_ms,
                           priority_class=job.priority_class,
                           priority=cfg.priority_classes.get(job.priority_class) if job.priority_class else None,
                           scheduler_name=cfg.scheduler_name, grace_s=cfg.termination_grace_s,
                           task_role="worker")
                for k in range(job.size)]
        return pg, pods


# -- object builders (docs/object-shapes.md) ------------------------------------------------------

def podgroup_object(name: str, namespace: str, *, min_member: int, queue: str,
                    priority_class: str | None = None) -> dict:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace, "labels": {}, "annotations": {}},
            "spec": {"minMember": int(min_member), "minTaskMember": {}, "queue": queue,
                     "priorityClassName": priority_class or "", "minResources": None},
            "status": {"phase": "Pending", "conditions": [], "running": 0, "succeeded": 0,
                       "failed": 0}}


def pod_object(name: str, namespace: str, *, job: str, request: Mapping[str, Any], runtime_ms: int,
               priority_class: str | None = None, priority: int | None = None,
               scheduler_name: str = "volcano", grace_s: int = 1, task_role: str | None = None,
               attempt: int = 0) -> dict:
    ann = {GROUP_ANNOTATION: job, JOB_ANNOTATION: job, RUNTIME_ANNOTATION: str(int(runtime_ms)),
           ATTEMPT_ANNOTATION: str(attempt), SLOT_ANNOTATION: name}
    if task_role:
        ann["volcano.sh/task-spec"] = task_role
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": {}, "annotations": ann},
            "spec": {"schedulerName": scheduler_name, "nodeName": "", "priority": priority,
                     "priorityClassName": priority_class or "",
                     "preemptionPolicy": "PreemptLowerPriority", "nodeSelector": {},
                     "containers": [{"name": "main", "resources": {"requests": dict(request)}}],
                     "initContainers": [], "terminationGracePeriodSeconds": int(grace_s)},
            "status": {"phase": "Pending", "nominatedNodeName": "", "conditions": []}}


def make_node(name: str, *, cpu: Any = "32", memory: Any = "128Gi", pods: Any = 110,
              labels: Mapping[str, str] | None = None, extra: Mapping[str, Any] | None = None) -> dict:
    alloc = {"cpu": cpu, "memory": memory, "pods": pods, **dict(extra or {})}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": dict(labels or {}), "annotations": {}},
            "spec": {"unschedulable": False},
            "status": {"allocatable": dict(alloc), "capacity": dict(alloc),
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def make_nodes(n: int, *, prefix: str = "node-", **kw) -> list[dict]:
    """``node-1`` … ``node-N`` (the experiment file's naming)."""
    return [make_node(f"{prefix}{i}", **kw) for i in range(1, n + 1)]


def make_queue(name: str, weight: int = 1, *, capability=None, deserved=None, guarantee=None,
               reclaimable: bool | None = None, priority: int = 0) -> dict:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
            "metadata": {"name": name, "labels": {}, "annotations": {}},
            "spec": {"weight": int(weight), "capability": capability, "deserved": deserved,
                     "guarantee": {"resource": guarantee} if guarantee else None,
                     "reclaimable": reclaimable, "priority": int(priority)},
            "status": {"state": "Open"}}


def make_priority_class(name: str, value: int, *, global_default: bool = False,
                        preemption_policy: str = "PreemptLowerPriority") -> dict:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": name, "labels": {}, "annotations": {}},
            "value": int(value), "globalDefault": bool(global_default),
            "preemptionPolicy": preemption_policy}
