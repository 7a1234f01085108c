"""A real sim sweep (local process pool): every cell a results folder, a failed cell recorded while
the sweep goes on, resume (done cells skipped, a half-written one redone), sweep.json/summary.md,
``compare`` and ``analyze`` on the sweep folder."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ha.cli import app

DATA = Path(__file__).resolve().parents[1] / "data" / "sweep" / "tiny.yaml"
GRACE = "initial.pods[0].annotations.ha-testbed/termination-grace-s"


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory):
    """2 profiles x 2 seeds x 2 values of the starting pod's grace annotation: "oops" passes the
    file's schema (annotations are strings) but the starting objects refuse it when the cell
    creates them (a real failure inside the cell), so half the cells fail."""
    out = tmp_path_factory.mktemp("sw") / "sweep"
    r = CliRunner().invoke(app, ["sweep", str(DATA), "--seeds", "1-2", "--profiles", "v1.14,pr5045-fixed",
                                 "--set", f'{GRACE}="5",oops', "--jobs", "2", "--out", str(out)])
    return out, r


def _cells(out: Path) -> dict[str, dict]:
    return {c["path"]: c for c in json.loads((out / "sweep.json").read_text())["cells"]}


def test_grid_cells_and_failed_cells_recorded(sweep_dir):
    out, r = sweep_dir
    assert r.exit_code == 1, r.output           # a cell failed: exit 1, after every cell ran
    cells = _cells(out)
    assert len(cells) == 8
    ok = [c for c in cells.values() if c["status"] == "ok"]
    bad = [c for c in cells.values() if c["status"] != "ok"]
    assert {c["set"][GRACE] for c in ok} == {'"5"'} and len(ok) == 4
    assert {c["set"][GRACE] for c in bad} == {"oops"} and len(bad) == 4
    for c in bad:
        assert c["status"] == "failed" and "termination-grace-s" in c["error"] and "'oops'" in c["error"]
        meta = json.loads((out / c["path"] / "cell.json").read_text())
        assert meta["error"] == c["error"]
    for c in ok:
        folder = out / c["path"]
        assert folder.name == f"seed-{c['seed']}" and folder.parent.parent.name == c["profile"]
        assert json.loads((folder / "metrics.json").read_text())["summary"]["pods_bound_per_s"] > 0
        assert (folder / "history" / "run.json").is_file() and (folder / "cell.log").is_file()
        assert not (folder / "report.md").exists()          # only with --cell-reports
    doc = json.loads((out / "sweep.json").read_text())
    assert doc["bootstrap"]["seed"] == 0 and doc["bootstrap"]["resamples"] == 10_000
    label = f'{GRACE.replace("/", "_")}="5"'
    grp = doc["metrics"]["pods_bound_per_s"][label]
    assert grp["profiles"]["v1.14"]["n"] == 2 and grp["profiles"]["pr5045-fixed"]["seeds"] == [1, 2]
    assert [(d["a"], d["b"], d["n"]) for d in grp["differences"]] == [("v1.14", "pr5045-fixed", 2)]
    md = (out / "summary.md").read_text()
    assert "Cells: 8 (4 ok, 4 failed)" in md and "## Failed cells" in md
    assert "v1.14 vs pr5045-fixed:" in md or "pr5045-fixed reduces" in md or "pr5045-fixed increases" in md
    assert (out / "plots" / "pods_bound_per_s.png").is_file()


def test_compare_and_analyze_on_the_sweep_folder(sweep_dir, tmp_path):
    out, _ = sweep_dir
    r = CliRunner().invoke(app, ["compare", str(out)])
    assert r.exit_code == 0, r.output
    assert "pods_bound_per_s" in r.output and "(n=2)" in r.output and "paired differences" in r.output
    r = CliRunner().invoke(app, ["compare", "--json", str(out)])
    doc = json.loads(r.output)
    assert doc["sweeps"][0]["metrics"]["pods_bound_per_s"]
    # a cell is a results folder: compare and analyze take it as one
    cell = next(p for p, c in _cells(out).items() if c["status"] == "ok")
    r = CliRunner().invoke(app, ["compare", str(out / cell)])
    assert r.exit_code == 0 and "pods_bound_per_s" in r.output
    # analyze SWEEP_DIR: every cell again from its history, then the statistics rewritten
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    before = json.loads((copy / "sweep.json").read_text())["metrics"]
    sj = json.loads((copy / "sweep.json").read_text())
    sj["metrics"] = {}
    (copy / "sweep.json").write_text(json.dumps(sj))
    (copy / "summary.md").write_text("stale")
    m = copy / cell / "metrics.json"
    md = json.loads(m.read_text())
    md["summary"]["pods_bound_per_s"] = 12345.0
    m.write_text(json.dumps(md))
    r = CliRunner().invoke(app, ["analyze", str(copy)])
    assert r.exit_code == 0, r.output
    assert json.loads(m.read_text())["summary"]["pods_bound_per_s"] != 12345.0
    assert json.loads((copy / "sweep.json").read_text())["metrics"] == before
    assert (copy / "summary.md").read_text().startswith("# Sweep of")


def test_resume_skips_done_cells_and_redoes_a_half_written_one(sweep_dir, tmp_path):
    out, _ = sweep_dir
    copy = tmp_path / "resume"
    shutil.copytree(out, copy)
    cells = _cells(copy)
    ok = sorted(p for p, c in cells.items() if c["status"] == "ok")
    half = ok[0]
    # half-written: the run died before its summary (metrics.json without one, no cell.json)
    md = json.loads((copy / half / "metrics.json").read_text())
    md["summary"] = {}
    (copy / half / "metrics.json").write_text(json.dumps(md))
    (copy / half / "cell.json").unlink()
    stamps = {p: (copy / p / "metrics.json").stat().st_mtime_ns for p in ok[1:]}
    walls = {p: cells[p]["wall_s"] for p in ok[1:]}
    r = CliRunner().invoke(app, ["sweep", str(DATA), "--seeds", "1-2", "--profiles", "v1.14,pr5045-fixed",
                                 "--set", f'{GRACE}="5",oops', "--jobs", "2", "--out", str(copy)])
    assert r.exit_code == 1, r.output
    after = _cells(copy)
    for p in ok[1:]:
        assert (copy / p / "metrics.json").stat().st_mtime_ns == stamps[p]    # untouched
        assert after[p]["skipped"] is True and after[p]["wall_s"] == walls[p]
    assert after[half]["status"] == "ok" and not after[half].get("skipped")
    assert json.loads((copy / half / "metrics.json").read_text())["summary"]["pods_bound_per_s"] > 0
    assert "4 done before" in r.output or "3 done before" in r.output
    assert sum(1 for c in after.values() if c["status"] == "failed") == 4     # failed ones retried, fail again


@pytest.mark.ray
def test_live_engine_sweep(tmp_path):
    """The same sweep on the live engine (embedded Redis and local Ray per cell, one at a time)."""
    out = tmp_path / "live"
    r = CliRunner().invoke(app, ["sweep", str(DATA), "--engine", "live", "--seeds", "1", "--profiles", "v1.14",
                                 "--out", str(out), "--json", "--cell-reports"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert doc["grid"]["engine"] == "live" and [c["status"] for c in doc["cells"]] == ["ok"]
    m = json.loads((out / "cells/v1.14/base/seed-1/metrics.json").read_text())
    assert m["engine"] == "live" and m["summary"]["pods_bound_per_s"] > 0
    assert (out / "cells/v1.14/base/seed-1/report.md").is_file()
    assert doc["metrics"]["pods_bound_per_s"]["base"]["profiles"]["v1.14"]["n"] == 1
