"""partial_gang_binds: binds committed for a job in one session while fewer than minMember of its
tasks were placed."""
from __future__ import annotations

from typing import Any, Iterable, Mapping

from ha.experiment.checkers._fold import truth_checker
from ha.experiment.oracles import Truth, committed, session_key


class PartialGangBinds:
    """partial_gang_binds: binds committed for a job in one session while fewer than minMember of
    its tasks were placed: (pods of the job already bound in the truth, other than these) + (these
    binds) < minMember. Counted per (session, job) group; ``binds`` counts the pods bound so.
    A group whose job is not yet known to the truth waits (up to ``patience`` ticks)."""

    def __init__(self, patience: int = 20) -> None:
        self.patience = patience
        self._pending: list[tuple[tuple, list[str], int]] = []
        self._bound_by_decision: dict[str, set[str]] = {}
        self.groups = 0
        self.count = 0
        self.binds = 0
        self.unknown_job = 0
        self.examples: list[dict[str, Any]] = []

    def observe(self, decisions: Iterable[Mapping[str, Any]], truth: Truth, generation: int = 0) -> int:
        by: dict[tuple, list[str]] = {}
        for d in decisions:
            if committed(d) and d.get("op") == "bind":
                by.setdefault(session_key(d, generation), []).append(d["pod"])
        work = self._pending + [(k, pods, 0) for k, pods in by.items()]
        self._pending = []
        new = 0
        for key, pods, age in work:
            jobs: dict[str, list[str]] = {}
            missing = []
            for p in pods:
                j = truth.job_of(p)
                if j is None or truth.min_member(j) is None:
                    missing.append(p)
                else:
                    jobs.setdefault(j, []).append(p)
            if missing:
                if age < self.patience:
                    self._pending.append((key, missing, age + 1))
                else:
                    self.unknown_job += len(missing)
            for j, ps in jobs.items():
                self.groups += 1
                mine = set(ps)
                alive_prev = {q for q in self._bound_by_decision.get(j, set()) if q in truth.pods}
                prior = (truth.occupying(j) | alive_prev) - mine
                mm = truth.min_member(j) or 0
                self._bound_by_decision.setdefault(j, set()).update(mine)
                if len(prior) + len(mine) < mm:
                    self.count += 1
                    self.binds += len(mine)
                    new += 1
                    if len(self.examples) < 20:
                        self.examples.append({"session": list(key), "job": j, "bound": sorted(mine),
                                              "already_placed": len(prior), "min_member": mm})
        return new

    def summary(self) -> dict[str, Any]:
        return {"count": self.count, "binds": self.binds, "groups": self.groups,
                "unknown_job": self.unknown_job, "examples": self.examples}


NAME = "partial_gang_binds"
HEADLINE = "count"
CONTRACT = True


def _feed(o, st):
    o.observe(st.decisions, st.truth)
    return o.count


check, columns = truth_checker(NAME, PartialGangBinds, _feed)
