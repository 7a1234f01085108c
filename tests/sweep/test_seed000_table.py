"""examples/seed000_table.py on a sweep folder: per row and profile the mean over the cells with its
interval, and the paired difference computed from the same cells (checked against the cells'
own metrics.json)."""
from __future__ import annotations

import importlib.util
import json
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
