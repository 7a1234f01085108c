"""The results folder (docs/design.md "Results folder"): writing and reading.

::

    <out>/metrics.json           {"summary": {metric: value}, "experiment": resolved file,
                                  "scheduler_conf": resolved conf, "run": {...}, "chaos": [...],
                                  "instances": {name: final stats}}
    <out>/timeseries.csv         one row per measurement tick per instance (TIMESERIES_COLUMNS)
    <out>/delivery/<name>.log    what each instance's informers received, and when

Metric names are a contract (docs/design.md "Metrics"; the checkers' registry,
``ha.experiment.checkers.metric_names``, lists them); only metrics actually computed are written —
a metric that is missing was not measured, it is never a zero standing in for "unknown".
"""
from __future__ import annotations

import csv
import json
import math
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from ha.errors import BadInput
from ha.experiment.oracles import status_name

__all__ = ["TASK_STATUSES", "TIMESERIES_COLUMNS", "ResultsWriter", "Results",
           "read_results", "pairwise_drift", "task_status_counts", "summarise_drift", "write_json"]

# Volcano's TaskStatus names, as the cache digest spells them (upper case, e.g. "PIPELINED")
TASK_STATUSES = ("PENDING", "ALLOCATED", "PIPELINED", "BINDING", "BOUND", "RUNNING", "RELEASING",
                 "SUCCEEDED", "FAILED", "UNKNOWN")

TIMESERIES_COLUMNS = (
    ["t", "instance", "alive", "is_leader", "rv", "sessions"]
    + [f"tasks_{s.lower()}" for s in TASK_STATUSES]
    + ["binds", "bind_conflicts", "bind_errors", "evictions", "pairwise_drift_max", "drift_to_leader"]
    # staleness (ms, write -> applied) of the samples taken since the previous tick
    + ["staleness_p50_ms", "staleness_p99_ms", "staleness_max_ms"]
    # the checkers' columns (ha.experiment.checkers): vs the reference cache; cumulative counters
    + ["cache_divergence", "resource_drift", "overcommit_nodes", "allocation_drift",
       "wasted_evictions", "cyclic_evictions", "partial_gang_binds",
       # of cache_divergence, the tasks whose wrong state the instance already held a tick ago
       "cache_divergence_persistent"]
)


def task_status_counts(tasks: Mapping[str, Any]) -> dict[str, int]:
    """``{"PENDING": n, ...}`` from a digest's ``tasks`` ({uid: [status, node]})."""
    out = {s: 0 for s in TASK_STATUSES}
    raw: dict[Any, int] = {}
    for entry in tasks.values():     # count raw spellings first: status_name once per spelling
        k = entry[0] if isinstance(entry, (list, tuple)) else entry
        raw[k] = raw.get(k, 0) + 1
    for k, n in raw.items():
        name = status_name(k)
        out[name if name in out else "UNKNOWN"] += n
    return out


def pairwise_drift(a: Mapping[str, Any], b: Mapping[str, Any]) -> int:
    """Tasks whose (status, node) differ between two caches' digests (oracles.task_diff)."""
    from ha.experiment.oracles import task_diff
    return task_diff(a, b)


def pairwise_drifts(digests: Mapping[str, Mapping[str, Any]]) -> dict[tuple[str, str], int]:
    """Drift of every pair of instances (names sorted) from their digests' ``tasks``."""
    from ha.experiment.checkers.pairwise_drift import PairwiseDrift
    return PairwiseDrift().observe(digests)


def summarise_drift(samples: Iterable[Mapping[tuple[str, str], int]]) -> dict[str, Any] | None:
    """``{"max", "mean", "pairs": {"a|b": {"max", "mean", "samples"}}}`` over the run
    (checkers.pairwise_drift.PairwiseDrift's summary)."""
    from ha.experiment.checkers.pairwise_drift import PairwiseDrift
    pw = PairwiseDrift()
    for tick in samples:
        for (a, b), v in tick.items():
            pw.pairs.setdefault(f"{a}|{b}", []).append(v)
    return pw.summary()


def _clean(v: Any) -> Any:
    """JSON-safe: NaN/inf become null (json.dump would write invalid JSON)."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {str(k): _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    return v


def write_json(p: Path, doc: Mapping[str, Any]) -> Path:
    """Write a JSON document atomically (NaN/inf as null)."""
    tmp = p.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(_clean(dict(doc)), indent=2, sort_keys=False, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, p)
    return p


class ResultsWriter:
    """Writes a results folder incrementally: the CSV row by row (a crash or Ctrl-C still leaves
    the ticks so far), metrics.json at the end."""

    @staticmethod
    def check_out(out: str | Path) -> None:
        out = Path(out)
        if out.exists() and not out.is_dir():
            raise BadInput(f"--out {out}: exists and is not a folder")
        if out.is_dir() and (out / "metrics.json").exists():
            raise BadInput(f"--out {out}: already holds results (metrics.json); choose another folder")

    def __init__(self, out: str | Path):
        self.out = Path(out)
        self.check_out(self.out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.delivery_dir.mkdir(exist_ok=True)
        self._csv_file = open(self.out / "timeseries.csv", "w", newline="", encoding="utf-8")
        self._csv = csv.DictWriter(self._csv_file, fieldnames=TIMESERIES_COLUMNS, extrasaction="raise")
        self._csv.writeheader()
        self.rows = 0

    @property
    def delivery_dir(self) -> Path:
        return self.out / "delivery"

    def add_row(self, row: Mapping[str, Any]) -> None:
        self._csv.writerow({k: ("" if row.get(k) is None else row.get(k)) for k in TIMESERIES_COLUMNS})
        self.rows += 1

    def flush(self) -> None:
        if not self._csv_file.closed:
            self._csv_file.flush()

    def add_delivery_log(self, instance: str, path: str | os.PathLike | None) -> bool:
        """Copy an instance's delivery log in (unless it was written in place already)."""
        dest = self.delivery_dir / f"{instance}.log"
        if path is None:
            return dest.exists()
        src = Path(path)
        if not src.exists():
            return dest.exists()
        if src.resolve() != dest.resolve():
            shutil.copyfile(src, dest)
        return True

    def write_metrics(self, doc: Mapping[str, Any]) -> Path:
        return write_json(self.out / "metrics.json", doc)

    def close(self) -> None:
        if not self._csv_file.closed:
            self._csv_file.close()


@dataclass
class Results:
    path: Path
    summary: dict[str, Any]
    experiment: dict[str, Any]
    metrics: dict[str, Any]
    timeseries: list[dict[str, Any]] = field(default_factory=list)
    delivery_logs: dict[str, Path] = field(default_factory=dict)

    def instances(self) -> list[str]:
        return sorted({r["instance"] for r in self.timeseries})


def _num(v: str) -> Any:
    if v == "":
        return None
    try:
        return int(v)
    except ValueError:
        try:
            return float(v)
        except ValueError:
            return v


def read_results(path: str | Path) -> Results:
    """Read a results folder (for report / compare); BadInput names the file and the problem."""
    p = Path(path)
    mpath = p / "metrics.json"
    if not p.is_dir():
        raise BadInput(f"{p}: not a results folder (no such folder)")
    if not mpath.exists():
        if (p / "history" / "run.json").is_file():
            raise BadInput(f"{p}: no metrics.json yet; `ha-testbed analyze {p}` computes it from history/")
        raise BadInput(f"{p}: not a results folder (no metrics.json)")
    try:
        metrics = json.loads(mpath.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise BadInput(f"{mpath}: not valid JSON: {e}") from None
    if not isinstance(metrics, dict) or not isinstance(metrics.get("summary"), dict) \
            or not isinstance(metrics.get("experiment"), dict):
        raise BadInput(f"{mpath}: expected an object with 'summary' and 'experiment'")
    rows: list[dict[str, Any]] = []
    tpath = p / "timeseries.csv"
    if tpath.exists():
        with open(tpath, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            missing = [c for c in ("t", "instance") if c not in (reader.fieldnames or [])]
            if missing:
                raise BadInput(f"{tpath}: missing column(s) {', '.join(missing)}")
            for r in reader:
                rows.append({k: (v if k == "instance" else _num(v)) for k, v in r.items()})
    logs = {f.stem: f for f in sorted((p / "delivery").glob("*.log"))} if (p / "delivery").is_dir() else {}
    return Results(path=p, summary=metrics["summary"], experiment=metrics["experiment"],
                   metrics=metrics, timeseries=rows, delivery_logs=logs)
