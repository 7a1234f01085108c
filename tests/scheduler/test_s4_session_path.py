"""The session-level path to docs/volcano-semantics.md S4 that crashed the leader in the pr5045 run
of examples/seed000-current-vs-proposed.yaml (examples/README.md, "The 2 overcommitted node-ticks of
pr5045"): a task Pipelined on A in the cache cannot use its own reservation (S1), allocate places it
on B, AddBindTask refuses ("already on different node A"), the session un-allocates it to Pending,
preempt pipelines it on B, and Cache.Pipeline -> NodeInfo.UpdateTask hits klog.Fatalf. With
self-exclusion (pr5045-fixed) the task keeps its reservation on A in this configuration and nothing
crashes."""
from __future__ import annotations

import pytest

from ha.scheduler.scheduler import run_session

from .fw_helpers import (CONFORMANCE, GANG_ALL, PREDICATES, PRIORITY_ALL, conf, make_cache, node, pod,
                         podgroup)
from .test_preempt_map_order import PRIORITY_CLASSES

CONF = conf(actions=("allocate", "preempt"),
            tiers=((PRIORITY_ALL, GANG_ALL, CONFORMANCE),
                   ({"name": "proportion", "enabledQueueOrder": True}, PREDICATES)))


def two_sessions(profile: str):
    return cache_and_two_sessions(profile)[2]


def cache_and_two_sessions(profile):
    """(cache, io, second session's result); ``profile`` is a profile name or a Switches."""
    cache, io = make_cache(
        profile, nodes=[node("A", 4000), node("B", 4000)],
        podgroups=[podgroup("pg-low", 1, pc="low", phase="Running"), podgroup("pg-t", 1, pc="high"),
                   podgroup("pg-b", 1, pc="low", phase="Running")],
        pods=[pod("x", "pg-low", 2000, node_name="A", phase="Running"),
              pod("y", "pg-low", 2000, node_name="A", phase="Running"),
              pod("t", "pg-t", 2000),
              pod("b1", "pg-b", 4000, node_name="B", phase="Running")],
        priority_classes=PRIORITY_CLASSES)
    first = run_session(cache, CONF, seed=1)
    assert first.ok and first.evictions == ["ns/x"] and first.committed_pipelines == {"ns/t": "A"}
    cache.delete_pod(io.pods["ns/b1"])   # B frees up while x is still terminating on A
    return cache, io, run_session(cache, CONF, seed=2)


def test_pr5045_as_coded_crashes_through_allocate_elsewhere_then_preempt():
    res = two_sessions("pr5045")
    assert any("failed to allocate task ns/t" in e and "already on different node <A>" in e for e in res.errors)
    assert res.fatal is not None and "Node <B>" in res.fatal and "already on different node <A>" in res.fatal


@pytest.mark.parametrize("profile", ["pr5045-fixed"])
def test_self_exclusion_keeps_the_reservation_here(profile):
    res = two_sessions(profile)
    assert res.ok and not res.binds and not res.evictions
