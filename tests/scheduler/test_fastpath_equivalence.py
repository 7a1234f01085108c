"""The vectorised allocate path (ha/scheduler/actions/allocate/fastpath.py) against the scalar path.

Randomised clusters (seeded): nodes of varied sizes and pod limits, GPUs, zone labels, NoSchedule /
NoExecute / PreferNoSchedule taints, unschedulable nodes; running, releasing (deleting) and — in the
PR profiles — reconstructed pipelined pods; pending gangs in several weighted queues with
priorities, node selectors, required / preferred node affinity, tolerations, host ports, task
roles, GPU requests, init containers and containers without requests. Every scenario runs the
same sessions (several, so the rotating start index and the pipelines carry over) once with the
fast path on and once off, on fresh identical caches; binds, evictions, pipelines, errors, the
session's per-node accounting and k8s view, and the cache digest must be identical.

Besides the end-to-end runs, the predicate scan and the per-node scores are compared directly
(exact float equality per node), and two deliberately perturbed fast paths must be detected.
"""
from __future__ import annotations

import dataclasses
import random
from typing import Any

import numpy as np
import pytest

from ha.scheduler.cache import SchedulerCache
from ha.scheduler.conf import PluginOption, SchedulerConf, Tier, default_conf
from ha.scheduler.actions.allocate import fastpath
from ha.scheduler.framework.util import PredicateHelper, _set_last_index, _get_last_index, prioritize_nodes
from ha.scheduler.interfaces import RecordingIO
from ha.scheduler.profiles import profile
from ha.scheduler.scheduler import run_session

GI = 2**30
MI = 2**20


# ------------------------------------------------------------------------------------- workloads

def _node(rng: random.Random, i: int) -> dict:
    name = f"n{i:03d}"
    alloc = {"cpu": f"{rng.choice([2000, 4000, 8000, 16000, 32000])}m",
             "memory": str(rng.choice([4, 8, 16, 32, 64]) * GI),
             "pods": str(rng.choice([3, 5, 8, 16, 110, 110]))}
    if rng.random() < 0.12:
        alloc["nvidia.com/gpu"] = str(rng.choice([1, 2, 4]))
    labels = {"kubernetes.io/hostname": name, "zone": rng.choice("abc")}
    if rng.random() < 0.3:
        labels["disk"] = rng.choice(["ssd", "hdd"])
    taints = []
    r = rng.random()
    if r < 0.08:
        taints.append({"key": "dedicated", "value": rng.choice(["gpu", "infra"]), "effect": "NoSchedule"})
    elif r < 0.11:
        taints.append({"key": "maint", "value": "", "effect": "NoExecute"})
    if rng.random() < 0.12:
        taints.append({"key": "spot", "value": "true", "effect": "PreferNoSchedule"})
        if rng.random() < 0.4:
            taints.append({"key": "noisy", "value": "1", "effect": "PreferNoSchedule"})
    spec: dict[str, Any] = {"unschedulable": rng.random() < 0.04}
    if taints:
        spec["taints"] = taints
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "uid": name, "resourceVersion": 1, "creationTimestamp": 0.0,
                         "labels": labels, "annotations": {}},
            "spec": spec,
            "status": {"allocatable": alloc, "capacity": dict(alloc),
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def _queue(name: str, weight: int) -> dict:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
            "metadata": {"name": name, "uid": name, "resourceVersion": 1, "creationTimestamp": 0.0,
                         "labels": {}, "annotations": {}},
            "spec": {"weight": weight, "capability": None, "deserved": None, "guarantee": None,
                     "reclaimable": True, "priority": 0},
            "status": {"state": "Open"}}


def _pg(ns: str, name: str, queue: str, min_member: int, t: float) -> dict:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": ns, "uid": f"{ns}-{name}", "resourceVersion": 1,
                         "creationTimestamp": t, "labels": {}, "annotations": {}},
            "spec": {"minMember": min_member, "minTaskMember": {}, "queue": queue,
                     "priorityClassName": "", "minResources": None},
            "status": {"phase": "Inqueue", "conditions": [], "running": 0, "succeeded": 0, "failed": 0}}


APPS = ("web", "db", "cache")


def _pod_affinity(rng: random.Random) -> dict:
    """Pod (anti-)affinity terms over the hostname and zone topologies (some pods only)."""
    aff: dict[str, Any] = {}

    def term(key: str) -> dict:
        return {"labelSelector": {"matchExpressions": [
            {"key": "app", "operator": "In", "values": rng.sample(APPS, rng.randint(1, 2))}]},
                "topologyKey": key}

    r = rng.random()
    if r < 0.12:
        aff.setdefault("podAntiAffinity", {})["requiredDuringSchedulingIgnoredDuringExecution"] = [
            term("kubernetes.io/hostname")]
    elif r < 0.17:
        aff.setdefault("podAffinity", {})["requiredDuringSchedulingIgnoredDuringExecution"] = [term("zone")]
    for kind in ("podAffinity", "podAntiAffinity"):
        if rng.random() < 0.15:
            key = rng.choice(["zone", "kubernetes.io/hostname"])
            aff.setdefault(kind, {})["preferredDuringSchedulingIgnoredDuringExecution"] = [
                {"weight": rng.choice([1, 10, 100]), "podAffinityTerm": term(key)}]
    return aff


def _pod_spec(rng: random.Random, *, plain: bool, pod_aff: bool = False) -> dict:
    cpu = rng.choice([100, 250, 500, 1000, 2000, 4000])
    mem = rng.choice([128 * MI, 512 * MI, GI, 2 * GI, 6 * GI])
    req: dict[str, str] = {"cpu": f"{cpu}m", "memory": str(mem)}
    spec: dict[str, Any] = {"schedulerName": "volcano", "nodeName": "", "priority": None,
                            "priorityClassName": "", "preemptionPolicy": "PreemptLowerPriority",
                            "nodeSelector": {}, "initContainers": [], "terminationGracePeriodSeconds": 30}
    containers = [{"name": "main", "resources": {"requests": req}}]
    if not plain:
        r = rng.random()
        if r < 0.07:
            req["nvidia.com/gpu"] = str(rng.choice([1, 2]))
        elif r < 0.12:
            del req["memory"]  # nodeorder counts 200Mi (non-zero requests), balanced counts 0
        if rng.random() < 0.08:
            containers.append({"name": "side", "resources": {"requests": {"cpu": "100m"}}})
        if rng.random() < 0.06:
            spec["initContainers"] = [{"name": "init", "resources": {"requests": {
                "cpu": f"{rng.choice([500, 3000])}m", "memory": str(GI)}}}]
        if rng.random() < 0.10:
            spec["nodeSelector"] = {"zone": rng.choice("abc")}
        if rng.random() < 0.06:
            spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "zone", "operator": "In", "values": rng.sample("abc", 2)}]}]}}}
        if rng.random() < 0.10:
            spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})[
                "preferredDuringSchedulingIgnoredDuringExecution"] = [
                {"weight": rng.choice([1, 5, 50]), "preference": {"matchExpressions": [
                    {"key": "disk", "operator": "In", "values": ["ssd"]}]}}]
        if rng.random() < 0.12:
            spec["tolerations"] = rng.choice([
                [{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}],
                [{"key": "spot", "operator": "Exists", "effect": "PreferNoSchedule"}],
                [{"operator": "Exists"}],
                [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}]])
        if rng.random() < 0.04:
            containers[0]["ports"] = [{"containerPort": 80, "hostPort": rng.choice([8080, 9090])}]
        if rng.random() < 0.3:
            spec["priority"] = rng.choice([0, 10, 100, 1000])
    if pod_aff:
        extra = _pod_affinity(rng)
        if extra:
            spec.setdefault("affinity", {}).update(extra)
    spec["containers"] = containers
    return spec


def _pod(ns: str, name: str, group: str, spec: dict, t: float, *, node: str = "", phase: str = "Pending",
         deleting: bool = False, nominated: str = "", role: str = "") -> dict:
    ann = {"scheduling.k8s.io/group-name": group}
    if role:
        ann["volcano.sh/task-spec"] = role
    md: dict[str, Any] = {"name": name, "namespace": ns, "uid": f"{ns}-{name}", "resourceVersion": 1,
                          "creationTimestamp": t, "labels": {}, "annotations": ann}
    if deleting:
        md["deletionTimestamp"] = 1.0
    spec = dict(spec, nodeName=node)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": spec,
            "status": {"phase": phase, "nominatedNodeName": nominated, "conditions": []}}


def workload(seed: int, *, plain: bool = False, nominated: bool = True, pod_aff: bool = False) -> dict:
    """Nodes, queues, podgroups, pods (object-shape dicts) and a second wave of pending pods;
    with ``pod_aff`` pods carry an ``app`` label and some carry pod (anti-)affinity terms."""
    rng = random.Random(seed)
    n_nodes = rng.randint(101, 240)  # > 100: numFeasibleNodes samples and the start index rotates
    nodes = [_node(rng, i) for i in range(n_nodes)]
    queues = [_queue(f"q{i}", w) for i, w in enumerate(rng.sample([1, 2, 3, 5], 3))]
    pgs: list[dict] = []
    pods: list[dict] = []
    wave2: list[tuple[dict, list[dict]]] = []
    t = 0.0

    def gang(kind: str, size: int, min_member: int) -> tuple[dict, list[dict]]:
        nonlocal t
        t += 1.0
        j = len(pgs) + len(wave2)
        ns, name = f"ns{j % 3}", f"{kind}-{j:04d}"
        q = rng.choice(queues)["metadata"]["name"]
        g = _pg(ns, name, q, min_member, t)
        spec = _pod_spec(rng, plain=plain, pod_aff=pod_aff)
        role = rng.choice(["", "", "", "worker"]) if not plain else ""
        app = rng.choice(APPS) if pod_aff else ""
        out = []
        for k in range(size):
            s = spec if rng.random() < 0.8 else _pod_spec(rng, plain=plain, pod_aff=pod_aff)
            out.append(_pod(ns, f"{name}-{k}", name, s, t, role=role if k else ""))
            if app:
                out[-1]["metadata"]["labels"] = {"app": app}
        return g, out

    # running / releasing gangs already on nodes
    for _ in range(rng.randint(20, 60)):
        g, ps = gang("run", rng.randint(1, 6), 1)
        g["status"]["phase"] = "Running"
        for p in ps:
            node = rng.choice(nodes)["metadata"]["name"]
            p["spec"]["nodeName"] = node
            p["status"]["phase"] = "Running"
            if rng.random() < 0.25:
                p["metadata"]["deletionTimestamp"] = 1.0  # Releasing: FutureIdle > Idle there
        pgs.append(g)
        pods.extend(ps)
    # pods nominated to a node without nodeName: Pending (v1.14, nominated fast path) or, in the
    # PR profiles, reconstructed as Pipelined on that node
    for _ in range(rng.randint(2, 8) if nominated else 0):
        g, ps = gang("nom", rng.randint(1, 4), 1)
        for p in ps:
            p["status"]["nominatedNodeName"] = rng.choice(nodes)["metadata"]["name"]
        pgs.append(g)
        pods.extend(ps)
    # pending gangs
    for _ in range(rng.randint(25, 60)):
        size = rng.randint(1, 8)
        g, ps = gang("job", size, rng.randint(1, size))
        pgs.append(g)
        pods.extend(ps)
    for _ in range(rng.randint(6, 16)):
        size = rng.randint(1, 8)
        g, ps = gang("late", size, rng.randint(1, size))
        if rng.random() < 0.6:  # urgent work for a fuller cluster: preempt / reclaim
            for p in ps:
                p["spec"]["priority"] = 1000
        wave2.append((g, ps))
    return {"nodes": nodes, "queues": queues, "podgroups": pgs, "pods": pods, "wave2": wave2}


def _tier2(*extra: PluginOption, nodeorder_args: dict | None = None, predicates_args: dict | None = None):
    t2 = [PluginOption.all_on(n) for n in ("overcommit", "drf")]
    t2.append(PluginOption.all_on("predicates", **(predicates_args or {})))
    t2.append(PluginOption.all_on("proportion"))
    t2.append(PluginOption.all_on("nodeorder", **(nodeorder_args or {})))
    t2.extend(extra)
    return Tier(t2)


def make_conf(kind: str) -> SchedulerConf:
    d = default_conf()
    t1 = d.tiers[0]
    if kind == "default":  # enqueue allocate preempt reclaim backfill, production tiers
        return d
    if kind == "default-no-shares":  # the same without drf and proportion: the PR's overflow
        # pre-pass un-pipelining a reservation rebuilt from a nomination asserts in their
        # DeallocateFunc (Volcano's panic) and ends every session of the nominated PR cases
        t2 = Tier([PluginOption.all_on(n) for n in ("overcommit", "predicates", "nodeorder")])
        return SchedulerConf(actions=list(d.actions), tiers=[t1, t2], configurations=[],
                             source="<test default-no-shares>")
    if kind == "binpack":
        bp = PluginOption.all_on("binpack", **{"binpack.weight": 2, "binpack.cpu": 3, "binpack.memory": 1,
                                               "binpack.resources": "nvidia.com/gpu",
                                               "binpack.resources.nvidia.com/gpu": 2})
        no = {"leastrequested.weight": 2, "mostrequested.weight": 1, "balancedresource.weight": 3,
              "nodeaffinity.weight": 1, "tainttoleration.weight": 2}
        return SchedulerConf(actions=["allocate", "backfill"], tiers=[t1, _tier2(bp, nodeorder_args=no)],
                             configurations=[], source="<test binpack>")
    if kind == "binpack-first":  # binpack's score added before nodeorder's (tier order)
        bp = PluginOption.all_on("binpack")
        t1b = Tier(list(t1.plugins) + [bp])
        return SchedulerConf(actions=["allocate"], tiers=[t1b, _tier2()], configurations=[],
                             source="<test binpack-first>")
    if kind == "predicates-off":
        pa = {"predicate.NodeAffinityEnable": False, "predicate.TaintTolerationEnable": False,
              "predicate.NodePortsEnable": False}
        no = {"tainttoleration.weight": 0, "balancedresource.weight": 0, "mostrequested.weight": 2}
        return SchedulerConf(actions=["allocate", "preempt"], tiers=[t1, _tier2(predicates_args=pa,
                                                                                  nodeorder_args=no)],
                             configurations=[], source="<test predicates-off>")
    if kind == "hypernodes":  # the hypernode gradient / order on; its node score off (fast path stays)
        nta = PluginOption(name="network-topology-aware", enabled_hyper_node_order=True,
                           enabled_hyper_node_gradient=True)
        return SchedulerConf(actions=["allocate", "backfill"], tiers=[t1, _tier2(nta)], configurations=[],
                             source="<test hypernodes>")
    raise ValueError(kind)


def with_hypernodes(w: dict, seed: int) -> dict:
    """Racks of eight nodes (regex members), spines of four racks (HyperNode members), and a
    network topology (hard or soft, tier 1 or 2) on a third of the pending gangs."""
    from ha.scheduler.api.hypernode_info import hyper_node_object
    rng = random.Random(seed)
    names = [n["metadata"]["name"] for n in w["nodes"]]
    racks = [names[i:i + 8] for i in range(0, len(names), 8)]
    hns = []
    for r, members in enumerate(racks):
        pattern = "^(" + "|".join(members) + ")$"
        hns.append(hyper_node_object(f"rack{r}", 1, [{"type": "Node", "selector": {"regexMatch": {"pattern": pattern}}}]))
    for s in range(0, len(racks), 4):
        hns.append(hyper_node_object(f"spine{s // 4}", 2, [
            {"type": "HyperNode", "selector": {"exactMatch": {"name": f"rack{r}"}}}
            for r in range(s, min(s + 4, len(racks)))]))
    w = dict(w, hypernodes=hns)
    groups = w["podgroups"] + [g for g, _ in w["wave2"]]
    for g in groups:
        if g["metadata"]["name"].startswith(("job", "late")) and rng.random() < 0.33:
            g["spec"]["networkTopology"] = {"mode": rng.choice(["hard", "soft"]),
                                            "highestTierAllowed": rng.choice([1, 2])}
    return w


# ------------------------------------------------------------------------------------- running

def _cache(w: dict, prof: str) -> tuple[SchedulerCache, RecordingIO]:
    import copy
    io = RecordingIO()
    cache = SchedulerCache(switches=profile(prof), binder=io, evictor=io, status_updater=io,
                           scheduler_names=("volcano",), default_queue="default")
    for n in w["nodes"]:
        cache.add_node(copy.deepcopy(n))
    for h in w.get("hypernodes", ()):
        cache.add_hyper_node(copy.deepcopy(h))
    for q in w["queues"]:
        cache.add_queue(copy.deepcopy(q))
    for g in w["podgroups"]:
        cache.add_pod_group(copy.deepcopy(g))
    for p in w["pods"]:
        p = copy.deepcopy(p)
        io.pods[f"{p['metadata']['namespace']}/{p['metadata']['name']}"] = copy.deepcopy(p)
        cache.add_pod(p)
    return cache, io


def _session_state(ssn: Any) -> dict:
    from ha.scheduler.plugins.k8s_nodes import node_map
    view = node_map(ssn)
    return {
        "nodes": {name: n.to_dict() for name, n in sorted(ssn.nodes.items())},
        "k8s": {name: (v.pod_count(), sorted(v.requested.items()), sorted(v.non_zero_requested.items()))
                for name, v in sorted(view.items())},
        "tasks": sorted((t.pod_key, str(t.status), t.node_name) for j in ssn.jobs.values() for t in j.tasks.values()),
        "rng": ssn.rng.random(),  # the same number of draws on both paths
        # every task's FitErrors: the summary, the nodes and each node's message, in scan order
        "fit_errors": sorted((j.uid, tid, fe.error(), sorted(fe.get_unschedulable_and_unresolvable_nodes()),
                              [(name, e.error()) for name, e in fe.nodes.items()])
                             for j in ssn.jobs.values() for tid, fe in j.nodes_fit_errors.items()
                             if fe is not None),
    }


def run(w: dict, prof: str, conf_kind: str, fast: bool, sessions: int = 3) -> tuple[list, dict]:
    """Outcome of ``sessions`` scheduling cycles; ``info`` says how much the fast path did."""
    import copy
    old_for = fastpath.for_session
    info: dict = {"fast": 0, "reasons": [], "paths": []}

    def for_session(ssn: Any) -> Any:
        fp = old_for(ssn)
        if fp is not None and all(p is not fp for p in info["paths"]):
            info["paths"].append(fp)
        info["reasons"].append(getattr(ssn, "fastpath_reason", "not built"))
        return fp

    fastpath.for_session = for_session
    try:
        cache, io = _cache(w, prof)
        cache.acceleration = dataclasses.replace(cache.acceleration, allocate_fastpath=fast)
        conf = make_conf(conf_kind)
        out: list = []
        for s in range(sessions):
            if s in (1, 2):  # more work arrives after the first and the second cycle
                half = len(w["wave2"]) // 2
                for g, ps in (w["wave2"][:half] if s == 1 else w["wave2"][half:]):
                    cache.add_pod_group(copy.deepcopy(g))
                    for p in ps:
                        cache.add_pod(copy.deepcopy(p))
            state: dict = {}

            def hook(ssn: Any) -> None:
                state.update(_session_state(ssn))

            res = run_session(cache, conf, seed=7 + s, session_hook=hook)
            cache.process_bind_task()
            out.append({"binds": list(res.binds.items()), "evictions": list(res.evictions),
                        "eviction_reasons": sorted(res.eviction_reasons.items()),
                        "pipelined": sorted(res.pipelined.items()),
                        "committed_pipelines": list(res.committed_pipelines.items()),
                        "errors": list(res.errors), "fatal": res.fatal, "panic": res.panic,
                        "session": state, "digest": cache.digest(),
                        "io": [(r.op, r.key, r.detail.get("node", ""), bool(r.detail.get("error")))
                               for r in io.records if r.op in ("bind", "evict")]})
        info["fast"] = sum(p.stats["fast"] for p in info["paths"])
        return out, info
    finally:
        fastpath.for_session = old_for


def _first_difference(a: list, b: list) -> str:
    for s, (x, y) in enumerate(zip(a, b)):
        for k in x:
            if x[k] != y[k]:
                if isinstance(x[k], list):
                    for i, (u, v) in enumerate(zip(x[k], y[k])):
                        if u != v:
                            return f"session {s} {k}[{i}]: fast {u!r} != scalar {v!r}"
                    return f"session {s} {k}: lengths {len(x[k])} != {len(y[k])}"
                return f"session {s} {k} differs"
    return ""


# (seed, profile, conf, nominated pods in the initial state). Nominated pods without a node make
# the PR profiles reconstruct Pipelined tasks, which can hit the PR's fatal paths — equal on both
# paths too, but they end the session early, so most PR cases start without them.
CASES = [(1, "v1.14", "default", True), (2, "pr5045", "default", False), (3, "pr5045-fixed", "default", False),
         (4, "v1.14", "binpack", True), (5, "pr5045-fixed", "binpack", False), (6, "pr5045", "binpack-first", False),
         (7, "v1.14", "predicates-off", True), (8, "pr5045-fixed", "predicates-off", False),
         (9, "annotations", "default", True), (10, "nomination-only", "binpack", True),
         (11, "v1.14", "default", False), (12, "pr5045-fixed", "default-no-shares", True),
         (13, "pr5045", "default-no-shares", True), (14, "v1.14", "binpack-first", True)]


# with pod affinity / anti-affinity (required and preferred, hostname and zone topologies)
AFFINITY_CASES = [(51, "v1.14", "default", True), (52, "pr5045-fixed", "binpack", False),
                  (53, "pr5045", "default", False), (54, "v1.14", "predicates-off", True)]


@pytest.mark.parametrize("seed,prof,kind,nominated", AFFINITY_CASES,
                         ids=[f"{c[0]}-{c[1]}-{c[2]}-podaffinity" for c in AFFINITY_CASES])
def test_fast_and_scalar_sessions_are_identical_with_pod_affinity(seed: int, prof: str, kind: str,
                                                                   nominated: bool) -> None:
    w = workload(seed, nominated=nominated, pod_aff=True)
    fast, info = run(w, prof, kind, True)
    scalar, _ = run(w, prof, kind, False)
    assert all(r is None for r in info["reasons"]), info["reasons"]
    assert info["fast"] > 20, "the fast path was hardly used"
    assert fast == scalar, _first_difference(fast, scalar)


def test_pod_affinity_workloads_exercise_the_filter_and_the_score(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pod-affinity workloads reject nodes through InterPodAffinity and move scores: the same
    sessions without the filter (predicate.PodAffinityEnable off) and without the score
    (podaffinity.weight 0) place pods differently."""
    from ha.scheduler.plugins import nodeorder, predicates
    w = workload(51, pod_aff=True)
    base = [s["binds"] for s in run(w, "v1.14", "default", True)[0]]
    for cls, attr in ((predicates.PredicatesPlugin, "pod_affinity_enable"),
                      (nodeorder.NodeOrderPlugin, "pod_affinity_weight")):
        orig = cls.__init__

        def without(self, args=None, orig=orig, attr=attr):
            orig(self, args)
            setattr(self, attr, 0)
        monkeypatch.setattr(cls, "__init__", without)
        assert [s["binds"] for s in run(w, "v1.14", "default", True)[0]] != base, attr
        monkeypatch.setattr(cls, "__init__", orig)


@pytest.mark.parametrize("seed,prof,kind,nominated", CASES, ids=[f"{c[0]}-{c[1]}-{c[2]}" for c in CASES])
def test_fast_and_scalar_sessions_are_identical(seed: int, prof: str, kind: str, nominated: bool) -> None:
    w = workload(seed, nominated=nominated)
    fast, info = run(w, prof, kind, True)
    scalar, sinfo = run(w, prof, kind, False)
    assert all(r is None for r in info["reasons"]), info["reasons"]
    assert info["fast"] > 20, "the fast path was hardly used"
    assert sinfo["fast"] == 0
    assert sum(len(s["binds"]) for s in fast) > 10
    diff = _first_difference(fast, scalar)
    assert fast == scalar, diff


@pytest.mark.parametrize("seed,prof", [(31, "v1.14"), (32, "pr5045-fixed"), (33, "pr5045")])
def test_fast_and_scalar_sessions_are_identical_with_hypernodes(seed: int, prof: str) -> None:
    """HyperNodes present and jobs with hard / soft network topologies: those jobs take the scalar
    path (the fast path is per job), the others the fast path; the sessions stay identical."""
    w = with_hypernodes(workload(seed, nominated=False), seed)
    fast, info = run(w, prof, "hypernodes", True)
    scalar, sinfo = run(w, prof, "hypernodes", False)
    assert all(r is None for r in info["reasons"]), info["reasons"]
    assert info["fast"] > 20 and sinfo["fast"] == 0
    topo = {f"{g['metadata']['namespace']}/{g['metadata']['name']}" for g in
            w["podgroups"] + [g for g, _ in w["wave2"]] if g["spec"].get("networkTopology")}
    bound_topo = [k for s_ in fast for k, _ in s_["binds"] if k.rsplit("-", 1)[0] in topo]
    assert len(bound_topo) > 5, "the topology jobs hardly ran"
    diff = _first_difference(fast, scalar)
    assert fast == scalar, diff


def test_hard_topology_gangs_stay_in_one_allowed_hypernode() -> None:
    w = with_hypernodes(workload(34, nominated=False), 34)
    out, _ = run(w, "v1.14", "hypernodes", True, sessions=1)
    rack_of = {}
    spine_of = {}
    for h in w["hypernodes"]:
        if h["metadata"]["name"].startswith("rack"):
            pat = h["spec"]["members"][0]["selector"]["regexMatch"]["pattern"]
            for n in pat[2:-2].split("|"):
                rack_of[n] = h["metadata"]["name"]
    for h in w["hypernodes"]:
        if h["metadata"]["name"].startswith("spine"):
            for m in h["spec"]["members"]:
                spine_of[m["selector"]["exactMatch"]["name"]] = h["metadata"]["name"]
    hard = {f"{g['metadata']['namespace']}/{g['metadata']['name']}": g["spec"]["networkTopology"]["highestTierAllowed"]
            for g in w["podgroups"] if (g["spec"].get("networkTopology") or {}).get("mode") == "hard"}
    by_job: dict = {}
    for k, node in out[0]["binds"]:
        job = k.rsplit("-", 1)[0]
        if job in hard:
            by_job.setdefault(job, set()).add(node)
    assert len(by_job) >= 3
    for job, nodes in by_job.items():
        racks = {rack_of[n] for n in nodes}
        domains = racks if hard[job] == 1 else {spine_of[r] for r in racks}
        assert len(domains) == 1, (job, hard[job], sorted(nodes))


def test_scenarios_exercise_pipelines_evictions_and_failures() -> None:
    """The workloads above are not trivial: there are pipelines, evictions, tasks without a
    feasible node (FitErrors built from the arrays), tasks the fast path hands to the scalar
    predicate (selectors, required node affinity, host ports, task roles) and node rows kept from
    the last session's build."""
    pipelines = evictions = reruns = scalar_predicates = rows_kept = 0
    for seed, prof, kind, nominated in (CASES[0], CASES[1], CASES[12]):
        out, info = run(workload(seed, nominated=nominated), prof, kind, True)
        pipelines += sum(len(s["pipelined"]) + len(s["committed_pipelines"]) for s in out)
        evictions += sum(len(s["evictions"]) for s in out)
        reruns += sum(p.stats["vector_fit_errors"] for p in info["paths"])
        scalar_predicates += sum(p.stats["scalar_predicate"] for p in info["paths"])
        rows_kept += sum(p.stats["rows_kept"] for p in info["paths"])
    assert pipelines > 0
    assert rows_kept > 0      # rows of nodes nothing changed, taken from the last session's build
    assert evictions > 0
    assert reruns > 0
    assert scalar_predicates > 0


# ------------------------------------------------------------------------------------- direct checks

class _Owner:
    """A start-index owner for a private PredicateHelper (weak-referenceable)."""


def _open(w: dict, prof: str, kind: str):
    from ha.scheduler.framework import open_session
    cache, _ = _cache(w, prof)
    return open_session(cache, make_conf(kind), seed=3)


@pytest.mark.parametrize("seed,kind,pod_aff", [(21, "default", False), (22, "binpack", False),
                                               (23, "predicates-off", False), (24, "binpack-first", False),
                                               (25, "default", True), (26, "binpack", True)])
def test_predicate_scan_and_scores_match_per_node(seed: int, kind: str, pod_aff: bool) -> None:
    """For every pending task, from random start indices: the same feasible nodes in the same
    order and the same next start index; over random node groups: bit-identical scores."""
    from ha.scheduler.actions.allocate import AllocateAction
    from ha.scheduler.api import TaskStatus
    w = workload(seed, pod_aff=pod_aff)
    ssn = _open(w, "pr5045-fixed", kind)
    action = AllocateAction()
    action.parse_arguments(ssn)
    action.ssn = ssn
    fp = fastpath.AllocateFastPath(ssn)
    assert fp.ok
    rng = random.Random(seed)
    tasks = [t for j in ssn.jobs.values() for t in j.tasks.values()
             if t.status in (TaskStatus.PENDING, TaskStatus.PIPELINED)]
    assert len(tasks) > 50
    n = len(ssn.node_list)
    compared = unfit = own_node = 0
    # twice: in the second pass every task meets arrays that later tasks extended (GPU rows)
    for task in tasks + tasks[::-1]:
        start = rng.randrange(3 * n)
        a, b = _Owner(), _Owner()
        _set_last_index(a, start)
        _set_last_index(b, start)
        ph_a, ph_b = PredicateHelper(a), PredicateHelper(b)
        assert ssn.pre_predicate_fn(task) is None             # as allocate does before its scan
        found, fe = ph_a.predicate_nodes(task, ssn.node_list, action.predicate, False)
        sel = fp.predicate_nodes(task, ph_b, False)
        if not found:
            assert sel is not None and len(sel) == 0 and _get_last_index(b) == start
            # the FitErrors from the arrays: the summary counts each status's nodes (a Pipelined
            # task's own node, asked of the predicate, is not among them)
            vfe = fp.fit_errors(task, ph_b, action.predicate, False)
            if vfe is not None:
                assert vfe.error() == fe.error()
                unfit += 1
                own_node += fp._own_node(task) >= 0
            continue
        assert [ssn.node_list[j].name for j in sel] == [x.name for x in found]
        assert _get_last_index(a) == _get_last_index(b)
        # scores over the candidate group and over random subsets of all nodes
        for group in (sel, np.array(sorted(rng.sample(range(n), rng.randint(2, n))), dtype=np.intp)):
            nodes = [ssn.node_list[j] for j in group]
            by_score = prioritize_nodes(task, nodes, ssn.batch_node_order_fn, ssn.node_order_map_fn,
                                        ssn.node_order_reduce_fn)
            scalar = {x.name: s for s, xs in by_score.items() for x in xs}
            vec = fp.scores(task, fp._facts(task), group)
            assert {x.name: float(v) for x, v in zip(nodes, vec)} == scalar
            compared += len(group)
    assert compared > 1000
    if seed == 25:   # this seed's workload has Pipelined tasks that fit nowhere, their own node asked
        assert own_node >= 2 and unfit >= own_node


def _cache_view(ph: PredicateHelper) -> dict:
    return {g: [(name, e.error()) for name, e in c.items()] for g, c in ph.task_predicate_error_cache.items()}


@pytest.mark.parametrize("seed,kind", [(27, "default"), (28, "binpack"), (29, "predicates-off")])
def test_the_predicate_error_cache_of_role_tasks_matches_the_scalar_scan(seed: int, kind: str) -> None:
    """Tasks with a role and the error cache on, a (job, role) after another through one helper
    (as allocate scans a job's tasks): the same feasible nodes, start index and FitErrors, and
    the same cache -- which nodes, with which error, in which order -- after every scan."""
    from ha.scheduler.actions.allocate import AllocateAction
    from ha.scheduler.api import TaskStatus
    w = workload(seed)
    for i, p in enumerate(w["pods"] + [p for _, ps in w["wave2"] for p in ps]):
        p["metadata"].setdefault("annotations", {})["volcano.sh/task-spec"] = "worker"
        if not p["spec"].get("nodeName") and i % 5 == 0:   # fits nowhere: the FitErrors path
            p["spec"] = dict(p["spec"], containers=[{"name": "main", "resources": {
                "requests": {"cpu": "100000", "memory": str(GI)}}}])
    ssn = _open(w, "v1.14", kind)
    action = AllocateAction()
    action.parse_arguments(ssn)
    action.ssn = ssn
    fp = fastpath.AllocateFastPath(ssn)
    rng = random.Random(seed)
    jobs = [[t for t in j.tasks.values() if t.status == TaskStatus.PENDING] for j in ssn.jobs.values()]
    jobs = [ts for ts in jobs if len(ts) >= 2]
    assert len(jobs) > 10
    a, b = _Owner(), _Owner()
    start = rng.randrange(1000)
    _set_last_index(a, start)
    _set_last_index(b, start)
    found_some = empty = 0
    for tasks in jobs:
        ph_a, ph_b = PredicateHelper(a), PredicateHelper(b)   # one helper per job, as allocate has
        for task in tasks + tasks[:1]:                        # the first again: all it failed is cached
            assert ssn.pre_predicate_fn(task) is None         # as allocate does before its scan
            found, fe = ph_a.predicate_nodes(task, ssn.node_list, action.predicate, True)
            sel = fp.predicate_nodes(task, ph_b, True, action.predicate)
            assert sel is not None
            if not found:
                assert len(sel) == 0
                vfe = fp.fit_errors(task, ph_b, action.predicate, True)
                assert vfe is not None
                assert vfe.error() == fe.error()
                assert [(n, e.error()) for n, e in vfe.nodes.items()] == [(n, e.error()) for n, e in fe.nodes.items()]
                empty += 1
            else:
                assert [ssn.node_list[j].name for j in sel] == [x.name for x in found]
                found_some += 1
            assert _get_last_index(a) == _get_last_index(b)
            assert _cache_view(ph_b) == _cache_view(ph_a)
    assert found_some > 20 and empty > 3
    assert fp.stats["error_cache"] > 20 and fp.stats["cache_passed"] > 100


def test_fast_path_follows_session_changes() -> None:
    """Node arrays follow allocations made through statements (the sinks), so a scan after them
    still equals the scalar scan."""
    from ha.scheduler.actions.allocate import AllocateAction
    from ha.scheduler.api import TaskStatus
    ssn = _open(workload(31, plain=True), "v1.14", "default")
    action = AllocateAction()
    action.parse_arguments(ssn)
    action.ssn = ssn
    fp = fastpath.AllocateFastPath(ssn)
    stmt = ssn.statement()
    tasks = [t for j in ssn.jobs.values() for t in j.tasks.values() if t.status == TaskStatus.PENDING]
    placed = 0
    for task in tasks:
        a, b = _Owner(), _Owner()
        ph_a, ph_b = PredicateHelper(a), PredicateHelper(b)
        assert ssn.pre_predicate_fn(task) is None             # as allocate does before its scan
        found, _ = ph_a.predicate_nodes(task, ssn.node_list, action.predicate, False)
        sel = fp.predicate_nodes(task, ph_b, False)
        assert [x.name for x in found] == [ssn.node_list[j].name for j in (sel if sel is not None else [])]
        if found:
            stmt.allocate(task, found[-1])  # the last candidate: fills nodes unevenly
            placed += 1
    assert placed > 20
    stmt.discard()
    fp._sync()
    for i, node in enumerate(ssn.node_list):
        assert fp.idle[0, i] == node.idle.milli_cpu and fp.fi[1, i] == node.future_idle().memory


def test_a_task_before_its_pre_predicate_takes_the_scalar_path() -> None:
    """Volcano's cycle state: before the task's PrePredicate in a session the predicates plugin
    answers Error on every node the resources fit (the state-reading filters find nothing); the
    arrays do not know that, so the fast path leaves such a task to the scalar scan."""
    from ha.scheduler.actions.allocate import AllocateAction
    from ha.scheduler.api import TaskStatus
    ssn = _open(workload(31, plain=True), "v1.14", "default")
    action = AllocateAction()
    action.parse_arguments(ssn)
    action.ssn = ssn
    fp = fastpath.AllocateFastPath(ssn)
    task = next(t for j in ssn.jobs.values() for t in j.tasks.values() if t.status == TaskStatus.PENDING)
    found, fe = PredicateHelper(_Owner()).predicate_nodes(task, ssn.node_list, action.predicate, False)
    assert not found and any("cycleState: not found" in e.error() for e in fe.nodes.values())
    assert fp.predicate_nodes(task, PredicateHelper(_Owner()), False) is None
    assert ssn.pre_predicate_fn(task) is None
    found, _ = PredicateHelper(_Owner()).predicate_nodes(task, ssn.node_list, action.predicate, False)
    sel = fp.predicate_nodes(task, PredicateHelper(_Owner()), False)
    assert found and [ssn.node_list[j].name for j in sel] == [x.name for x in found]


def test_unsupported_configuration_falls_back() -> None:
    """A plugin the fast path does not know (here: a node map function) turns it off for the
    session; the session then runs the scalar path."""
    from ha.scheduler.framework import open_session
    from ha.scheduler.framework.registry import register_plugin_builder

    class Mapper:
        def __init__(self, args: dict):
            pass

        def name(self) -> str:
            return "test-fastpath-mapper"

        def on_session_open(self, ssn: Any) -> None:
            ssn.add_node_map_fn(self.name(), lambda task, node: 1.0)

        def on_session_close(self, ssn: Any) -> None:
            pass

    register_plugin_builder("test-fastpath-mapper", Mapper)
    d = default_conf()
    tiers = [d.tiers[0], Tier(list(d.tiers[1].plugins) + [PluginOption.all_on("test-fastpath-mapper")])]
    cache, _ = _cache(workload(41, plain=True), "v1.14")
    ssn = open_session(cache, SchedulerConf(actions=["allocate"], tiers=tiers, configurations=[], source="<t>"))
    assert fastpath.unsupported_reason(ssn) == "node map functions ['test-fastpath-mapper']"
    assert fastpath.for_session(ssn) is None
    ssn2 = open_session(_cache(workload(41, plain=True), "v1.14")[0], default_conf())
    assert fastpath.unsupported_reason(ssn2) is None


# ------------------------------------------------------------------------------------- it can fail

def _detects(monkeypatch: pytest.MonkeyPatch, attr: str, wrapper) -> bool:
    orig = getattr(fastpath.AllocateFastPath, attr)
    monkeypatch.setattr(fastpath.AllocateFastPath, attr, wrapper(orig))
    for seed, prof, kind in [(1, "v1.14", "default"), (5, "pr5045-fixed", "binpack")]:
        w = workload(seed)
        if run(w, prof, kind, True)[0] != run(w, prof, kind, False)[0]:
            return True
    return False


def test_equivalence_check_detects_a_perturbed_score(monkeypatch: pytest.MonkeyPatch) -> None:
    def wrapper(orig):
        def perturbed(self, task, f, g):
            s = orig(self, task, f, g)
            if len(s) > 1:
                s = s.copy()
                s[-1] += 1.0  # one point for the last node of the group
            return s
        return perturbed
    assert _detects(monkeypatch, "_nodeorder", wrapper)


def test_equivalence_check_detects_a_perturbed_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    def wrapper(orig):
        def perturbed(self, task, ph, enable, predicate=None):
            sel = orig(self, task, ph, enable, predicate)
            if sel is not None and len(sel) > 2:
                sel = sel[:-1]  # stop one feasible node early
            return sel
        return perturbed
    assert _detects(monkeypatch, "predicate_nodes", wrapper)


def test_equivalence_check_detects_an_error_cache_left_empty(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _detects(monkeypatch, "_cache_errors", lambda orig: staticmethod(lambda ph, group, errors: None))


def test_equivalence_check_detects_cached_nodes_scanned_again(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _detects(monkeypatch, "_cached_nodes", lambda orig: (lambda self, node_cache: None))


def test_role_tasks_take_the_fast_path_with_the_error_cache() -> None:
    """Every pod of a Volcano job has a role and allocate's predicate error cache is on by
    default: such tasks are scanned by the fast path (which keeps the cache), not the scalar one."""
    seed, prof, kind, nominated = CASES[0]
    out, info = run(workload(seed, nominated=nominated), prof, kind, True)
    st = {k: sum(p.stats[k] for p in info["paths"]) for k in ("error_cache", "cache_passed")}
    assert st["error_cache"] > 20 and st["cache_passed"] > 100, st


def test_tolerations_take_the_mask_not_the_per_node_predicate() -> None:
    """Pods whose only special need is tolerations are scanned with the taint-set mask (no
    scalar predicate calls) and still place exactly as the scalar path."""
    w = workload(61, plain=True)
    tolerations = ([{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}],
                   [{"key": "maint", "operator": "Exists"}],
                   [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}])
    for i, p in enumerate(w["pods"] + [p for _, ps in w["wave2"] for p in ps]):
        if i % 3 == 0:
            p["spec"]["tolerations"] = tolerations[i % len(tolerations)]
    fast, info = run(w, "v1.14", "default", True)
    scalar, _ = run(w, "v1.14", "default", False)
    assert fast == scalar, _first_difference(fast, scalar)
    assert info["fast"] > 20
    assert sum(p.stats["scalar_predicate"] for p in info["paths"]) == 0
    # the tolerations matter: some pod lands on a node with a NoSchedule/NoExecute taint
    tainted = {n["metadata"]["name"] for n in w["nodes"]
               if any(t["effect"] in ("NoSchedule", "NoExecute") for t in n["spec"].get("taints", []))}
    assert any(node in tainted for s in fast for _, node in s["binds"])


def test_a_first_failure_everywhere_caches_errors_built_when_read() -> None:
    """A role task that fits nowhere, its (job, role) not failed before: the cache holds every
    node of the scan, and no FitError object is built until one is read (a gang's first task
    failing everywhere is given up next: 5,000 error objects a pending job a session, otherwise);
    what is read is the scalar scan's error."""
    from ha.scheduler.actions.allocate import AllocateAction
    w = workload(27)
    pods = w["pods"] + [p for _, ps in w["wave2"] for p in ps]
    for p in pods:
        p["metadata"].setdefault("annotations", {})["volcano.sh/task-spec"] = "worker"
        if not p["spec"].get("nodeName"):
            p["spec"] = dict(p["spec"], containers=[{"name": "main", "resources": {
                "requests": {"cpu": "100000", "memory": str(GI)}}}])
    ssn = _open(w, "v1.14", "default")
    action = AllocateAction()
    action.parse_arguments(ssn)
    action.ssn = ssn
    fp = fastpath.AllocateFastPath(ssn)
    task = next(t for j in ssn.jobs.values() for t in j.tasks.values() if not t.node_name)
    assert ssn.pre_predicate_fn(task) is None                 # as allocate does before its scan
    a, b = _Owner(), _Owner()
    ph_a, ph_b = PredicateHelper(a), PredicateHelper(b)
    found, fe = ph_a.predicate_nodes(task, ssn.node_list, action.predicate, True)
    assert not found and len(fp.predicate_nodes(task, ph_b, True, action.predicate)) == 0
    assert fp.fit_errors(task, ph_b, action.predicate, True).error() == fe.error()
    (group, lazy), = ph_b.task_predicate_error_cache.items()
    assert isinstance(lazy, fastpath.ScanErrors) and lazy.built() == 0
    assert list(lazy) == list(ph_a.task_predicate_error_cache[group]) and len(lazy) == len(ssn.node_list)
    name = ssn.node_list[5].name
    assert lazy[name].error() == ph_a.task_predicate_error_cache[group][name].error()
    assert lazy[name] is lazy[name] and lazy.built() == 1
    # the scalar helper reads and extends it as its own dict
    found, fe2 = ph_b.predicate_nodes(task, ssn.node_list, action.predicate, True)
    assert not found and fe2.error() == ph_a.predicate_nodes(task, ssn.node_list, action.predicate, True)[1].error()


@pytest.mark.parametrize("seed,prof,kind,nominated", [CASES[0], CASES[2], CASES[9]],
                         ids=[f"{c[0]}-{c[1]}-{c[2]}" for c in (CASES[0], CASES[2], CASES[9])])
def test_a_task_asking_more_than_any_node_has_is_answered_at_once_as_the_scan_would(
        seed: int, prof: str, kind: str, nominated: bool) -> None:
    """Gangs whose pods ask for more cpu, or more memory, than any node has left (with and
    without a role): the fast path answers their scans without a pass over the nodes, and every
    session ends as the scalar path's does (FitErrors node by node included)."""
    w = workload(seed, nominated=nominated)
    rng = random.Random(seed)
    # the largest node has 32 cpu and 64Gi: these fit on none, yet stay within the queues' shares
    for j, (cpu, mem) in enumerate([(33_000, GI), (100, 65 * GI), (33_000, 65 * GI)]):
        name = f"huge-{j}"
        w["podgroups"].append(_pg("ns0", name, w["queues"][0]["metadata"]["name"], 2, 0.5 + j))
        spec = _pod_spec(rng, plain=True)
        spec["containers"][0]["resources"]["requests"] = {"cpu": f"{cpu}m", "memory": str(mem)}
        for k in range(2):
            w["pods"].append(_pod("ns0", f"{name}-{k}", name, spec, 0.5 + j, role="worker" if j % 2 else ""))
    fast, info = run(w, prof, kind, True)
    scalar, _ = run(w, prof, kind, False)
    assert sum(p.stats["fits_nowhere"] for p in info["paths"]) >= 3
    assert fast == scalar, _first_difference(fast, scalar)
