"""pairwise_drift: per pair of instances, tasks whose (status, node) differ between their caches,
at every tick where both were sampled with synced informers (a cold standby holds no cache)."""
from __future__ import annotations

from itertools import combinations
from typing import Any, Mapping

from ha.experiment.checkers import Absent
from ha.experiment.oracles import diff_tasks, task_diff, task_entry


class PairwiseDrift:
    """pairwise_drift: per pair of instances, tasks whose (status, node) differ."""

    def __init__(self) -> None:
        self.pairs: dict[str, list[int]] = {}
        self._calls = 0
        self._diff: dict[tuple[str, str], tuple[int, set[str]]] = {}

    def observe(self, digests: Mapping[str, Mapping[str, Any]],
                changed: Mapping[str, Any] | None = None) -> dict[tuple[str, str], int]:
        """Drift of every pair (names sorted). ``changed`` (optional): per instance, the uids whose
        entry changed since its digest in the previous call (None: not known) — a pair observed
        in the previous call is then updated from those uids alone, with the same result."""
        out = {}
        for a, b in combinations(sorted(digests), 2):
            prev = self._diff.get((a, b))
            ca = changed.get(a) if changed is not None else None
            cb = changed.get(b) if changed is not None else None
            if prev is not None and prev[0] == self._calls - 1 and ca is not None and cb is not None:
                d = set(prev[1])
                ta, tb = digests[a], digests[b]
                for uid in ca | cb:
                    x, y = ta.get(uid), tb.get(uid)
                    if (x is None and y is None) or (x is not None and y is not None
                                                     and (x == y or task_entry(x) == task_entry(y))):
                        d.discard(uid)
                    else:
                        d.add(uid)
            else:
                d = diff_tasks(digests[a], digests[b])
            self._diff[(a, b)] = (self._calls, d)
            out[(a, b)] = len(d)
            self.pairs.setdefault(f"{a}|{b}", []).append(len(d))
        self._calls += 1
        return out

    def summary(self) -> dict[str, Any] | None:
        if not self.pairs:
            return None
        allv = [v for vs in self.pairs.values() for v in vs]
        return {"max": max(allv), "mean": round(sum(allv) / len(allv), 3),
                "pairs": {k: {"max": max(vs), "mean": round(sum(vs) / len(vs), 3), "samples": len(vs)}
                          for k, vs in sorted(self.pairs.items())}}


NAME = "pairwise_drift"
HEADLINE = "max"
CONTRACT = True


def _pass(h):
    if "pairwise" in h.memo:
        return h.memo["pairwise"]
    pw = PairwiseDrift()
    cols = {"pairwise_drift_max": [], "drift_to_leader": []}
    for _tk, states in h.digests():
        cached = {n: s["tasks"] for n, s in states.items() if s.get("alive") and s.get("synced", 1)}
        changed = {n: states[n].get("changed_tasks") for n in cached}
        drifts = pw.observe(cached, changed) if len(cached) >= 2 else {}
        leaders = [n for n, s in states.items() if s.get("alive") and s.get("is_leader")]
        lead = leaders[0] if len(leaders) == 1 else None
        mx, tl = {}, {}
        for name in states:
            mine = [v for (a, b), v in drifts.items() if name in (a, b)]
            if mine:
                mx[name] = max(mine)
            if lead and name != lead and name in cached and lead in cached:
                tl[name] = drifts.get(tuple(sorted((name, lead))), task_diff(cached[name], cached[lead]))
        cols["pairwise_drift_max"].append(mx)
        cols["drift_to_leader"].append(tl)
    h.memo["pairwise"] = (pw, cols)
    return pw, cols


def check(h):
    from ha.experiment.checkers._unobserved import absent_reason, with_unobserved
    s = _pass(h)[0].summary()
    return with_unobserved(h, "cache", s) if s is not None else \
        Absent(absent_reason(h, "cache", "never two instances with synced caches in one tick"))


def columns(h):
    return _pass(h)[1]
