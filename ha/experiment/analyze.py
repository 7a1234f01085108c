"""``ha-testbed analyze DIR [--json]``: recompute every metric of a results folder from its recorded
``history/`` alone (Jepsen's ``analyze``), then rewrite the views and the report.

:func:`analyze` runs every checker (:mod:`ha.experiment.checkers`) over the history and writes:

* ``metrics.json``: ``summary`` (every computed metric), ``absent`` ({metric: why it could not be
  computed}), ``convergence`` (a copy of the summary's, where report readers used to find it),
  ``totals`` (counters over every life of every instance), ``history`` (what was read: ticks,
  events, skipped truncated lines, the checkers run); every other key of an existing metrics.json
  is kept, and a folder without one gets the header's experiment, engine, seed and code version;
* ``timeseries.csv``: one row per tick per instance (results.TIMESERIES_COLUMNS), a view of the
  history plus each checker's per-tick ``columns``;
* ``divergence.jsonl``: the tasks behind each tick's cache_divergence (at most 25 per instance and
  tick): the instance's state, the reference's after and before the sampling window;
* ``report.md`` and its plots (report.write_report, a renderer).

The runner calls :func:`analyze` at the end of every run, so a run's summary and a later
``analyze``'s are the same by construction. Output is deterministic: the same history gives
byte-identical metrics.json summary, timeseries.csv and divergence.jsonl.
"""
from __future__ import annotations

import csv
import json
import logging
import os
from pathlib import Path
from typing import Any, Iterable

from ha.errors import BadInput
from ha.experiment.history import COUNTERS, History
from ha.experiment.results import TASK_STATUSES, TIMESERIES_COLUMNS, task_status_counts, write_json

__all__ = ["analyze", "analyze_cli", "analyze_sweep", "timeseries_rows"]

log = logging.getLogger(__name__)


def _status_counts(name: str, st: dict[str, Any], last: dict[str, tuple[dict, dict[str, int]]]) -> dict[str, int]:
    """task_status_counts of the instance's tasks, updated from the entries that changed since its
    previous record when the history says which (the same counts, without re-reading them all)."""
    tasks, changed = st["tasks"], st.get("changed_tasks")
    prev = last.get(name)
    if prev is None or changed is None:
        counts = task_status_counts(tasks)
    else:
        counts = dict(prev[1])
        old = {u: prev[0][u] for u in changed if u in prev[0]}
        new = {u: tasks[u] for u in changed if u in tasks}
        for k, n in task_status_counts(old).items():
            counts[k] -= n
        for k, n in task_status_counts(new).items():
            counts[k] += n
    last[name] = (tasks, counts)
    return counts


def _base_rows(h: History) -> list[list[dict[str, Any]]]:
    """Per tick, per instance (sorted): the columns that come straight from the history."""
    carried: dict[str, dict[str, int]] = {}          # counters of finished generations
    last_counts: dict[str, tuple[dict, dict[str, int]]] = {}   # instance -> (tasks, status counts)
    current: dict[str, tuple[int, dict[str, int]]] = {}
    out = []
    names = h.instances()
    for tk, states in h.digests():
        rows = []
        for name in names:
            st = states.get(name) or {"alive": 0}
            row: dict[str, Any] = {"t": round(float(tk["t"]), 3), "instance": name, "alive": int(bool(st.get("alive")))}
            if st.get("alive"):
                gen = int(st.get("generation") or 0)
                prev = current.get(name)
                if prev is not None and prev[0] != gen:
                    c = carried.setdefault(name, {})
                    for k, v in prev[1].items():
                        c[k] = c.get(k, 0) + int(v or 0)
                counters = st.get("counters") or {}
                current[name] = (gen, counters)
                c = carried.get(name, {})
                rvs = st.get("rvs") or {}
                row.update({"is_leader": int(bool(st.get("is_leader"))),
                            "rv": max(rvs.values()) if rvs else None, "sessions": st.get("sessions")})
                if (st.get("unobserved") or {}).get("cache"):
                    # an external instance whose cache could not be sampled: blank, not zero
                    row.update({f"tasks_{s.lower()}": None for s in TASK_STATUSES})
                    last_counts.pop(name, None)
                else:
                    counts = _status_counts(name, st, last_counts)
                    row.update({f"tasks_{s.lower()}": counts[s] for s in TASK_STATUSES})
                for k in ("binds", "bind_conflicts", "bind_errors", "evictions"):
                    row[k] = int(counters.get(k) or 0) + c.get(k, 0)
            rows.append(row)
        out.append(rows)
    return out


def timeseries_rows(h: History, columns: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The timeseries view: base columns plus the checkers' per-tick columns (alive rows only)."""
    out = []
    for i, rows in enumerate(_base_rows(h)):
        for row in rows:
            if row["alive"]:
                for col, per_tick in columns.items():
                    if i < len(per_tick) and row["instance"] in per_tick[i]:
                        row[col] = per_tick[i][row["instance"]]
            out.append(row)
    return out


def _write_csv(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    tmp = path.with_suffix(".csv.tmp")
    with open(tmp, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=TIMESERIES_COLUMNS, extrasaction="ignore", lineterminator="\n")
        w.writeheader()
        for r in rows:
            w.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in TIMESERIES_COLUMNS})
    os.replace(tmp, path)


def _metrics_doc(out: Path, h: History) -> dict[str, Any]:
    p = out / "metrics.json"
    if p.exists():
        try:
            doc = json.loads(p.read_text(encoding="utf-8"))
            if isinstance(doc, dict):
                return doc
        except ValueError:
            log.warning("%s: not valid JSON; rebuilt from the history", p)
    hd = h.header
    return {"summary": {}, "experiment": hd.get("experiment") or {}, "engine": hd.get("engine"),
            "seed": hd.get("seed"), "profile": hd.get("profile"), "switches": hd.get("switches"),
            "code_version": hd.get("code_version")}


def analyze(out_dir: str | os.PathLike, *, extra_checkers: Iterable[str | os.PathLike] = (),
            report: bool = True) -> dict[str, Any]:
    """Recompute every metric from ``<out_dir>/history/``; rewrite metrics.json's summary,
    timeseries.csv, divergence.jsonl and (``report``) report.md. Returns the summary.
    ``extra_checkers``: folders (or files) of further checker modules (checkers.all_checkers)."""
    from ha.experiment.checkers import all_checkers, run_checkers
    from ha.experiment.checkers._fold import reference_pass
    from ha.experiment.checkers._run import counter_totals
    out = Path(out_dir)
    h = History(out)
    checkers = all_checkers(extra_checkers)
    summary, absent = run_checkers(h, checkers)
    columns: dict[str, list[dict[str, Any]]] = {}
    for c in checkers:
        if c.columns is None or c.name in absent:
            continue
        try:
            columns.update(c.columns(h))
        except Exception as e:  # noqa: BLE001 — a column view must not lose the summary
            log.warning("columns of %s: %s", c.name, e)
    _write_csv(out / "timeseries.csv", timeseries_rows(h, columns))
    rp = reference_pass(h)
    tmp = out / "divergence.jsonl.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        for line in rp.examples:
            f.write(json.dumps(line) + "\n")
    os.replace(tmp, out / "divergence.jsonl")

    doc = _metrics_doc(out, h)
    doc["summary"] = summary
    doc["absent"] = dict(sorted(absent.items()))
    if "convergence" in summary:
        doc["convergence"] = summary["convergence"]
    doc["totals"] = {k: sum(counter_totals(h, k).values()) for k in COUNTERS}
    # every leader loss and its takeover (what failover_recovery_s takes the slowest of)
    from ha.experiment.checkers.failover_recovery_s import failovers
    doc["failovers"] = failovers(h)
    oracles = doc.get("oracles") if isinstance(doc.get("oracles"), dict) else {}
    oracles.update({"absent": doc["absent"], "api_consistency": summary.get("api_consistency"),
                    "reference_handler_errors": rp.handler_errors,
                    "divergence_t": [list(x) for x in rp.divergence_t[-2000:]]})
    doc["oracles"] = oracles
    doc["history"] = {"ticks": len(h.ticks()), "elapsed_s": round(h.duration(), 3), "events": len(h.events()),
                      "decisions": len(h.decisions()), "final": h.final is not None,
                      "skipped": dict(sorted(h.skipped.items())), "warnings": list(h.warnings),
                      "checkers": [c.name for c in checkers]}
    write_json(out / "metrics.json", doc)
    if report:
        try:
            from ha.experiment.report import write_report
            write_report(out)
        except Exception as e:  # noqa: BLE001 — the metrics stand without their report
            log.warning("report: %s", e)
    return summary


def analyze_cli(path, as_json: bool = False, echo=print, extra_checkers: Iterable[str | os.PathLike] = ()) -> int:
    """The ``analyze`` command: BadInput (exit 2) for a folder without a history."""
    p = Path(path)
    if not p.is_dir():
        raise BadInput(f"{p}: not a results folder (no such folder)")
    for c in extra_checkers:
        if not Path(c).exists():
            raise BadInput(f"--checkers {c}: no such file or folder")
    from ha.experiment.sweep_report import is_sweep_dir
    if is_sweep_dir(p):      # a sweep: every cell (a results folder), then its statistics
        return analyze_sweep(p, as_json=as_json, echo=echo, extra_checkers=extra_checkers)
    summary = analyze(p, extra_checkers=extra_checkers)
    if as_json:
        echo(json.dumps(summary, sort_keys=True, default=str))
        return 0
    from ha.experiment.checkers import headline
    for k, v in summary.items():
        echo(f"{k}: {headline(k, v)}")
    doc = json.loads((p / "metrics.json").read_text(encoding="utf-8"))
    for k, why in (doc.get("absent") or {}).items():
        echo(f"{k}: absent ({why})")
    for w in (doc.get("history") or {}).get("warnings") or []:
        echo(f"warning: {w}")
    return 0


def analyze_sweep(path: str | Path, *, as_json: bool = False, echo=print, console=None,
                  extra_checkers=()) -> int:
    """``ha-testbed analyze SWEEP_DIR``: every ok cell's metrics recomputed from its history, then
    sweep.json and summary.md rewritten."""
    from ha.experiment.sweep_report import SWEEP_FILE, print_ci_tables, read_sweep, write_sweep
    out = Path(path)
    doc = read_sweep(out)
    cells = doc["cells"]
    for c in cells:
        folder = out / c["path"]
        if c.get("status") == "ok" and (folder / "history" / "run.json").is_file():
            # the cell's report only where it had one (a sweep writes none by default)
            analyze(folder, extra_checkers=extra_checkers, report=(folder / "report.md").exists())
    b = doc.get("bootstrap") or {}
    new = write_sweep(out, doc["grid"], cells, bootstrap_seed=int(b.get("seed", 0)),
                      resamples=b.get("resamples"))
    if as_json:
        echo(json.dumps(new, sort_keys=True, default=str))
        return 0
    print_ci_tables(new, console=console)
    echo(f"re-analyzed {sum(1 for c in cells if c.get('status') == 'ok')} cells; rewrote {out / SWEEP_FILE}, "
         f"{out / 'summary.md'}")
    return 0
