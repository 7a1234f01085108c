"""The --when language: every operator, and/or/not, parentheses, nested keys, headlines, absent
metrics (false, with a note) and bad input (BadInput naming the position; exit 2 on the CLI)."""
from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from ha.cli import app
from ha.errors import BadInput
from ha.experiment.shrink.predicate import parse_predicate

SUMMARY = {
    "cyclic_evictions": {"count": 4, "slots": 1, "jobs": 1},
    "overcommit_violations": {"count": 0, "ticks": 81},
    "fatal_cache_errors": 0,
    "bind_conflicts": 2,
    "allocation_drift": {"count": 3, "rate": 0.5},
    "convergence": {"ok": False, "value": None, "instances": {"scheduler-1": {"ok": True, "final": 0}}},
    "cache_divergence": {"max": 2, "mean": 0.14, "instances": {"scheduler-1": {"max": 1}}},
    "pairwise_drift": {"max": 2, "pairs": {"scheduler-1|scheduler-2": {"max": 1}}},
    "staleness_ms": {"scheduler-1": {"p50": 3.0, "p99": 40.0}, "scheduler-2": {"p50": 1.0, "p99": 90.5}},
}


def ok(expr: str) -> bool:
    return parse_predicate(expr).evaluate(SUMMARY).ok


@pytest.mark.parametrize("expr,want", [
    ("cyclic_evictions>0", True), ("cyclic_evictions>4", False),
    ("cyclic_evictions>=4", True), ("cyclic_evictions>=5", False),
    ("cyclic_evictions<5", True), ("cyclic_evictions<4", False),
    ("cyclic_evictions<=4", True), ("cyclic_evictions<=3", False),
    ("cyclic_evictions==4", True), ("cyclic_evictions==4.0", True), ("cyclic_evictions==3", False),
    ("cyclic_evictions!=3", True), ("cyclic_evictions!=4", False),
    ("fatal_cache_errors>0", False), ("fatal_cache_errors==0", True),
    ("allocation_drift>=3", True), ("allocation_drift.rate<0.6", True), ("allocation_drift.rate>0.6", False),
    ("overcommit_violations>0", False), ("overcommit_violations.ticks==81", True),
    ("staleness_ms>90", True), ("staleness_ms>91", False),           # headline: the worst p99
    ("cache_divergence>=2", True), ("cache_divergence.instances.scheduler-1.max==1", True),
    ("pairwise_drift.pairs.scheduler-1|scheduler-2.max==1", True),
])
def test_each_operator_and_headline(expr, want):
    assert ok(expr) is want


@pytest.mark.parametrize("expr,want", [
    ("convergence.ok==false", True), ("convergence.ok==true", False), ("convergence.ok!=true", True),
    ("convergence.value==null", True), ("convergence.instances.scheduler-1.ok==true", True),
    ("cyclic_evictions>0 and overcommit_violations>0", False),
    ("cyclic_evictions>0 or overcommit_violations>0", True),
    ("not cyclic_evictions>0", False), ("not (fatal_cache_errors>0)", True),
    ("fatal_cache_errors>0 or cyclic_evictions>0 and bind_conflicts==2", True),   # and binds tighter
    ("(fatal_cache_errors>0 or cyclic_evictions>0) and bind_conflicts==3", False),
    ("fatal_cache_errors>0 or (cyclic_evictions>0 and not bind_conflicts<1)", True),
])
def test_booleans_and_nesting(expr, want):
    assert ok(expr) is want


def test_values_are_reported():
    v = parse_predicate("cyclic_evictions>0 and convergence.ok==false").evaluate(SUMMARY)
    assert v.ok and v.values == {"cyclic_evictions": 4, "convergence.ok": False}
    assert v.describe() == "true (cyclic_evictions=4, convergence.ok=false)"


@pytest.mark.parametrize("expr,note", [
    ("wasted_evictions>0", "metric 'wasted_evictions' is absent"),
    ("allocation_drift.nope>0", "allocation_drift.nope is absent"),
    ("convergence.instances>0", "is a map, not a scalar"),
    ("convergence.ok>0", "not a number"),
    ("convergence.value>0", "not a number"),
])
def test_absent_or_unusable_is_false_with_a_note(expr, note):
    v = parse_predicate(expr).evaluate(SUMMARY)
    assert v.ok is False
    assert any(note in n for n in v.notes), v.notes
    # and "not" of it is true: a missing metric is never a zero, but the note stays
    v2 = parse_predicate(f"not ({expr})").evaluate(SUMMARY)
    assert v2.ok is True and v2.notes


@pytest.mark.parametrize("expr,problem", [
    ("", "empty expression"),
    ("   ", "empty expression"),
    ("cyclic_evictions", "expected a comparison"),
    ("cyclic_evictions>", "expected a number, true, false, null or quoted text"),
    ("cyclic_evictions = 1", "unexpected character '='"),
    ("cyclic_evictions>0 overcommit_violations>0", "after a complete expression"),
    ("(cyclic_evictions>0", "expected ')'"),
    ("cyclic_evictions>0)", "after a complete expression"),
    ("cyclic_evictions>true", "needs a number"),
    ("0<cyclic_evictions", "expected a metric name"),
    ("cyclic_evictions>0 and", "expected a metric name"),
    ("__import__('os')>0", "expected a comparison"),
    ("a>0 && b>0", "unexpected character '&'"),
])
def test_bad_expressions_are_bad_input(expr, problem):
    with pytest.raises(BadInput) as e:
        parse_predicate(expr)
    assert problem in str(e.value)
    assert "--when" in str(e.value) and "position" in str(e.value)


def test_cli_bad_expression_exits_2(tmp_path):
    (tmp_path / "metrics.json").write_text(json.dumps({"summary": {}, "experiment": {"name": "x"}}))
    r = CliRunner().invoke(app, ["shrink", str(tmp_path), "--when", "cyclic_evictions >> 0"])
    assert r.exit_code == 2
    assert "--when" in r.output and "position 19" in r.output
