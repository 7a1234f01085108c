"""Run facts the checkers share (not a checker): the experiment from the header, counter totals
across each instance's generations, the chaos windows from faults.jsonl."""
from __future__ import annotations

from typing import Any

__all__ = ["experiment", "mode", "counter_totals", "counters_seen", "seconds", "last_fault_end",
           "fault_windows", "is_windowed"]


def experiment(h) -> dict[str, Any]:
    e = h.header.get("experiment")
    return e if isinstance(e, dict) else {}


def mode(h) -> str:
    return str((experiment(h).get("schedulers") or {}).get("mode") or "leader-elected")


def seconds(v: Any, default: float | None = None) -> float | None:
    from apimachinery.units import parse_duration
    if v is None:
        return default
    try:
        return float(parse_duration(v))
    except (ValueError, TypeError):
        return default


def _last_per_generation(h) -> dict[str, dict[int, dict[str, int]]]:
    memo = h.memo
    if "counters" in memo:
        return memo["counters"]
    out: dict[str, dict[int, dict[str, int]]] = {}
    for tk in h.ticks():
        for name, rec in tk["instances"].items():
            c = rec.get("counters")
            if rec.get("alive") and c:
                out.setdefault(name, {})[int(rec.get("generation") or 0)] = c
    # final.json's per-instance counters are the last word on the generation they belong to
    from ha.experiment.history import COUNTERS
    for name, rec in sorted(((h.final or {}).get("instances") or {}).items()):
        if not isinstance(rec, dict):
            continue
        c = rec.get("counters")
        if not isinstance(c, dict):   # the instance's final stats() as they are
            c = {k: rec[k] for k in COUNTERS if isinstance(rec.get(k), int) and not isinstance(rec.get(k), bool)}
        if c:
            out.setdefault(name, {})[int(rec.get("generation") or 0)] = c
    memo["counters"] = out
    return out


def counters_seen(h) -> bool:
    return any(_last_per_generation(h).values())


def counter_totals(h, key: str) -> dict[str, int]:
    """{instance: Σ over its generations of the last recorded value of ``key``}, sorted."""
    return {n: sum(int(c.get(key) or 0) for c in gens.values())
            for n, gens in sorted(_last_per_generation(h).items())}


def is_windowed(fault: str) -> bool:
    """Whether a fault has a start and an end (chaos' own knowledge: a registry entry's
    ``windowed`` attribute where the chaos package has one, else chaos.faults.WINDOWED)."""
    import chaos.faults as cf
    reg = getattr(cf, "REGISTRY", None) or getattr(cf, "FAULTS", None)
    entry = reg.get(fault) if isinstance(reg, dict) else None
    w = getattr(entry, "windowed", None)
    if isinstance(w, bool):
        return w
    return fault in cf.WINDOWED


def fault_windows(h) -> list[dict[str, Any]]:
    """Per applied chaos entry (faults.jsonl, by index): ``{"index", "fault", "label", "start",
    "end"}`` with ``end`` None for a point fault (or a windowed one never ended), sorted by start."""
    by: dict[int, list[dict]] = {}
    for r in h.faults():
        if r.get("index") is not None:
            by.setdefault(int(r["index"]), []).append(r)
    out = []
    for i in sorted(by):
        rs = by[i]
        first = next((r for r in rs if r.get("action") in ("start", "fire")), None)
        if first is None or first.get("status") in ("skipped", "not-reached", "failed"):
            continue
        fault = str(first.get("fault"))
        targets = first.get("targets") or []
        label = f"{fault}→{','.join(targets) if targets else ''}"
        end = None
        if is_windowed(fault):
            ends = [r for r in rs if r.get("action") in ("end", "restart")]
            if ends:
                end = float(ends[-1]["t"])
        out.append({"index": i, "fault": fault, "label": label, "start": float(first["t"]), "end": end})
    return sorted(out, key=lambda w: (w["start"], w["index"]))


def last_fault_end(h) -> float | None:
    ws = fault_windows(h)
    if not ws:
        return None
    return max(w["end"] if w["end"] is not None else w["start"] for w in ws)
