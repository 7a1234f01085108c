"""topology_violations (extension): hard-mode gangs (a PodGroup with ``spec.networkTopology.mode:
hard``) whose bound pods are not all under ONE HyperNode of tier <= ``highestTierAllowed`` in the
API server's truth — the placement Volcano v1.14.0's network-topology allocate promises, checked
across instances (a failover or two leaders can each keep the promise and still split a gang).

Per tick, at the tick's ``rv_after``: the hypernodes resolved from the truth's HyperNode objects
and node labels (the model's own resolution, ``HyperNodesInfo``), and each hard gang's pods that
hold a node (bound, not being deleted). ``count``: distinct gangs ever split; ``gang_ticks``: ticks
summed over gangs; ``gangs``: hard gangs seen; ``examples``: the first splits (gang, tick, nodes).
Absent without hard-mode gangs, or without HyperNodes in the truth (nothing to check against)."""
from __future__ import annotations

from typing import Any

from ha.experiment.checkers import Absent
from ha.experiment.checkers._fold import EventFold, _events_sorted, tick_rvs

NAME = "topology_violations"
HEADLINE = None
CONTRACT = False
GROUP_ANNOTATION = "scheduling.k8s.io/group-name"


def _hard(pg: dict) -> int | None:
    """The highest tier a hard gang may span (None: not a hard gang with a tier limit)."""
    nt = (pg.get("spec") or {}).get("networkTopology") or {}
    if nt.get("mode") != "hard" or nt.get("highestTierAllowed") is None:
        return None
    return int(nt["highestTierAllowed"])


def _domains(fold: EventFold):
    from ha.scheduler.api.hypernode_info import HyperNodesInfo
    info = HyperNodesInfo()
    labels = {k: ((n.get("metadata") or {}).get("labels") or {}) for k, n in fold.store["Node"].items()}
    info.objects = {k: dict(h) for k, h in fold.store["HyperNode"].items()}
    info.rebuild(labels)
    tiers = {name: int(((hn.hyper_node or {}).get("spec") or {}).get("tier") or 0)
             for name, hn in info.hyper_nodes.items() if hn.hyper_node is not None}
    return [(tiers[n], info.real_nodes.get(n, frozenset())) for n in sorted(tiers)]


def check(h):
    events = _events_sorted(h)
    if not events:
        return Absent("no API-server events in the history")
    if not any(e.get("kind") == "HyperNode" for e in events):
        return Absent("no HyperNode in the run (a flat cluster: nothing to check)")
    fold = EventFold(events)
    split: dict[str, int] = {}
    seen: set[str] = set()
    examples: list[dict[str, Any]] = []
    domains = None
    hn_rv = -1
    for tk, rv in zip(h.ticks(), tick_rvs(h)):
        if rv is None:
            continue
        fold.advance(int(rv), float(tk["t"]))
        hard = {k: lim for k, pg in fold.store["PodGroup"].items() if (lim := _hard(pg)) is not None}
        if not hard:
            continue
        seen.update(hard)
        last_hn = max((int((x.get("metadata") or {}).get("resourceVersion") or 0)
                       for x in list(fold.store["HyperNode"].values()) + list(fold.store["Node"].values())),
                      default=0)
        if domains is None or last_hn != hn_rv:
            domains, hn_rv = _domains(fold), last_hn
        nodes_of: dict[str, set[str]] = {}
        for p in fold.truth.pods.values():
            md, spec = p.get("metadata") or {}, p.get("spec") or {}
            g = (md.get("annotations") or {}).get(GROUP_ANNOTATION)
            key = f"{md.get('namespace')}/{g}" if g else None
            if key in hard and spec.get("nodeName") and not md.get("deletionTimestamp"):
                nodes_of.setdefault(key, set()).add(spec["nodeName"])
        for key, nodes in sorted(nodes_of.items()):
            if len(nodes) < 2:
                continue
            lim = hard[key]
            if any(tier <= lim and nodes <= real for tier, real in domains):
                continue
            split[key] = split.get(key, 0) + 1
            if len(examples) < 10 and split[key] == 1:
                examples.append({"gang": key, "t": tk["t"], "nodes": sorted(nodes), "highest_tier_allowed": lim})
    if not seen:
        return Absent("no hard-mode gang (networkTopology.mode hard with highestTierAllowed) in the run")
    return {"count": len(split), "gang_ticks": sum(split.values()), "gangs": len(seen), "examples": examples}
