"""repeat_pipelines on literal decision lists (the shape ha/runtime/instance.py records)."""
from __future__ import annotations

import random

from ha.experiment.repeat_pipelines import pipeline_counts, repeat_pipelines


def pipe(instance: str, session: int, pod: str, node: str, **extra) -> dict:
    return {"t": 0.0, "session": session, "instance": instance, "leader": True, "dry_run": False,
            "op": "pipeline", "pod": pod, "uid": None, "node": node, "ok": True, "error": None,
            "seq": session, **extra}


def status(instance: str, session: int, pod: str, node: str, ok: bool) -> dict:
    return {"t": 0.0, "session": session, "instance": instance, "leader": True, "dry_run": False,
            "op": "status", "pod": pod, "uid": "u", "node": node, "ok": ok,
            "error": None if ok else "409 Conflict", "seq": session}


def test_detects_the_same_pod_pipelined_on_the_same_node_session_after_session():
    decisions = []
    for s in range(1, 23):   # 22 consecutive sessions, each after a failed status write
        decisions.append(status("scheduler-2", s, "default/p", "n2", False))
        decisions.append(pipe("scheduler-2", s, "default/p", "n2"))
    decisions.append(pipe("scheduler-2", 23, "default/q", "n1"))
    assert repeat_pipelines(decisions) == {"scheduler-2": 23 / 2}
    assert pipeline_counts(decisions) == {"scheduler-2": {("default/p", "n2"): 22, ("default/q", "n1"): 1}}


def test_no_repeats_is_one_per_instance():
    decisions = [pipe("scheduler-1", 1, "default/a", "n1"), pipe("scheduler-1", 2, "default/b", "n1"),
                 pipe("scheduler-3", 4, "default/a", "n2"),
                 status("scheduler-1", 1, "default/a", "n1", True),
                 {"op": "bind", "instance": "scheduler-1", "pod": "default/a", "node": "n1", "ok": True}]
    assert repeat_pipelines(decisions) == {"scheduler-1": 1.0, "scheduler-3": 1.0}


def test_a_pod_moved_to_another_node_is_a_new_placement_not_a_repeat():
    decisions = [pipe("s1", 1, "default/a", "n1"), pipe("s1", 2, "default/a", "n2"),
                 pipe("s1", 3, "default/a", "n1")]
    assert repeat_pipelines(decisions) == {"s1": 1.5}


def test_instances_are_counted_apart_and_without_pipelines_have_no_ratio():
    decisions = [pipe("s1", 1, "default/a", "n1"), pipe("s1", 2, "default/a", "n1"),
                 pipe("s2", 1, "default/a", "n1"),
                 status("s3", 1, "default/a", "", False),
                 pipe("s3", 1, "default/a", "n1", ok=False), pipe("s3", 2, "default/a", "")]
    assert repeat_pipelines(decisions) == {"s1": 2.0, "s2": 1.0}
    assert repeat_pipelines([]) == {}


def test_order_does_not_matter():
    decisions = [pipe("s1", s, f"default/p{s % 3}", f"n{s % 2}") for s in range(12)]
    shuffled = list(decisions)
    random.Random(7).shuffle(shuffled)
    assert repeat_pipelines(shuffled) == repeat_pipelines(decisions) == {"s1": 2.0}
