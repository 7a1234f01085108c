"""ha-testbed shrink on examples/br2-cyclic-eviction.yaml (sim engine): it ends no larger than the
repro's own cluster and still shows cyclic evictions; the path is deterministic; the run budget,
the wall-time budget and Ctrl-C stop it with the smallest case written; a failure the sim does not
reproduce, or a summary that does not satisfy the predicate, is exit 1."""
from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from ha.cli import app
from ha.experiment.config import load_experiment
from ha.experiment.runner import ExperimentRunner
from ha.experiment.shrink import Shrinker, parse_predicate

ROOT = Path(__file__).resolve().parents[3]
BR2 = ROOT / "examples" / "br2-cyclic-eviction.yaml"
WHEN = "cyclic_evictions>0"


def _run(exp, out: Path) -> dict:
    return ExperimentRunner(exp, out, engine="sim", progress=False,
                            console=Console(file=io.StringIO())).run().summary


@pytest.fixture(scope="module")
def br2_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("br2") / "run"
    summary = _run(load_experiment(BR2), out)
    assert summary["cyclic_evictions"]["count"] > 0
    return out


@pytest.fixture(scope="module")
def br2_shrunk(br2_run, tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("shrunk") / "a"
    r = CliRunner().invoke(app, ["shrink", str(br2_run), "--when", WHEN, "--out", str(out), "--json"])
    assert r.exit_code == 0, r.output
    return out, json.loads(r.output)


def test_br2_shrinks_to_the_repros_cluster(br2_shrunk):
    out, res = br2_shrunk
    orig, final = res["original"], res["final"]
    assert res["stopped"] == "fixpoint"
    # the repro's own cluster (tests/data/bug-repros.json BR2): 1 node, 3 podgroups, 3 pods
    assert final["nodes"] <= 1 and final["jobs"] <= 3
    assert final["faults"] < orig["faults"] and final["seconds"] < orig["seconds"]
    assert final["instances"] <= orig["instances"]
    summary = json.loads((out / "run" / "metrics.json").read_text())["summary"]
    assert summary["cyclic_evictions"]["count"] > 0
    # every accepted step kept the predicate true, and each one is in shrink.md
    md = (out / "shrink.md").read_text()
    for step in res["steps"]:
        assert step["predicate"].startswith("true")
        assert step["change"] in md
    assert f"| original | {orig['nodes']} | {orig['jobs']} | {orig['pods']} |" in md
    # shrunk.yaml is a valid experiment and reproduces the shrunk run
    exp = load_experiment(out / "shrunk.yaml")
    assert len(exp.chaos) == final["faults"]
    assert exp.duration == final["seconds"]


def test_shrunk_yaml_reproduces(br2_shrunk, tmp_path):
    out, _ = br2_shrunk
    summary = _run(load_experiment(out / "shrunk.yaml"), tmp_path / "again")
    assert parse_predicate(WHEN).evaluate(summary).ok
    want = json.loads((out / "run" / "metrics.json").read_text())["summary"]
    assert summary["cyclic_evictions"] == want["cyclic_evictions"]


def test_same_input_same_shrink_path(br2_run, br2_shrunk, tmp_path):
    out_a, res_a = br2_shrunk
    r = CliRunner().invoke(app, ["shrink", str(br2_run), "--when", WHEN, "--out", str(tmp_path / "b"), "--json"])
    assert r.exit_code == 0, r.output
    res_b = json.loads(r.output)
    assert (tmp_path / "b" / "shrunk.yaml").read_bytes() == (out_a / "shrunk.yaml").read_bytes()
    assert res_b["steps"] == res_a["steps"] and res_b["tried"] == res_a["tried"]


def test_run_budget_is_honoured(br2_run, br2_shrunk, tmp_path):
    _, full = br2_shrunk
    r = CliRunner().invoke(app, ["shrink", str(br2_run), "--when", WHEN, "--budget", "4",
                                 "--out", str(tmp_path / "c"), "--json"])
    assert r.exit_code == 0, r.output
    res = json.loads(r.output)
    assert res["runs"] == 4 and len(res["tried"]) == 4 and res["stopped"] == "budget"
    assert full["runs"] > 4
    # the files are there for the smallest case found within the budget, and it still fails
    exp = load_experiment(tmp_path / "c" / "shrunk.yaml")
    assert exp.duration == res["final"]["seconds"]
    summary = json.loads((tmp_path / "c" / "run" / "metrics.json").read_text())["summary"]
    assert summary["cyclic_evictions"]["count"] > 0
    assert "run budget (--budget) was used up" in (tmp_path / "c" / "shrink.md").read_text()


def test_time_budget_stops_after_the_confirming_run(br2_run, tmp_path):
    r = CliRunner().invoke(app, ["shrink", str(br2_run), "--when", WHEN, "--time-budget", "1ms",
                                 "--out", str(tmp_path / "t"), "--json"])
    assert r.exit_code == 0, r.output
    res = json.loads(r.output)
    assert res["runs"] == 1 and res["stopped"] == "time budget" and res["steps"][0]["run"] == 1
    assert load_experiment(tmp_path / "t" / "shrunk.yaml").duration == 40


def test_interrupt_keeps_the_smallest_case(br2_run, tmp_path):
    exp = load_experiment(BR2)

    def stop_at_5(what, runs, size):
        if runs == 5 and size is None:
            raise KeyboardInterrupt
    res = Shrinker(exp, parse_predicate(WHEN), tmp_path / "i", on_progress=stop_at_5).shrink()
    assert res.stopped == "interrupted" and res.runs == 5
    assert len(res.steps) >= 2      # the confirming run and at least one accepted step before Ctrl-C
    kept = load_experiment(tmp_path / "i" / "shrunk.yaml")
    assert len(kept.chaos) == res.final.faults < len(exp.chaos)
    assert (tmp_path / "i" / "run" / "metrics.json").is_file()
    assert not (tmp_path / "i" / ".work").exists()
    assert "interrupted (Ctrl-C)" in (tmp_path / "i" / "shrink.md").read_text()


def test_failure_that_sim_does_not_reproduce_is_exit_1(br2_run, tmp_path):
    # a "live" run whose summary shows cycles under a profile that, in sim, does not cycle
    fake = tmp_path / "live-run"
    fake.mkdir()
    doc = json.loads((br2_run / "metrics.json").read_text())
    doc["engine"] = "live"
    doc["experiment"]["profile"] = "pr5045-fixed"
    (fake / "metrics.json").write_text(json.dumps(doc))
    r = CliRunner().invoke(app, ["shrink", str(fake), "--when", WHEN, "--out", str(tmp_path / "o")])
    assert r.exit_code == 1, r.output
    assert "does not reproduce on the sim engine" in r.output and "live engine" in r.output
    assert "cyclic_evictions=0" in r.output


def test_summary_that_does_not_satisfy_the_predicate_is_exit_1(br2_run, tmp_path):
    r = CliRunner().invoke(app, ["shrink", str(br2_run), "--when", "overcommit_violations>0",
                                 "--out", str(tmp_path / "o")])
    assert r.exit_code == 1 and "nothing to shrink" in r.output
    assert not (tmp_path / "o").exists()


def test_bad_folder_is_exit_2(tmp_path):
    r = CliRunner().invoke(app, ["shrink", str(tmp_path / "nope"), "--when", WHEN])
    assert r.exit_code == 2 and "not a results folder" in r.output
    (tmp_path / "empty").mkdir()
    r = CliRunner().invoke(app, ["shrink", str(tmp_path / "empty"), "--when", WHEN])
    assert r.exit_code == 2 and "holds the experiment" in r.output


def test_seeds_are_tried_in_order_and_kept_only_when_smaller(br2_shrunk, tmp_path):
    out, res = br2_shrunk
    exp = load_experiment(out / "shrunk.yaml")
    from ha.experiment.shrink.shrinker import Size
    sh = Shrinker(exp, parse_predicate(WHEN), tmp_path / "s")
    sh.work.mkdir(parents=True)
    final = res["final"]
    same = Size(**final)
    # nothing is smaller than the shrunk run by the run's own size: every seed is tried, none kept
    assert sh._try_seeds(exp, same, []) is None
    assert [t["change"] for t in sh.log] == [f"seed {exp.seed} -> {exp.seed + k}" for k in range(1, 9)]
    # against a larger reference size the first seed that still cycles is kept
    sh2 = Shrinker(exp, parse_predicate(WHEN), tmp_path / "s2")
    sh2.work.mkdir(parents=True)
    big = Size(**{**final, "pods": final["pods"] + 100})
    steps = []
    got = sh2._try_seeds(exp, big, steps)
    holding = [t for t in sh.log if t["holds"]]
    assert holding      # the shrunk BR2 cycles whatever the seed (no random draw decides it)
    first = int(holding[0]["change"].rsplit(" ", 1)[1])
    assert got is not None and got[0].seed == first and steps[0].what.endswith(str(first))
    assert len(sh2.log) == [t["change"] for t in sh.log].index(holding[0]["change"]) + 1


def test_experiment_from_history_header(br2_run, tmp_path):
    # a folder with only history/run.json (no metrics.json): the experiment and seed come from it
    src = tmp_path / "h"
    (src / "history").mkdir(parents=True)
    shutil.copy(br2_run / "history" / "run.json", src / "history" / "run.json")
    r = CliRunner().invoke(app, ["shrink", str(src), "--when", WHEN, "--budget", "1",
                                 "--out", str(tmp_path / "o"), "--json"])
    assert r.exit_code == 0, r.output
    res = json.loads(r.output)
    assert res["runs"] == 1 and res["steps"][0]["predicate"].startswith("true")
    assert load_experiment(tmp_path / "o" / "shrunk.yaml").seed == 1
