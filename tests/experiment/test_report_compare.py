"""report.md + PNGs and the compare table, on a synthetic results folder (no Redis, no Ray)."""
from __future__ import annotations

import csv
import json

import pytest
from typer.testing import CliRunner

from ha.cli import app
from ha.errors import BadInput
from ha.experiment.compare import compare_cli, compare_table
from ha.experiment.report import chaos_windows, verdicts, write_report
from ha.experiment.results import TIMESERIES_COLUMNS, read_results


def make_results(tmp_path, name="r", profile="v1.14", divergence_final=0, cyclic=0):
    d = tmp_path / name
    d.mkdir()
    summary = {
        "cache_divergence": {"max": 4, "mean": 1.2, "final_max": divergence_final,
                             "instances": {"scheduler-1": {"max": 4, "mean": 1.2, "final": divergence_final,
                                                           "samples": 20}}},
        "pairwise_drift": {"max": 3, "mean": 0.5, "pairs": {}},
        "cyclic_evictions": {"count": cyclic, "slots": 1 if cyclic else 0, "jobs": 0},
        "overcommit_violations": {"count": 0, "ticks": 20, "nodes": {}},
        "bind_conflicts": 2, "pods_bound_per_s": 1.5,
        "staleness_ms": {"scheduler-1": {"p50": 3.0, "p99": 40.0, "max": 80.0, "n": 100}},
    }
    metrics = {"summary": summary,
               "experiment": {"name": name, "profile": profile, "seed": 7, "duration": "10s",
                              "schedulers": {"instances": 2, "mode": "leader-elected"},
                              "measure": {"every": "500ms"},
                              "chaos": [{"at": "2s", "for": "3s", "fault": "watch-delay", "target": "scheduler-1"},
                                        {"at": "6s", "fault": "kill", "target": "leader"}]},
               "run": {"elapsed_s": 10.0, "ticks": 20},
               "chaos": [{"index": 0, "status": "applied", "applied_at_s": 2.1, "ended_at_s": 5.1},
                         {"index": 1, "status": "applied", "applied_at_s": 6.0}],
               "oracles": {"absent": {"resource_drift": "no cluster capacity (no nodes)"},
                           "api_consistency": {"ok": True, "lost_writes": 0, "phantoms": 0}}}
    (d / "metrics.json").write_text(json.dumps(metrics))
    with open(d / "timeseries.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=TIMESERIES_COLUMNS)
        w.writeheader()
        for i in range(20):
            for inst in ("scheduler-1", "scheduler-2"):
                w.writerow({"t": i * 0.5, "instance": inst, "alive": 1, "binds": i * 2, "evictions": i // 5,
                            "cache_divergence": (4 if 4 <= i < 10 else 0) if inst == "scheduler-1" else 0,
                            "pairwise_drift_max": 1})
    return d


def test_report_writes_markdown_and_pngs(tmp_path):
    d = make_results(tmp_path)
    p = write_report(d)
    text = p.read_text()
    for png in ("drift.png", "binds_evictions.png", "staleness.png"):
        assert (d / png).stat().st_size > 1000, png
        assert f"]({png})" in text
    assert "| `cache_divergence` | 4 |" in text
    assert "| `resource_drift` | — | not measured: no cluster capacity" in text
    assert "ended equal to the reference" in text
    assert "no lost writes" in text


def test_report_verdict_flags_non_convergence_and_cycles(tmp_path):
    res = read_results(make_results(tmp_path, divergence_final=3, cyclic=2))
    v = " ".join(verdicts(res))
    assert "did not converge" in v and "scheduler-1=3" in v
    assert "2 cyclic evictions" in v


def test_chaos_windows_use_applied_times(tmp_path):
    res = read_results(make_results(tmp_path))
    w = chaos_windows(res.metrics)
    assert w[0][1:] == (2.1, 5.1) and w[1][1:] == (6.0, None)


def test_report_cli_command(tmp_path):
    d = make_results(tmp_path)
    r = CliRunner().invoke(app, ["report", str(d)])
    assert r.exit_code == 0, r.output
    assert (d / "report.md").exists()
    r = CliRunner().invoke(app, ["report", str(tmp_path / "nope")])
    assert r.exit_code == 2 and "nope" in r.output


def test_compare_table_and_json(tmp_path, capsys):
    a = make_results(tmp_path, "a", "v1.14", cyclic=3)
    b = make_results(tmp_path, "b", "pr5045-fixed", cyclic=0)
    t = compare_table([read_results(a), read_results(b)])
    assert t["metrics"]["cyclic_evictions"] == [3, 0]
    assert t["metrics"]["resource_drift"] == [None, None]       # absent stays absent
    assert t["metrics"]["staleness_ms"] == [40.0, 40.0]
    out = []
    assert compare_cli([a, b], as_json=True, echo=out.append) == 0
    doc = json.loads(out[0])
    assert [r["profile"] for r in doc["runs"]] == ["v1.14", "pr5045-fixed"]


def test_compare_cli_exit_2_names_the_bad_folder(tmp_path):
    a = make_results(tmp_path, "a")
    bad = tmp_path / "corrupt"
    bad.mkdir()
    (bad / "metrics.json").write_text("{not json")
    with pytest.raises(BadInput, match="corrupt"):
        compare_cli([a, bad])
    r = CliRunner().invoke(app, ["compare", str(a), str(tmp_path / "missing")])
    assert r.exit_code == 2 and "missing" in r.output
    r = CliRunner().invoke(app, ["compare", str(a), str(a)])
    assert r.exit_code == 0 and "cyclic_evictions" in r.output


def test_report_says_where_each_instance_ran(tmp_path):
    """report.md's "Where the instances ran": one row per instance from lives.jsonl (its nodes,
    hosts and lives, a node-kill named); absent when no life names a node (in-process runs)."""
    from ha.experiment.console import where
    from ha.experiment.history import HistoryWriter
    from .histories import header
    d = make_results(tmp_path)
    with HistoryWriter(d, header(instances=("scheduler-1", "scheduler-2"))) as w:
        w.life(0.0, "scheduler-1", "start", 0, pid=11, node_id="a" * 56, host="m1")
        w.life(0.0, "scheduler-2", "start", 0, pid=12, node_id="b" * 56, host="m2")
        w.life(6.04, "scheduler-2", "kill", 0, pid=12, node_id="b" * 56, host="m2", was_leader=True,
               cause="node-kill")
        w.life(9.0, "scheduler-2", "restart", 1, pid=13, node_id="c" * 56, host="m3")
    text = write_report(d).read_text()
    assert "## Where the instances ran" in text
    assert "| scheduler-1 | aaaaaaaaaaaa | m1 | start 0.0 s |" in text
    assert ("| scheduler-2 | bbbbbbbbbbbb → cccccccccccc | m2, m3 | start 0.0 s; "
            "kill 6.0 s (leader, node-kill); restart 9.0 s |") in text
    assert where({"node_id": "b" * 56, "host": "m2"}) == "m2/bbbbbbbb" and where({}) == "-"

    e = make_results(tmp_path, name="no-nodes")
    with HistoryWriter(e, header(instances=("scheduler-1",))) as w:
        w.life(0.0, "scheduler-1", "start", 0, pid=11)
    assert "Where the instances ran" not in write_report(e).read_text()
