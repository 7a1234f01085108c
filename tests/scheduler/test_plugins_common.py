"""Builders for the plugin tests (objects in docs/object-shapes.md shape, a hand-built Session) and
tests of the plugin registry and the shared k8s node view."""
from __future__ import annotations

from typing import Any, Iterable

import pytest

from ha.errors import BadInput
from ha.scheduler.api import JobInfo, NodeInfo, QueueInfo, TaskInfo, TaskStatus
from ha.scheduler.conf import PluginOption, SchedulerConf, Tier
from ha.scheduler.framework.session import Session
from ha.scheduler.plugins import get_plugin_builder, plugin_names
from ha.scheduler.plugins.k8s_nodes import node_map, pod_requests

GI = 1024 ** 3
MI = 1024 ** 2


# ----------------------------------------------------------------------------- object builders

def pod(name: str, *, ns: str = "ns1", group: str | None = "pg1", cpu: float | None = 1000,
        mem: float | None = GI, phase: str = "Pending", node: str = "", priority: int | None = None,
        deleting: bool = False, node_selector: dict | None = None, tolerations: list | None = None,
        priority_class: str = "", host_ports: Iterable[int] = (), extra: dict | None = None,
        annotations: dict | None = None) -> dict:
    requests = {}
    if cpu is not None:
        requests["cpu"] = f"{int(cpu)}m"
    if mem is not None:
        requests["memory"] = str(int(mem))
    ann = dict(annotations or {})
    if group:
        ann["scheduling.k8s.io/group-name"] = group
    container: dict[str, Any] = {"name": "c", "resources": {"requests": requests} if requests else {}}
    if host_ports:
        container["ports"] = [{"containerPort": p, "hostPort": p} for p in host_ports]
    md: dict[str, Any] = {"name": name, "namespace": ns, "uid": f"{ns}-{name}", "annotations": ann,
                          "creationTimestamp": 0.0}
    if deleting:
        md["deletionTimestamp"] = 1.0
    spec: dict[str, Any] = {"schedulerName": "volcano", "nodeName": node, "containers": [container],
                            "nodeSelector": node_selector or {}, "priorityClassName": priority_class}
    if priority is not None:
        spec["priority"] = priority
    if tolerations:
        spec["tolerations"] = tolerations
    spec.update(extra or {})
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": spec,
            "status": {"phase": phase, "nominatedNodeName": ""}}


def node(name: str, *, cpu: float = 4000, mem: float = 8 * GI, pods: int = 110, labels: dict | None = None,
         taints: list | None = None, unschedulable: bool = False, scalars: dict | None = None) -> dict:
    alloc = {"cpu": f"{int(cpu)}m", "memory": str(int(mem)), "pods": str(pods)}
    for k, v in (scalars or {}).items():
        alloc[k] = str(v)
    spec: dict[str, Any] = {"unschedulable": unschedulable}
    if taints:
        spec["taints"] = taints
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": dict(labels or {})},
            "spec": spec, "status": {"allocatable": alloc, "capacity": dict(alloc),
                                     "conditions": [{"type": "Ready", "status": "True"}]}}


def podgroup(name: str, *, ns: str = "ns1", queue: str = "q1", min_member: int = 1,
             phase: str = "Running", min_resources: dict | None = None,
             min_task_member: dict | None = None) -> dict:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": ns, "uid": f"{ns}-{name}", "creationTimestamp": 0.0},
            "spec": {"minMember": min_member, "minTaskMember": dict(min_task_member or {}), "queue": queue,
                     "minResources": min_resources},
            "status": {"phase": phase, "conditions": []}}


def queue(name: str, *, weight: int = 1, capability: dict | None = None, deserved: dict | None = None,
          guarantee: dict | None = None, priority: int = 0, state: str = "Open") -> dict:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
            "metadata": {"name": name},
            "spec": {"weight": weight, "capability": capability, "deserved": deserved,
                     "guarantee": {"resource": guarantee} if guarantee else None, "priority": priority},
            "status": {"state": state}}


# ----------------------------------------------------------------------------- session builder

ALL_FLAGS = {"enabledJobOrder": True, "enabledJobReady": True, "enabledJobPipelined": True,
             "enabledTaskOrder": True, "enabledPreemptable": True, "enabledReclaimable": True,
             "enablePreemptive": True, "enabledQueueOrder": True, "enabledPredicate": True,
             "enabledNodeOrder": True, "enabledJobStarving": True, "enabledOverused": True,
             "enabledAllocatable": True, "enabledJobEnqueued": True}


def opt(name: str, arguments: dict | None = None, **flags: bool) -> dict:
    """A plugin option with every flag on unless flags are given explicitly."""
    d: dict[str, Any] = {"name": name, **(flags or ALL_FLAGS)}
    if arguments:
        d["arguments"] = arguments
    return d


def make_session(tiers: list[list[dict]], *, nodes: Iterable[dict] = (), pods: Iterable[dict] = (),
                 podgroups: Iterable[dict] = (), queues: Iterable[dict] = (),
                 job_priorities: dict[str, int] | None = None,
                 statuses: dict[str, TaskStatus] | None = None) -> Session:
    """A Session built like a snapshot (tasks placed on their nodes), with the tiers' plugins open.

    ``statuses`` overrides the status derived from the pod (e.g. Pipelined) by pod name.
    """
    conf = SchedulerConf(actions=[], tiers=[
        Tier(plugins=[PluginOption.from_dict(p, source="test", where=f"tiers[{i}]") for p in tier])
        for i, tier in enumerate(tiers)])
    ssn = Session(None, conf)
    ssn.nodes = {n["metadata"]["name"]: NodeInfo(n) for n in nodes}
    ssn.node_list = list(ssn.nodes.values())
    ssn.queues = {q["metadata"]["name"]: QueueInfo(q) for q in queues}
    jobs: dict[str, JobInfo] = {}
    for pg in podgroups:
        jid = f"{pg['metadata']['namespace']}/{pg['metadata']['name']}"
        job = JobInfo(jid)
        job.set_pod_group(pg)
        job.priority = (job_priorities or {}).get(jid, 0)
        jobs[jid] = job
    for p in pods:
        t = TaskInfo(p)
        st = (statuses or {}).get(t.name)
        if st is not None:
            t.status = st
        if t.status == TaskStatus.PIPELINED and not t.node_name:
            raise ValueError("a pipelined test task needs node=...")
        jobs[t.job].add_task_info(t)
        if t.node_name:
            ssn.nodes[t.node_name].add_task(t)
    ssn.jobs = jobs
    from ha.scheduler.api import Resource
    total = Resource()
    for n in ssn.nodes.values():
        total.add(n.allocatable)
    ssn.total_resource = total
    for tier in ssn.tiers:
        for o in tier.plugins:
            plugin = get_plugin_builder(o.name)(dict(o.arguments))
            ssn.plugins[plugin.name()] = plugin
            plugin.on_session_open(ssn)
    return ssn


def task(ssn: Session, name: str, ns: str = "ns1") -> TaskInfo:
    for job in ssn.jobs.values():
        for t in job.tasks.values():
            if t.name == name and t.namespace == ns:
                return t
    raise KeyError(name)


def names(tasks: Iterable[Any]) -> list[str]:
    return sorted(t.name for t in tasks)


# ----------------------------------------------------------------------------- tests

def test_every_plugin_is_registered_and_builds():
    expected = {"gang", "priority", "drf", "proportion", "capacity", "predicates", "nodeorder",
                "binpack", "conformance"}
    assert expected <= set(plugin_names())
    for n in expected:
        p = get_plugin_builder(n)({})
        assert p.name() == n


def test_unknown_plugin_is_bad_input_naming_it():
    with pytest.raises(BadInput, match="nope"):
        get_plugin_builder("nope")


def test_registered_functions_go_through_the_enable_flags():
    # gang and priority register starving/preemptable functions, but with no flags set the
    # session's aggregators must not consult them (unset = off, as in Volcano's unit tests).
    pods = [pod("p1", node="n1", phase="Running"), pod("p2")]
    flags_off = make_session([[{"name": "gang"}, {"name": "priority"}]], nodes=[node("n1")], pods=pods,
                             podgroups=[podgroup("pg1", min_member=2)], queues=[queue("q1")])
    job = flags_off.jobs["ns1/pg1"]
    assert flags_off.job_starving(job) is False  # no enabled starving fn -> false
    flags_on = make_session([[opt("gang"), opt("priority")]], nodes=[node("n1")], pods=pods,
                            podgroups=[podgroup("pg1", min_member=2)], queues=[queue("q1")])
    assert flags_on.job_starving(flags_on.jobs["ns1/pg1"]) is True


def test_pod_requests_non_zero_defaults():
    p = pod("p", cpu=None, mem=None)
    assert pod_requests(p, non_zero=False) == {}
    assert pod_requests(p, non_zero=True) == {"cpu": 100, "memory": 200 * MI}
    p2 = pod("p2", cpu=500, mem=None)
    assert pod_requests(p2, non_zero=True) == {"cpu": 500, "memory": 200 * MI}


def test_k8s_view_counts_every_task_and_follows_handlers():
    pods = [pod("run", node="n1", phase="Running"), pod("rel", node="n1", phase="Running", deleting=True),
            pod("pend")]
    ssn = make_session([[opt("predicates")]], nodes=[node("n1")], pods=pods,
                       podgroups=[podgroup("pg1")], queues=[queue("q1")])
    view = node_map(ssn)["n1"]
    assert task(ssn, "rel").status == TaskStatus.RELEASING
    assert view.pod_count() == 2  # Running and Releasing both count
    assert view.requested["cpu"] == 2000
    stmt = ssn.statement()
    stmt.allocate(task(ssn, "pend"), ssn.nodes["n1"])
    assert view.pod_count() == 3
    stmt.evict(task(ssn, "run"), "test")  # DeallocateFunc removes it from the k8s view
    assert view.pod_count() == 2
    assert view.requested["cpu"] == 2000


def test_the_k8s_view_keeps_each_pods_requests_on_the_task_and_follows_a_new_pod():
    """The view's per-pod requests are parsed once, into the cell a task shares with its clones
    (the next session's snapshot reads them from there), and parsed again for another pod."""
    from ha.scheduler.plugins.k8s_nodes import task_pod_requests
    t = TaskInfo(pod("p", cpu=1500, mem=None, node="n1", phase="Running"))
    assert t.k8s_requests == [None]
    clone = t.clone()
    got = task_pod_requests(clone)
    assert got[:2] == ({"cpu": 1500}, {"cpu": 1500, "memory": 200 * MI}) and got[3] is False
    assert task_pod_requests(t) is got                      # the original sees the clone's work
    t.pod = pod("p", cpu=250, mem=None, node="n1", phase="Running")   # another pod object
    assert task_pod_requests(t)[:2] == ({"cpu": 250}, {"cpu": 250, "memory": 200 * MI})
    assert task_pod_requests(clone)[:2] == ({"cpu": 1500}, {"cpu": 1500, "memory": 200 * MI})


def test_production_defaults_leave_hierarchy_and_cluster_order_off():
    """plugins/defaults.go turns every unset enabled* flag on except enableHierarchy and
    enableClusterOrder: an experiment's capacity plugin is flat unless the file asks for the tree
    (with the tree on by default, BR2's reclaim never fired)."""
    from ha.scheduler.conf import DEFAULTED_FLAGS, ENABLED_FLAGS, PluginOption, SchedulerConf
    opt = PluginOption(name="capacity").with_defaults()
    assert opt.enabled_hierarchy is None and opt.enabled_cluster_order is None
    assert all(getattr(opt, f) is True for f in DEFAULTED_FLAGS)
    assert set(ENABLED_FLAGS) - set(DEFAULTED_FLAGS) == {"enabled_hierarchy", "enabled_cluster_order"}
    asked = PluginOption(name="capacity", enabled_hierarchy=True).with_defaults()
    assert asked.enabled_hierarchy is True
    conf = SchedulerConf.from_dict({"actions": "allocate, reclaim", "tiers": [{"plugins": [{"name": "capacity"}]}]},
                                   apply_defaults=True)
    assert conf.tiers[0].plugins[0].enabled_hierarchy is None
