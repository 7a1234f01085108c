"""A planted bug (the test-only switch ``planted_skip_fit``: allocate and AddBindTask skip their
Idle checks) in a 40-node, 3-instance chaos experiment on the sim engine: shrink reaches a case of
at most 4 nodes and 3 jobs that still overcommits, and a scenario file (repro.json) that fails
``scenario run --check`` with the switch on and passes without it. Without the switch the same
experiment does not overcommit (the oracle stays 0), so the shrink has something real to find."""
from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from ha.cli import app
from ha.experiment.config import load_experiment
from ha.experiment.runner import ExperimentRunner

PLANTED = Path(__file__).resolve().parents[2] / "data" / "shrink" / "planted-overcommit.yaml"


def _run(exp, out: Path) -> dict:
    return ExperimentRunner(exp, out, engine="sim", progress=False,
                            console=Console(file=io.StringIO())).run().summary


@pytest.fixture(scope="module")
def planted(tmp_path_factory) -> tuple[Path, dict]:
    base = tmp_path_factory.mktemp("planted")
    exp = load_experiment(PLANTED)
    assert exp.cluster.nodes == 40 and len(exp.chaos) >= 2 and exp.switches == {"planted_skip_fit": True}
    summary = _run(exp, base / "run")
    assert summary["overcommit_violations"]["count"] > 0
    r = CliRunner().invoke(app, ["shrink", str(base / "run"), "--when", "overcommit_violations>0",
                                 "--out", str(base / "shrunk"), "--json"])
    assert r.exit_code == 0, r.output
    return base / "shrunk", json.loads(r.output)


def test_without_the_planted_bug_nothing_overcommits(tmp_path):
    exp = load_experiment(PLANTED)
    exp = exp.model_copy(update={"switches": {}})
    assert _run(exp, tmp_path / "clean")["overcommit_violations"]["count"] == 0


def test_shrink_reaches_a_tiny_case(planted):
    out, res = planted
    assert res["original"]["nodes"] == 40
    final = res["final"]
    assert final["nodes"] <= 4 and final["jobs"] <= 3, final
    assert final["faults"] == 0 or final["faults"] < res["original"]["faults"]
    summary = json.loads((out / "run" / "metrics.json").read_text())["summary"]
    assert summary["overcommit_violations"]["count"] > 0
    exp = load_experiment(out / "shrunk.yaml")
    assert exp.switches == {"planted_skip_fit": True}
    assert exp.cluster.nodes + len(exp.initial.nodes) == final["nodes"]


def test_scenario_file_fails_with_the_bug_and_passes_without(planted):
    out, res = planted
    rp = res["repro"]
    assert rp["written"] and rp["reproduces"] and rp["switches"] == {"planted_skip_fit": True}
    path = out / rp["file"]
    doc = json.loads(path.read_text())
    assert doc["kind"] == "action" and len(doc["nodes"]) <= 4
    assert set(rp["blamed"]).isdisjoint(doc["expected"]["binds"])
    r_bug = CliRunner().invoke(app, ["scenario", "run", str(path), "--check", "--switch", "planted_skip_fit"])
    assert r_bug.exit_code == 1, r_bug.output
    assert any(f"unexpected {k}" in r_bug.output for k in rp["blamed"])
    r_ok = CliRunner().invoke(app, ["scenario", "run", str(path), "--check"])
    assert r_ok.exit_code == 0, r_ok.output
    r_off = CliRunner().invoke(app, ["scenario", "run", str(path), "--check", "--switch", "planted_skip_fit=false"])
    assert r_off.exit_code == 0, r_off.output
    assert rp["command"] in (out / "shrink.md").read_text()


def test_unknown_switch_is_bad_input(planted):
    out, res = planted
    r = CliRunner().invoke(app, ["scenario", "run", str(out / res["repro"]["file"]), "--switch", "no_such"])
    assert r.exit_code == 2 and "unknown switch" in r.output
