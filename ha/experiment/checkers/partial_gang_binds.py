"""partial_gang_binds: binds committed for a job in one session while fewer than minMember of its
tasks were placed."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from ha.experiment.checkers._fold import truth_checker
from ha.experiment.oracles import Truth, committed, session_key


@dataclass
class _Group:
    """A (session, job) group already judged, kept so that later binds of it can join."""
    pods: set[str]                 # the pods the group bound
    placed_before: int             # the job's pods placed before it, when it was first judged
    min_member: int
    counted: bool                  # judged a partial bind
    example: dict[str, Any] | None
    tick: int                      # the tick it was first judged in


class PartialGangBinds:
    """partial_gang_binds: binds committed for a job in one session while fewer than minMember of
    its tasks were placed: (pods of the job already bound in the truth, other than these) + (these
    binds) < minMember. Counted per (session, job) group; ``binds`` counts the pods bound so.
    A group whose job is not yet known to the truth waits (up to ``patience`` ticks).

    A session's binds may reach the history over more than one tick: a real vc-scheduler sends
    them from its bind goroutines, and a tick can fall between the first bind of a gang and the
    rest (the model records a session's binds together). More binds of a (session, job) group in a
    later tick join the group, which is judged again with the placed count it was first judged
    against; a group that the later binds complete is no longer counted. Groups are kept for
    ``rejoin_ticks`` ticks."""

    def __init__(self, patience: int = 20, rejoin_ticks: int = 10) -> None:
        self.patience = patience
        self.rejoin_ticks = rejoin_ticks
        self._tick = 0
        self._recent: dict[tuple, _Group] = {}        # (session key, job) -> its group
        self._pending: list[tuple[tuple, list[str], int]] = []
        self._bound_by_decision: dict[str, set[str]] = {}
        self.groups = 0
        self.count = 0
        self.binds = 0
        self.unknown_job = 0
        self.examples: list[dict[str, Any]] = []

    def observe(self, decisions: Iterable[Mapping[str, Any]], truth: Truth, generation: int = 0) -> int:
        self._tick += 1
        if self._recent:
            for k in [k for k, g in self._recent.items() if self._tick - g.tick > self.rejoin_ticks]:
                del self._recent[k]
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
                g = self._recent.get((key, j))
                if g is not None:
                    self._rejoin(g, set(ps), j)
                    continue
                self.groups += 1
                mine = set(ps)
                alive_prev = {q for q in self._bound_by_decision.get(j, set()) if q in truth.pods}
                prior = (truth.occupying(j) | alive_prev) - mine
                mm = truth.min_member(j) or 0
                self._bound_by_decision.setdefault(j, set()).update(mine)
                example = None
                counted = len(prior) + len(mine) < mm
                if counted:
                    self.count += 1
                    self.binds += len(mine)
                    new += 1
                    if len(self.examples) < 20:
                        example = {"session": list(key), "job": j, "bound": sorted(mine),
                                   "already_placed": len(prior), "min_member": mm}
                        self.examples.append(example)
                self._recent[(key, j)] = _Group(mine, len(prior), mm, counted, example, self._tick)
        return new

    def _rejoin(self, g: _Group, pods: set[str], job: str) -> None:
        """Later binds of a group judged in an earlier tick: judge the whole group again."""
        more = pods - g.pods
        if not more:
            return
        g.pods |= more
        self._bound_by_decision.setdefault(job, set()).update(more)
        if not g.counted:
            return
        if g.placed_before + len(g.pods) < g.min_member:
            self.binds += len(more)
            if g.example is not None:
                g.example["bound"] = sorted(g.pods)
            return
        # the group's later binds complete the gang: it was not a partial bind after all
        self.count -= 1
        self.binds -= len(g.pods) - len(more)
        g.counted = False
        if g.example is not None:
            self.examples.remove(g.example)
            g.example = None

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
