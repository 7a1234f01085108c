"""Signatures and grouping without running anything: the roles read from a summary's evidence,
names taken out of messages, the properties judged (absent metrics and modes that do not apply are
not judged), a failure joining the signature whose needed fault kinds its run applied and a
failure no signature covers waiting for a shrink of its own, and the Wilson interval."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from ha.errors import BadInput
from ha.hunt.report import build, render_markdown, wilson
from ha.hunt.safety import judge, predicate_for, properties
from ha.hunt.search import Hunt, HuntConfig, MAX_SHRINKS_PER_GROUP
from ha.hunt.signature import fault_kinds, normalise_message, roles


def test_messages_lose_their_names():
    a = normalise_message("fatal: session: Failed to add Task <default,job-00012-0> to Node <node-1> during task "
                          "update: task <default/job-00012-0> already on different node <node-2>")
    b = normalise_message("fatal: session: Failed to add Task <ns2,job-00407-3> to Node <node-11> during task "
                          "update: task <ns2/job-00407-3> already on different node <node-5>")
    assert a == b
    assert "job-" not in a and "node-1" not in a
    assert normalise_message("bind of default/job-00001-2 to node-3 failed") != a


def _over(pods):
    return {"overcommit_violations": {"count": 3, "examples": [{"t": 4.5, "node": "node-1",
                                                               "requested": {"cpu": 9000.0}, "pods": pods}]}}


def test_overcommit_roles_name_the_binders(tmp_path):
    one = _over([{"pod": "d/a", "bound_by": ["scheduler-1", 0, 4]}, {"pod": "d/b", "bound_by": ["scheduler-1", 0, 4]}])
    two = _over([{"pod": "d/a", "bound_by": ["scheduler-1", 0, 4]}, {"pod": "d/b", "bound_by": ["scheduler-2", 0, 9]}])
    lives = _over([{"pod": "d/a", "bound_by": ["scheduler-1", 0, 4]}, {"pod": "d/b", "bound_by": ["scheduler-1", 1, 2]}])
    r1, t1 = roles("overcommit", one, tmp_path)
    assert r1 == "binds by one session; over cpu" and t1 == 4.5
    assert roles("overcommit", two, tmp_path)[0].startswith("binds by two or more instances")
    assert roles("overcommit", lives, tmp_path)[0].startswith("binds by two lives of one instance")


def test_fault_kinds_applied_and_active(tmp_path):
    h = tmp_path / "history"
    h.mkdir()
    recs = [{"t": 1.0, "index": 0, "fault": "watch-delay", "action": "start", "status": "applied"},
            {"t": 6.0, "index": 0, "fault": "watch-delay", "action": "end", "status": "applied"},
            {"t": 8.0, "index": 1, "fault": "kill", "action": "fire", "status": "applied"},
            {"t": 9.0, "index": 2, "fault": "partition", "action": "start", "status": "skipped"}]
    (h / "faults.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    applied, active = fault_kinds(tmp_path, 10.0)
    assert applied == ["kill", "watch-delay"]          # the skipped partition never acted
    assert active == ["kill"]                          # the delay ended at 6 s; the kill 2 s before
    assert fault_kinds(tmp_path, 3.0)[1] == ["watch-delay"]


def test_judge_skips_absent_metrics_and_modes_that_do_not_apply():
    props = properties("pods_bound_per_s<1")
    summary = {"overcommit_violations": {"count": 2}, "fatal_cache_errors": 0, "partial_gang_binds": {"count": 1},
               "api_consistency": {"ok": True}, "pods_bound_per_s": 0.5}
    bad, judged = judge(summary, {"schedulers": {"mode": "leader-elected"}}, props)
    assert sorted(v.oracle for v in bad) == ["overcommit", "partial_gang_bind", "when"]
    assert "topology" not in judged and "convergence" not in judged     # absent: not judged
    assert "split_brain" not in judged                                   # no fencing in the run
    bad, judged = judge(summary, {"schedulers": {"mode": "active-active"}}, props)
    assert sorted(v.oracle for v in bad) == ["when"]
    # a topology violation counts only where the configuration has the plugin that promises it
    topo = {"topology_violations": {"count": 1, "examples": []}}
    assert not judge(topo, {}, props)[0]
    aware = {"scheduler_conf": {"tiers": [[{"name": "gang"}], [{"name": "network-topology-aware"}]]}}
    assert [v.oracle for v in judge(topo, aware, props)[0]] == ["topology"]
    with pytest.raises(BadInput):
        properties("overcommit_violations >")


def test_convergence_needs_a_tail_to_judge_by():
    p = predicate_for("convergence", "convergence.ok==false")
    short = {"convergence": {"ok": False, "within_s": 7.0, "min_quiet_s": 5.0,
                             "instances": {"scheduler-1": {"alive": True, "ok": False, "samples_after": 5}}}}
    long_ = {"convergence": {"ok": False, "within_s": 7.0, "min_quiet_s": 5.0,
                             "instances": {"scheduler-1": {"alive": True, "ok": False, "samples_after": 30}}}}
    assert not p.evaluate(short).ok
    assert p.evaluate(long_).ok
    assert not p.evaluate({"convergence": {"ok": True}}).ok


def test_wilson_interval():
    lo, hi = wilson(0, 100)
    assert lo == 0.0 and 0.03 < hi < 0.04
    lo, hi = wilson(50, 100)
    assert 0.40 < lo < 0.41 and 0.59 < hi < 0.60


def _violation(oracle, role, applied):
    return {"oracle": oracle, "when": "x>0", "value": "true", "roles": role, "t": 1.0, "faults_applied": applied,
            "faults_active": applied[:1], "group": f"{oracle} · {role}"}


def test_a_failure_joins_the_signature_whose_needed_faults_its_run_applied(tmp_path):
    h = Hunt(HuntConfig(profile="pr5045", runs=10), tmp_path)
    g = "fatal_cache_error · boom"
    h.records = {0: {"index": 0, "violations": [_violation("fatal_cache_error", "boom", ["kill", "watch-delay"])]},
                 1: {"index": 1, "violations": []},
                 2: {"index": 2, "violations": [_violation("fatal_cache_error", "boom", ["kill"])]},
                 3: {"index": 3, "violations": [_violation("fatal_cache_error", "boom", ["pause"])]},
                 4: {"index": 4, "violations": [_violation("overcommit", "one session", [])]}}
    # nothing shrunk yet: every group waits, and one shrink per group starts (the first failure)
    todo = h._shrinks_to_start()
    assert sorted((p["oracle"], p["source_run"]) for p in todo) == [("fatal_cache_error", 0), ("overcommit", 4)]
    # the fatal error's shrunk case needs a kill: runs 0 and 2 are that signature, run 3 is not
    h.shrinks = {todo[0]["id"]: {"id": todo[0]["id"], "group": g, "oracle": "fatal_cache_error", "source_run": 0,
                                 "when": "x>0", "status": "done", "needs": ["kill"]}}
    sigs, uncovered = h.assign()
    assert [i for i, _ in sigs[todo[0]["id"]]] == [0, 2]
    assert [i for i, _ in uncovered[g]] == [3]
    nxt = [p for p in h._shrinks_to_start() if p["group"] == g]
    assert len(nxt) == 1 and nxt[0]["source_run"] == 3 and nxt[0]["id"] != todo[0]["id"]
    # the report counts runs per signature over the runs judged, with the interval
    doc = build(h)
    row = next(r for r in doc["signatures"] if r["id"] == todo[0]["id"])
    assert row["count"] == 2 and row["needs"] == ["kill"] and row["per_1000"][0] == 400.0
    assert row["per_1000"][1] < 400.0 < row["per_1000"][2]
    assert doc["runs"] == 5 and doc["failing_runs"] == 4
    md = render_markdown(doc)
    assert "fatal_cache_error" in md and "not shrunk" in md
    # a group stops getting shrinks at the cap
    for k in range(MAX_SHRINKS_PER_GROUP):
        h.shrinks[f"s{k}"] = {"id": f"s{k}", "group": g, "oracle": "fatal_cache_error", "source_run": 0,
                              "when": "x>0", "status": "done", "needs": ["never-applied"]}
    assert not [p for p in h._shrinks_to_start() if p["group"] == g]


def test_a_shrink_covers_its_own_run_even_when_its_case_needs_a_kind_the_run_never_applied(tmp_path):
    """The shrinker may swap a fault for a smaller kind the run never applied (a redis-restart for
    the watch expiry it causes); the run the shrink started from is still its signature's, and no
    second shrink of the same run starts."""
    h = Hunt(HuntConfig(profile="pr5045", runs=10), tmp_path)
    g = "overcommit · two binders"
    h.records = {0: {"index": 0, "violations": [_violation("overcommit", "two binders", ["pause", "redis-restart"])]}}
    (todo,) = h._shrinks_to_start()
    h.shrinks = {todo["id"]: {"id": todo["id"], "group": g, "oracle": "overcommit", "source_run": 0,
                              "when": "x>0", "status": "done", "needs": ["pause", "watch-expire"]}}
    sigs, uncovered = h.assign()
    assert [i for i, _ in sigs[todo["id"]]] == [0] and not uncovered
    assert not h._shrinks_to_start()
