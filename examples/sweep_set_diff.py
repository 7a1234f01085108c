"""The effect of one ``--set`` key of a sweep, per profile: each value's mean with its 95% interval
and the difference between the two values paired by seed, with its interval.
``ha-testbed sweep`` pairs profiles within one set value; this pairs set values within one profile.

    .venv/bin/python examples/sweep_set_diff.py /work/results/timing-standby [METRIC ...]

The sweep must have one ``--set`` key with two values: the difference is the second value minus the
first (``--set KEY=OLD,NEW``: new - old). A sweep of several keys compares two of its combinations,
named by their folder under ``cells/<profile>/`` (``--pair A B``: B - A), e.g. both gang-aware flags
off against both on:

    .venv/bin/python examples/sweep_set_diff.py results/gang-ha --pair \
        'scheduler_conf.action_arguments.preempt.gangAwareEnable=false+scheduler_conf.action_arguments.reclaim.gangAwareEnable=false' \
        'scheduler_conf.action_arguments.preempt.gangAwareEnable=true+scheduler_conf.action_arguments.reclaim.gangAwareEnable=true'
 Prints a markdown table; every number comes from
``ha.experiment.stats`` with the sweep's own bootstrap settings, over the cells' headlines.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ha.experiment import stats
from ha.experiment.sweep_report import _ci, cell_values, fmt, read_sweep

DEFAULT_METRICS = ("allocation_drift", "wasted_evictions", "cyclic_evictions", "partial_gang_binds",
                   "repeat_pipelines", "bind_conflicts", "stale_nominations", "cache_divergence",
                   "pairwise_drift", "failover_recovery_s", "fatal_cache_errors", "leader_changes",
                   "pods_bound_per_s")


def set_differences(folder: Path, metrics: list[str],
                    pair: tuple[str, str] | None = None) -> tuple[str, list[str], list[dict]]:
    doc = read_sweep(folder)
    sets = doc["grid"]["sets"]
    if pair is not None:
        key, values = "set", list(pair)
        labels = {c.get("set_label") for c in doc["cells"]}
        missing = [v for v in values if v not in labels]
        if missing:
            raise SystemExit(f"{folder}: no combination named {missing[0]!r}; the sweep has {sorted(labels)}")
    elif len(sets) != 1 or len(sets[0]["values"]) != 2:
        raise SystemExit(f"{folder}: needs a sweep of one --set key with two values (or --pair A B), got {sets}")
    else:
        key, values = sets[0]["key"], [str(v) for v in sets[0]["values"]]
    boot = doc["bootstrap"]
    by: dict[tuple[str, str, str], dict[int, float]] = {}     # (metric, profile, value) -> seed -> v
    for c in doc["cells"]:
        if c.get("status") != "ok":
            continue
        value = str(c["set_label"]) if pair is not None else str(c["set"][key])
        if value not in values:
            continue
        for m, v in cell_values(folder / c["path"]).items():
            by.setdefault((m, c["profile"], value), {})[int(c["seed"])] = v
    rows = []
    for m in metrics:
        for p in doc["grid"]["profiles"]:
            old, new = (by.get((m, p, v), {}) for v in values)
            if not old and not new:
                continue
            row = {"metric": m, "profile": p}
            for v, per in zip(values, (old, new)):
                row[v] = stats.describe([per[s] for s in sorted(per)], resamples=boot["resamples"],
                                        seed=stats.derive_seed(boot["seed"], m, key, v, p))
            row["difference"] = stats.paired_difference(old, new, resamples=boot["resamples"],
                                                        seed=stats.derive_seed(boot["seed"], m, key, p))
            rows.append(row)
    return key, values, rows


def _mean(d: dict) -> str:
    return "—" if not d["n"] else f"{fmt(d['mean'])} {_ci(d['ci95'])}"


def markdown(key: str, values: list[str], rows: list[dict]) -> str:
    out = [f"| metric | profile | {key}={values[0]} | {key}={values[1]} | {values[1]} − {values[0]} (paired) |",
           "|---|---|---|---|---|"]
    for r in rows:
        d = r["difference"]
        if not d["n"]:
            diff = "—"
        elif d["verdict"] == stats.NO_DIFFERENCE:
            diff = f"{stats.NO_DIFFERENCE} {_ci(d['ci95'])}"
        else:
            diff = f"{'+' if d['mean'] > 0 else ''}{fmt(d['mean'])} {_ci(d['ci95'])}"
        out.append(f"| {r['metric']} | {r['profile']} | {_mean(r[values[0]])} | {_mean(r[values[1]])} | "
                   f"{diff} (n={d['n']}) |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sweep", type=Path)
    ap.add_argument("metrics", nargs="*", default=list(DEFAULT_METRICS))
    ap.add_argument("--pair", nargs=2, metavar=("A", "B"), help="two combinations of a several-key sweep (B - A)")
    a = ap.parse_args(argv)
    print(markdown(*set_differences(a.sweep, a.metrics, tuple(a.pair) if a.pair else None)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
