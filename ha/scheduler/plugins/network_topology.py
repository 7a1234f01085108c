"""network-topology-aware: hypernodes from node labels and the ``GangSearchSpaceFn`` (seed 001 §2).

Hypernodes. Each tier is a node-label key; tier 1 is the tightest (default ``topology/switch``),
tier 2 the next (default ``topology/rack``), … Every distinct value of a tier's label is one
hypernode of that tier (``topology/rack=r1``) holding the nodes with that label value. Above the
last tier sits the cluster (all session nodes). Arguments (either spelling)::

    network-topology-aware.tierLabels: "topology/switch,topology/rack"   # or a list
    network-topology-aware.evictTopK: 3                                   # domains tried by eviction

PodGroup constraint (Volcano's shape): ``spec.networkTopology: {mode: hard|soft,
highestTierAllowed: N}`` (mode defaults to hard, N to 1). A job without it gets no opinion from
this plugin (the actions then use the whole cluster as their single domain).

Search space for a constrained job:

* candidate domains: every hypernode of tier ≤ N (the cluster too when N exceeds the tiers);
  if the gang already has tasks placed (allocated statuses, Pipelined, Releasing), only domains
  holding all of their nodes (a running gang stays in its domain, §4.3.2);
* ``PURPOSE_ALLOCATE``: all of them, tightest tier first, then by name;
* ``PURPOSE_EVICT``: those whose capacity could hold the gang's pending request, sorted by the
  cost to enter (the normalised shortfall of the request against the domain's FutureIdle), then
  tier, then name, truncated to the top K;
* soft: the same list followed by the whole cluster, marked ``hard=False``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from ha.errors import BadInput
from ha.scheduler.api import Resource, TaskStatus
from ha.scheduler.framework.gang_eviction import (PURPOSE_EVICT, SearchSpace, needed_dims)
from ha.scheduler.plugins import register

PLUGIN_NAME = "network-topology-aware"
DEFAULT_TIER_LABELS = ("topology/switch", "topology/rack")
DEFAULT_EVICT_TOP_K = 3
CLUSTER_DOMAIN = "cluster"

_PLACED = frozenset({TaskStatus.ALLOCATED, TaskStatus.BINDING, TaskStatus.BOUND, TaskStatus.RUNNING,
                     TaskStatus.PIPELINED, TaskStatus.RELEASING})


@dataclass
class HyperNode:
    name: str
    tier: int
    nodes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class TopologyConstraint:
    mode: str            # "hard" | "soft"
    highest_tier: int


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


def job_constraint(job: Any) -> TopologyConstraint | None:
    """``spec.networkTopology`` of the job's PodGroup (None when absent)."""
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
        tier = int(nt.get("highestTierAllowed") or 1)
    except (TypeError, ValueError):
        tier = 1
    return TopologyConstraint(mode, max(tier, 1))


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
    argument_keys = ("tierLabels", "evictTopK")
    argument_prefixes = (f"{PLUGIN_NAME}.",)

    def __init__(self, arguments: Mapping[str, Any] | None = None):
        self.arguments = dict(arguments or {})
        self.tier_labels = parse_tier_labels(_arg(self.arguments, "tierLabels"))
        k = _arg(self.arguments, "evictTopK")
        try:
            self.evict_top_k = int(k) if k is not None else DEFAULT_EVICT_TOP_K
        except (TypeError, ValueError):
            raise BadInput(f"{PLUGIN_NAME}.evictTopK: expected an integer, got {k!r}") from None
        if self.evict_top_k < 1:
            raise BadInput(f"{PLUGIN_NAME}.evictTopK: must be >= 1, got {self.evict_top_k}")
        self.hyper_nodes: list[HyperNode] = []

    def name(self) -> str:
        return PLUGIN_NAME

    def on_session_open(self, ssn: Any) -> None:
        self.hyper_nodes = build_hypernodes(list(ssn.node_list), self.tier_labels)
        ssn.hyper_nodes_ready_to_schedule = True
        ssn.add_gang_search_space_fn(self.name(), self.gang_search_space)

    def on_session_close(self, ssn: Any) -> None:
        self.hyper_nodes = []

    # ------------------------------------------------------------------------------------------
    def candidate_domains(self, job: Any, ssn: Any) -> list[HyperNode]:
        c = job_constraint(job)
        if c is None:
            return []
        doms = [h for h in self.hyper_nodes if h.tier <= c.highest_tier]
        if c.highest_tier > len(self.tier_labels):
            doms.append(HyperNode(CLUSTER_DOMAIN, len(self.tier_labels) + 1, [n.name for n in ssn.node_list]))
        placed = {t.node_name for st, ts in job.task_status_index.items() if st in _PLACED
                  for t in ts.values() if t.node_name}
        if placed:
            doms = [h for h in doms if placed <= set(h.nodes)]
        return doms

    def gang_search_space(self, job: Any, ssn: Any, purpose: int) -> SearchSpace | None:
        c = job_constraint(job)
        if c is None:
            return None
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
