"""Seed 000's "Current vs Proposed" table, one measured number per row, from results folders of
examples/seed000-current-vs-proposed.yaml run under different profiles (same seed).

    .venv/bin/python examples/seed000_table.py results/s000-v1.14 results/s000-pr5045 results/s000-pr5045-fixed

Reads each folder's metrics.json, timeseries.csv and decisions.jsonl; prints a markdown table
(seed row | metric | one column per folder, headed by its profile) and, with --json, the numbers.
"""
from __future__ import annotations

import argparse
import csv
import json
import sys
from collections import Counter
from pathlib import Path


def _rows(d: Path) -> list[dict]:
    with open(d / "timeseries.csv", newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _decisions(d: Path) -> list[dict]:
    p = d / "decisions.jsonl"
    if not p.exists():
        return []
    return [json.loads(line) for line in p.read_text(encoding="utf-8").splitlines() if line.strip()]


def _i(v) -> int:
    try:
        return int(float(v))
    except (TypeError, ValueError):
        return 0


def _head(v, k="max"):
    return v.get(k) if isinstance(v, dict) else v


def measure(d: Path) -> dict:
    m = json.loads((d / "metrics.json").read_text(encoding="utf-8"))
    s = m.get("summary") or {}
    rows = _rows(d)
    decs = _decisions(d)
    leader_rows = [r for r in rows if r.get("is_leader") == "1" and r.get("alive") == "1"]
    standby_rows = [r for r in rows if r.get("is_leader") == "0" and r.get("alive") == "1"]
    pipes = [x for x in decs if x.get("op") == "pipeline" and x.get("ok") and not x.get("dry_run")]
    per_pod = Counter((x.get("pod"), x.get("node")) for x in pipes)
    nnn_writes = [x for x in decs if x.get("op") == "status" and x.get("ok") and x.get("node")]
    kill_t = min((f.get("at_s") or 0.0 for f in m.get("failovers") or []), default=None)
    after = [r for r in rows if kill_t is not None and float(r["t"]) >= kill_t and r.get("alive") == "1"
             and r.get("pairwise_drift_max") not in ("", None)]
    last = max((float(r["t"]) for r in rows), default=0.0)
    final_leader = [r for r in leader_rows if float(r["t"]) == max(float(x["t"]) for x in leader_rows)] if leader_rows else []
    return {
        "profile": (m.get("experiment") or {}).get("profile"),
        "leader_pipelined_max": max((_i(r["tasks_pipelined"]) for r in leader_rows), default=None),
        "leader_pipelined_mean": round(sum(_i(r["tasks_pipelined"]) for r in leader_rows) / len(leader_rows), 2) if leader_rows else None,
        "standby_pipelined_max": max((_i(r["tasks_pipelined"]) for r in standby_rows), default=None),
        "pipeline_ops": len(pipes),
        "pipelined_pairs": len(per_pod),
        "repipelines_per_pair": round(len(pipes) / len(per_pod), 2) if per_pod else None,
        "nnn_status_writes": len(nnn_writes),
        "allocation_drift": _head(s.get("allocation_drift"), "count"),
        "wasted_evictions": _head(s.get("wasted_evictions"), "count"),
        "cyclic_evictions": _head(s.get("cyclic_evictions"), "count"),
        "evictions": (m.get("totals") or {}).get("evictions"),
        "binds": (m.get("totals") or {}).get("binds"),
        "cache_divergence_max": _head(s.get("cache_divergence")),
        "cache_divergence_mean": _head(s.get("cache_divergence"), "mean"),
        "pairwise_drift_max": _head(s.get("pairwise_drift")),
        "pairwise_drift_after_kill_mean": round(sum(_i(r["pairwise_drift_max"]) for r in after) / len(after), 2) if after else None,
        "failover_recovery_s": s.get("failover_recovery_s"),
        "partial_gang_binds": _head(s.get("partial_gang_binds"), "count"),
        "pods_bound_per_s": s.get("pods_bound_per_s"),
        "final_leader_pending": _i(final_leader[0]["tasks_pending"]) if final_leader else None,
        "overcommit_violations": _head(s.get("overcommit_violations"), "count"),
        "run_s": last,
    }


ROWS = [
    ("Cache task status (Pending forever → Pipelined)", "leader cache: Pipelined tasks, max / mean per tick",
     lambda x: f"{x['leader_pipelined_max']} / {x['leader_pipelined_mean']}"),
    ("Next cycle sees the pipeline decision (reservation survives)", "wasted_evictions / allocation_drift / cyclic_evictions",
     lambda x: f"{x['wasted_evictions']} / {x['allocation_drift']} / {x['cyclic_evictions']}"),
    ("Cache node resource accounting (no double booking)", "overcommit_violations; evictions / binds",
     lambda x: f"{x['overcommit_violations']}; {x['evictions']} / {x['binds']}"),
    ("NominatedNodeName set (eviction cases only → every pipeline)", "status writes carrying a nominatedNodeName",
     lambda x: f"{x['nnn_status_writes']}"),
    ("Duplicate events (re-pipelined every session → skipped)", "pipeline decisions / distinct (pod,node) = repeats",
     lambda x: f"{x['pipeline_ops']} / {x['pipelined_pairs']} = {x['repipelines_per_pair']}"),
    ("HA coherence (Problem 4: standbys rebuild Pipelined)", "standby caches: Pipelined tasks max; pairwise_drift max / mean after the kill",
     lambda x: f"{x['standby_pipelined_max']}; {x['pairwise_drift_max']} / {x['pairwise_drift_after_kill_mean']}"),
    ("Cache vs an up-to-date cache of the same profile", "cache_divergence max / mean",
     lambda x: f"{x['cache_divergence_max']} / {x['cache_divergence_mean']}"),
    ("Partial gang binds (PR as coded commits pipelined jobs)", "partial_gang_binds",
     lambda x: f"{x['partial_gang_binds']}"),
    ("Self-competition stall (PR as coded, Problem 2)", "pods_bound_per_s; leader's pending tasks at the end",
     lambda x: f"{x['pods_bound_per_s']}; {x['final_leader_pending']}"),
    ("Failover", "failover_recovery_s",
     lambda x: f"{x['failover_recovery_s']}"),
]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    ms = [measure(Path(d)) for d in a.dirs]
    if a.json:
        print(json.dumps(ms, indent=1))
        return 0
    print("| seed row | metric | " + " | ".join(x["profile"] or "?" for x in ms) + " |")
    print("|---|---|" + "---|" * len(ms))
    for what, metric, f in ROWS:
        print(f"| {what} | {metric} | " + " | ".join(f(x) for x in ms) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
