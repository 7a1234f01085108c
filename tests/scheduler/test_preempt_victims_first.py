"""preempt's normal_preempt asks every node's victims before scoring any node, and scores the
nodes only when one of them has enough (ha/scheduler/actions/preempt.py). These tests hold it to
the order Volcano's normalPreempt follows — score, sort, then per node in that order: victims,
ValidateVictims, evict, pipeline — written out below as the reference: every action scenario
comes out the same under both, and an attempt where no node has enough never scores a node."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ha.scenario.loader import load_scenario
from ha.scenario.runner import run_scenario
from ha.scheduler.actions import preempt as preempt_mod
from ha.scheduler.api import ZERO
from ha.scheduler.framework.statement import StatementError
from ha.scheduler.framework.util import prioritize_nodes, sort_nodes, victims_suffice

DATA = Path(__file__).resolve().parents[1] / "data" / "scenarios"
ACTION_FILES = [f for f in sorted(DATA.glob("*.json")) if json.loads(f.read_text())["kind"] == "action"]


def reference_normal_preempt(self, ssn: Any, stmt: Any, preemptor: Any, filter_fn, predicate_nodes) -> bool:
    """Volcano's normalPreempt step for step: the nodes scored and sorted first, then each node's
    victims taken when the walk reaches it."""
    scores = prioritize_nodes(preemptor, predicate_nodes, ssn.batch_node_order_fn, ssn.node_order_map_fn,
                              ssn.node_order_reduce_fn)
    job = ssn.jobs.get(preemptor.job)
    if job is None:
        return False
    current_queue = ssn.queues.get(job.queue)
    for node in sort_nodes(scores):
        preemptees = [t.clone() for t in list(node.tasks.values()) if filter_fn is None or filter_fn(t)]
        victims = ssn.preemptable(preemptor, preemptees)
        if not victims_suffice(preemptor, node, victims):
            continue
        vq = ssn.build_victims_priority_queue(victims, preemptor)
        preempted_any = False
        while not vq.empty():
            if ssn.allocatable(current_queue, preemptor) and preemptor.init_resreq.less_equal(node.future_idle(), ZERO):
                break
            preemptee = vq.pop()
            try:
                stmt.evict(preemptee, "preempt")
            except StatementError as e:
                ssn.record_error(f"failed to preempt task {preemptee.pod_key} for {preemptor.pod_key}: {e}")
                continue
            if not preemptee.resreq.is_empty():
                preempted_any = True
        if ssn.allocatable(current_queue, preemptor) and preemptor.init_resreq.less_equal(node.future_idle(), ZERO):
            try:
                stmt.pipeline(preemptor, node.name, preempted_any)
            except StatementError as e:
                ssn.record_error(f"failed to pipeline task {preemptor.pod_key} on {node.name}: {e}")
                stmt.un_pipeline(preemptor)
            return True
    return False


def _outcome(res) -> tuple:
    o = res.outcome
    return (o.bind_list, o.evicted, sorted(o.pipelined.items()), o.podgroup_phases, o.task_status_counts, o.fatal)


@pytest.mark.parametrize("path", ACTION_FILES, ids=[f.stem for f in ACTION_FILES])
@pytest.mark.parametrize("profile", ["v1.14", "pr5045"])
def test_victims_first_decides_as_the_reference(path: Path, profile: str, monkeypatch):
    scn = load_scenario(path)
    got = _outcome(run_scenario(scn, profile))
    monkeypatch.setattr(preempt_mod.PreemptAction, "normal_preempt", reference_normal_preempt)
    want = _outcome(run_scenario(load_scenario(path), profile))
    assert got == want


def test_no_node_enough_scores_no_node(monkeypatch):
    """preempt__no-preempt-enough-idle style attempts: with no node whose victims make room, the
    attempt ends False without the node order functions being asked; attempts that preempt still
    score (the walk needs the order)."""
    calls = {"scored": 0, "attempts": 0, "assigned": 0}
    real_prioritize = preempt_mod.prioritize_nodes
    real_normal = preempt_mod.PreemptAction.normal_preempt

    def counting_prioritize(*a, **kw):
        calls["scored"] += 1
        return real_prioritize(*a, **kw)

    def counting_normal(self, *a, **kw):
        calls["attempts"] += 1
        out = real_normal(self, *a, **kw)
        calls["assigned"] += bool(out)
        return out

    monkeypatch.setattr(preempt_mod, "prioritize_nodes", counting_prioritize)
    monkeypatch.setattr(preempt_mod.PreemptAction, "normal_preempt", counting_normal)
    for path in ACTION_FILES:
        if path.stem.startswith(("preempt__", "priority__")):
            run_scenario(load_scenario(path), "v1.14")
    assert calls["attempts"] > calls["scored"] >= calls["assigned"] > 0
