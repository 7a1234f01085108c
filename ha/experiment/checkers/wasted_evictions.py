"""wasted_evictions: evictions whose preemptor did not end on the freed node (classified per
eviction group by ``WastedEvictions``; unresolved groups are judged at the run's end)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from ha.experiment.checkers._fold import truth_checker
from ha.experiment.oracles import PodEvent, committed, session_key


@dataclass
class _EvictionGroup:
    session: tuple
    node: str
    t: float
    victims: list[str]
    preemptors: set[str]


class WastedEvictions:
    """wasted_evictions: evictions whose preemptor did not end on the freed node. The preemptor of
    an eviction on node N in session S is a pod pipelined/nominated onto N in the same session S by
    the same instance. Per eviction group (S, N):

    * a preemptor bound on N → not wasted;
    * every preemptor bound elsewhere or deleted unbound → wasted;
    * otherwise, at the end of the run: a preemptor still unbound while another pod was bound on N
      after the eviction → wasted (the freed node went to a competitor, BR1); else unresolved.

    ``count`` counts victims (evicted pods) of wasted groups."""

    def __init__(self) -> None:
        self._evictions: dict[tuple, dict[str, list]] = {}   # session -> node -> [(victim, t)]
        self._nominations: dict[tuple, dict[str, set[str]]] = {}  # session -> node -> pods
        self.bound: dict[str, tuple[str, float]] = {}
        self.deleted: set[str] = set()
        self.node_binds: dict[str, list[tuple[float, str]]] = {}
        self.evicted_pods: set[str] = set()

    def observe_decisions(self, decisions: Iterable[Mapping[str, Any]], generation: int = 0) -> None:
        for d in decisions:
            if not committed(d):
                continue
            key = session_key(d, generation)
            op = d.get("op")
            if op == "evict" and d.get("node"):
                if d["pod"] in self.evicted_pods:
                    continue   # a second instance evicting the same pod: one eviction
                self.evicted_pods.add(d["pod"])
                self._evictions.setdefault(key, {}).setdefault(d["node"], []).append((d["pod"], d.get("t", 0.0)))
            elif op in ("pipeline", "status") and d.get("node"):
                self._nominations.setdefault(key, {}).setdefault(d["node"], set()).add(d["pod"])

    def observe_events(self, events: Iterable[PodEvent]) -> None:
        for e in events:
            if e.type == "bound" and e.pod not in self.bound:
                self.bound[e.pod] = (e.node, e.t)
                self.node_binds.setdefault(e.node, []).append((e.t, e.pod))
            elif e.type == "deleted":
                self.deleted.add(e.pod)

    def groups(self) -> list[_EvictionGroup]:
        out = []
        for s, by_node in self._evictions.items():
            for node, vs in by_node.items():
                pre = set(self._nominations.get(s, {}).get(node, set()))
                out.append(_EvictionGroup(s, node, min(t for _, t in vs), [v for v, _ in vs], pre))
        return out

    def classify(self, g: _EvictionGroup, final: bool) -> str:
        if not g.preemptors:
            return "no_preemptor"
        places = [self.bound.get(p) for p in g.preemptors]
        if any(pl is not None and pl[0] == g.node for pl in places):
            return "used"
        unresolved = [p for p, pl in zip(g.preemptors, places) if pl is None and p not in self.deleted]
        if not unresolved:
            return "wasted"
        if final:
            taken = [p for t, p in self.node_binds.get(g.node, []) if t >= g.t and p not in g.preemptors]
            if taken:
                return "wasted"
        return "unresolved"

    def summary(self, final: bool = True) -> dict[str, Any]:
        counts = {"used": 0, "wasted": 0, "unresolved": 0, "no_preemptor": 0}
        examples = []
        for g in self.groups():
            c = self.classify(g, final)
            counts[c] += len(g.victims)
            if c == "wasted" and len(examples) < 20:
                examples.append({"node": g.node, "victims": g.victims, "preemptors": sorted(g.preemptors),
                                 "preemptors_bound": {p: (self.bound.get(p) or (None,))[0]
                                                      for p in sorted(g.preemptors)}})
        total = sum(counts.values())
        return {"count": counts["wasted"], "evictions": total, "with_preemptor": total - counts["no_preemptor"],
                "used": counts["used"], "unresolved": counts["unresolved"],
                "no_preemptor": counts["no_preemptor"], "examples": examples}


NAME = "wasted_evictions"
HEADLINE = "count"
CONTRACT = True


def _feed(o, st):
    o.observe_decisions(st.decisions)
    o.observe_events(st.events)
    return o.summary(final=False)["count"]


check, columns = truth_checker(NAME, WastedEvictions, _feed, summary=lambda o: o.summary(final=True))
