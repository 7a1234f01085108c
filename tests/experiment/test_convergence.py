"""The long-run convergence verdict (issue 7 item 5): seconds from the last fault to
cache_divergence 0 per live instance, written into metrics.json by the report."""
from __future__ import annotations

import json

from ha.experiment.oracles import convergence


def _rows(series: dict[str, list[tuple[float, int | None]]], dead: tuple[str, ...] = ()):
    out = []
    for name, pts in series.items():
        for i, (t, d) in enumerate(pts):
            alive = 0 if (name in dead and i == len(pts) - 1) else 1
            out.append({"t": t, "instance": name, "alive": alive, "cache_divergence": d})
    return out


def test_seconds_from_last_fault_to_zero_per_live_instance():
    rows = _rows({"s1": [(0, 3), (10, 2), (11, 1), (12, 0), (13, 1), (14, 0), (15, 0)],
                  "s2": [(0, 0), (10, 4), (11, 0), (12, 0), (13, 0), (14, 0), (15, 0)],
                  "s3": [(0, 5), (5, 5)]}, dead=("s3",))
    c = convergence(rows, 10.0, within_s=3.0, api_consistency={"ok": True})
    assert c["instances"]["s1"]["seconds"] == 2.0 and c["instances"]["s1"]["settled_s"] == 4.0
    assert c["instances"]["s2"]["seconds"] == 1.0 and c["instances"]["s2"]["max_after"] == 4
    assert c["instances"]["s3"]["alive"] is False and "seconds" not in c["instances"]["s3"]
    assert c["ok"] is True and c["value"] == 2.0 and c["api_consistency_ok"] is True


def test_not_ok_when_late_never_zero_or_api_inconsistent():
    rows = _rows({"s1": [(10, 2), (20, 2), (30, 0)], "s2": [(10, 1), (20, 1), (30, 1)]})
    c = convergence(rows, 10.0, within_s=15.0)
    assert c["instances"]["s1"]["seconds"] == 20.0 and c["instances"]["s1"]["ok"] is False
    assert c["instances"]["s2"]["seconds"] is None and "never 0" in c["instances"]["s2"]["reason"]
    assert c["ok"] is False and c["value"] is None
    ok_rows = _rows({"s1": [(10, 1), (11, 0)]})
    assert convergence(ok_rows, 10.0)["ok"] is True
    assert convergence(ok_rows, 10.0, api_consistency={"ok": False})["ok"] is False


def test_absent_with_a_reason_when_the_fault_lasts_to_the_end():
    rows = _rows({"s1": [(0, 1), (5, 1)], "s2": [(0, 0), (5, None)]})
    c = convergence(rows, 30.0)
    assert c["ok"] is None and c["value"] is None and "until the end" in c["reason"]
    assert convergence([], 1.0)["reason"] == "no timeseries rows"


def test_report_writes_convergence_into_metrics_json(tmp_path):
    from ha.experiment.report import write_report
    from ha.experiment.results import TIMESERIES_COLUMNS
    (tmp_path / "delivery").mkdir()
    exp = {"name": "x", "profile": "v1.14", "seed": 1, "duration": "20s",
           "chaos": [{"at": "2s", "for": "5s", "fault": "watch-delay", "target": "scheduler-1"},
                     {"at": "8s", "fault": "kill", "target": "leader"}]}
    (tmp_path / "metrics.json").write_text(json.dumps(
        {"summary": {}, "experiment": exp, "chaos": [],
         "oracles": {"api_consistency": {"ok": True}}}))
    lines = [",".join(TIMESERIES_COLUMNS)]
    for t, d in ((7.0, 2), (8.5, 1), (9.5, 0), (10.0, 0)):
        row = {c: "" for c in TIMESERIES_COLUMNS}
        row.update(t=t, instance="scheduler-1", alive=1, cache_divergence=d)
        lines.append(",".join(str(row[c]) for c in TIMESERIES_COLUMNS))
    (tmp_path / "timeseries.csv").write_text("\n".join(lines) + "\n")
    write_report(tmp_path)
    conv = json.loads((tmp_path / "metrics.json").read_text())["convergence"]
    assert conv["last_fault_s"] == 8.0 and conv["instances"]["scheduler-1"]["seconds"] == 1.5
    assert conv["ok"] is True
    assert "Convergence after the last fault" in (tmp_path / "report.md").read_text()
