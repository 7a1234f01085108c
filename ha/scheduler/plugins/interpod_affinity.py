"""Inter-pod affinity and anti-affinity as Volcano v1.14.0 calls Kubernetes' ``interpodaffinity``
plugin (kube-scheduler v1.34 ``framework/plugins/interpodaffinity`` filtering.go / scoring.go),
over the session's k8s node view (``k8s_nodes``, Volcano's ``ssn.NodeMap``).

Terms. A ``PodAffinityTerm`` of pod P matches pod E when E's namespace is in the term's
``namespaces`` (empty: P's own namespace) and its ``labelSelector`` matches E's labels (an absent
selector matches nothing, ``{}`` everything). Topology pairs are (topologyKey, the node's label
value); a node without the label has no pair.

Filter (predicates; PreFilter at PrePredicate time, Filter per node):
* existing anti-affinity: every required anti-affinity term of a pod already on a node that
  matches the incoming pod counts its topology pair; a node in a counted pair fails
  (Unschedulable);
* the incoming pod's required anti-affinity: per term, pods that match it count their pairs; a node
  in a counted pair of a term fails (Unschedulable);
* the incoming pod's required affinity: pods matching *all* its terms count the pairs of every
  term; a node lacking any term's topology label fails; a node whose pair of some term has no
  count fails, unless no pod matches at all and the pod matches all its own terms (the first pod
  of a self-affine series) (UnschedulableAndUnresolvable);
* nothing to check (no existing anti-affinity counts, no required terms): the filter is skipped.

Score (nodeorder's BatchNodeOrderFn, weight ``podaffinity.weight``): PreScore walks every node's
pods when the incoming pod has preferred (anti-)affinity terms, else only the pods with affinity;
for each existing pod on a labelled node: +weight per preferred affinity term of the incoming
pod it matches, −weight per preferred anti-affinity term, and +/−weight per preferred (anti-)
affinity term of the existing pod that the incoming pod matches (Volcano passes
``InterPodAffinityArgs{}``: HardPodAffinityWeight 0, so existing required terms add nothing),
summed per topology pair. A node scores the sum over the pairs it is in; NormalizeScore maps
[min, max] of the scored nodes to [0, 100] (int64 truncation; all 0 when max = min). Nothing
counted: PreScore skips and every node scores 0.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable

from ha.scheduler.plugins.k8s_nodes import has_pod_affinity, has_required_anti_affinity  # noqa: F401
from ha.scheduler.plugins.matchers import match_expression

__all__ = ["AffinityTerm", "PodAffinity", "pod_affinity", "has_pod_affinity",
           "has_required_anti_affinity", "PreFilterState", "pre_filter", "filter_node",
           "affinity_scores", "ERR_AFFINITY", "ERR_ANTI_AFFINITY", "ERR_EXISTING_ANTI_AFFINITY"]

ERR_AFFINITY = "node(s) didn't match pod affinity rules"
ERR_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
ERR_EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
MAX_NODE_SCORE = 100

_EMPTY: dict = {}
_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
_PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


def _labels(obj: dict | None) -> dict:
    return ((obj or _EMPTY).get("metadata") or _EMPTY).get("labels") or _EMPTY


def _namespace(pod: dict) -> str:
    return ((pod or _EMPTY).get("metadata") or _EMPTY).get("namespace") or ""


def selector_matches(selector: dict | None, labels: dict) -> bool:
    """metav1.LabelSelectorAsSelector(selector).Matches(labels); None matches nothing."""
    if selector is None:
        return False
    for k, v in (selector.get("matchLabels") or _EMPTY).items():
        if labels.get(k) != v:
            return False
    for e in selector.get("matchExpressions") or ():
        k = e.get("key")
        if not match_expression(e, labels.get(k), k in labels):
            return False
    return True


@dataclass(frozen=True)
class AffinityTerm:
    namespaces: frozenset
    selector: dict | None = field(compare=False, hash=False)
    topology_key: str = ""
    weight: int = 0

    def matches(self, pod: dict) -> bool:
        return _namespace(pod) in self.namespaces and selector_matches(self.selector, _labels(pod))


@dataclass
class PodAffinity:
    """A pod's terms (framework.PodInfo's Required/Preferred(Anti)AffinityTerms)."""
    required_affinity: list[AffinityTerm]
    required_anti: list[AffinityTerm]
    preferred_affinity: list[AffinityTerm]
    preferred_anti: list[AffinityTerm]


_NONE = PodAffinity([], [], [], [])


def _term(pod_ns: str, raw: dict, weight: int = 0) -> AffinityTerm:
    ns = raw.get("namespaces") or [pod_ns]
    return AffinityTerm(frozenset(ns), raw.get("labelSelector"), raw.get("topologyKey") or "", weight)


def pod_affinity(pod: dict) -> PodAffinity:
    aff = (((pod or _EMPTY).get("spec") or _EMPTY).get("affinity")) or _EMPTY
    pa, anti = aff.get("podAffinity") or _EMPTY, aff.get("podAntiAffinity") or _EMPTY
    if not pa and not anti:
        return _NONE
    ns = _namespace(pod)
    return PodAffinity(
        [_term(ns, t) for t in pa.get(_REQUIRED) or ()],
        [_term(ns, t) for t in anti.get(_REQUIRED) or ()],
        [_term(ns, w.get("podAffinityTerm") or _EMPTY, int(w.get("weight") or 0)) for w in pa.get(_PREFERRED) or ()],
        [_term(ns, w.get("podAffinityTerm") or _EMPTY, int(w.get("weight") or 0)) for w in anti.get(_PREFERRED) or ()],
    )


def _pair(node: dict | None, key: str) -> tuple[str, str] | None:
    labels = _labels(node)
    return (key, labels[key]) if key in labels else None


# ------------------------------------------------------------------------------------ filter

@dataclass
class PreFilterState:
    pod: dict
    terms: PodAffinity
    existing_anti: Counter
    affinity_counts: Counter
    anti_counts: Counter


def _matches_all(terms: list[AffinityTerm], pod: dict) -> bool:
    return bool(terms) and all(t.matches(pod) for t in terms)


def pre_filter(pod: dict, view: dict[str, Any], index: Any) -> PreFilterState | None:
    """The PreFilter state of ``pod`` over the session's node view; None = Skip."""
    terms = pod_affinity(pod)
    existing: Counter = Counter()
    for name in index.nodes_with_required_anti():
        ni = view.get(name)
        if ni is None or ni.node is None:
            continue
        for uid, other in ni.affinity_pods.items():
            for t in pod_affinity(other).required_anti:
                if t.matches(pod):
                    p = _pair(ni.node, t.topology_key)
                    if p is not None:
                        existing[p] += ni.pods.get(uid, 1)
    aff_counts: Counter = Counter()
    anti_counts: Counter = Counter()
    if terms.required_affinity or terms.required_anti:
        for ni in view.values():
            if ni.node is None:
                continue
            for uid, copies in ni.pods.items():
                other = ni.pod_objs[uid]
                if _matches_all(terms.required_affinity, other):
                    for t in terms.required_affinity:
                        p = _pair(ni.node, t.topology_key)
                        if p is not None:
                            aff_counts[p] += copies
                for t in terms.required_anti:
                    if t.matches(other):
                        p = _pair(ni.node, t.topology_key)
                        if p is not None:
                            anti_counts[p] += copies
    existing = +existing
    aff_counts, anti_counts = +aff_counts, +anti_counts
    if not existing and not terms.required_affinity and not terms.required_anti:
        return None
    return PreFilterState(pod, terms, existing, aff_counts, anti_counts)


def filter_node(state: PreFilterState | None, node: dict | None) -> str | None:
    """The failure reason of the Filter on ``node``, or None (passes; also when skipped)."""
    if state is None:
        return None
    labels = _labels(node)
    terms = state.terms
    pods_exist = True
    for t in terms.required_affinity:
        if t.topology_key not in labels:
            return ERR_AFFINITY
        if state.affinity_counts[(t.topology_key, labels[t.topology_key])] <= 0:
            pods_exist = False
    # the first pod of a self-affine series may go anywhere its topology labels exist
    if not pods_exist and (state.affinity_counts or not _matches_all(terms.required_affinity, state.pod)):
        return ERR_AFFINITY
    for t in terms.required_anti:
        if t.topology_key in labels and state.anti_counts[(t.topology_key, labels[t.topology_key])] > 0:
            return ERR_ANTI_AFFINITY
    for key, value in labels.items():
        if state.existing_anti.get((key, value), 0) > 0:
            return ERR_EXISTING_ANTI_AFFINITY
    return None


# ------------------------------------------------------------------------------------ score

def _process_terms(score: dict, terms: Iterable[AffinityTerm], pod: dict, node: dict, sign: int) -> None:
    labels = _labels(node)
    for t in terms:
        if t.matches(pod) and t.topology_key in labels:
            per_key = score.setdefault(t.topology_key, {})
            v = labels[t.topology_key]
            per_key[v] = per_key.get(v, 0) + t.weight * sign


def affinity_scores(pod: dict, view: dict[str, Any], index: Any, nodes: list[Any]) -> dict[str, int] | None:
    """Normalised (0..100, before the plugin weight) inter-pod affinity score of each of ``nodes``
    (ha NodeInfo objects); None when PreScore skips (every node then scores 0)."""
    if not nodes:
        return None
    terms = pod_affinity(pod)
    constraints = bool(terms.preferred_affinity or terms.preferred_anti)
    names = sorted(view) if constraints else index.nodes_with_affinity()
    topology: dict[str, dict[str, int]] = {}
    counted = False
    for name in names:
        ni = view.get(name)
        if ni is None or ni.node is None or not _labels(ni.node):
            continue
        pods = ni.pod_objs if constraints else ni.affinity_pods
        local: dict[str, dict[str, int]] = {}
        for uid, other in pods.items():
            for _ in range(ni.pods.get(uid, 1)):
                _process_terms(local, terms.preferred_affinity, other, ni.node, 1)
                _process_terms(local, terms.preferred_anti, other, ni.node, -1)
                ex = pod_affinity(other)
                _process_terms(local, ex.preferred_affinity, pod, ni.node, 1)
                _process_terms(local, ex.preferred_anti, pod, ni.node, -1)
        if local:
            counted = True
            for k, vals in local.items():
                dst = topology.setdefault(k, {})
                for v, s in vals.items():
                    dst[v] = dst.get(v, 0) + s
    if not counted:
        return None
    raw = {}
    for n in nodes:
        labels = _labels(n.node)
        raw[n.name] = sum(vals.get(labels[k], 0) for k, vals in topology.items() if k in labels)
    lo, hi = min(raw.values()), max(raw.values())
    diff = hi - lo
    return {k: int(MAX_NODE_SCORE * ((v - lo) / diff)) if diff > 0 else 0 for k, v in raw.items()}
