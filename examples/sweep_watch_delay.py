"""Allocation drift (and wasted evictions, resource drift) against the pod-watch delay, per profile.

Runs one experiment file through the CLI (``ha-testbed run ... --profile P --out DIR``) once per
(profile, delay): every ``watch-delay`` entry of the file gets ``delay: {dist: fixed, value: D}``
(D = 0 removes them); then plots the summaries as PNGs and prints a table.

    .venv/bin/python examples/sweep_watch_delay.py                       # quickstart, 3 profiles
    .venv/bin/python examples/sweep_watch_delay.py --delays 0 1 3 5 --duration 15s \
        --profiles v1.14 pr5045-fixed --out results/sweep

Each run costs its duration plus ~15 s of start-up (Redis, Ray, actors), so the default (3 profiles
x 4 delays x 12 s) takes ~5 min on a 2-core machine. Results: <out>/<profile>-d<D>/ (each an
ordinary results folder; ``ha-testbed compare`` works on them), <out>/sweep.json, <out>/*.png.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
# (column, summary metric, field)
METRICS = (("allocation_drift", "allocation_drift", "count"), ("wasted_evictions", "wasted_evictions", "count"),
           ("resource_drift", "resource_drift", "max"), ("cache_divergence", "cache_divergence", "max"),
           ("cache_divergence_mean", "cache_divergence", "mean"))


def variant(base: dict, delay_s: float) -> dict:
    exp = json.loads(json.dumps(base))
    chaos = []
    for entry in exp.get("chaos") or []:
        if entry.get("fault") == "watch-delay":
            if delay_s <= 0:
                continue
            entry = {**entry, "delay": {"dist": "fixed", "value": f"{int(delay_s * 1000)}ms"}}
        chaos.append(entry)
    exp["chaos"] = chaos
    return exp


def pick(summary: dict, name: str, field: str):
    v = summary.get(name)
    if isinstance(v, dict):
        v = v.get(field)
    return v


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--experiment", default=str(HERE / "quickstart.yaml"))
    ap.add_argument("--profiles", nargs="+", default=["v1.14", "pr5045", "pr5045-fixed"])
    ap.add_argument("--delays", nargs="+", type=float, default=[0, 1, 3, 5], help="seconds")
    ap.add_argument("--duration", default="12s")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default="results/sweep-watch-delay")
    ap.add_argument("--cli", default=str(Path(sys.executable).with_name("ha-testbed")))
    ap.add_argument("--plot-only", action="store_true", help="re-plot existing <out>/sweep.json")
    ap.add_argument("--figure", help="also write one PNG with allocation drift and cache divergence side by side")
    a = ap.parse_args(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    if a.plot_only:
        rows = json.loads((out / "sweep.json").read_text())
    else:
        base = yaml.safe_load(Path(a.experiment).read_text())
        if not any(c.get("fault") == "watch-delay" for c in base.get("chaos") or []):
            raise SystemExit(f"{a.experiment}: no watch-delay entry to sweep")
        with tempfile.TemporaryDirectory() as tmp:
            for prof in a.profiles:
                for d in a.delays:
                    f = Path(tmp) / f"{prof}-d{d:g}.yaml"
                    f.write_text(yaml.safe_dump(variant(base, d), sort_keys=False))
                    run_dir = out / f"{prof}-d{d:g}"
                    cmd = [a.cli, "run", str(f), "--profile", prof, "--seed", str(a.seed),
                           "--duration", a.duration, "--out", str(run_dir)]
                    print("$", " ".join(cmd), flush=True)
                    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                    if r.returncode != 0:
                        print(r.stderr[-2000:], file=sys.stderr)
                        continue
                    summary = json.loads((run_dir / "metrics.json").read_text())["summary"]
                    rows.append({"profile": prof, "delay_s": d, "dir": str(run_dir),
                                 **{col: pick(summary, n, fld) for col, n, fld in METRICS},
                                 "pods_bound_per_s": summary.get("pods_bound_per_s")})
        (out / "sweep.json").write_text(json.dumps(rows, indent=1))
    plot(rows, out)
    if a.figure:
        figure(rows, Path(a.figure), title=Path(a.experiment).stem if not a.plot_only else "")
    cols = ["profile", "delay_s", *[c for c, _, _ in METRICS], "pods_bound_per_s"]
    print(" | ".join(cols))
    for r in rows:
        print(" | ".join(str(r.get(c)) for c in cols))
    return 0


def plot(rows: list[dict], out: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    profiles = list(dict.fromkeys(r["profile"] for r in rows))
    for name, _, _ in METRICS:
        fig, ax = plt.subplots(figsize=(6, 4))
        for prof in profiles:
            pts = sorted((r["delay_s"], r[name]) for r in rows if r["profile"] == prof and r[name] is not None)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=prof)
        ax.set_xlabel("pod watch delay (s, fixed)")
        ax.set_ylabel(name)
        ax.set_title(f"{name} vs watch delay")
        ax.grid(alpha=0.3)
        ax.legend()
        fig.tight_layout()
        fig.savefig(out / f"{name}.png", dpi=110)
        plt.close(fig)


def figure(rows: list[dict], path: Path, title: str = "") -> None:
    """allocation drift | cache divergence (max, mean dashed) against the delay, one line per profile."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    profiles = list(dict.fromkeys(r["profile"] for r in rows))
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
    for i, prof in enumerate(profiles):
        color = f"C{i}"
        mine = sorted((r for r in rows if r["profile"] == prof), key=lambda r: r["delay_s"])
        for ax, col, style, lab in ((axes[0], "allocation_drift", "-", prof),
                                    (axes[1], "cache_divergence", "-", f"{prof} max"),
                                    (axes[1], "cache_divergence_mean", "--", f"{prof} mean")):
            pts = [(r["delay_s"], r[col]) for r in mine if r.get(col) is not None]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], style, marker="o", color=color, label=lab)
    axes[0].set_ylabel("allocation_drift (pods)")
    axes[1].set_ylabel("cache_divergence (tasks)")
    for ax in axes:
        ax.set_xlabel("pod watch delay on every instance (s, fixed)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
