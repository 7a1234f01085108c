"""nodeorder: k8s score plugins with Volcano's weights (``plugins/nodeorder/nodeorder.go``,
scores as in kube-scheduler v1.34 ``noderesources``, ``nodeaffinity``, ``tainttoleration``).

Per-node score (NodeOrderFn), each 0–100 and multiplied by its weight:
* LeastAllocated (``leastrequested.weight``, default 1): cpu and memory with weights 50/50;
  per resource ``(alloc − req) × 100 / alloc`` (integer), 0 if over; ``req`` = the node's
  non-zero requests (100m / 200Mi for containers without one) + the pod's;
* MostAllocated (``mostrequested.weight``, default 0 = off): ``min(req, alloc) × 100 / alloc``;
* BalancedAllocation (``balancedresource.weight``, default 1): cpu, memory, nvidia.com/gpu
  (only if the pod asks for it); ``(1 − std(fractions)) × 100``, fractions capped at 1, from the
  node's plain requests + the pod's; 0 for a pod requesting nothing;
* NodeAffinity (``nodeaffinity.weight``, default 2): Σ weights of matching preferred terms (raw);
* ImageLocality (``imagelocality.weight``, default 1): nodes carry no image lists here, so 0.
Batch score (BatchNodeOrderFn): InterPodAffinity (``podaffinity.weight``, default 2), preferred
pod affinity / anti-affinity of the pod and of the pods already placed, normalised min–max to
0–100 over the scored nodes (``interpod_affinity``); TaintToleration (``tainttoleration.weight``,
default 3), intolerable PreferNoSchedule taints normalised in reverse to 0–100. Topology spread is
not modelled (its PreScore would skip for the pods this testbed builds).

Node requests come from the session's k8s view (``k8s_nodes``), which the predicates plugin keeps
current within the session, exactly as Volcano's shared ``ssn.NodeMap``.
"""
from __future__ import annotations

import math
from typing import Any, Mapping

from ha.scheduler.plugins.factory import register
from ha.scheduler.plugins import interpod_affinity
from ha.scheduler.plugins.k8s_nodes import (  # noqa: F401
    K8sNodeInfo, affinity_index, cached_pod_requests, node_map, pod_requests,
)
from ha.scheduler.plugins.matchers import term_matches, tolerates
from ha.scheduler.plugins.util import arguments

PLUGIN_NAME = "nodeorder"
MAX_NODE_SCORE = 100

NODE_AFFINITY_WEIGHT = "nodeaffinity.weight"
POD_AFFINITY_WEIGHT = "podaffinity.weight"
LEAST_REQUESTED_WEIGHT = "leastrequested.weight"
BALANCED_RESOURCE_WEIGHT = "balancedresource.weight"
MOST_REQUESTED_WEIGHT = "mostrequested.weight"
TAINT_TOLERATION_WEIGHT = "tainttoleration.weight"
IMAGE_LOCALITY_WEIGHT = "imagelocality.weight"
POD_TOPOLOGY_SPREAD_WEIGHT = "podtopologyspread.weight"

LEAST_ALLOCATED_RESOURCES = (("cpu", 50), ("memory", 50))
MOST_ALLOCATED_RESOURCES = (("cpu", 1), ("memory", 1))
BALANCED_RESOURCES = ("cpu", "memory", "nvidia.com/gpu")

_EMPTY: dict = {}


def _is_scalar(name: str) -> bool:
    return name not in ("cpu", "memory", "ephemeral-storage", "pods")


def _alloc_request(ni: K8sNodeInfo, name: str, pod_request: int, *, use_requested: bool) -> tuple[int, int]:
    """calculateResourceAllocatableRequest: (allocatable, node requests + pod request)."""
    if pod_request == 0 and _is_scalar(name):
        return 0, 0  # extended resources the pod does not ask for are skipped
    requested = ni.requested if use_requested or _is_scalar(name) else ni.non_zero_requested
    if name not in ni.allocatable and _is_scalar(name):
        return 0, 0
    return ni.allocatable.get(name, 0), requested.get(name, 0) + pod_request


def least_requested_score(requested: int, capacity: int) -> int:
    if capacity == 0 or requested > capacity:
        return 0
    return (capacity - requested) * MAX_NODE_SCORE // capacity


def most_requested_score(requested: int, capacity: int) -> int:
    if capacity == 0:
        return 0
    return min(requested, capacity) * MAX_NODE_SCORE // capacity


def _weighted(ni: K8sNodeInfo, pod: dict, resources: tuple, scorer) -> int:
    pod_req = cached_pod_requests(ni.memo, pod, True)
    score, weight_sum = 0, 0
    for name, weight in resources:
        alloc, req = _alloc_request(ni, name, pod_req.get(name, 0), use_requested=False)
        if alloc == 0:
            continue
        score += scorer(req, alloc) * weight
        weight_sum += weight
    return score // weight_sum if weight_sum else 0


def least_allocated_score(ni: K8sNodeInfo, pod: dict) -> int:
    return _weighted(ni, pod, LEAST_ALLOCATED_RESOURCES, least_requested_score)


def most_allocated_score(ni: K8sNodeInfo, pod: dict) -> int:
    return _weighted(ni, pod, MOST_ALLOCATED_RESOURCES, most_requested_score)


def balanced_allocation_score(ni: K8sNodeInfo, pod: dict) -> int:
    pod_req = cached_pod_requests(ni.memo, pod, False)
    if all(pod_req.get(n, 0) == 0 for n in BALANCED_RESOURCES):
        return 0  # best-effort pod (Score without PreScore)
    fractions = []
    for name in BALANCED_RESOURCES:
        alloc, req = _alloc_request(ni, name, pod_req.get(name, 0), use_requested=True)
        if alloc == 0:
            continue
        fractions.append(min(req / alloc, 1.0))
    std = 0.0
    if len(fractions) == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        mean = sum(fractions) / len(fractions)
        std = math.sqrt(sum((f - mean) ** 2 for f in fractions) / len(fractions))
    return int((1 - std) * MAX_NODE_SCORE)


def node_affinity_score(pod: dict, node: dict | None) -> int:
    """Σ weight of the pod's preferred node-affinity terms the node matches (not normalised)."""
    preferred = ((((pod or _EMPTY).get("spec") or _EMPTY).get("affinity") or _EMPTY)
                 .get("nodeAffinity") or _EMPTY).get("preferredDuringSchedulingIgnoredDuringExecution") or []
    md = (node or _EMPTY).get("metadata") or _EMPTY
    labels = md.get("labels") or _EMPTY
    total = 0
    for term in preferred:
        w = int(term.get("weight") or 0)
        if w and term_matches(term.get("preference") or _EMPTY, labels, md.get("name", "")):
            total += w
    return total


def intolerable_prefer_no_schedule(pod: dict, node: dict | None) -> int:
    tolerations = [t for t in (((pod or _EMPTY).get("spec") or _EMPTY).get("tolerations") or ())
                   if (t.get("effect") or "") in ("", "PreferNoSchedule")]
    n = 0
    for taint in ((node or _EMPTY).get("spec") or _EMPTY).get("taints") or ():
        if taint.get("effect") == "PreferNoSchedule" and not tolerates(tolerations, taint):
            n += 1
    return n


def default_normalize_reverse(scores: dict[str, int]) -> dict[str, int]:
    """k8s helper.DefaultNormalizeScore(MaxNodeScore, reverse=true)."""
    top = max(scores.values(), default=0)
    if top == 0:
        return {k: MAX_NODE_SCORE for k in scores}
    return {k: MAX_NODE_SCORE - MAX_NODE_SCORE * v // top for k, v in scores.items()}


@register(PLUGIN_NAME)
class NodeOrderPlugin:
    argument_keys = (NODE_AFFINITY_WEIGHT, POD_AFFINITY_WEIGHT, LEAST_REQUESTED_WEIGHT, BALANCED_RESOURCE_WEIGHT,
                     MOST_REQUESTED_WEIGHT, TAINT_TOLERATION_WEIGHT, IMAGE_LOCALITY_WEIGHT,
                     POD_TOPOLOGY_SPREAD_WEIGHT)

    def __init__(self, args: Mapping[str, Any] | None = None):
        a = arguments(args)
        self.arguments = a
        self.least_req_weight = a.get_int(LEAST_REQUESTED_WEIGHT, 1)
        self.most_req_weight = a.get_int(MOST_REQUESTED_WEIGHT, 0)
        self.node_affinity_weight = a.get_int(NODE_AFFINITY_WEIGHT, 2)
        self.pod_affinity_weight = a.get_int(POD_AFFINITY_WEIGHT, 2)
        self.balanced_resource_weight = a.get_int(BALANCED_RESOURCE_WEIGHT, 1)
        self.taint_toleration_weight = a.get_int(TAINT_TOLERATION_WEIGHT, 3)
        self.image_locality_weight = a.get_int(IMAGE_LOCALITY_WEIGHT, 1)
        self.pod_topology_spread_weight = a.get_int(POD_TOPOLOGY_SPREAD_WEIGHT, 2)
        self._ssn: Any = None  # the open session (the pods the affinity score walks)

    def name(self) -> str:
        return PLUGIN_NAME

    def node_score(self, ni: K8sNodeInfo, task: Any) -> float:
        pod = task.pod
        score = 0.0
        if self.least_req_weight:
            score += least_allocated_score(ni, pod) * self.least_req_weight
        if self.most_req_weight:
            score += most_allocated_score(ni, pod) * self.most_req_weight
        if self.balanced_resource_weight:
            score += balanced_allocation_score(ni, pod) * self.balanced_resource_weight
        if self.node_affinity_weight:
            score += node_affinity_score(pod, ni.node) * self.node_affinity_weight
        return score

    def batch_scores(self, task: Any, nodes: list[Any]) -> dict[str, float]:
        out = {n.name: 0.0 for n in nodes}
        if self.pod_affinity_weight and self._ssn is not None:
            ssn = self._ssn
            got = interpod_affinity.affinity_scores(task.pod, node_map(ssn), affinity_index(ssn), nodes)
            for name, s in (got or {}).items():
                out[name] += float(s * self.pod_affinity_weight)
        if self.taint_toleration_weight:
            raw = {n.name: intolerable_prefer_no_schedule(task.pod, n.node) for n in nodes}
            for name, s in default_normalize_reverse(raw).items():
                out[name] += float(s * self.taint_toleration_weight)
        return out

    def on_session_open(self, ssn: Any) -> None:
        view = node_map(ssn)
        self._ssn = ssn

        def node_order(task: Any, node: Any) -> float:
            ni = view.get(node.name)
            if ni is None:
                ni = K8sNodeInfo.from_node_info(node)
            return self.node_score(ni, task)

        ssn.add_node_order_fn(self.name(), node_order)
        ssn.add_batch_node_order_fn(self.name(), self.batch_scores)

    def on_session_close(self, ssn: Any) -> None:
        self._ssn = None
