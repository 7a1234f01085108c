"""The results folder: drift arithmetic, writing and reading back. Pure (no Redis, no Ray)."""
from __future__ import annotations

import csv
import json

import pytest

from ha.errors import BadInput
from ha.experiment.checkers import metric_names
from ha.experiment.results import (TIMESERIES_COLUMNS, ResultsWriter, pairwise_drift,
                                   pairwise_drifts, read_results, summarise_drift,
                                   task_status_counts)


def test_pairwise_drift_counts_tasks_whose_status_or_node_differ():
    a = {"u1": ["PENDING", ""], "u2": ["PIPELINED", "n1"], "u3": ["BOUND", "n2"], "u4": ["RUNNING", "n1"]}
    b = {"u1": ["PENDING", ""], "u2": ["PENDING", ""], "u3": ["BOUND", "n3"], "u5": ["PENDING", ""]}
    # u2 status differs, u3 node differs, u4 only in a, u5 only in b
    assert pairwise_drift(a, b) == 4
    assert pairwise_drift(a, a) == 0
    assert pairwise_drift(b, a) == pairwise_drift(a, b)
    # None and "" are the same "no node"
    assert pairwise_drift({"u": ["PENDING", None]}, {"u": ["PENDING", ""]}) == 0


def test_pairwise_drifts_covers_every_pair_once():
    d = {"scheduler-2": {"x": ["PENDING", ""]}, "scheduler-1": {}, "scheduler-3": {"x": ["PENDING", ""]}}
    drifts = pairwise_drifts(d)
    assert drifts == {("scheduler-1", "scheduler-2"): 1, ("scheduler-1", "scheduler-3"): 1,
                      ("scheduler-2", "scheduler-3"): 0}


def test_summarise_drift():
    ticks = [{("a", "b"): 0, ("a", "c"): 2}, {("a", "b"): 4, ("a", "c"): 2}]
    s = summarise_drift(ticks)
    assert s["max"] == 4 and s["mean"] == 2.0
    assert s["pairs"]["a|b"] == {"max": 4, "mean": 2.0, "samples": 2}
    assert summarise_drift([]) is None


def test_task_status_counts_accepts_names_in_any_case():
    counts = task_status_counts({"1": ["Pending", ""], "2": ["PIPELINED", "n"], "3": ["bound", "n"],
                                 "4": ["weird", ""]})
    assert counts["PENDING"] == 1 and counts["PIPELINED"] == 1 and counts["BOUND"] == 1
    assert counts["UNKNOWN"] == 1 and sum(counts.values()) == 4


def test_write_and_read_back(tmp_path):
    out = tmp_path / "run"
    w = ResultsWriter(out)
    w.add_row({"t": 0.5, "instance": "scheduler-1", "alive": 1, "is_leader": 1, "binds": 3,
               "pairwise_drift_max": None})
    w.add_row({"t": 0.5, "instance": "scheduler-2", "alive": 0})
    log = tmp_path / "elsewhere.log"
    log.write_text("event 1\n")
    assert w.add_delivery_log("scheduler-1", log)
    assert not w.add_delivery_log("scheduler-2", None)
    w.write_metrics({"summary": {"bind_conflicts": 2, "pods_bound_per_s": float("nan")},
                     "experiment": {"name": "x"}})
    w.close()
    with open(out / "timeseries.csv") as f:
        header = next(csv.reader(f))
    assert header == list(TIMESERIES_COLUMNS)
    r = read_results(out)
    assert r.summary["bind_conflicts"] == 2
    assert r.summary["pods_bound_per_s"] is None          # NaN is not valid JSON: written as null
    assert r.experiment == {"name": "x"}
    assert r.instances() == ["scheduler-1", "scheduler-2"]
    row = r.timeseries[0]
    assert row["t"] == 0.5 and row["binds"] == 3 and row["is_leader"] == 1 and row["pairwise_drift_max"] is None
    assert r.delivery_logs["scheduler-1"].read_text() == "event 1\n"
    json.loads((out / "metrics.json").read_text())      # valid JSON


def test_writer_refuses_to_overwrite_results(tmp_path):
    w = ResultsWriter(tmp_path / "r")
    w.write_metrics({"summary": {}, "experiment": {}})
    w.close()
    with pytest.raises(BadInput, match="already holds results"):
        ResultsWriter(tmp_path / "r")
    (tmp_path / "file").write_text("x")
    with pytest.raises(BadInput, match="not a folder"):
        ResultsWriter(tmp_path / "file")


def test_read_results_errors(tmp_path):
    with pytest.raises(BadInput, match="no such folder"):
        read_results(tmp_path / "nope")
    with pytest.raises(BadInput, match="no metrics.json"):
        read_results(tmp_path)
    (tmp_path / "metrics.json").write_text("{broken")
    with pytest.raises(BadInput, match="metrics.json: not valid JSON"):
        read_results(tmp_path)
    (tmp_path / "metrics.json").write_text("[]")
    with pytest.raises(BadInput, match="expected an object with 'summary'"):
        read_results(tmp_path)


def test_metric_names_are_the_design_contract():
    # the checkers that declare themselves the contract's are exactly its twelve metrics
    assert set(metric_names(contract_only=True)) == {
        "cache_divergence", "pairwise_drift", "resource_drift", "staleness_ms", "allocation_drift",
        "wasted_evictions", "cyclic_evictions", "overcommit_violations", "partial_gang_binds",
        "bind_conflicts", "failover_recovery_s", "pods_bound_per_s"}
