"""HyperNodes in the session (``framework/session.go:241-479``, ``util/scheduler_helper.go``, v1.14.0).

At session open (:func:`open_hyper_nodes`):

* ``ssn.hyper_nodes`` (HyperNodeInfoMap, cloned), ``ssn.hyper_nodes_set_by_tier``,
  ``ssn.hyper_node_tier_name_map`` and ``ssn.hyper_nodes_ready_to_schedule`` come from the snapshot;
* ``ssn.real_nodes_list`` / ``ssn.real_nodes_set``: each hypernode's nodes that exist in the session
  (``GetRealNodesByHyperNode``), the list in the session's node order (Go iterates a set; the
  order only matters for tie-breaks, and ours must be deterministic);
* the virtual ``<cluster-top-hypernode>`` with tier max(1, highest tier + 1), every session node,
  and every parentless hypernode as its child (``addClusterTopHyperNode``);
* ``ssn.hyper_nodes_tiers``: the sorted tiers, cluster top included (``parseHyperNodesTiers``);
* when ready: each job's ``allocated_hyper_node`` is dropped if unknown or the job has no allocated
  task (``removeInvalidAllocatedHyperNode``) and, for a job with a network topology and none set,
  recovered from the nodes its allocated tasks run on: the smallest hypernode (fewest real nodes)
  holding all of them (``recoverAllocatedHyperNode``; no sub-groups: the job is its default sub-job).

The helpers below are the ``util`` functions the allocate action and the plugins share.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Iterable, Mapping

from ha.scheduler.api import allocated_status
from ha.scheduler.api.hypernode_info import CLUSTER_TOP_HYPERNODE, HyperNodeInfo, HyperNodeInfoMap

__all__ = ["CLUSTER_TOP_HYPERNODE", "open_hyper_nodes", "install_hyper_nodes", "find_hyper_node_for_node",
           "find_job_task_num_of_hyper_node", "prioritize_hyper_nodes", "select_best_hyper_node_and_score",
           "has_real_hyper_nodes"]


def open_hyper_nodes(ssn: Any, snapshot: Any) -> None:
    install_hyper_nodes(ssn, getattr(snapshot, "hyper_nodes", None) or HyperNodeInfoMap(),
                        getattr(snapshot, "hyper_nodes_set_by_tier", None) or {},
                        getattr(snapshot, "real_nodes_set", None) or {},
                        getattr(snapshot, "hyper_node_tier_name_map", None) or {},
                        getattr(snapshot, "hyper_nodes_ready_to_schedule", True))


def install_hyper_nodes(ssn: Any, hyper_nodes: HyperNodeInfoMap, set_by_tier: Mapping[int, Iterable[str]],
                        real_nodes: Mapping[str, Iterable[str]], tier_name_map: Mapping[str, int],
                        ready: bool) -> None:
    """Set the session's hypernode view (also used by the label-tier shortcut of the
    network-topology-aware plugin, which builds HyperNodes when the cluster has none)."""
    ssn.hyper_nodes = HyperNodeInfoMap(hyper_nodes)
    ssn.hyper_nodes_set_by_tier = {int(t): set(ns) for t, ns in set_by_tier.items()}
    ssn.hyper_node_tier_name_map = dict(tier_name_map)
    ssn.hyper_nodes_ready_to_schedule = bool(ready)
    order = {n.name: i for i, n in enumerate(ssn.node_list)}
    ssn.real_nodes_list = {}
    ssn.real_nodes_set = {}
    for hn, names in real_nodes.items():
        present = sorted((n for n in names if n in ssn.nodes), key=lambda n: order.get(n, len(order)))
        ssn.real_nodes_list[hn] = [ssn.nodes[n] for n in present]
        ssn.real_nodes_set[hn] = frozenset(present)
    _add_cluster_top(ssn)
    ssn.hyper_nodes_tiers = sorted(ssn.hyper_nodes_set_by_tier)
    if ssn.hyper_nodes_ready_to_schedule:
        known = set(ssn.hyper_nodes)
        for job in ssn.jobs.values():
            _remove_invalid_allocated_hyper_node(ssn, job)
            _recover_allocated_hyper_node(ssn, job, known)


def has_real_hyper_nodes(ssn: Any) -> bool:
    """Whether the session holds any hypernode besides the virtual cluster top."""
    return any(n != CLUSTER_TOP_HYPERNODE for n in ssn.hyper_nodes) or any(
        CLUSTER_TOP_HYPERNODE not in s for s in ssn.hyper_nodes_set_by_tier.values())


def _add_cluster_top(ssn: Any) -> None:
    top_tier = 1
    for tier in ssn.hyper_nodes_set_by_tier:
        if tier >= top_tier:
            top_tier = tier + 1
    top = HyperNodeInfo(CLUSTER_TOP_HYPERNODE, tier=top_tier)
    for name in sorted(ssn.hyper_nodes):
        hni = ssn.hyper_nodes[name]
        if hni.parent:
            continue
        hni.parent = top.name
        top.children.add(name)
    ssn.hyper_nodes[top.name] = top
    ssn.hyper_nodes_set_by_tier[top_tier] = {top.name}
    ssn.real_nodes_list[top.name] = list(ssn.node_list)
    ssn.real_nodes_set[top.name] = frozenset(n.name for n in ssn.node_list)


def _remove_invalid_allocated_hyper_node(ssn: Any, job: Any) -> None:
    for attr in ("allocated_hyper_node", "sub_job_allocated_hyper_node"):
        hn = getattr(job, attr)
        if hn and (hn not in ssn.hyper_nodes or job.allocated_task_num() == 0):
            setattr(job, attr, "")
            ssn.mark_job_dirty(job.uid)


def _recover_allocated_hyper_node(ssn: Any, job: Any, known: set[str]) -> None:
    """The default sub-job's hypernode from its allocated tasks' nodes, then the job's (the LCA of
    its sub-jobs': here the one sub-job's)."""
    if not job.with_network_topology():
        return
    updated = False
    if not job.sub_job_allocated_hyper_node:
        best = _minimum_hyper_node(ssn, job, known)
        if best:
            job.sub_job_allocated_hyper_node = best
            ssn.mark_job_dirty(job.uid)
            updated = True
    if not job.allocated_hyper_node or updated:
        lca = job.sub_job_allocated_hyper_node
        if lca != job.allocated_hyper_node:
            job.allocated_hyper_node = lca
            ssn.mark_job_dirty(job.uid)


def _minimum_hyper_node(ssn: Any, job: Any, known: set[str]) -> str:
    """The hypernode with the fewest real nodes among those holding every allocated task's node
    ("" when a task's node is under none)."""
    found: set[str] | None = None
    for st in sorted(job.task_status_index, key=int):
        if not allocated_status(st):
            continue
        tasks = job.task_status_index[st]
        for uid in sorted(tasks):
            task = tasks[uid]
            if not task.node_name:
                continue
            search = known if found is None else found
            found = {hn for hn in search if task.node_name in ssn.real_nodes_set.get(hn, ())}
            if not found:
                return ""
    if not found:
        return ""
    best, size = CLUSTER_TOP_HYPERNODE, math.inf
    for hn in sorted(found):
        n = len(ssn.real_nodes_set.get(hn, ()))
        if n < size:
            best, size = hn, n
    return best


# -- util ---------------------------------------------------------------------------------------------

def find_hyper_node_for_node(ssn: Any, node_name: str) -> str:
    """``util.FindHyperNodeForNode``: the hypernode of the lowest tier holding the node."""
    if not ssn.hyper_nodes_tiers:
        return ""
    for hn in sorted(ssn.hyper_nodes_set_by_tier.get(ssn.hyper_nodes_tiers[0], ())):
        if node_name in ssn.real_nodes_set.get(hn, ()):
            return hn
    return ""


def find_job_task_num_of_hyper_node(ssn: Any, hyper_node: str, tasks: Mapping[Any, Any]) -> int:
    """``util.FindJobTaskNumOfHyperNode``: tasks whose node is under the hypernode."""
    nodes = ssn.real_nodes_set.get(hyper_node, frozenset())
    return sum(1 for t in tasks.values() if t.node_name in nodes)


def prioritize_hyper_nodes(candidates: Mapping[str, list[Any]], job: Any,
                           order_map_fn: Callable[[Any, Mapping[str, list[Any]]], dict]) -> dict[float, list[str]]:
    """``util.PrioritizeHyperNodes``: sum the plugins' scores; score -> hypernodes (0 when no plugin
    scored one)."""
    total: dict[str, float] = {}
    for scores in order_map_fn(job, candidates).values():
        for hn, s in scores.items():
            total[hn] = total.get(hn, 0.0) + s
    out: dict[float, list[str]] = {}
    for hn in sorted(candidates):
        out.setdefault(total.get(hn, 0.0), []).append(hn)
    return out


def select_best_hyper_node_and_score(scores: Mapping[float, list[str]], rng: Any) -> tuple[str, float]:
    """``util.SelectBestHyperNodeAndScore``: the highest score, a random one among ties."""
    if not scores:
        return "", 0.0
    best = max(scores)
    names = scores[best]
    if not names:
        return "", 0.0
    return names[rng.randrange(len(names))], best
