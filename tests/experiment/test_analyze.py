"""``analyze``: every metric recomputed from history/ alone; a checker added later runs on an old
folder; the output is deterministic; the CLI's errors are exit 2; report renders from it."""
from __future__ import annotations

import json

from typer.testing import CliRunner

from ha.cli import app
from ha.experiment.analyze import analyze
from ha.experiment.results import TIMESERIES_COLUMNS, read_results

from .histories import History
from .test_checkers import S1, S2, Run, _listing, cluster, dec


def results_folder(path):
    """A small finished run: a watch fault, a lagging instance that catches up, binds, a lease."""
    r = Run(path)
    cluster(r, pods=("a", "b", "c"), min_member=1)
    r.w.lease(0.1, {"holder": f"{S1}_x", "lease_transitions": 0})
    r.w.life(0.0, S1, "start", 0, pid=11)
    r.w.life(0.0, S2, "start", 0, pid=12)
    r.tick(0.0, binds=0)
    stuck = r.api.rv
    r.w.fault({"t": 0.5, "index": 0, "fault": "watch-delay", "action": "start", "targets": [S2],
               "status": "applied", "detail": ""})
    r.w.decisions([dec("pipeline", "a", "n1", 0.6), dec("bind", "a", "n1", 0.7), dec("bind", "b", "n2", 0.7)])
    r.api.bind("default/a", "n1")
    r.api.bind("default/b", "n2")
    r.w.staleness(1.0, S1, 0, [1.5, 2.5])
    r.tick(1.0, lag={S2: stuck}, binds=2)
    r.w.fault({"t": 1.5, "index": 0, "fault": "watch-delay", "action": "end", "targets": [S2],
               "status": "applied", "detail": ""})
    for t in range(2, 10):
        r.tick(float(t), binds=2)
    r.close(api_state=_listing(r.api), elapsed_s=10.0, lease={"holder": f"{S1}_x", "lease_transitions": 0})
    return path


def test_analyze_writes_summary_timeseries_divergence_and_report(tmp_path):
    out = results_folder(tmp_path / "run")
    s = analyze(out)
    assert s["cache_divergence"]["instances"][S2]["max"] == 2 and s["cache_divergence"]["final_max"] == 0
    assert s["pods_bound_per_s"] == 0.4   # 2 binds recorded by each instance, 10 s and s["allocation_drift"]["count"] == 0
    assert s["convergence"]["ok"] is True and s["api_consistency"]["ok"] is True
    assert s["leader_changes"] == 0 and s["staleness_ms"] == {S1: {"p50": 1.5, "p99": 2.5, "max": 2.5, "n": 2}}
    doc = json.loads((out / "metrics.json").read_text())
    assert doc["summary"] == json.loads(json.dumps(s))
    # what this small run cannot show, each with its reason (never a zero standing in for it)
    assert doc["absent"] == {"failover_recovery_s": "no leader loss in the run",
                             "session_latency_ms": "no /metrics scrapes in the history: only external "
                                                   "vc-scheduler instances are scraped; the model's instances "
                                                   "record no per-session latency",
                             "split_brain_writes": "no Lease event in the history (nobody was elected)",
                             "topology_violations": "no HyperNode in the run (a flat cluster: nothing to check)"}
    assert doc["history"]["ticks"] == 10 and doc["history"]["skipped"] == {}
    res = read_results(out)
    assert list(res.timeseries[0]) == TIMESERIES_COLUMNS
    row = next(x for x in res.timeseries if x["t"] == 1.0 and x["instance"] == S2)
    assert row["cache_divergence"] == 2 and row["pairwise_drift_max"] == 2 and row["drift_to_leader"] == 2
    lines = [json.loads(x) for x in (out / "divergence.jsonl").read_text().splitlines()]
    assert {x["pod"] for x in lines} == {"default/a", "default/b"} and all(x["instance"] == S2 for x in lines)
    report = (out / "report.md").read_text()
    assert "watch-delay→scheduler-2: 0.5 s → 1.5 s" in report
    assert "Convergence after the last fault" in report and "ended equal to the reference" in report


def test_analyze_keeps_the_other_keys_of_metrics_json(tmp_path):
    out = results_folder(tmp_path / "run")
    (out / "metrics.json").write_text(json.dumps({"summary": {"stale": 1}, "experiment": {"name": "kept"},
                                                  "run": {"run_id": "abc"}}))
    analyze(out, report=False)
    doc = json.loads((out / "metrics.json").read_text())
    assert doc["run"] == {"run_id": "abc"} and doc["experiment"] == {"name": "kept"}
    assert "stale" not in doc["summary"] and "cache_divergence" in doc["summary"]


def test_a_checker_added_later_runs_on_an_old_folder(tmp_path):
    out = results_folder(tmp_path / "run")
    before = analyze(out, report=False)
    assert "evictions_per_bind" not in before
    extra = tmp_path / "more_checkers"
    extra.mkdir()
    (extra / "evictions_per_bind.py").write_text(
        '"""evictions_per_bind: evict decisions per bind decision."""\n'
        'from ha.experiment.checkers import Absent\n'
        'NAME = "evictions_per_bind"\n'
        'def check(h):\n'
        '    ops = [d["op"] for d in h.decisions() if d.get("ok")]\n'
        '    binds = ops.count("bind")\n'
        '    return round(ops.count("evict") / binds, 3) if binds else Absent("no binds")\n')
    after = analyze(out, extra_checkers=[extra], report=False)
    assert after["evictions_per_bind"] == 0.0
    assert {k: v for k, v in after.items() if k != "evictions_per_bind"} == before
    doc = json.loads((out / "metrics.json").read_text())
    assert "evictions_per_bind" in doc["history"]["checkers"]
    res = CliRunner().invoke(app, ["analyze", str(out), "--json", "--checkers", str(extra)])
    assert res.exit_code == 0 and json.loads(res.output)["evictions_per_bind"] == 0.0
    res = CliRunner().invoke(app, ["analyze", str(out), "--checkers", str(tmp_path / "nope")])
    assert res.exit_code == 2 and "--checkers" in res.output and "nope" in res.output


def test_analyze_twice_is_byte_identical(tmp_path):
    out = results_folder(tmp_path / "run")
    analyze(out, report=False)
    first = [(out / f).read_bytes() for f in ("metrics.json", "timeseries.csv", "divergence.jsonl")]
    analyze(out, report=False)
    assert [(out / f).read_bytes() for f in ("metrics.json", "timeseries.csv", "divergence.jsonl")] == first


def test_analyze_of_a_crashed_run_skips_the_cut_line(tmp_path):
    out = results_folder(tmp_path / "run")
    (out / "history" / "final.json").unlink()
    with open(out / "history" / "ticks.jsonl", "a") as f:
        f.write('{"tick": 10, "t": 10.0, "instan')
    s = analyze(out, report=False)
    doc = json.loads((out / "metrics.json").read_text())
    assert doc["history"]["skipped"] == {"ticks.jsonl": 1} and doc["history"]["ticks"] == 10
    assert "api_consistency" in doc["absent"] and s["cache_divergence"]["max"] == 2
    assert History(out).duration() == 9.0


def test_cli_analyze_json_and_bad_folders(tmp_path):
    out = results_folder(tmp_path / "run")
    runner = CliRunner()
    res = runner.invoke(app, ["analyze", str(out), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["cache_divergence"]["max"] == 2
    res = runner.invoke(app, ["analyze", str(out)])
    assert res.exit_code == 0 and "failover_recovery_s: absent (no leader loss in the run)" in res.output
    res = runner.invoke(app, ["analyze", str(tmp_path / "missing")])
    assert res.exit_code == 2 and "no such folder" in res.output
    (tmp_path / "old").mkdir()
    res = runner.invoke(app, ["analyze", str(tmp_path / "old")])
    assert res.exit_code == 2 and "no recorded history" in res.output
    res = runner.invoke(app, ["report", str(out)])
    assert res.exit_code == 0 and (out / "report.md").exists()


def test_analyze_is_byte_identical_across_processes_and_hash_seeds(tmp_path):
    import os
    import subprocess
    import sys
    out = results_folder(tmp_path / "run")
    got = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        subprocess.run([sys.executable, "-c", "import sys; from ha.experiment.analyze import analyze; "
                        "analyze(sys.argv[1], report=False)", str(out)], check=True, env=env)
        got.append([(out / f).read_bytes() for f in ("metrics.json", "timeseries.csv", "divergence.jsonl")])
    assert got[0] == got[1]


def test_compare_shows_analyzed_runs_with_their_extensions(tmp_path):
    from ha.experiment.compare import compare_table
    a = results_folder(tmp_path / "a")
    analyze(a, report=False)
    b = results_folder(tmp_path / "b")
    analyze(b, report=False)
    t = compare_table([read_results(a), read_results(b)])
    assert t["metrics"]["cache_divergence"] == [2, 2]
    assert t["metrics"]["leader_changes"] == [0, 0] and t["metrics"]["api_consistency"] == [True, True]
    assert t["metrics"]["failover_recovery_s"] == [None, None]


def test_chaos_windows_come_from_the_history_and_chaos_decides_what_is_windowed(tmp_path):
    from ha.experiment.history import HistoryWriter
    from ha.experiment.report import chaos_windows
    from .histories import header
    w = HistoryWriter(tmp_path, header())
    for rec in ({"t": 1.0, "index": 0, "fault": "kill", "action": "fire", "targets": [S1], "status": "applied"},
                {"t": 2.0, "index": 1, "fault": "redis-restart", "action": "fire", "targets": [], "status": "applied"},
                {"t": 4.0, "index": 2, "fault": "pause", "action": "start", "targets": [S2], "status": "skipped"},
                {"t": 5.0, "index": 3, "fault": "watch-expire", "action": "fire", "targets": [S2], "status": "applied"}):
        w.fault(rec)
    w.close()
    assert chaos_windows({}, tmp_path) == [("kill→scheduler-1", 1.0, None), ("redis-restart→", 2.0, None),
                                           ("watch-expire→scheduler-2", 5.0, None)]


def test_timeseries_status_counts_follow_the_deltas(tmp_path):
    from ha.experiment.analyze import _base_rows
    from ha.experiment.history import HistoryWriter
    from ha.experiment.results import task_status_counts
    from .histories import header, inst
    import random
    rnd = random.Random(3)
    given = []
    w = HistoryWriter(tmp_path, header())
    tasks = {}
    for k in range(40):
        tasks = dict(tasks)
        for _ in range(rnd.randint(0, 5)):
            u = f"u{rnd.randrange(15)}"
            if rnd.random() < 0.25:
                tasks.pop(u, None)
            else:
                tasks[u] = [rnd.choice(["Pending", "Bound", "Running", "Pipelined"]), "n1"]
        alive = k % 9 != 4
        gen = 0 if k < 25 else 1
        w.tick(float(k), 1, 1, {S1: inst(tasks, gen=gen) if alive else None, S2: inst({})})
        given.append(task_status_counts(tasks) if alive else None)
    w.close()
    rows = _base_rows(History(tmp_path))
    for row, want in zip((r[0] for r in rows), given):
        if want is None:
            assert row["alive"] == 0
        else:
            assert {k.removeprefix("tasks_").upper(): v for k, v in row.items() if k.startswith("tasks_")} == want


def test_report_of_a_recorded_but_unanalyzed_run_points_to_analyze(tmp_path):
    out = results_folder(tmp_path / "run")
    res = CliRunner().invoke(app, ["report", str(out)])
    assert res.exit_code == 2 and "ha-testbed analyze" in res.output
    assert CliRunner().invoke(app, ["analyze", str(out)]).exit_code == 0
    assert CliRunner().invoke(app, ["report", str(out)]).exit_code == 0
