"""cyclic_evictions: evictions of a pod that re-creates (``<base>-r<n>``) a pod evicted before in
the run (one slot evicted, re-created, evicted again)."""
from __future__ import annotations

from typing import Any, Iterable, Mapping

from ha.experiment.checkers._fold import truth_checker
from ha.experiment.oracles import Truth, committed, slot_of_name


class CyclicEvictions:
    """cyclic_evictions: evictions of a pod that is a re-creation (``<base>-r<n>``) of a pod evicted
    before in the run (one slot evicted, re-created, evicted again). ``count`` = such evictions;
    ``slots`` and ``jobs`` = how many distinct slots / jobs cycled."""

    def __init__(self) -> None:
        self.evicted: dict[str, list[int]] = {}    # slot -> attempts evicted, in order
        self.seen_pods: set[str] = set()
        self.count = 0
        self.cycling_slots: set[str] = set()
        self.cycling_jobs: set[str] = set()

    def evict(self, pod: str, job: str | None = None, annotations: Mapping[str, str] | None = None) -> bool:
        if pod in self.seen_pods:
            return False
        self.seen_pods.add(pod)
        ns, _, name = pod.rpartition("/")
        base, attempt = slot_of_name(name, annotations)
        slot = f"{ns}/{base}"
        prev = self.evicted.setdefault(slot, [])
        cyclic = any(a < attempt for a in prev)
        prev.append(attempt)
        if cyclic:
            self.count += 1
            self.cycling_slots.add(slot)
            if job:
                self.cycling_jobs.add(job)
        return cyclic

    def observe_decisions(self, decisions: Iterable[Mapping[str, Any]], truth: Truth | None = None) -> None:
        for d in decisions:
            if committed(d) and d.get("op") == "evict":
                job, ann = None, None
                if truth is not None:
                    job = truth.job_of(d["pod"])
                    p = truth.pods.get(d["pod"])
                    ann = ((p or {}).get("metadata") or {}).get("annotations")
                self.evict(d["pod"], job, ann)

    def summary(self) -> dict[str, Any]:
        return {"count": self.count, "slots": len(self.cycling_slots), "jobs": len(self.cycling_jobs),
                "evicted_pods": len(self.seen_pods),
                "max_attempt_evicted": max((max(v) for v in self.evicted.values()), default=None)}


NAME = "cyclic_evictions"
HEADLINE = "count"
CONTRACT = True


def _feed(o, st):
    o.observe_decisions(st.decisions, st.truth)
    return o.count


check, columns = truth_checker(NAME, CyclicEvictions, _feed)
