"""A sweep folder's statistics and views: ``sweep.json``, ``summary.md`` and ``plots/`` (a renderer
over the cells' ``metrics.json``; every number comes from :mod:`ha.experiment.stats`).

``sweep.json``::

    {"version": 1, "grid": {experiment, seeds, profiles, sets: [{key, values}], engine, cells},
     "experiment_data": {the experiment file as written},
     "bootstrap": {"method": "percentile", "statistic": "mean", "resamples", "level", "seed"},
     "cells": [{profile, seed, set, set_label, path, status, error, wall_s, node_id, host, pid}],
     "metrics": {metric: {set_label: {"set": {key: value},
                                      "profiles": {profile: {n, mean, median, ci95, seeds}},
                                      "differences": [{a, b, n, mean, median, ci95, verdict, seeds}]}}}}

A metric's value per cell is its headline (``checkers.headline``: the one number a table shows, as its checker declares it);
booleans and non-finite values are left out. A difference is ``b - a`` over the seeds where both
profiles have the metric (paired by seed), for every pair of profiles in ``--profiles`` order
(``a`` before ``b``). Each group's bootstrap seed is derived from the recorded seed and the group's
names (``stats.derive_seed``), so the same cells give the same sweep.json statistics.
"""
from __future__ import annotations

import itertools
import json
import logging
import math
import os
from pathlib import Path
from typing import Any

from ha.errors import BadInput
from ha.experiment import stats

__all__ = ["write_grid", "write_sweep", "aggregate", "cell_values", "difference_sentence", "summary_markdown",
           "print_ci_tables", "read_sweep", "is_sweep_dir", "fmt"]

log = logging.getLogger(__name__)

SWEEP_FILE = "sweep.json"
VERSION = 1


def is_sweep_dir(path: str | Path) -> bool:
    return (Path(path) / SWEEP_FILE).is_file()


def _write_json(path: Path, doc: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2, sort_keys=False, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def read_sweep(path: str | Path) -> dict[str, Any]:
    p = Path(path) / SWEEP_FILE
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BadInput(f"{Path(path)}: not a sweep folder (no sweep.json)") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise BadInput(f"{p}: not valid JSON: {e}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("grid"), dict) or not isinstance(doc.get("cells"), list):
        raise BadInput(f"{p}: expected an object with 'grid' and 'cells'")
    return doc


def write_grid(out: Path, grid, engine: str) -> None:
    """Before any cell runs: the grid and the experiment as written (a later ``analyze`` needs no
    original file). An existing sweep.json keeps its statistics until they are rewritten."""
    p = out / SWEEP_FILE
    doc: dict[str, Any] = {}
    if p.is_file():
        try:
            doc = json.loads(p.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError):
            doc = {}
    doc.update({"version": VERSION, "grid": grid.to_dict() | {"engine": engine},
                "experiment_data": grid.data})
    doc.setdefault("cells", [c.to_dict() | {"status": "not run"} for c in grid.cells])
    _write_json(p, doc)


# ----------------------------------------------------------------------------------- the numbers

def cell_values(folder: Path) -> dict[str, float]:
    """{metric: headline number} of one cell (numeric headlines only)."""
    from ha.experiment.checkers import headline
    try:
        doc = json.loads((folder / "metrics.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return {}
    out: dict[str, float] = {}
    for m, v in sorted((doc.get("summary") or {}).items()):
        h = headline(m, v)
        if isinstance(h, bool) or not isinstance(h, (int, float)) or not math.isfinite(float(h)):
            continue
        out[m] = float(h) if isinstance(h, float) else int(h)
    return out


def aggregate(cells: list[dict[str, Any]], values: dict[str, dict[str, float]], profiles: list[str],
              set_labels: list[tuple[str, dict]], *, seed: int = 0,
              resamples: int = stats.RESAMPLES) -> dict[str, Any]:
    """The ``metrics`` part of sweep.json from the ok cells' values (``values``: path → {metric: v})."""
    by: dict[tuple[str, str, str], dict[int, float]] = {}     # (metric, set_label, profile) -> seed -> v
    for c in cells:
        if c.get("status") != "ok":
            continue
        for m, v in (values.get(c["path"]) or {}).items():
            by.setdefault((m, c["set_label"], c["profile"]), {})[int(c["seed"])] = v
    metrics = sorted({k[0] for k in by})
    out: dict[str, Any] = {}
    for m in metrics:
        groups: dict[str, Any] = {}
        for label, assign in set_labels:
            per = {p: by.get((m, label, p), {}) for p in profiles}
            if not any(per.values()):
                continue
            profs = {}
            for p in profiles:
                seeds = sorted(per[p])
                d = stats.describe([per[p][s] for s in seeds], seed=stats.derive_seed(seed, m, label, p),
                                   resamples=resamples)
                profs[p] = d | {"seeds": seeds}
            diffs = []
            for a, b in itertools.combinations(profiles, 2):
                d = stats.paired_difference(per[a], per[b], seed=stats.derive_seed(seed, m, label, a, b),
                                            resamples=resamples)
                diffs.append({"a": a, "b": b} | d)
            groups[label] = {"set": assign, "profiles": profs, "differences": diffs}
        out[m] = groups
    return out


def write_sweep(out: Path, grid: dict[str, Any], cells: list[dict[str, Any]], *, bootstrap_seed: int = 0,
                resamples: int | None = None, plots: bool = True) -> dict[str, Any]:
    """Statistics over the cells → sweep.json, summary.md, plots/. Returns the document."""
    resamples = stats.RESAMPLES if resamples is None else int(resamples)
    profiles = list(grid["profiles"])
    combos = _combos(grid)
    from ha.experiment.sweep_grid import set_label
    labels = [(set_label(c), c) for c in combos]
    values = {c["path"]: cell_values(out / c["path"]) for c in cells if c.get("status") == "ok"}
    doc: dict[str, Any] = {}
    p = out / SWEEP_FILE
    if p.is_file():
        try:
            doc = json.loads(p.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError):
            doc = {}
    doc.update({"version": VERSION, "grid": grid,
                "bootstrap": {"method": "percentile", "statistic": "mean", "resamples": resamples,
                              "level": stats.LEVEL, "seed": bootstrap_seed},
                "cells": cells,
                "metrics": aggregate(cells, values, profiles, labels, seed=bootstrap_seed, resamples=resamples)})
    doc.setdefault("experiment_data", None)
    _write_json(p, doc)
    (out / "summary.md").write_text(summary_markdown(doc), encoding="utf-8")
    if plots:
        try:
            write_plots(out, doc)
        except Exception as e:  # noqa: BLE001 — a plot must not lose the statistics
            log.warning("sweep plots: %s", e)
    return doc


def _combos(grid: dict[str, Any]) -> list[dict[str, str]]:
    sets = grid.get("sets") or []
    keys = [s["key"] for s in sets]
    return [dict(zip(keys, vals)) for vals in itertools.product(*(s["values"] for s in sets))]


# ----------------------------------------------------------------------------------- the words

def fmt(v: Any) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        if v == int(v) and abs(v) < 1e9:
            return str(int(v))
        return f"{v:.0f}" if abs(v) >= 1000 else f"{v:.3g}"
    return str(v)


def _ci(ci) -> str:
    return "[—]" if ci is None else f"[{fmt(ci[0])}, {fmt(ci[1])}]"


def difference_sentence(metric: str, d: dict[str, Any]) -> str:
    """One paired difference in words: "B reduces M by X [lo, hi] per run vs A (n=N)", or
    "A vs B: no difference detected [lo, hi] (n=N)" when the interval holds 0."""
    a, b, n, ci = d["a"], d["b"], d["n"], d["ci95"]
    if n == 0 or ci is None:
        return f"{a} vs {b}: no seed has {metric} under both"
    if d["verdict"] == stats.NO_DIFFERENCE:
        return f"{a} vs {b}: {stats.NO_DIFFERENCE} {_ci(ci)} (n={n})"
    if d["verdict"] == "decrease":
        return f"{b} reduces {metric} by {fmt(-d['mean'])} {_ci((-ci[1], -ci[0]))} per run vs {a} (n={n})"
    return f"{b} increases {metric} by {fmt(d['mean'])} {_ci(ci)} per run vs {a} (n={n})"


def _cell_text(s: dict[str, Any] | None) -> str:
    if not s or not s.get("n"):
        return "—"
    return f"{fmt(s['mean'])} {_ci(s['ci95'])} (n={s['n']})"


def summary_markdown(doc: dict[str, Any]) -> str:
    g, b = doc["grid"], doc["bootstrap"]
    cells = doc["cells"]
    ok = sum(1 for c in cells if c.get("status") == "ok")
    failed = [c for c in cells if c.get("status") not in ("ok", "not run")]
    notrun = sum(1 for c in cells if c.get("status") == "not run")
    seeds = g.get("seeds") or []
    lines = [f"# Sweep of {g.get('experiment')}", "",
             f"Engine `{g.get('engine')}`; profiles {', '.join(g['profiles'])}; {len(seeds)} seeds "
             f"({_seed_text(seeds)})" + ("; " + "; ".join(f"`{s['key']}` = {', '.join(s['values'])}"
                                                        for s in g.get("sets") or []) if g.get("sets") else "")
             + f". Cells: {len(cells)} ({ok} ok, {len(failed)} failed" + (f", {notrun} not run" if notrun else "")
             + ").", "",
             f"Each number is the mean over seeds of a metric's headline per run, with its "
             f"{int(b['level'] * 100)}% percentile bootstrap interval ({b['resamples']} resamples, seed "
             f"{b['seed']}) and n, the runs that measured it. Differences are paired by seed (the runs of one "
             f"seed share workload and faults); an interval that contains 0 is \"{stats.NO_DIFFERENCE}\".", ""]
    metrics = doc.get("metrics") or {}
    labels = []
    for groups in metrics.values():
        for lab in groups:
            if lab not in labels:
                labels.append(lab)
    for lab in labels:
        if lab != "base":
            lines += [f"## {lab}", ""]
        lines += ["| metric | " + " | ".join(g["profiles"]) + " |", "|---|" + "---|" * len(g["profiles"])]
        for m, groups in metrics.items():
            grp = groups.get(lab)
            if grp is None:
                continue
            lines.append(f"| {m} | " + " | ".join(_cell_text(grp["profiles"].get(p)) for p in g["profiles"]) + " |")
        lines.append("")
        if len(g["profiles"]) > 1:
            lines += ["Differences (paired by seed):", ""]
            for m, groups in metrics.items():
                grp = groups.get(lab)
                if grp is None:
                    continue
                lines.append(f"- **{m}**: " + "; ".join(difference_sentence(m, d) for d in grp["differences"]) + ".")
            lines.append("")
    if failed:
        lines += ["## Failed cells", ""]
        lines += [f"- `{c['path']}`: {c.get('status')}: {c.get('error')}" for c in failed]
        lines.append("")
    if metrics:
        lines += ["## Plots", "", "Per metric, `plots/<metric>.png` (each run a dot, a box per profile"
                  + (", per set value" if g.get("sets") else "") + ")"
                  + (" and `plots/<metric>-sweep.png` (the mean against the swept value, its interval "
                     "as a band)" if g.get("sets") else "") + ".", ""]
    return "\n".join(lines)


def _seed_text(seeds: list[int]) -> str:
    if not seeds:
        return ""
    s = sorted(seeds)
    if s == list(range(s[0], s[-1] + 1)) and len(s) > 2:
        return f"{s[0]}-{s[-1]}"
    return ",".join(str(x) for x in seeds)


# ----------------------------------------------------------------------------------- the plots

def write_plots(out: Path, doc: dict[str, Any]) -> list[Path]:
    """Per metric: a box with the runs as dots per profile (per set value); with ``--set``, the
    mean per profile against the set values with its interval as a band."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    pdir = out / "plots"
    pdir.mkdir(exist_ok=True)
    for old in pdir.glob("*.png"):
        old.unlink()
    g = doc["grid"]
    profiles = g["profiles"]
    values = {c["path"]: cell_values(out / c["path"]) for c in doc["cells"] if c.get("status") == "ok"}
    written = []
    for m, groups in (doc.get("metrics") or {}).items():
        labels = list(groups)
        fig, ax = plt.subplots(figsize=(max(4.0, 1.2 * len(profiles) * len(labels) + 1.5), 3.6))
        width = 0.8 / max(1, len(profiles))
        for j, p in enumerate(profiles):
            data, pos = [], []
            for i, lab in enumerate(labels):
                ys = [values[c["path"]][m] for c in doc["cells"]
                      if c.get("status") == "ok" and c["profile"] == p and c["set_label"] == lab
                      and m in values.get(c["path"], {})]
                if not ys:
                    continue
                x = i + (j - (len(profiles) - 1) / 2) * width
                data.append(ys)
                pos.append(x)
                jitter = [x + width * 0.25 * (((k * 37) % 11) / 10 - 0.5) for k in range(len(ys))]
                ax.scatter(jitter, ys, s=9, alpha=0.6, color=f"C{j}", zorder=3, label=None if data[:-1] else p)
            if data:
                ax.boxplot(data, positions=pos, widths=width * 0.8, showfliers=False, manage_ticks=False,
                           medianprops={"color": f"C{j}"})
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels([lab if lab != "base" else "" for lab in labels], rotation=20 if len(labels) > 1 else 0,
                           fontsize=7)
        ax.set_ylabel(m)
        ax.set_title(f"{m}: runs per profile (n seeds each)", fontsize=9)
        written.append(_save(fig, ax, pdir / f"{m}.png"))
        if g.get("sets") and len(labels) > 1:
            fig, ax = plt.subplots(figsize=(5.5, 3.6))
            xs = list(range(len(labels)))
            for j, p in enumerate(profiles):
                pts = [(x, groups[lab]["profiles"].get(p)) for x, lab in zip(xs, labels)]
                pts = [(x, s) for x, s in pts if s and s.get("n")]
                if not pts:
                    continue
                ax.plot([x for x, _ in pts], [s["mean"] for _, s in pts], marker="o", color=f"C{j}", label=p)
                ax.fill_between([x for x, _ in pts], [s["ci95"][0] for _, s in pts], [s["ci95"][1] for _, s in pts],
                                color=f"C{j}", alpha=0.2)
            ax.set_xticks(xs)
            ax.set_xticklabels([" + ".join(groups[lab]["set"].values()) for lab in labels], fontsize=8)
            ax.set_xlabel(" + ".join(s["key"] for s in g["sets"]), fontsize=8)
            ax.set_ylabel(f"{m} (mean, 95% CI)")
            ax.set_title(f"{m}: mean per run over {len(g.get('seeds') or [])} seeds, 95% interval", fontsize=9)
            written.append(_save(fig, ax, pdir / f"{m}-sweep.png"))
    return written


def _save(fig, ax, path: Path) -> Path:
    import matplotlib.pyplot as plt
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


# ----------------------------------------------------------------------------------- compare, analyze

def print_ci_tables(doc: dict[str, Any], *, console=None, title: str | None = None) -> None:
    """The CI table (metric × profile, per set value) and the paired differences, with rich."""
    from rich.console import Console
    from rich.table import Table
    console = console or Console()
    g = doc["grid"]
    metrics = doc.get("metrics") or {}
    labels: list[str] = []
    for groups in metrics.values():
        labels += [lab for lab in groups if lab not in labels]
    for lab in labels:
        t = Table(title=(title or f"sweep {g.get('experiment')}") + ("" if lab == "base" else f" — {lab}"))
        t.add_column("metric")
        for p in g["profiles"]:
            t.add_column(p, justify="right")
        for m, groups in metrics.items():
            if lab in groups:
                t.add_row(m, *[_cell_text(groups[lab]["profiles"].get(p)) for p in g["profiles"]])
        console.print(t)
        if len(g["profiles"]) > 1:
            d = Table(title="paired differences (b - a, over the same seeds)")
            d.add_column("metric")
            d.add_column("difference")
            for m, groups in metrics.items():
                if lab in groups:
                    for x in groups[lab]["differences"]:
                        d.add_row(m, difference_sentence(m, x))
            console.print(d)
