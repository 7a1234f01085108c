"""``ha-testbed bench session``: one allocate session of the scheduler model at scale.

Figure: pods placed (bound) per second by one whole session -- ``open_session`` (snapshot +
plugins' OnSessionOpen), the allocate action, ``close_session`` -- over 5,000 nodes and 50,000
pending pods in gangs of 1-16 across several queues, with Volcano's default production tiers
(priority, gang, conformance | drf, predicates, proportion, nodeorder; every flag on).

``taints`` (``--param taints=F``, default 0): a fraction F of the nodes carries a taint — half of
them ``dedicated=infra:NoSchedule``, half ``spot=true:PreferNoSchedule`` — and one job in ten
tolerates each (the scoring then has intolerable PreferNoSchedule taints to normalise, the
predicates taints to filter and tolerating pods to check node by node).

Baseline, measured in the same run on the same cache: a snapshot plus a trivial gang-aware
first-fit loop (jobs in creation order; each task on the first node whose Idle fits its request,
with a moving start index; a gang that does not reach minMember is rolled back). It does what
any placement must do -- walk the tasks, compare resources, update node accounting -- and
nothing Volcano adds (ordering by plugins, predicates, scoring, statements, bind dispatch), so the
ratio says what the Volcano semantics cost over the cheapest honest placement in Python.

``--hypernodes``: the nodes also carry a rack label and sit under HyperNodes -- racks of
``RACK_SIZE`` nodes (tier 1, one labelMatch member) and spines of ``RACKS_PER_SPINE`` racks (tier 2,
HyperNode members) -- resolved by the cache; the network-topology-aware plugin joins the last tier
with its hypernode order and gradient (its node score off, as in the default tiers); and
``TOPOLOGY_JOBS`` gangs, evenly spread over the job order, carry ``networkTopology: {mode: hard,
highestTierAllowed: 2}``. Those take allocate's hypernode path, which dry-runs the gang in every
eligible rack (Volcano's algorithm: its cost grows with the nodes of the eligible hypernodes, so a
few such gangs cost as much as thousands of plain pods); the other gangs take the usual path.
"""
from __future__ import annotations

import random
import time
from typing import Any

from ha.bench import BenchResult

__all__ = ["run", "build_cluster", "model_session", "first_fit_baseline"]

NODE = {"cpu": "32", "memory": str(128 * 2**30), "pods": "110"}
RACK_SIZE = 20
RACKS_PER_SPINE = 10
TOPOLOGY_JOBS = 10
RACK_LABEL = "topology.example/rack"
CPU_CHOICES = (250, 500, 1000, 2000, 4000)
MEM_CHOICES = (256 * 2**20, 512 * 2**20, 2**30, 2 * 2**30, 4 * 2**30)


TAINTS = ({"key": "dedicated", "value": "infra", "effect": "NoSchedule"},
          {"key": "spot", "value": "true", "effect": "PreferNoSchedule"})
TOLERATIONS = ([{"key": "dedicated", "operator": "Equal", "value": "infra", "effect": "NoSchedule"}],
               [{"key": "spot", "operator": "Exists", "effect": "PreferNoSchedule"}])


def _node(i: int, taint: dict | None = None) -> dict:
    name = f"node-{i:05d}"
    spec: dict[str, Any] = {"unschedulable": False}
    if taint is not None:
        spec["taints"] = [dict(taint)]
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "uid": name, "resourceVersion": i + 1, "creationTimestamp": 0.0,
                         "labels": {"kubernetes.io/hostname": name}, "annotations": {}},
            "spec": spec,
            "status": {"allocatable": dict(NODE), "capacity": dict(NODE),
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def _queue(name: str) -> dict:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
            "metadata": {"name": name, "uid": name, "resourceVersion": 1, "creationTimestamp": 0.0,
                         "labels": {}, "annotations": {}},
            "spec": {"weight": 1, "capability": None, "deserved": None, "guarantee": None,
                     "reclaimable": True, "priority": 0},
            "status": {"state": "Open"}}


def workload(n_nodes: int, n_pods: int, n_queues: int, seed: int,
             taints: float = 0.0) -> tuple[list, list, list, list]:
    """Nodes, queues, podgroups, pods (object-shapes.md dicts); gangs of 1-16, minMember = size;
    a fraction ``taints`` of the nodes tainted (module docstring)."""
    rng = random.Random(seed)
    n_tainted = int(round(n_nodes * taints))
    tainted = set(random.Random(seed + 1).sample(range(n_nodes), n_tainted)) if n_tainted else set()
    nodes = [_node(i, TAINTS[i % 2] if i in tainted else None) for i in range(n_nodes)]
    queues = [_queue(f"q{i}") for i in range(n_queues)]
    podgroups: list[dict] = []
    pods: list[dict] = []
    j = 0
    while len(pods) < n_pods:
        size = min(rng.randint(1, 16), n_pods - len(pods))
        ns, pg = f"ns{j % 8}", f"job-{j:06d}"
        cpu, mem = rng.choice(CPU_CHOICES), rng.choice(MEM_CHOICES)
        t = float(j)  # distinct creation times: a stable job order
        tolerations = TOLERATIONS[j % 2] if taints and j % 10 == 0 else None
        podgroups.append({
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": pg, "namespace": ns, "uid": f"{ns}-{pg}", "resourceVersion": 1,
                         "creationTimestamp": t, "labels": {}, "annotations": {}},
            "spec": {"minMember": size, "minTaskMember": {}, "queue": queues[j % n_queues]["metadata"]["name"],
                     "priorityClassName": "", "minResources": None},
            "status": {"phase": "Inqueue", "conditions": [], "running": 0, "succeeded": 0, "failed": 0}})
        for k in range(size):
            name = f"{pg}-task-{k}"
            pods.append({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": ns, "uid": f"{ns}-{name}", "resourceVersion": 1,
                             "creationTimestamp": t, "labels": {},
                             "annotations": {"scheduling.k8s.io/group-name": pg}},
                "spec": {"schedulerName": "volcano", "nodeName": "", "priority": None,
                         "priorityClassName": "", "preemptionPolicy": "PreemptLowerPriority",
                         "nodeSelector": {}, "initContainers": [], "terminationGracePeriodSeconds": 30,
                         "containers": [{"name": "main", "resources": {"requests": {
                             "cpu": f"{cpu}m", "memory": str(mem)}}}]},
                "status": {"phase": "Pending", "nominatedNodeName": "", "conditions": []}})
            if tolerations:
                pods[-1]["spec"]["tolerations"] = [dict(t) for t in tolerations]
        j += 1
    return nodes, queues, podgroups, pods


def hypernode_topology(nodes: list, podgroups: list) -> list[dict]:
    """Label the nodes by rack, return rack and spine HyperNodes, and give TOPOLOGY_JOBS gangs a
    hard network topology (tier 2)."""
    from ha.scheduler.api.hypernode_info import hyper_node_object
    n_racks = (len(nodes) + RACK_SIZE - 1) // RACK_SIZE
    for i, n in enumerate(nodes):
        n["metadata"]["labels"][RACK_LABEL] = f"rack-{i // RACK_SIZE:04d}"
    hns = [hyper_node_object(f"rack-{r:04d}", 1, [{"type": "Node", "selector": {
        "labelMatch": {"matchLabels": {RACK_LABEL: f"rack-{r:04d}"}}}}], tier_name="rack")
        for r in range(n_racks)]
    for s in range(0, n_racks, RACKS_PER_SPINE):
        hns.append(hyper_node_object(f"spine-{s // RACKS_PER_SPINE:03d}", 2, [
            {"type": "HyperNode", "selector": {"exactMatch": {"name": f"rack-{r:04d}"}}}
            for r in range(s, min(s + RACKS_PER_SPINE, n_racks))], tier_name="spine"))
    step = max(1, len(podgroups) // TOPOLOGY_JOBS)
    for g in podgroups[step // 2::step][:TOPOLOGY_JOBS]:
        g["spec"]["networkTopology"] = {"mode": "hard", "highestTierAllowed": 2}
    return hns


def build_cluster(nodes: list, queues: list, podgroups: list, pods: list, profile_name: str = "v1.14",
                  hyper_nodes: list | None = None):
    """A SchedulerCache fed through its event handlers, with an in-memory RecordingIO."""
    from ha.scheduler.wiring import build_cache
    cache, handlers = build_cache(profile=profile_name)
    for kind, objs in (("Node", nodes), ("HyperNode", hyper_nodes or ()), ("Queue", queues),
                       ("PodGroup", podgroups), ("Pod", pods)):
        for obj in objs:
            handlers[kind].on_add(obj)
    return cache, cache.binder


def _conf(hypernodes: bool = False):
    from ha.scheduler.conf import PluginOption, SchedulerConf, Tier, default_conf
    d = default_conf()
    tiers = list(d.tiers)
    if hypernodes:
        nta = PluginOption(name="network-topology-aware", enabled_hyper_node_order=True,
                           enabled_hyper_node_gradient=True)
        tiers[-1] = Tier(list(tiers[-1].plugins) + [nta])
    # allocate only; the tiers are Volcano's production defaults with every flag on
    return SchedulerConf(actions=["allocate"], tiers=tiers, configurations=[], source="<bench>")


def _bind_count(io: Any) -> int:
    from ha.scenario.runner import _io_ops
    return sum(1 for op in _io_ops(io) if op[0] == "bind")


def model_session(cache: Any, io: Any, hypernodes: bool = False) -> tuple[int, float, dict[str, float]]:
    """(pods bound, seconds, phase timings) of one open -> allocate -> close session."""
    from ha.scheduler.actions import get_action
    from ha.scheduler.framework import close_session, open_session
    conf = _conf(hypernodes)
    before = _bind_count(io)
    t0 = time.perf_counter()
    ssn = open_session(cache, conf, seed=0)
    t1 = time.perf_counter()
    action = get_action("allocate")
    action.execute(ssn)
    t2 = time.perf_counter()
    close_session(ssn)
    for name in ("process_bind_task",):
        fn = getattr(cache, name, None)
        if callable(fn):
            fn()
    t3 = time.perf_counter()
    phases = {"open_s": t1 - t0, "allocate_s": t2 - t1, "close_s": t3 - t2,
              # actions/allocate/fastpath.py (vectorised, result-identical allocate path; env
              # HA_ALLOCATE_FASTPATH=0 turns it off) served this session
              "fastpath": getattr(action, "fastpath", None) is not None}
    return _bind_count(io) - before, t3 - t0, phases


def first_fit_baseline(cache: Any) -> tuple[int, float]:
    """(pods placed, seconds): snapshot + gang-aware first fit on Idle, no plugins."""
    from ha.scheduler.api import TaskStatus
    t0 = time.perf_counter()
    snap = cache.snapshot()
    nodes = list(snap.nodes.values())
    n = len(nodes)
    start = 0
    placed = 0
    jobs = sorted(snap.jobs.values(), key=lambda j: (_ctime(j), str(j.uid)))
    for job in jobs:
        pending = [t for t in job.tasks.values() if t.status == TaskStatus.PENDING]
        taken: list[tuple[Any, Any]] = []
        for task in pending:
            for k in range(n):
                node = nodes[(start + k) % n]
                if task.resreq.less_equal(node.idle):
                    node.idle.sub(task.resreq)
                    taken.append((task, node))
                    start = (start + k) % n
                    break
        if len(taken) >= job.min_available:
            placed += len(taken)
        else:
            for task, node in taken:
                node.idle.add(task.resreq)
    return placed, time.perf_counter() - t0


def _ctime(job: Any) -> float:
    t = getattr(job, "creation_timestamp", 0.0)
    return float(t or 0.0)


def run(quick: bool = False, hypernodes: bool = False, taints: float = 0.0) -> BenchResult:
    taints = float(taints)
    if not 0.0 <= taints <= 1.0:
        from ha.errors import BadInput
        raise BadInput(f"bench session: taints: a fraction of the nodes in [0, 1], got {taints}")
    n_nodes, n_pods, n_queues = (500, 5_000, 4) if quick else (5_000, 50_000, 4)
    seed = 42
    nodes, queues, podgroups, pods = workload(n_nodes, n_pods, n_queues, seed, taints=taints)
    hns = hypernode_topology(nodes, podgroups) if hypernodes else []
    t0 = time.perf_counter()
    cache, io = build_cluster(nodes, queues, podgroups, pods, hyper_nodes=hns)
    build_s = time.perf_counter() - t0
    # the baseline first, on the untouched cache (it only mutates its own snapshot)
    base_placed, base_s = first_fit_baseline(cache)
    placed, secs, phases = model_session(cache, io, hypernodes)
    topo: dict[str, Any] = {}
    if hypernodes:
        topo = {"hypernodes": len(hns), "rack_size": RACK_SIZE, "racks_per_spine": RACKS_PER_SPINE,
                "topology_jobs": sum(1 for g in podgroups if g["spec"].get("networkTopology")),
                "topology": "hard, highestTierAllowed 2"}
    value = placed / secs if secs > 0 else 0.0
    baseline = base_placed / base_s if base_s > 0 else 0.0
    return BenchResult(
        name="session", value=value, unit="pods/s", baseline=baseline,
        ratio=(value / baseline) if baseline else None,
        params={"nodes": n_nodes, "pods": n_pods, "gang_size": [1, 16], "queues": n_queues,
                "jobs": len(podgroups), "seed": seed, "quick": quick, "taints": taints,
                "node": NODE, "conf": "default tiers (all flags on), actions [allocate]",
                "pods_bound": placed, "session_s": round(secs, 3),
                **{k: (round(v, 3) if isinstance(v, float) else v) for k, v in phases.items()},
                "baseline_placed": base_placed, "baseline_s": round(base_s, 3),
                "cache_build_s": round(build_s, 3), **topo},
    )
