"""allocation_drift (the drift PR #5045's description names): pods bound to a node other than the
one they were last nominated/pipelined to (by a committed decision or by status.nominatedNodeName
in the API server); count and rate per nominated pod that got bound."""
from __future__ import annotations

from typing import Any, Iterable, Mapping

from ha.experiment.checkers._fold import truth_checker
from ha.experiment.oracles import PodEvent, committed


class AllocationDrift:
    """allocation_drift (the drift PR #5045's description names): pods bound to a node other than
    the one they were last nominated/pipelined to. ``count``; ``rate`` = count / nominated pods
    that got bound."""

    def __init__(self) -> None:
        self.nominated: dict[str, str] = {}       # pod -> last nominated node (until bound)
        self.ever_nominated: set[str] = set()
        self.renominations = 0
        self.bound: dict[str, str] = {}
        self.count = 0
        self.nominated_bound = 0
        self.events: list[dict[str, Any]] = []    # the drifts, for the report

    def nominate(self, pod: str, node: str | None, t: float = 0.0) -> None:
        if not node or pod in self.bound:
            return
        prev = self.nominated.get(pod)
        if prev is not None and prev != node:
            self.renominations += 1
        self.nominated[pod] = node
        self.ever_nominated.add(pod)

    def bind(self, pod: str, node: str, t: float = 0.0) -> None:
        if pod in self.bound:
            return
        self.bound[pod] = node
        nom = self.nominated.pop(pod, None)
        if nom is None:
            return
        self.nominated_bound += 1
        if nom != node:
            self.count += 1
            self.events.append({"t": t, "pod": pod, "nominated": nom, "bound": node})

    def observe_decisions(self, decisions: Iterable[Mapping[str, Any]]) -> None:
        for d in decisions:
            if committed(d) and d.get("op") in ("pipeline", "status") and d.get("node"):
                self.nominate(d["pod"], d["node"], d.get("t", 0.0))

    def observe_events(self, events: Iterable[PodEvent]) -> None:
        for e in events:
            if e.type == "nominated":
                self.nominate(e.pod, e.node, e.t)
            elif e.type == "bound":
                self.bind(e.pod, e.node, e.t)

    def summary(self) -> dict[str, Any]:
        return {"count": self.count, "nominated_pods": len(self.ever_nominated),
                "nominated_then_bound": self.nominated_bound,
                "rate": round(self.count / self.nominated_bound, 4) if self.nominated_bound else None,
                "renominations": self.renominations, "examples": self.events[:20]}


NAME = "allocation_drift"
HEADLINE = "count"
CONTRACT = True


def _feed(o, st):
    o.observe_decisions(st.decisions)
    o.observe_events(st.events)
    return o.count


check, columns = truth_checker(NAME, AllocationDrift, _feed)
