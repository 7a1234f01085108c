"""The "Current vs Proposed" table of PR #5045's design, from results folders of
examples/seed000-current-vs-proposed.yaml run under different profiles.

One run per profile (an anecdote: one seed), a column per folder headed by its profile:

    .venv/bin/python examples/seed000_table.py results/s000-v1.14 results/s000-pr5045 results/s000-pr5045-fixed

A sweep folder (``ha-testbed sweep ... --profiles ...``): per row and profile the mean over the
seeds with its 95% bootstrap interval, and the difference of each profile to the first, paired by
seed, with its interval ("no difference detected" when it holds 0); ``--live SWEEP`` adds, beside
the headline rows, the same numbers from a live-engine sweep, and ``--real SWEEP`` (repeatable) the
real vc-scheduler cells of a sweep run with ``schedulers.implementation=volcano``, a column per
(profile, build) with its build named:

    .venv/bin/python examples/seed000_table.py --sweep results/s000-sim [--live results/s000-live] \
        [--real results/s000-real --real results/s000-pr5045-real]

Reads each run's metrics.json, timeseries.csv and decisions.jsonl; prints a markdown table and,
with --json, the numbers.
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
        p = d / "history" / "decisions.jsonl"   # a sweep cell keeps only the history's copy
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
        "repeat_pipelines": _head(s.get("repeat_pipelines"), "max"),
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


# One number per row (a sweep needs a number per run): (seed row, metric, key of measure()).
SWEEP_ROWS = [
    ("Cache task status (Pending forever → Pipelined)", "leader cache: Pipelined tasks, max", "leader_pipelined_max"),
    ("Next cycle sees the pipeline decision", "allocation_drift (pods bound off their nomination)", "allocation_drift"),
    ("", "wasted_evictions", "wasted_evictions"),
    ("", "cyclic_evictions", "cyclic_evictions"),
    ("No double booking", "overcommit_violations (node-ticks)", "overcommit_violations"),
    ("Duplicate events skipped", "repeat_pipelines (pipeline decisions per distinct pod and node, max over instances)", "repeat_pipelines"),
    ("HA coherence (Problem 4)", "standby caches: Pipelined tasks, max", "standby_pipelined_max"),
    ("", "pairwise_drift mean after the kill", "pairwise_drift_after_kill_mean"),
    ("Cache vs an up-to-date cache", "cache_divergence max", "cache_divergence_max"),
    ("Partial gang binds (S2)", "partial_gang_binds", "partial_gang_binds"),
    ("Throughput", "pods_bound_per_s", "pods_bound_per_s"),
    ("Failover", "failover_recovery_s", "failover_recovery_s"),
]
# the rows a live-engine column stands beside
HEADLINE = ("allocation_drift", "wasted_evictions", "cyclic_evictions", "overcommit_violations",
            "partial_gang_binds", "cache_divergence_max", "failover_recovery_s")


def sweep_runs(folder: Path) -> dict[str, dict[int, dict]]:
    """{profile: {seed: measure(cell)}} of a sweep folder's finished cells (its base grid: no --set)."""
    from ha.experiment.sweep import cell_done
    sweep = json.loads((folder / "sweep.json").read_text(encoding="utf-8"))
    profiles = (sweep.get("grid") or {}).get("profiles") or sorted(p.name for p in (folder / "cells").iterdir())
    out: dict[str, dict[int, dict]] = {}
    for prof in profiles:
        runs: dict[int, dict] = {}
        for cell in sorted((folder / "cells" / prof / "base").glob("seed-*")):
            if cell_done(cell):   # finished, not half-written or failed
                runs[int(cell.name.split("-", 1)[1])] = measure(cell)
        out[prof] = runs
    return out


def real_runs(folder: Path) -> dict[str, dict[int, dict]]:
    """{"<build> (<profile>)": {seed: measure(cell)}} of a sweep folder's finished cells that ran
    real vc-scheduler instances (metrics.json ``scheduler.implementation`` = volcano), whatever
    else their ``--set`` names (standby mode, the build's source)."""
    from ha.experiment.sweep import cell_done
    out: dict[str, dict[int, dict]] = {}
    for cell in sorted((folder / "cells").glob("*/*/seed-*")):
        if not cell_done(cell):
            continue
        m = json.loads((cell / "metrics.json").read_text(encoding="utf-8"))
        sch = m.get("scheduler") or {}
        if sch.get("implementation") != "volcano":
            continue
        build = str(sch.get("version") or "?")
        if build.startswith("source:"):
            build = "checkout " + build.split(":", 1)[1]
        label = f"{build} beside {cell.parent.parent.name}"
        out.setdefault(label, {})[int(cell.name.split("-", 1)[1])] = measure(cell)
    return out


def _num(v) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _fmt(v: float) -> str:
    return f"{v:.3g}" if abs(v) < 100 else f"{v:.0f}"


def sweep_table(runs: dict[str, dict[int, dict]], live: dict[str, dict[int, dict]] | None = None,
                seed: int = 0, diff: list[str] | None = None,
                real: dict[str, dict[int, dict]] | None = None) -> tuple[str, dict]:
    """The markdown table and its numbers (per key and profile: describe(); per other profile:
    the paired difference to the first)."""
    from ha.experiment.stats import NO_DIFFERENCE, describe, paired_difference
    profiles = list(runs)
    base = profiles[0]
    others = [p for p in profiles[1:] if diff is None or p in diff]
    numbers: dict = {}
    head = ["seed row", "metric"] + [f"{p} (n={len(runs[p])})" for p in profiles]
    head += [f"{p} − {base}, paired" for p in others]
    if live:
        head += [f"live {p} (n={len(live[p])})" for p in live]
    if real:
        head += [f"real {p} (n={len(real[p])})" for p in real]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def cells_of(src, key, tag):
        row, store = [], numbers.setdefault(tag, {})
        per = {p: {s: _num(m.get(key)) for s, m in src[p].items()} for p in src}
        for p in src:
            d = describe([v for v in per[p].values() if v is not None], seed=seed)
            store.setdefault(key, {})[p] = d
            row.append("–" if d["mean"] is None else
                       f"{_fmt(d['mean'])} [{_fmt(d['ci95'][0])}, {_fmt(d['ci95'][1])}]")
        return row, per

    for what, metric, key in SWEEP_ROWS:
        row, per = cells_of(runs, key, "sim")
        for p in others:
            d = paired_difference(per[base], per[p], seed=seed)
            numbers.setdefault("paired", {}).setdefault(key, {})[f"{p}-{base}"] = d
            if d["mean"] is None:
                row.append("–")
            else:
                lo, hi = d["ci95"]
                word = NO_DIFFERENCE if d["verdict"] == NO_DIFFERENCE else _fmt(d["mean"])
                row.append(f"{word} [{_fmt(lo)}, {_fmt(hi)}]")
        if live:
            if key in HEADLINE:
                lrow, _ = cells_of(live, key, "live")
                row += lrow
            else:
                row += [""] * len(live)
        if real:
            if key in HEADLINE or key == "leader_pipelined_max":
                rrow, _ = cells_of(real, key, "real")
                row += rrow
            else:
                row += [""] * len(real)
        lines.append(f"| {what} | {metric} | " + " | ".join(row) + " |")
    return "\n".join(lines), numbers


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dirs", nargs="*")
    ap.add_argument("--sweep", help="a sweep folder: means with 95%% intervals and paired differences")
    ap.add_argument("--live", help="with --sweep: a live-engine sweep folder for the headline rows")
    ap.add_argument("--real", action="append", default=[],
                    help="with --sweep: a sweep folder with real vc-scheduler cells (repeatable)")
    ap.add_argument("--diff", help="with --sweep: only these profiles' differences to the first (comma-separated)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    if a.sweep:
        real: dict[str, dict[int, dict]] = {}
        for folder in a.real:
            real.update(real_runs(Path(folder)))
        table, numbers = sweep_table(sweep_runs(Path(a.sweep)), sweep_runs(Path(a.live)) if a.live else None,
                                     diff=a.diff.split(",") if a.diff else None, real=real or None)
        print(json.dumps(numbers, indent=1, default=str) if a.json else table)
        return 0
    if not a.dirs:
        ap.error("give results folders, or --sweep SWEEP_DIR")
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
