"""Small cluster builders for the framework tests: real SchedulerCache + RecordingIO, objects in
docs/object-shapes.md shape, sessions opened exactly as the scenario runner opens them."""
from __future__ import annotations

from typing import Any

from ha.scheduler.api import copy_object
from ha.scheduler.cache import SchedulerCache
from ha.scheduler.conf import SchedulerConf
from ha.scheduler.framework import close_session, open_session
from ha.scheduler.interfaces import RecordingIO
from ha.scheduler.profiles import Switches, profile

NS = "ns"


def node(name: str, cpu: int, mem: int = 8 * 2**30, pods: int = 10) -> dict:
    alloc = {"cpu": f"{cpu}m", "memory": str(mem), "pods": str(pods)}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "uid": name, "resourceVersion": 1, "creationTimestamp": 0.0,
                         "labels": {}, "annotations": {}},
            "spec": {"unschedulable": False},
            "status": {"allocatable": dict(alloc), "capacity": dict(alloc),
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def queue(name: str = "q1", weight: int = 1, **spec: Any) -> dict:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
            "metadata": {"name": name, "uid": name, "resourceVersion": 1, "creationTimestamp": 0.0,
                         "labels": {}, "annotations": {}},
            "spec": {"weight": weight, "capability": None, "deserved": None, "guarantee": None,
                     "reclaimable": None, "priority": 0, **spec},
            "status": {"state": "Open"}}


def podgroup(name: str, min_member: int, q: str = "q1", phase: str = "Inqueue", pc: str = "") -> dict:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": NS, "uid": f"{NS}-{name}", "resourceVersion": 1,
                         "creationTimestamp": 0.0, "labels": {}, "annotations": {}},
            "spec": {"minMember": min_member, "minTaskMember": {}, "queue": q, "priorityClassName": pc,
                     "minResources": None},
            "status": {"phase": phase, "conditions": [], "running": 0, "succeeded": 0, "failed": 0}}


def pod(name: str, pg: str, cpu: int, *, node_name: str = "", phase: str = "Pending", priority: int | None = None,
        nominated: str = "", deleting: bool = False, preemptable: bool = True, mem: int = 2**20) -> dict:
    md: dict[str, Any] = {"name": name, "namespace": NS, "uid": f"{NS}-{name}", "resourceVersion": 1,
                          "creationTimestamp": 0.0, "labels": {},
                          "annotations": {"scheduling.k8s.io/group-name": pg,
                                          "volcano.sh/preemptable": "true" if preemptable else "false"}}
    if deleting:
        md["deletionTimestamp"] = 1.0
        md["deletionGracePeriodSeconds"] = 30
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md,
            "spec": {"schedulerName": "volcano", "nodeName": node_name, "priority": priority,
                     "priorityClassName": "", "preemptionPolicy": "PreemptLowerPriority", "nodeSelector": {},
                     "containers": [{"name": "main", "resources": {"requests": {"cpu": f"{cpu}m",
                                                                                 "memory": str(mem)}}}],
                     "initContainers": [], "terminationGracePeriodSeconds": 30},
            "status": {"phase": phase, "nominatedNodeName": nominated, "conditions": []}}


def make_cache(switches: Switches | str = "v1.14", *, nodes=(), queues=None, podgroups=(), pods=(),
               priority_classes=()) -> tuple[SchedulerCache, RecordingIO]:
    sw = profile(switches) if isinstance(switches, str) else switches
    io = RecordingIO()
    c = SchedulerCache(switches=sw, binder=io, evictor=io, status_updater=io)
    for n in nodes:
        c.add_node(n)
    for q in (queues if queues is not None else [queue("q1")]):
        c.add_queue(q)
    for pc in priority_classes:
        c.add_priority_class(pc)
    for pg in podgroups:
        c.add_pod_group(pg)
    for p in pods:
        # the "API server" copy is separate from the cache's (updates reach the cache only
        # through an informer, which these tests do not run)
        io.pods[f"{p['metadata']['namespace']}/{p['metadata']['name']}"] = copy_object(p)
        c.add_pod(p)
    return c, io


def conf(actions=(), tiers=(), registered=None, **action_arguments: dict) -> SchedulerConf:
    d: dict[str, Any] = {"actions": list(actions), "tiers": [list(t) for t in tiers],
                         "action_arguments": action_arguments}
    if registered is not None:
        d["registered_builders"] = list(registered)
    return SchedulerConf.from_dict(d, source="<test>")


GANG_ALL = {"name": "gang", "enabledJobOrder": True, "enabledJobReady": True, "enabledJobPipelined": True,
            "enabledJobStarving": True, "enabledPreemptable": True, "enabledReclaimable": True}
PREDICATES = {"name": "predicates", "enabledPredicate": True}
PRIORITY_ALL = {"name": "priority", "enabledJobOrder": True, "enabledTaskOrder": True,
                "enabledPreemptable": True, "enabledJobStarving": True}
CONFORMANCE = {"name": "conformance", "enabledPreemptable": True, "enabledReclaimable": True}


def session(cache: SchedulerCache, c: SchedulerConf | None = None):
    return open_session(cache, c if c is not None else conf(), seed=1)


def cache_task(cache: SchedulerCache, key: str):
    ns, name = key.split("/")
    return cache.find_task(ns, name)


def ssn_task(ssn: Any, key: str):
    for job in ssn.jobs.values():
        for t in job.tasks.values():
            if t.pod_key == key:
                return t
    raise KeyError(key)


__all__ = ["node", "queue", "podgroup", "pod", "make_cache", "conf", "session", "close_session",
           "cache_task", "ssn_task", "GANG_ALL", "PREDICATES", "PRIORITY_ALL", "CONFORMANCE", "NS"]
