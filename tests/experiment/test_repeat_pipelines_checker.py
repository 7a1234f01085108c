"""The repeat_pipelines checker over literal histories: a placement decided again after its
reservation was lost counts; a reservation kept across sessions does not."""
from __future__ import annotations

from ha.experiment.checkers import Absent, all_checkers

from .histories import History, HistoryWriter, header


def _pipe(pod, node, session, new, instance="scheduler-1", dry=False):
    return {"t": float(session), "op": "pipeline", "pod": f"default/{pod}", "node": node, "ok": True,
            "session": session, "instance": instance, "generation": 0, "dry_run": dry, "new": new}


def _check(tmp_path, decisions):
    with HistoryWriter(tmp_path, header()) as w:
        w.decisions(decisions)
    checker = next(c for c in all_checkers() if c.name == "repeat_pipelines")
    return checker.check(History(tmp_path))


def test_a_placement_decided_again_counts(tmp_path):
    # p1 on n1: decided in session 1, kept in 2, lost and decided again in 3; p2 decided once
    got = _check(tmp_path, [_pipe("p1", "n1", 1, True), _pipe("p1", "n1", 2, False),
                            _pipe("p1", "n1", 3, True), _pipe("p2", "n2", 3, True)])
    assert got["instances"]["scheduler-1"] == {"ratio": 1.5, "held": 2.0}
    assert got["max"] == 1.5


def test_a_kept_reservation_is_one_decision(tmp_path):
    got = _check(tmp_path, [_pipe("p1", "n1", s, s == 1) for s in range(1, 6)]
                 + [_pipe("p9", "n1", 1, True, dry=True), _pipe("p9", "n1", 2, True, dry=True)])
    assert got["instances"] == {"scheduler-1": {"ratio": 1.0, "held": 5.0}}   # dry runs left out


def test_absent_without_pipeline_decisions(tmp_path):
    assert isinstance(_check(tmp_path, []), Absent)
