"""``ha-testbed compare DIR_A DIR_B ...``: the summaries of several results folders side by side
(e.g. one seed under ``v1.14``, ``pr5045`` and ``pr5045-fixed``). One row per contract metric (docs/design.md),
one column per run; a metric a run did not measure shows as "—" (never as 0).

A sweep folder (``sweep.json``) among the arguments prints its confidence-interval table instead:
per metric and profile the mean over seeds with its 95% interval and n, and the paired differences
(``ha.experiment.sweep_report``); ``--json`` gives ``{"runs", ..., "sweeps": [{path, grid, metrics}]}``.
Two or more sweep folders (e.g. the same grid on the live and the sim engine) are also compared
with each other (``ha.experiment.agreement``: means over their common seeds, overlap, contradictory
orderings; ``"agreement"`` in the JSON). Sweeps holding real vc-scheduler cells put the model beside
the real scheduler (``ha.experiment.fidelity``: model − real paired by seed, agrees or not;
``"agreement"."fidelity"`` in the JSON), also a single sweep with the implementation axis."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ha.experiment.checkers import headline, metric_names
from ha.experiment.results import Results, read_results

__all__ = ["compare_cli", "compare_table", "run_label"]


def run_label(res: Results) -> str:
    e = res.experiment
    return f"{e.get('name', res.path.name)} [{e.get('profile')}, seed {e.get('seed')}]"


def compare_table(results: list[Results]) -> dict[str, Any]:
    """{"runs": [{label, path, profile, seed}], "metrics": {metric: [headline or None per run]},
    "details": {metric: [full summary value per run]}}"""
    runs = [{"label": run_label(r), "path": str(r.path), "profile": r.experiment.get("profile"),
             "seed": r.experiment.get("seed"), "name": r.experiment.get("name")} for r in results]
    # the contract's metrics (docs/design.md) first, then the extensions any of the runs measured (sorted)
    contract = metric_names(contract_only=True)
    names = list(contract) + sorted({k for r in results for k in r.summary} - set(contract))
    metrics = {m: [headline(m, r.summary.get(m)) if m in r.summary else None for r in results]
               for m in names}
    details = {m: [r.summary.get(m) for r in results] for m in names}
    extras = {"allocation_drift.rate": [((r.summary.get("allocation_drift") or {}).get("rate")
                                         if isinstance(r.summary.get("allocation_drift"), dict) else None)
                                        for r in results],
              "cache_divergence.mean": [((r.summary.get("cache_divergence") or {}).get("mean")
                                         if isinstance(r.summary.get("cache_divergence"), dict) else None)
                                        for r in results],
              "cache_divergence.final_max": [((r.summary.get("cache_divergence") or {}).get("final_max")
                                              if isinstance(r.summary.get("cache_divergence"), dict) else None)
                                             for r in results]}
    return {"runs": runs, "metrics": metrics, "extras": extras, "details": details}


def _cell(v: Any) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def compare_cli(dirs, as_json: bool = False, echo=print, console=None) -> int:
    """Print the side-by-side table; a missing or corrupt folder raises BadInput naming it (exit 2)."""
    from ha.experiment.sweep_report import is_sweep_dir, print_ci_tables, read_sweep
    sweeps = [(Path(d), read_sweep(d)) for d in dirs if is_sweep_dir(d)]
    results = [read_results(Path(d)) for d in dirs if not is_sweep_dir(d)]
    table = compare_table(results) if results else None
    agree = None
    from ha.experiment.agreement import has_real_cells
    # two sweeps (sim beside live), or any sweep holding real vc-scheduler cells (the model beside
    # the real scheduler: its own --set schedulers.implementation=model,volcano axis is enough)
    if len(sweeps) >= 2 or any(has_real_cells(s) for _, s in sweeps):
        from ha.experiment.agreement import agreement
        agree = agreement([p for p, _ in sweeps], [s for _, s in sweeps])
    if as_json:
        doc: dict[str, Any] = {}
        if table is not None:
            doc = {k: v for k, v in table.items() if k != "details"} | {"details": table["details"]}
        if sweeps:
            doc["sweeps"] = [{"path": str(p), "grid": s["grid"], "bootstrap": s.get("bootstrap"),
                              "metrics": s.get("metrics") or {}} for p, s in sweeps]
        if agree is not None:
            doc["agreement"] = agree
        echo(json.dumps(doc, default=str))
        return 0
    for p, s in sweeps:
        print_ci_tables(s, console=console, title=f"sweep {p}")
    if agree is not None:
        from ha.experiment.agreement import agreement_markdown
        if agree["metrics"]:
            echo("\nThe sweeps side by side (seeds every sweep finished; 95% intervals):\n")
        else:
            echo("")
        echo(agreement_markdown(agree))
    if table is None:
        return 0
    from rich.console import Console
    from rich.table import Table
    t = Table(title="ha-testbed compare")
    t.add_column("metric")
    for r in table["runs"]:
        t.add_column(r["label"], justify="right")
    for m, vals in list(table["metrics"].items()) + list(table["extras"].items()):
        t.add_row(m, *[_cell(v) for v in vals])
    (console or Console()).print(t)
    return 0
