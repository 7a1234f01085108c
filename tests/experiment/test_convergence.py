"""The long-run convergence verdict (issue 7 item 5): seconds from the last fault to
cache_divergence 0 per live instance, written into metrics.json by the report."""
from __future__ import annotations

import json

from ha.experiment.checkers.convergence import convergence


def _rows(series: dict[str, list[tuple[float, int | None]]], dead: tuple[str, ...] = ()):
    out = []
    for name, pts in series.items():
        for i, (t, d) in enumerate(pts):
            alive = 0 if (name in dead and i == len(pts) - 1) else 1
            out.append({"t": t, "instance": name, "alive": alive, "cache_divergence": d})
    return out


def test_seconds_from_last_fault_to_zero_per_live_instance():
    rows = _rows({"s1": [(0, 3), (10, 2), (11, 1), (12, 0), (13, 1), (14, 0), (15, 0), (16, 0)],
                  "s2": [(0, 0), (10, 4), (11, 0), (12, 0), (13, 0), (14, 0), (15, 0), (16, 0)],
                  "s3": [(0, 5), (5, 5)]}, dead=("s3",))
    c = convergence(rows, 10.0, within_s=4.0, min_quiet_s=2.0, api_consistency={"ok": True})
    assert c["instances"]["s1"]["seconds"] == 2.0 and c["instances"]["s1"]["settled_s"] == 4.0
    assert c["instances"]["s1"]["quiet_s"] == 2.0
    assert c["instances"]["s2"]["seconds"] == 1.0 and c["instances"]["s2"]["max_after"] == 4
    assert c["instances"]["s3"]["alive"] is False and "seconds" not in c["instances"]["s3"]
    # the headline is the slowest instance's settling time, not its first zero
    assert c["ok"] is True and c["value"] == 4.0 and c["api_consistency_ok"] is True


def test_a_first_zero_is_not_convergence_the_final_stretch_is():
    # s1 touches 0 one second after the fault but keeps flapping until 14 s: not settled within 3 s
    rows = _rows({"s1": [(10, 2), (11, 0), (12, 3), (13, 1), (14, 0), (15, 0), (16, 0), (17, 0)]})
    c = convergence(rows, 10.0, within_s=3.0, min_quiet_s=2.0)
    v = c["instances"]["s1"]
    assert v["seconds"] == 1.0 and v["settled_s"] == 4.0 and v["ok"] is False
    assert "settled for good only 4 s" in v["reason"] and c["ok"] is False
    assert convergence(rows, 10.0, within_s=4.0, min_quiet_s=2.0)["ok"] is True


def test_a_zero_in_the_last_samples_alone_is_not_enough_quiet():
    rows = _rows({"s1": [(10, 2), (11, 2), (12, 0), (13, 0)]})
    c = convergence(rows, 10.0, within_s=5.0, min_quiet_s=5.0)
    assert c["ok"] is False and "lengthen the quiet tail" in c["instances"]["s1"]["reason"]
    assert convergence(rows, 10.0, within_s=5.0, min_quiet_s=1.0)["ok"] is True


def test_not_ok_when_late_never_zero_or_api_inconsistent():
    rows = _rows({"s1": [(10, 2), (20, 2), (30, 0), (40, 0)], "s2": [(10, 1), (20, 1), (30, 1)]})
    c = convergence(rows, 10.0, within_s=15.0, min_quiet_s=1.0)
    assert c["instances"]["s1"]["seconds"] == 20.0 and c["instances"]["s1"]["ok"] is False
    assert c["instances"]["s2"]["seconds"] is None and "never 0" in c["instances"]["s2"]["reason"]
    assert c["ok"] is False and c["value"] is None
    ok_rows = _rows({"s1": [(10, 1), (11, 0), (20, 0)]})
    assert convergence(ok_rows, 10.0)["ok"] is True
    assert convergence(ok_rows, 10.0, api_consistency={"ok": False})["ok"] is False


def test_judged_on_the_persistent_part_when_recorded():
    rows = _rows({"s1": [(10, 2), (11, 0), (12, 1), (13, 0), (14, 0), (15, 0), (16, 0), (17, 0)]})
    assert convergence(rows, 10.0, within_s=2.0, min_quiet_s=2.0)["ok"] is False      # a blip at 12 s
    for r in rows:   # the blip was an event in flight: not held for a whole tick
        r["cache_divergence_persistent"] = 1 if r["t"] == 10 else 0
    c = convergence(rows, 10.0, within_s=2.0, min_quiet_s=2.0)
    assert c["column"] == "cache_divergence_persistent" and c["ok"] is True
    assert c["instances"]["s1"]["settled_s"] == 1.0


def test_absent_with_a_reason_when_the_fault_lasts_to_the_end():
    rows = _rows({"s1": [(0, 1), (5, 1)], "s2": [(0, 0), (5, None)]})
    c = convergence(rows, 30.0)
    assert c["ok"] is None and c["value"] is None and "until the end" in c["reason"]
    assert convergence([], 1.0)["reason"] == "no timeseries rows"


def test_report_groups_divergence_by_kind_and_skips_bad_lines(tmp_path):
    from ha.experiment.report import divergence_kinds
    lines = [
        {"t": 1.0, "instance": "s1", "pod": "default/a", "instance_state": ["Pending", ""], "reference": ["Pipelined", "n1"]},
        {"t": 2.0, "instance": "s2", "pod": "default/a", "instance_state": ["Pending", ""], "reference": ["Pipelined", "n1"]},
        {"t": 3.0, "instance": "s1", "pod": "default/b", "instance_state": ["Running", "n2"], "reference": ["Succeeded", "n2"]},
        {"t": 4.0, "instance": "s1", "pod": "default/c", "instance_state": None, "reference": ["Pending", ""]},
    ]
    p = tmp_path / "divergence.jsonl"
    p.write_text("\n".join(json.dumps(x) for x in lines) + "\nnot json\n{\"t\": 5}\n")
    kinds = divergence_kinds(p)
    assert [(k["instance_status"], k["reference_status"], k["node"], k["task_ticks"]) for k in kinds] == [
        ("Pending", "Pipelined", "other node", 2), ("Running", "Succeeded", "same node", 1),
        ("(absent)", "Pending", "—", 1)]
    assert kinds[0]["instances"] == ["s1", "s2"] and kinds[0]["first_t"] == 1.0 and kinds[0]["last_t"] == 2.0
    assert divergence_kinds(tmp_path / "missing.jsonl") == []
