"""Every kind-"action" scenario of tests/data/scenarios passes its Go test's checks under v1.14
(docs/volcano-semantics.md §16.2: binds exactly, evictions as a multiset, session-Pipelined tasks on the
listed nodes), run through the real cache, session, actions and plugins."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from ha.scenario.loader import load_scenario
from ha.scenario.runner import compare, run_scenario

DATA = Path(__file__).resolve().parents[1] / "data" / "scenarios"
FILES = sorted(DATA.glob("*.json"))
ACTION_FILES = [f for f in FILES if json.loads(f.read_text())["kind"] == "action"]
UNIT_FILES = [f for f in FILES if json.loads(f.read_text())["kind"] == "unit"]


def test_the_scenario_set_is_complete():
    # the shared set holds 42 files: 27 action + 15 unit (the brief's "43 action" counted the
    # 58 Go cases of the upstream list, not the files that were copied)
    assert len(ACTION_FILES) == 27 and len(UNIT_FILES) == 15


@pytest.mark.parametrize("path", ACTION_FILES, ids=[f.stem for f in ACTION_FILES])
def test_action_scenario_matches_volcano_v1_14(path: Path):
    scn = load_scenario(path)
    assert scn.expected is not None
    res = run_scenario(scn, "v1.14")
    assert res.mismatches == [], f"{scn.name}: " + "; ".join(res.mismatches)
    assert res.ok is True
    # the reported counts are the recorded calls
    assert len(res.outcome.bind_list) == scn.expected.bind_count
    assert sorted(res.outcome.evicted) == sorted(scn.expected.evicted)


@pytest.mark.parametrize("path", UNIT_FILES, ids=[f.stem for f in UNIT_FILES])
def test_unit_scenarios_load(path: Path):
    scn = load_scenario(path)
    assert scn.kind == "unit"
    # their clusters are structural: every node and pod became a Kubernetes-shaped object
    for n in scn.objects.nodes:
        assert n["kind"] == "Node" and n["status"]["allocatable"]
    for p in scn.objects.pods:
        assert p["kind"] == "Pod" and p["metadata"]["uid"] == f"{p['metadata']['namespace']}-{p['metadata']['name']}"


def test_compare_reports_each_kind_of_mismatch():
    """The checker itself can fail: a wrong bind, a missing eviction, a misplaced pipeline."""
    from ha.scenario.loader import Expected
    from ha.scenario.runner import SessionOutcome
    exp = Expected(binds={"a/p1": "n1"}, bind_count=1, evicted=["a/v1", "a/v1"], evict_count=2,
                   pipelined={"a/j1": ["n2"]})
    out = SessionOutcome(binds={"a/p1": "n2", "a/p2": "n1"}, bind_list=[("a/p1", "n2"), ("a/p2", "n1")],
                         evicted=["a/v1"], pipelined={"a/p3": "n1"},
                         pipelined_by_job={"a/j1": [("a/p3", "n1")]}, session_jobs={"a/j1"})
    mm = compare(exp, out)
    text = "\n".join(mm)
    assert "bind_count: expected 1, got 2" in text
    assert "expected a/p1 -> n1, got a/p1 -> n2" in text
    assert "unexpected a/p2 -> n1" in text
    assert "missing ['a/v1']" in text
    assert "a/p3 is pipelined on n1" in text
    ok = SessionOutcome(binds={"a/p1": "n1"}, bind_list=[("a/p1", "n1")], evicted=["a/v1", "a/v1"],
                        pipelined_by_job={"a/j1": [("a/p3", "n2")]}, session_jobs={"a/j1"})
    assert compare(exp, ok) == []
