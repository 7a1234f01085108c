"""split_brain_writes (extension): API writes (bind, evict, status, annotation, PodGroup) that an
instance made while the Lease record said it did not lead — the fencing oracle. With
``fencing: true`` such writes are refused before they reach the API server (recorded as failed
decisions) and this stays 0; without it, a leader that lost its lease unnoticed (a pause, a
partition, a slow clock) keeps writing beside the new leader.

The lease record is the API server's own: every Lease event of the truth (holder identity
``<instance>_<suffix>``, ``renewTime`` and the duration — exact in the ``ha-testbed/lease-duration-ms``
annotation, else ``leaseDurationSeconds``). A successful, non-dry-run write by X at wall time w
(the decision's ``wall``, else run time + the header's start) is split-brain unless the latest
record renewed at or before w names X and w <= renewTime + duration. ``count`` and per instance;
the first ``examples``. Absent in active-active mode (no election) and without Lease events."""
from __future__ import annotations

import bisect
from typing import Any

from ha.experiment.checkers import Absent
from ha.experiment.checkers._fold import _events_sorted
from ha.experiment.checkers._run import mode

NAME = "split_brain_writes"
HEADLINE = None
CONTRACT = False
WRITES = ("bind", "evict", "status", "annotate", "podgroup")
DURATION_ANNOTATION = "ha-testbed/lease-duration-ms"


def _instance_of(holder: str) -> str:
    return holder.rsplit("_", 1)[0] if "_" in holder else holder


def lease_record(events: list[dict]) -> list[tuple[float, str, float]]:
    """(renewTime, holder instance or "", duration s) per Lease write, by renewTime."""
    out = []
    for e in events:
        if e.get("kind") != "Lease" or e.get("type") == "DELETED":
            continue
        obj = e.get("object") or {}
        spec = obj.get("spec") or {}
        renew = spec.get("renewTime")
        if not isinstance(renew, (int, float)):
            continue
        ms = ((obj.get("metadata") or {}).get("annotations") or {}).get(DURATION_ANNOTATION)
        try:
            dur = float(ms) / 1000.0 if ms is not None else float(spec.get("leaseDurationSeconds") or 0)
        except (TypeError, ValueError):
            dur = float(spec.get("leaseDurationSeconds") or 0)
        holder = spec.get("holderIdentity") or ""
        out.append((float(renew), _instance_of(holder) if holder else "", dur))
    out.sort(key=lambda r: r[0])
    return out


def check(h):
    if mode(h) == "active-active":
        return Absent("active-active: no leader election, every instance writes")
    record = lease_record(_events_sorted(h))
    if not record:
        return Absent("no Lease event in the history (nobody was elected)")
    renews = [r[0] for r in record]
    started = h.header.get("t0_wall")
    count: dict[str, int] = {}
    examples: list[dict[str, Any]] = []
    writes = 0
    for d in h.decisions():
        if d.get("op") not in WRITES or not d.get("ok") or d.get("dry_run"):
            continue
        w = d.get("wall")
        if not isinstance(w, (int, float)):
            if started is None or not isinstance(d.get("t"), (int, float)):
                continue
            w = float(started) + float(d["t"])
        writes += 1
        who = str(d.get("instance"))
        i = bisect.bisect_right(renews, w) - 1
        ok = i >= 0 and record[i][1] == who and w <= record[i][0] + record[i][2]
        if not ok:
            count[who] = count.get(who, 0) + 1
            if len(examples) < 10:
                holder = record[i][1] if i >= 0 else None
                examples.append({"t": d.get("t"), "instance": who, "op": d.get("op"), "pod": d.get("pod"),
                                 "lease_holder": holder,
                                 "expired_s": round(w - record[i][0] - record[i][2], 3) if i >= 0 else None})
    return {"count": sum(count.values()), "instances": dict(sorted(count.items())), "writes": writes,
            "examples": examples}
