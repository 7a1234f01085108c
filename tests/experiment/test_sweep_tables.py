"""Tables over sweep folders, checked against the cells' own metrics.json: examples/seed000_table.py
(per row and profile the mean with its interval, the paired difference) and the agreement of two
sweeps (``ha-testbed compare SWEEP_A SWEEP_B``: common seeds, overlap, contradictions)."""
from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ha.cli import app

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parents[1] / "data" / "sweep" / "tiny.yaml"


def _script():
    spec = importlib.util.spec_from_file_location("seed000_table", ROOT / "examples" / "seed000_table.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    out = tmp_path_factory.mktemp("t") / "sweep"
    r = CliRunner().invoke(app, ["sweep", str(DATA), "--seeds", "1-3", "--profiles", "v1.14,pr5045-fixed",
                                 "--jobs", "2", "--out", str(out)])
    assert r.exit_code == 0, r.output
    return out


def _summary(out: Path, prof: str, seed: int) -> dict:
    return json.loads((out / "cells" / prof / "base" / f"seed-{seed}" / "metrics.json").read_text())["summary"]


def test_sweep_table_means_and_paired_differences(sweep):
    mod = _script()
    runs = mod.sweep_runs(sweep)
    assert sorted(runs) == ["pr5045-fixed", "v1.14"] and all(sorted(r) == [1, 2, 3] for r in runs.values())
    table, numbers = mod.sweep_table(runs)
    rate = {p: [_summary(sweep, p, s)["pods_bound_per_s"] for s in (1, 2, 3)] for p in runs}
    for p, xs in rate.items():
        d = numbers["sim"]["pods_bound_per_s"][p]
        assert d["n"] == 3 and d["mean"] == pytest.approx(sum(xs) / 3)
        assert d["ci95"][0] <= d["mean"] <= d["ci95"][1]
    diff = numbers["paired"]["pods_bound_per_s"]["pr5045-fixed-v1.14"]
    want = [b - a for a, b in zip(rate["v1.14"], rate["pr5045-fixed"])]
    assert diff["n"] == 3 and diff["mean"] == pytest.approx(sum(want) / 3)
    lines = table.splitlines()
    assert lines[0].startswith("| seed row | metric | v1.14 (n=3) | pr5045-fixed (n=3) | pr5045-fixed − v1.14, paired |")
    assert len(lines) == 2 + len(mod.SWEEP_ROWS)
    # a live column only beside the headline rows
    table2, _ = mod.sweep_table(runs, live=runs, diff=[])
    for line, (_, _, key) in zip(table2.splitlines()[2:], mod.SWEEP_ROWS):
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert (cells[-1] != "") == (key in mod.HEADLINE), line


def test_real_columns_come_from_the_real_cells_of_a_sweep(sweep, tmp_path):
    """--real: a column per (build, profile) from the cells whose metrics.json says they ran
    vc-scheduler; model cells of the same folder are not taken; only headline rows are filled."""
    mod = _script()
    real = tmp_path / "real"
    shutil.copytree(sweep, real)
    src = real / "cells" / "v1.14" / "base"
    dst = real / "cells" / "v1.14" / "schedulers.implementation=volcano+schedulers.standby=cold"
    src.rename(dst)
    for s in (1, 2, 3):
        p = dst / f"seed-{s}" / "metrics.json"
        doc = json.loads(p.read_text())
        doc["scheduler"] = {"implementation": "volcano", "version": "v1.14.1"}
        p.write_text(json.dumps(doc))
    src_pr = real / "cells" / "pr5045-fixed" / "base" / "seed-1" / "metrics.json"   # a model cell
    got = mod.real_runs(real)
    assert list(got) == ["v1.14.1 beside v1.14"] and sorted(got["v1.14.1 beside v1.14"]) == [1, 2, 3]
    assert src_pr.exists()
    runs = mod.sweep_runs(sweep)
    table, numbers = mod.sweep_table(runs, diff=[], real=got)
    want = [_summary(sweep, "v1.14", s)["cache_divergence"]["max"] for s in (1, 2, 3)]
    assert numbers["real"]["cache_divergence_max"]["v1.14.1 beside v1.14"]["mean"] == pytest.approx(sum(want) / 3)
    lines = table.splitlines()
    assert lines[0].rstrip().endswith("| real v1.14.1 beside v1.14 (n=3) |")
    for line, (_, _, key) in zip(lines[2:], mod.SWEEP_ROWS):
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert (cells[-1] != "") == (key in mod.HEADLINE or key == "leader_pipelined_max"), line


def _set_headline(cell: Path, metric: str, value) -> None:
    p = cell / "metrics.json"
    doc = json.loads(p.read_text())
    doc["summary"][metric] = value
    p.write_text(json.dumps(doc))


def test_agreement_of_two_sweeps(sweep, tmp_path):
    from ha.experiment.agreement import agreement, agreement_markdown
    from ha.experiment.sweep_report import read_sweep
    twin = tmp_path / "twin"
    shutil.copytree(sweep, twin)
    doc = agreement([sweep, twin], [read_sweep(sweep), read_sweep(twin)], metrics=("pods_bound_per_s",))
    x = doc["metrics"]["pods_bound_per_s"]
    for prof in ("v1.14", "pr5045-fixed"):
        a, b = x["profiles"][prof]["per_sweep"]
        assert x["profiles"][prof]["seeds"] == [1, 2, 3] and a == b and x["profiles"][prof]["overlap"] is True
    assert [p["contradiction"] for p in x["pairs"]] == [False]

    # the twin disagrees: v1.14 binds far faster in it, pr5045-fixed far slower
    for s in (1, 2, 3):
        _set_headline(twin / "cells" / "v1.14" / "base" / f"seed-{s}", "pods_bound_per_s", 1000.0 + s)
        _set_headline(twin / "cells" / "pr5045-fixed" / "base" / f"seed-{s}", "pods_bound_per_s", 0.001 * s)
    # and has lost a cell: only the seeds both finished count
    (twin / "cells" / "pr5045-fixed" / "base" / "seed-3" / "metrics.json").unlink()
    doc = agreement([sweep, twin], [read_sweep(sweep), read_sweep(twin)], metrics=("pods_bound_per_s",))
    x = doc["metrics"]["pods_bound_per_s"]
    assert x["profiles"]["v1.14"]["overlap"] is False
    assert x["profiles"]["pr5045-fixed"]["seeds"] == [1, 2]
    assert x["profiles"]["v1.14"]["per_sweep"][1]["mean"] == pytest.approx(1002.0)
    assert x["pairs"][0]["verdicts"][1]["verdict"] == "decrease"
    md = agreement_markdown(doc)
    assert "| pods_bound_per_s | v1.14 | 3 |" in md and "**no**" in md

    # a third sweep that orders the two profiles the other way: a contradiction
    other = tmp_path / "other"
    shutil.copytree(sweep, other)
    for s in (1, 2, 3):
        _set_headline(other / "cells" / "v1.14" / "base" / f"seed-{s}", "pods_bound_per_s", 0.001 * s)
        _set_headline(other / "cells" / "pr5045-fixed" / "base" / f"seed-{s}", "pods_bound_per_s", 1000.0 + s)
    doc = agreement([other, twin], [read_sweep(other), read_sweep(twin)], metrics=("pods_bound_per_s",))
    pair = doc["metrics"]["pods_bound_per_s"]["pairs"][0]
    assert [v["verdict"] for v in pair["verdicts"]] == ["increase", "decrease"] and pair["contradiction"] is True
    assert "**yes**" in agreement_markdown(doc)

    r = CliRunner().invoke(app, ["compare", str(sweep), str(twin), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["agreement"]["sweeps"] == ["sim (sweep)", "sim (twin)"]
