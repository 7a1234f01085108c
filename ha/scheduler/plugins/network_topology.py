"""network-topology-aware (``plugins/network-topology-aware/network_topology_aware.go``, v1.14.0),
plus the gang-aware eviction design's ``GangSearchSpaceFn`` and the label-tier shortcut.

What v1.14.0 registers (each behind its PluginOption flag, as the session gates them):

* ``HyperNodeOrderFn`` (enabledHyperNodeOrder): per candidate hypernode, the hypernode-level
  binpacking score of the job's tasks — Σ_r w_r·(used_r + request_r)/allocatable_r / Σ w_r over the
  weighted resources (``hypernode.binpack.cpu`` / ``.memory`` / ``.resources``, default 1), 0 when
  any resource would overflow; when several hypernodes share the best score, each of them adds
  (job tasks on its nodes)/(job tasks). Scaled by 100 × ``weight``.
* ``BatchNodeOrderFn`` (enabledNodeOrder): for a task of a job with a network topology and a
  ``JobAllocatedHyperNode``: (maxTier − tier of LCA(node's lowest-tier hypernode, allocated))/
  (maxTier − minTier) (1 when they are equal; best-score ties add the task-count share); for other
  tasks (``hypernode.binpack.normal-pod.enable``, default true): Σ_tier fading^(tier−1)·(binpack score
  of the node's hypernode of that tier, 1 when it has none) / Σ fading^(tier−1), fading default 0.8.
  Scaled by 100 × ``weight``.
* ``HyperNodeGradientForJobFn`` (enabledHyperNodeGradient): for a hard-mode job, a BFS from the
  search root (the given hypernode, intersected with the highest allowed ancestor of the job's
  allocated hypernode) keeping hypernodes of tier ≤ highestTierAllowed whose idle or future-idle sum
  holds the job's pending request (no resource filter once the job has an allocated hypernode),
  grouped by tier, lowest first; a soft job gets [[hypernode]].
* an event handler keeping each hypernode's ``used`` in step with allocations.

Per-hypernode resources (allocatable, used, idle, future idle) are summed once at session open.

Label-tier shortcut: when the cluster has no HyperNode objects, the plugin BUILDS HyperNodes from
node labels — tier i is the i-th key of ``tierLabels`` (default ``topology/switch,topology/rack``),
one hypernode ``<key>=<value>`` per label value, with a ``labelMatch`` Node member, and as
HyperNode members every lower-tier hypernode whose nodes all lie inside it — and installs them in
the session exactly as the cache would have.

Gang domains (``GangSearchSpaceFn``): the domains of a job with ``spec.networkTopology`` are the
session's hypernodes of tier ≤ highestTierAllowed (``cluster`` — every node — when the bound
reaches the cluster-top tier), only those holding every node the gang already occupies; for
eviction (``PURPOSE_EVICT``) those whose capacity could hold the gang's pending request, by cost to
enter (normalised shortfall against FutureIdle), tier, name, top ``evictTopK``; soft adds the cluster
last and is not hard. For ``PURPOSE_ALLOCATE`` it answers only when this plugin's
``enabledHyperNodeGradient`` is off: with it on, allocate follows v1.14.0's gradients.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

from ha.errors import BadInput
from ha.scheduler.api import Resource, TaskStatus, ZERO
from ha.scheduler.api.hypernode_info import (CLUSTER_TOP_HYPERNODE, MEMBER_HYPERNODE, MEMBER_NODE,
                                             HyperNodeInfo, HyperNodesInfo, hyper_node_object)
from ha.scheduler.framework.events import EventHandler
from ha.scheduler.framework.gang_eviction import PURPOSE_EVICT, SearchSpace, needed_dims
from ha.scheduler.framework.hypernodes import (find_job_task_num_of_hyper_node, has_real_hyper_nodes,
                                               install_hyper_nodes)
from ha.scheduler.plugins.factory import register
from ha.scheduler.plugins.util import arguments

PLUGIN_NAME = "network-topology-aware"
DEFAULT_TIER_LABELS = ("topology/switch", "topology/rack")
DEFAULT_EVICT_TOP_K = 3
CLUSTER_DOMAIN = "cluster"
MAX_NODE_SCORE = 100.0
FULL_SCORE, ZERO_SCORE = 1.0, 0.0

WEIGHT = "weight"
BINPACK_CPU = "hypernode.binpack.cpu"
BINPACK_MEMORY = "hypernode.binpack.memory"
BINPACK_RESOURCES = "hypernode.binpack.resources"
NORMAL_POD_ENABLE = "hypernode.binpack.normal-pod.enable"
NORMAL_POD_FADING = "hypernode.binpack.normal-pod.fading"

_PLACED = frozenset({TaskStatus.ALLOCATED, TaskStatus.BINDING, TaskStatus.BOUND, TaskStatus.RUNNING,
                     TaskStatus.PIPELINED, TaskStatus.RELEASING})


@dataclass
class HyperNode:
    """A label-built hypernode (the shortcut's view: name, tier, node names)."""
    name: str
    tier: int
    nodes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class TopologyConstraint:
    mode: str            # "hard" | "soft"
    highest_tier: int


@dataclass
class _ResourceStatus:
    allocatable: Resource
    used: Resource
    idle: Resource
    future_idle: Resource


def _arg(args: Mapping[str, Any], key: str) -> Any:
    for k in (f"{PLUGIN_NAME}.{key}", key):
        if k in args:
            return args[k]
    return None


def parse_tier_labels(value: Any) -> tuple[str, ...]:
    if value is None:
        return DEFAULT_TIER_LABELS
    if isinstance(value, str):
        labels = tuple(s.strip() for s in value.split(",") if s.strip())
    elif isinstance(value, (list, tuple)) and all(isinstance(s, str) for s in value):
        labels = tuple(s.strip() for s in value if s.strip())
    else:
        raise BadInput(f"{PLUGIN_NAME}.tierLabels: expected a comma-separated string or a list of "
                       f"label keys, got {value!r}")
    if not labels:
        raise BadInput(f"{PLUGIN_NAME}.tierLabels: needs at least one label key")
    return labels


def build_hypernodes(nodes: list[Any], tier_labels: tuple[str, ...]) -> list[HyperNode]:
    """One hypernode per (tier, label value), tiers 1..len(tier_labels), sorted by tier and name."""
    out: list[HyperNode] = []
    for tier, key in enumerate(tier_labels, start=1):
        groups: dict[str, list[str]] = {}
        for n in nodes:
            v = (n.labels or {}).get(key)
            if v is not None and v != "":
                groups.setdefault(v, []).append(n.name)
        for v in sorted(groups):
            out.append(HyperNode(f"{key}={v}", tier, sorted(groups[v])))
    return out


def hyper_node_objects_from_labels(nodes: list[Any], tier_labels: tuple[str, ...]) -> list[dict]:
    """The shortcut's HyperNode objects: a labelMatch Node member per hypernode, plus a HyperNode
    member for every next-lower-tier hypernode whose nodes all lie inside (and that has no other
    parent yet), so the tree has parents and children like a hand-written one."""
    hns = build_hypernodes(nodes, tier_labels)
    by_tier: dict[int, list[HyperNode]] = {}
    for h in hns:
        by_tier.setdefault(h.tier, []).append(h)
    claimed: set[str] = set()
    objs = []
    for h in hns:
        key, _, value = h.name.partition("=")
        members: list[dict] = [{"type": MEMBER_NODE, "selector": {"labelMatch": {"matchLabels": {key: value}}}}]
        mine = set(h.nodes)
        for c in by_tier.get(h.tier - 1, []):
            if c.name not in claimed and set(c.nodes) <= mine:
                claimed.add(c.name)
                members.append({"type": MEMBER_HYPERNODE, "selector": {"exactMatch": {"name": c.name}}})
        objs.append(hyper_node_object(h.name, h.tier, members))
    return objs


def job_constraint(job: Any) -> TopologyConstraint | None:
    """The gang-aware design's reading of ``spec.networkTopology`` (None when absent): mode defaults
    to hard (the CRD default), ``highestTierAllowed`` to 1 (a tier name resolves through the
    session's tier names once allocate has run ``updateJobTier``)."""
    pg = getattr(job, "pod_group", None)
    if not isinstance(pg, dict):
        return None
    nt = (pg.get("spec") or {}).get("networkTopology")
    if not nt:
        return None
    mode = str(nt.get("mode") or "hard")
    if mode not in ("hard", "soft"):
        mode = "hard"
    try:
        tier = int(nt.get("highestTierAllowed") if nt.get("highestTierAllowed") is not None else 1)
    except (TypeError, ValueError):
        tier = 1
    return TopologyConstraint(mode, max(tier, 0))


def gang_request(job: Any) -> Resource:
    """The pending (non-gated) request of the gang: what the domain has to make room for."""
    r = Resource()
    for t in (job.task_status_index.get(TaskStatus.PENDING) or {}).values():
        if not t.sch_gated:
            r.add(t.init_resreq)
    return r


def _shortfall(request: Resource, avail: Resource) -> float:
    return sum(max(0.0, n - avail.get(k)) / n for k, n in needed_dims(request))


@register(PLUGIN_NAME)
class NetworkTopologyPlugin:
    # arguments the scenario loader accepts for this plugin (unknown ones are rejected)
    argument_keys = ("tierLabels", "evictTopK", WEIGHT, BINPACK_CPU, BINPACK_MEMORY, BINPACK_RESOURCES,
                     NORMAL_POD_ENABLE, NORMAL_POD_FADING)
    argument_prefixes = (f"{PLUGIN_NAME}.", f"{BINPACK_RESOURCES}.")

    def __init__(self, arguments_: Mapping[str, Any] | None = None):
        self.arguments = dict(arguments_ or {})
        self.tier_labels = parse_tier_labels(_arg(self.arguments, "tierLabels"))
        k = _arg(self.arguments, "evictTopK")
        try:
            self.evict_top_k = int(k) if k is not None else DEFAULT_EVICT_TOP_K
        except (TypeError, ValueError):
            raise BadInput(f"{PLUGIN_NAME}.evictTopK: expected an integer, got {k!r}") from None
        if self.evict_top_k < 1:
            raise BadInput(f"{PLUGIN_NAME}.evictTopK: must be >= 1, got {self.evict_top_k}")
        a = arguments(self.arguments)
        self.global_weight = a.get_int(WEIGHT, 1)
        if self.global_weight < 0:
            self.global_weight = 1
        self.binpack_weights: dict[str, int] = {}
        for key, res in ((BINPACK_CPU, "cpu"), (BINPACK_MEMORY, "memory")):
            w = a.get_int(key, 1)
            self.binpack_weights[res] = 1 if w < 0 else w
        names = a.get(BINPACK_RESOURCES)
        for name in (names.split(",") if isinstance(names, str) else []):
            name = name.strip()
            if name:
                w = a.get_int(f"{BINPACK_RESOURCES}.{name}", 1)
                self.binpack_weights[name] = 1 if w < 0 else w
        self.normal_pod_enable = a.get_bool(NORMAL_POD_ENABLE, True)
        self.fading = a.get_float(NORMAL_POD_FADING, 0.8)
        if self.fading < 0:
            self.fading = 0.8
        self.min_tier = self.max_tier = 0
        self.resources: dict[str, _ResourceStatus] = {}
        self.node_hyper_nodes: dict[str, list[str]] = {}
        self.node_tiers: dict[str, dict[int, str]] = {}
        self.labels_built = False
        self.gradient_enabled = False
        self.hyper_nodes: list[HyperNode] = []

    def name(self) -> str:
        return PLUGIN_NAME

    # ------------------------------------------------------------------------------------------
    def on_session_open(self, ssn: Any) -> None:
        self.labels_built = False
        if not has_real_hyper_nodes(ssn):
            self._install_label_hyper_nodes(ssn)
        tiers = ssn.hyper_nodes_tiers
        if tiers:
            self.min_tier, self.max_tier = tiers[0], tiers[-1]
        self._init_resources(ssn)
        self.gradient_enabled = any(opt.name == PLUGIN_NAME and getattr(opt, "enabled_hyper_node_gradient", None) is True
                                    for tier in ssn.tiers for opt in tier.plugins)
        self.hyper_nodes = sorted(
            (HyperNode(n, hn.tier, sorted(ssn.real_nodes_set.get(n, ())))
             for n, hn in ssn.hyper_nodes.items() if n != CLUSTER_TOP_HYPERNODE),
            key=lambda h: (h.tier, h.name))
        ssn.add_hyper_node_order_fn(self.name(), lambda job, hns: self.hyper_node_order_fn(ssn, job, hns))
        ssn.add_batch_node_order_fn(self.name(), lambda task, nodes: self.batch_node_order_fn(ssn, task, nodes))
        ssn.add_hyper_node_gradient_for_job_fn(self.name(), lambda job, hn: self.gradient_for_job(ssn, job, hn))
        ssn.add_event_handler(EventHandler(allocate_func=lambda ev: self._on_used(ev.task, +1),
                                           deallocate_func=lambda ev: self._on_used(ev.task, -1)))
        ssn.add_gang_search_space_fn(self.name(), self.gang_search_space)

    def on_session_close(self, ssn: Any) -> None:
        self.resources = {}
        self.node_hyper_nodes = {}
        self.node_tiers = {}
        self.hyper_nodes = []

    def _install_label_hyper_nodes(self, ssn: Any) -> None:
        objs = hyper_node_objects_from_labels(list(ssn.node_list), self.tier_labels)
        if not objs:
            return
        info = HyperNodesInfo()
        info.objects = {o["metadata"]["name"]: o for o in objs}
        info.rebuild({n.name: dict(n.labels or {}) for n in ssn.node_list})
        hns, by_tier, real, names, ready = info.snapshot()
        install_hyper_nodes(ssn, hns, by_tier, real, names, ready)
        self.labels_built = True

    def _init_resources(self, ssn: Any) -> None:
        self.resources = {}
        self.node_hyper_nodes = {}
        # node -> {tier: hypernode} over the tier sets (which may name hypernodes the info map
        # lacks: the Go harness injects them so); the first name wins a tier
        self.node_tiers = {}
        for tier in sorted(ssn.hyper_nodes_set_by_tier):
            for hn in sorted(ssn.hyper_nodes_set_by_tier[tier]):
                for name in ssn.real_nodes_set.get(hn, ()):
                    self.node_tiers.setdefault(name, {}).setdefault(tier, hn)
        for hn in sorted(ssn.hyper_nodes):
            st = _ResourceStatus(Resource(), Resource(), Resource(), Resource())
            for name in ssn.real_nodes_set.get(hn, ()):
                n = ssn.nodes[name]
                st.allocatable.add(n.allocatable)
                st.used.add(n.used)
                st.idle.add(n.idle)
                st.future_idle.add(n.future_idle())
                self.node_hyper_nodes.setdefault(name, []).append(hn)
            self.resources[hn] = st

    def _on_used(self, task: Any, sign: int) -> None:
        for hn in self.node_hyper_nodes.get(task.node_name, ()):
            st = self.resources.get(hn)
            if st is None:
                continue
            if sign > 0:
                st.used.add(task.resreq)
            else:
                st.used.sub_without_assert(task.resreq)

    # -- scores --------------------------------------------------------------------------------
    def _scale(self, scores: dict[str, float]) -> dict[str, float]:
        return {k: MAX_NODE_SCORE * self.global_weight * v for k, v in scores.items()}

    def _binpack(self, hyper_node: str, request: Mapping[str, float]) -> float:
        st = self.resources.get(hyper_node)
        if st is None:
            return ZERO_SCORE
        total, weights = 0.0, 0
        for name in sorted(request):
            w = self.binpack_weights.get(name)
            if w is None:
                continue
            alloc, used = st.allocatable.get(name), st.used.get(name)
            if used + request[name] > alloc:
                return ZERO_SCORE
            total += w * (used + request[name]) / alloc
            weights += w
        return total / weights if weights > 0 else ZERO_SCORE

    def _request(self, tasks: Any) -> dict[str, float]:
        req: dict[str, float] = {}
        for t in tasks:
            for name in t.resreq.resource_names():
                if name in self.binpack_weights:
                    req[name] = req.get(name, 0.0) + t.resreq.get(name)
        return req

    def _task_num_score(self, ssn: Any, hyper_node: str, job: Any) -> float:
        if not job.tasks:
            return ZERO_SCORE
        return find_job_task_num_of_hyper_node(ssn, hyper_node, job.tasks) / len(job.tasks)

    def hyper_node_order_fn(self, ssn: Any, job: Any, hyper_nodes: Mapping[str, list[Any]]) -> dict[str, float]:
        req = self._request(job.tasks.values())
        scores = {hn: self._binpack(hn, req) for hn in hyper_nodes}
        if scores:
            best = max(scores.values())
            tied = [hn for hn, s in scores.items() if s == best]
            if len(tied) > 1:
                for hn in tied:
                    scores[hn] += self._task_num_score(ssn, hn, job)
        return self._scale(scores)

    def _tier_score(self, tier: int) -> float:
        if self.min_tier == self.max_tier:
            return FULL_SCORE
        if self.min_tier <= tier <= self.max_tier:
            return (self.max_tier - tier) / (self.max_tier - self.min_tier)
        return ZERO_SCORE

    def _lowest_hyper_node(self, ssn: Any, node: str) -> str:
        """``util.FindHyperNodeForNode``: the node's hypernode of the lowest tier."""
        if not ssn.hyper_nodes_tiers:
            return ""
        return self.node_tiers.get(node, {}).get(ssn.hyper_nodes_tiers[0], "")

    def batch_node_order_fn(self, ssn: Any, task: Any, nodes: list[Any]) -> dict[str, float]:
        job = ssn.jobs.get(task.job)
        if job is not None and job.with_network_topology():
            scores = self._scores_network_aware(ssn, task, job, nodes)
        else:
            scores = self._scores_normal_pod(ssn, task, nodes)
        return self._scale(scores)

    def _scores_network_aware(self, ssn: Any, task: Any, job: Any, nodes: list[Any]) -> dict[str, float]:
        allocated = task.job_allocated_hyper_node
        if not allocated:
            return {}
        scores: dict[str, float] = {}
        for n in nodes:
            hn = self._lowest_hyper_node(ssn, n.name)
            if not hn:
                scores[n.name] = ZERO_SCORE
            elif hn == allocated:
                scores[n.name] = FULL_SCORE
            else:
                lca = ssn.hyper_nodes.get_lca_hyper_node(hn, allocated)
                info = ssn.hyper_nodes.get(lca)
                scores[n.name] = self._tier_score(info.tier) if info is not None else ZERO_SCORE
        if scores:
            best = max(scores.values())
            tied = [k for k, s in scores.items() if s == best]
            if len(tied) > 1:
                for k in tied:
                    scores[k] += self._task_num_score(ssn, self._lowest_hyper_node(ssn, k), job)
        return scores

    def _scores_normal_pod(self, ssn: Any, task: Any, nodes: list[Any]) -> dict[str, float]:
        if not self.normal_pod_enable or not ssn.hyper_nodes_tiers:
            return {}
        weights = {t: math.pow(self.fading, t - 1) for t in range(self.min_tier, self.max_tier + 1)}
        total_w = sum(weights.values())
        if total_w <= 0:
            return {}
        req = {name: task.resreq.get(name) for name in task.resreq.resource_names() if name in self.binpack_weights}
        per_hn: dict[str, float] = {}
        out: dict[str, float] = {}
        for n in nodes:
            mine = self.node_tiers.get(n.name, {})
            total = 0.0
            for t, w in weights.items():
                hn = mine.get(t)
                if hn is None:
                    s = FULL_SCORE
                else:
                    if hn not in per_hn:
                        per_hn[hn] = self._binpack(hn, req)
                    s = per_hn[hn]
                total += w * s
            out[n.name] = total / total_w
        return out

    # -- gradients -----------------------------------------------------------------------------
    def gradient_for_job(self, ssn: Any, job: Any, hyper_node: HyperNodeInfo) -> list[list[HyperNodeInfo]]:
        hard, highest = job.is_hard_topology_mode()
        if not hard:
            return [[hyper_node]]
        try:
            return self.hyper_node_gradient(ssn, hyper_node, highest, job.allocated_hyper_node,
                                            job.pending_min_resources())
        except LookupError as e:
            ssn.record_error(f"build hyperNode gradient fail for job {job.uid}: {e}")
            return []

    def hyper_node_gradient(self, ssn: Any, hyper_node: HyperNodeInfo, highest: int, allocated: str,
                            min_resource: Resource) -> list[list[HyperNodeInfo]]:
        root = _search_root(ssn.hyper_nodes, hyper_node, highest, allocated)
        seen = {root.name}
        queue = [root]
        eligible: dict[int, list[HyperNodeInfo]] = {}
        while queue:
            cur = queue.pop(0)
            if self._eligible(cur, highest, allocated, min_resource):
                eligible.setdefault(cur.tier, []).append(cur)
            for child in sorted(cur.children):
                if child in seen or child not in ssn.hyper_nodes:
                    continue
                seen.add(child)
                queue.append(ssn.hyper_nodes[child])
        return [eligible[t] for t in sorted(eligible)]

    def _eligible(self, hn: HyperNodeInfo, highest: int, allocated: str, min_resource: Resource) -> bool:
        if hn.tier > highest:
            return False
        if allocated:
            return True
        st = self.resources.get(hn.name)
        if st is None:
            return True
        return min_resource.less_equal(st.idle, ZERO) or min_resource.less_equal(st.future_idle, ZERO)

    # -- gang domains --------------------------------------------------------------------------
    def candidate_domains(self, job: Any, ssn: Any) -> list[HyperNode]:
        c = job_constraint(job)
        if c is None:
            return []
        doms = [h for h in self.hyper_nodes if h.tier <= c.highest_tier]
        top = ssn.hyper_nodes.get(CLUSTER_TOP_HYPERNODE)
        if top is not None and c.highest_tier >= top.tier:
            doms.append(HyperNode(CLUSTER_DOMAIN, top.tier, [n.name for n in ssn.node_list]))
        placed = {t.node_name for st, ts in job.task_status_index.items() if st in _PLACED
                  for t in ts.values() if t.node_name}
        if placed:
            doms = [h for h in doms if placed <= set(h.nodes)]
        return doms

    def gang_search_space(self, job: Any, ssn: Any, purpose: int) -> SearchSpace | None:
        c = job_constraint(job)
        if c is None:
            return None
        if purpose != PURPOSE_EVICT and self.gradient_enabled:
            return None   # allocate follows v1.14.0's hypernode gradients
        doms = self.candidate_domains(job, ssn)
        if purpose == PURPOSE_EVICT:
            req = gang_request(job)
            ranked = []
            for h in doms:
                nodes = [ssn.nodes[n] for n in h.nodes if n in ssn.nodes]
                cap, fut = Resource(), Resource()
                for n in nodes:
                    cap.add(n.allocatable)
                    fut.add(n.future_idle())
                if _shortfall(req, cap) > 0.0:
                    continue  # could never hold the gang
                ranked.append((_shortfall(req, fut), h.tier, h.name, h))
            ranked.sort(key=lambda x: x[:3])
            doms = [x[3] for x in ranked[: self.evict_top_k]]
        names = [h.name for h in doms]
        domains = [[ssn.nodes[n] for n in h.nodes if n in ssn.nodes] for h in doms]
        if c.mode == "soft":
            if CLUSTER_DOMAIN not in names:
                names.append(CLUSTER_DOMAIN)
                domains.append(list(ssn.node_list))
            return SearchSpace(domains, hard=False, names=names)
        if not domains:
            # hard constraint and no feasible domain: an explicit empty space would read as
            # "no opinion"; a single empty domain makes every action fail for this gang
            return SearchSpace([[]], hard=True, names=["(none)"])
        return SearchSpace(domains, hard=True, names=names)


def _search_root(hyper_nodes: Any, available: HyperNodeInfo, highest: int, allocated: str) -> HyperNodeInfo:
    """``getSearchRoot``: ``available`` intersected with the highest allowed ancestor of the job's
    allocated hypernode."""
    if not allocated:
        return available
    highest_hn = ""
    for a in hyper_nodes.get_ancestors(allocated):
        info = hyper_nodes.get(a)
        if info is None:
            raise LookupError(f"allocated hyperNode {allocated} ancestor {a} not found")
        if info.tier > highest:
            break
        highest_hn = a
    if not highest_hn:
        raise LookupError(f"allocated hyperNode {allocated} tier is greater than highest allowed tier {highest}")
    lca = hyper_nodes.get_lca_hyper_node(available.name, highest_hn)
    if lca == highest_hn:
        return available
    if lca == available.name:
        return hyper_nodes[highest_hn]
    raise LookupError(f"there is no intersection between hyperNodeAvailable {available.name} and "
                      f"hyperNodeHighestAllowed {highest_hn}")
