"""session_latency_ms: per instance, vc-scheduler's own session latency (ms) from its /metrics
(``volcano_e2e_scheduling_latency_milliseconds``, one observation per session), with the
per-action latency, the preemption victims and attempts alongside; for external (real
vc-scheduler) instances, whose scrapes ``history/scrapes.jsonl`` holds.

``{instance: {"sessions", "mean", "p50", "p99" (histogram_quantile over the buckets),
"actions": {action: {"count", "mean"}}, "preemption_victims" (the largest value the gauge showed),
"preemption_attempts"}}``, summed over the instance's process lives (each life's counters start at
zero: its last scrape counts). An instance whose scrapes all failed says why (``unobserved``);
absent when no instance was scraped (model runs: the model exposes no /metrics)."""
from __future__ import annotations

from typing import Any

from ha.experiment.checkers import Absent

NAME = "session_latency_ms"
HEADLINE = "p99"
CONTRACT = False


def _add(into: dict, h: dict) -> None:
    into["count"] = into.get("count", 0) + (h.get("count") or 0)
    into["sum"] = into.get("sum", 0.0) + (h.get("sum") or 0.0)
    b = into.setdefault("buckets", {})
    for le, c in h.get("buckets") or ():
        b[le] = b.get(le, 0) + (c or 0)


def check(h):
    from ha.runtime.external.observe.metrics import histogram_quantile
    scrapes = h.scrapes()
    if not scrapes:
        return Absent("no /metrics scrapes in the history: only external vc-scheduler instances are "
                      "scraped; the model's instances record no per-session latency")
    last: dict[tuple[str, int, Any], dict] = {}      # (instance, generation, life) -> last good scrape
    failed: dict[str, str] = {}
    victims: dict[str, float] = {}
    for s in scrapes:
        name = str(s.get("instance"))
        if s.get("unobserved"):
            failed[name] = str(s["unobserved"])
            continue
        last[(name, int(s.get("generation") or 0), s.get("life"))] = s
        if s.get("pod_preemption_victims") is not None:
            victims[name] = max(victims.get(name, 0), s["pod_preemption_victims"])
    per: dict[str, dict[str, Any]] = {}
    for (name, _gen, _life), s in sorted(last.items(), key=lambda kv: (kv[0][0], kv[0][1], str(kv[0][2]))):
        acc = per.setdefault(name, {"e2e": {}, "actions": {}, "attempts": 0})
        if s.get("e2e_scheduling_latency_ms"):
            _add(acc["e2e"], s["e2e_scheduling_latency_ms"])
        for a, hist in (s.get("action_latency_ms") or {}).items():
            _add(acc["actions"].setdefault(a, {}), hist)
        acc["attempts"] += s.get("total_preemption_attempts") or 0
    out: dict[str, Any] = {}
    for name, acc in sorted(per.items()):
        e = acc["e2e"]
        n = e.get("count", 0)
        buckets = sorted(e.get("buckets", {}).items(), key=lambda kv: float("inf") if kv[0] == "+Inf" else kv[0])
        q = (lambda x: histogram_quantile(x, buckets)) if n else (lambda x: None)
        out[name] = {"sessions": n, "mean": round(e["sum"] / n, 3) if n else None,
                     "p50": _r(q(0.5)), "p99": _r(q(0.99)),
                     "actions": {a: {"count": v.get("count", 0),
                                     "mean": round(v["sum"] / v["count"], 3) if v.get("count") else None}
                                 for a, v in sorted(acc["actions"].items())},
                     "preemption_victims": victims.get(name),
                     "preemption_attempts": acc["attempts"]}
    for name, why in sorted(failed.items()):
        if name not in out:
            out[name] = {"unobserved": why}
    return out


def _r(v):
    return None if v is None else round(v, 3)
