"""overcommit_violations: node-ticks where bound, non-terminated pods' requests exceed the node's
allocatable in the API server's truth (the fold of its events at each tick's RV)."""
from __future__ import annotations

from typing import Any, Iterable, Mapping

from ha.experiment.checkers._fold import truth_checker
from ha.experiment.oracles import (NodeUsage, holds_node, node_allocatable, overcommitted_nodes, pod_requests,
                                   terminating)


class OvercommitViolations:
    """overcommit_violations: node-ticks where bound, non-terminated pods' requests exceed the
    node's allocatable in the API server's truth.

    A terminating pod (deletionTimestamp set, not yet gone) still holds its node — the kubelet
    admits against it and the kube-scheduler counts it — so it counts here; ``terminating_only``
    counts the node-ticks that would *not* be over without the terminating pods (a pod bound onto
    resources still being released). ``episodes``: a node going from not over to over;
    ``examples``: the first few episodes with the tick time, the node's pods (phase, terminating,
    requests of the over resources) and who bound each (``[instance, generation, session]`` from
    the bind decisions; None when no decision was seen, e.g. an initial pod)."""

    MAX_EXAMPLES = 5

    def __init__(self) -> None:
        self.count = 0
        self.ticks = 0
        self.nodes: dict[str, int] = {}
        self.resources: dict[str, int] = {}
        self.terminating_only = 0
        self.episodes = 0
        self.examples: list[dict[str, Any]] = []
        self._over_before: set[str] = set()
        self._bound_by: dict[str, list[Any]] = {}
        self._requests: dict[Any, dict[str, float]] = {}
        self._alloc: dict[Any, dict[str, float]] = {}

    def _req(self, p: Mapping[str, Any]) -> dict[str, float]:
        """pod_requests, memoized per pod and resourceVersion (a pod's spec does not change)."""
        md = p.get("metadata") or {}
        k = (md.get("uid") or md.get("name"), md.get("resourceVersion"))
        if k[1] is None:
            return pod_requests(p)
        r = self._requests.get(k)
        if r is None:
            if len(self._requests) > 200_000:
                self._requests.clear()
            r = self._requests[k] = pod_requests(p)
        return r

    def _allocatable(self, node: Mapping[str, Any]) -> dict[str, float]:
        md = node.get("metadata") or {}
        k = (md.get("name"), md.get("resourceVersion"))
        if k[1] is None:
            return node_allocatable(node)
        a = self._alloc.get(k)
        if a is None:
            a = self._alloc[k] = node_allocatable(node)
        return a

    def observe_decisions(self, decisions: Iterable[Mapping[str, Any]]) -> None:
        for d in decisions:
            if d.get("op") == "bind" and d.get("ok") and not d.get("dry_run") and d.get("pod"):
                self._bound_by[str(d["pod"])] = [d.get("instance"), d.get("generation", 0), d.get("session")]

    def observe(self, pods: Iterable[Mapping[str, Any]], nodes: Mapping[str, Mapping[str, Any]],
                t: float | None = None, over: Mapping[str, list[str]] | None = None) -> int:
        """One tick of the truth; ``over`` (optional): :func:`overcommitted_nodes` of it, already
        known (a :class:`NodeUsage` kept up to date)."""
        pods = list(pods)
        if over is None:
            over = overcommitted_nodes(pods, nodes, self._req, self._allocatable)
        self.ticks += 1
        self.count += len(over)
        for n, rs in over.items():
            self.nodes[n] = self.nodes.get(n, 0) + 1
            for r in rs:
                self.resources[r] = self.resources.get(r, 0) + 1
        if over:
            live = overcommitted_nodes([p for p in pods if not terminating(p)], nodes, self._req,
                                       self._allocatable)
            self.terminating_only += sum(1 for n in over if n not in live)
            for n in over:
                if n in self._over_before:
                    continue
                self.episodes += 1
                if len(self.examples) < self.MAX_EXAMPLES:
                    self.examples.append(self._example(t, n, over[n], pods, nodes))
        self._over_before = set(over)
        return len(over)

    def _example(self, t: float | None, n: str, resources: list[str], pods: list[Mapping[str, Any]],
                 nodes: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
        alloc = node_allocatable(nodes[n])
        on = []
        for p in pods:
            if not holds_node(p) or p["spec"]["nodeName"] != n:
                continue
            md = p.get("metadata") or {}
            key = f"{md.get('namespace', '')}/{md.get('name', '')}"
            req = pod_requests(p)
            on.append({"pod": key, "phase": (p.get("status") or {}).get("phase", ""),
                       "terminating": terminating(p), "requests": {r: req.get(r, 0.0) for r in resources},
                       "bound_by": self._bound_by.get(key)})
        on.sort(key=lambda x: x["pod"])
        return {"t": None if t is None else round(float(t), 3), "node": n,
                "requested": {r: sum(x["requests"][r] for x in on) for r in resources},
                "allocatable": {r: alloc.get(r) for r in resources}, "pods": on}

    def summary(self) -> dict[str, Any] | None:
        if self.ticks == 0:
            return None
        return {"count": self.count, "ticks": self.ticks, "nodes": dict(sorted(self.nodes.items())),
                "resources": self.resources, "terminating_only": self.terminating_only,
                "episodes": self.episodes, "examples": list(self.examples)}


NAME = "overcommit_violations"
HEADLINE = "count"
CONTRACT = True


def _make():
    o = OvercommitViolations()
    o.usage = NodeUsage(o._req, o._allocatable)     # the truth's node usage, kept from pod changes
    return o


def _feed(o, st):
    o.observe_decisions(st.decisions)
    for old, new in st.pod_changes:
        o.usage.pod_changed(old, new)
    if st.nodes_changed or st.index == 0:
        o.usage.nodes_changed()
    return o.observe(st.truth.pods.values(), st.truth.nodes, st.t, over=o.usage.current(st.truth.nodes))


check, columns = truth_checker(NAME, _make, _feed, column="overcommit_nodes", none_reason="no tick")
