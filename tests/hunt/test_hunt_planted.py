"""``ha-testbed hunt`` end to end on the sim engine.

* The test-only planted bug (switch ``planted_skip_fit``: allocate and AddBindTask skip their Idle
  checks) is found by a two-run hunt as an overcommit, shrunk in the background to a smaller
  experiment that still overcommits, with a scenario file that fails ``--check`` with the switch
  and passes without it; every run's experiment file re-runs alone.
* The same two runs without the planted bug find nothing (exit 0).
* A rerun into the same folder resumes (no run is redone); a rerun asking for another hunt, and
  bad options, are exit 2.
"""
from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import yaml
from rich.console import Console
from typer.testing import CliRunner

from ha.cli import app
from ha.experiment.config import load_experiment
from ha.experiment.runner import ExperimentRunner

HUNT = ["hunt", "--profile", "v1.14", "--runs", "2", "--seed", "0", "--intensity", "low", "--jobs", "2",
        "--shrink-budget", "20", "--json"]


def _invoke(args):
    r = CliRunner().invoke(app, args)
    return r.exit_code, r.output


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    out = tmp_path_factory.mktemp("hunt") / "planted"
    code, output = _invoke(HUNT + ["--switch", "planted_skip_fit", "--out", str(out)])
    assert code == 1, output
    return out, json.loads(output[output.index("{"):])


def test_the_planted_bug_is_found_and_shrunk(planted):
    out, doc = planted
    assert doc["runs"] == 2 and doc["failing_runs"] >= 1
    over = [s for s in doc["signatures"] if s["oracle"] == "overcommit"]
    assert len(over) == 1, doc["signatures"]
    sig = over[0]
    assert sig["count"] >= 1 and sig["shrunk"] is not None, sig
    orig, final = sig["shrunk"]["original"], sig["shrunk"]["final"]
    assert final["nodes"] < orig["nodes"] and final["pods"] < orig["pods"], (orig, final)
    # the shrunk experiment keeps the switch and still overcommits when re-run alone
    shrunk = Path(sig["shrunk"]["experiment"])
    exp = load_experiment(shrunk)
    assert exp.switches == {"planted_skip_fit": True}
    summary = ExperimentRunner(exp, out / "rerun-shrunk", engine="sim", progress=False, report=False,
                               console=Console(file=io.StringIO())).run().summary
    assert summary["overcommit_violations"]["count"] > 0
    md = (out / "hunt.md").read_text()
    assert "overcommit" in md and str(shrunk) in md and sig["reproduce"] in md


def test_the_scenario_file_reproduces_the_blamed_bind_only_with_the_bug(planted):
    out, doc = planted
    sig = next(s for s in doc["signatures"] if s["oracle"] == "overcommit")
    rp = sig["shrunk"]["repro"]
    assert rp and rp["reproduces"], rp
    path = str(Path(sig["shrunk"]["folder"]) / rp["file"])
    code, output = _invoke(["scenario", "run", path, "--profile", "v1.14", "--switch", "planted_skip_fit", "--check"])
    assert code == 1, output
    blamed = rp["blamed"]
    code, output = _invoke(["scenario", "run", path, "--profile", "v1.14", "--switch", "planted_skip_fit", "--json"])
    with_bug = json.loads(output)
    code, output = _invoke(["scenario", "run", path, "--profile", "v1.14", "--json"])
    without = json.loads(output)
    assert all(p in with_bug["binds"] for p in blamed), with_bug
    assert not any(p in without["binds"] for p in blamed), without


def test_every_run_re_runs_alone_from_its_experiment_file(planted):
    out, doc = planted
    failing = [s["source_run"] for s in doc["signatures"]]
    rec = json.loads((out / "runs" / f"run-{failing[0]:05d}" / "run.json").read_text())
    exp = load_experiment(out / "runs" / f"run-{failing[0]:05d}" / "experiment.yaml")
    summary = ExperimentRunner(exp, out / "rerun", engine="sim", progress=False, report=False,
                               console=Console(file=io.StringIO())).run().summary
    recorded = json.loads((out / "runs" / f"run-{failing[0]:05d}" / "results" / "metrics.json").read_text())["summary"]
    assert summary["overcommit_violations"] == recorded["overcommit_violations"]
    assert rec["violations"][0]["oracle"] in {v["oracle"] for v in rec["violations"]}


def test_a_rerun_resumes_and_another_hunt_is_refused(planted):
    out, doc = planted
    before = {p: p.stat().st_mtime_ns for p in (out / "runs").glob("*/run.json")}
    code, output = _invoke(HUNT + ["--switch", "planted_skip_fit", "--out", str(out)])
    assert code == 1, output
    again = json.loads(output[output.index("{"):])
    assert again["runs"] == 2 and [s["id"] for s in again["signatures"]] == [s["id"] for s in doc["signatures"]]
    assert {p: p.stat().st_mtime_ns for p in (out / "runs").glob("*/run.json")} == before   # nothing redone
    code, output = _invoke(HUNT + ["--out", str(out)])           # without the switch: another hunt
    assert code == 2 and "another hunt" in output


def test_without_the_planted_bug_the_same_runs_find_nothing(tmp_path):
    code, output = _invoke(HUNT + ["--out", str(tmp_path / "clean")])
    doc = json.loads(output[output.index("{"):])
    assert code == 0, doc["signatures"]
    assert doc["runs"] == 2 and doc["signatures"] == [] and doc["failing_runs"] == 0
    assert "No safety property failed." in (tmp_path / "clean" / "hunt.md").read_text()
    # a passing run keeps only its experiment and verdict
    assert sorted(p.name for p in (tmp_path / "clean" / "runs" / "run-00000").iterdir()) == ["experiment.yaml",
                                                                                            "run.json"]
    data = yaml.safe_load((tmp_path / "clean" / "runs" / "run-00000" / "experiment.yaml").read_text())
    assert data["profile"] == "v1.14" and "switches" not in data


@pytest.mark.parametrize("args, needle", [
    (["hunt", "--profile", "nope", "--runs", "1"], "unknown profile"),
    (["hunt", "--profile", "v1.14"], "--runs N or --time D"),
    (["hunt", "--profile", "v1.14", "--runs", "1", "--intensity", "extreme"], "--intensity"),
    (["hunt", "--profile", "v1.14", "--runs", "1", "--when", "a >"], "--when"),
    (["hunt", "--profile", "v1.14", "--runs", "1", "--switch", "no_such_switch"], "--switch"),
    (["hunt", "--profile", "v1.14", "--runs", "0"], "--runs"),
])
def test_bad_input_is_exit_2(args, needle, tmp_path):
    code, output = _invoke(args + ["--out", str(tmp_path / "h")])
    assert code == 2 and needle in output, output
    assert not (tmp_path / "h").exists()
