"""The S4 fix (switch ``unpipeline_on_replace``, profile ``pr5045-s4fixed``; docs/volcano-semantics.md
S4): a task the cache holds Pipelined that a session re-places — Pipeline or Allocate on another
node, or Binding on its own node after Idle shrank — is un-pipelined from its old node first and
then placed through AddTask; a failure is an error with the old reservation restored, never
klog.Fatalf. Each path is checked against the PR profiles, where it fails or crashes as coded."""
from __future__ import annotations

import pytest

from ha.scheduler.api import CacheError, FatalCacheError, TaskNodeError, TaskStatus
from ha.scheduler.profiles import profile

from .fw_helpers import make_cache, node, pod, podgroup
from .test_s4_session_path import CONF, cache_and_two_sessions

S = TaskStatus
FIXED = "pr5045-s4fixed"
AS_CODED = ["pr5045", "pr5045-fixed"]
KEY = "ns/t"


def cluster(sw, *extra_pods, cpu_a=4000):
    return make_cache(sw, nodes=[node("A", cpu_a), node("B", 4000)],
                      podgroups=[podgroup("pg-t", 1)], pods=[pod("t", "pg-t", 2000), *extra_pods])


def task(cache, node_name=None):
    """The session's copy of the cache task (a clone), optionally placed on ``node_name``."""
    t = cache.find_task("ns", "t").clone()
    if node_name is not None:
        t.node_name = node_name
    return t


def assert_consistent(cache):
    """Every NodeInfo equals a recomputation from its tasks; every placed job task is held by its
    node in the same status (none left behind on another node)."""
    for ni in cache.nodes.values():
        want = ni.recompute()
        for f in ("idle", "used", "releasing", "pipelined"):
            got = getattr(ni, f)
            assert got.to_plain() == want[f].to_plain(), (ni.name, f, got, want[f])
    for job in cache.jobs.values():
        for t in job.tasks.values():
            holders = [n for n, ni in cache.nodes.items() if ni.tasks.get(f"{t.namespace}/{t.name}") is not None
                       and ni.tasks[f"{t.namespace}/{t.name}"].uid == t.uid]
            if t.status in (S.PENDING, S.SUCCEEDED, S.FAILED):
                assert holders == [], (t.name, t.status, holders)
            else:
                assert holders == [t.node_name], (t.name, t.status, t.node_name, holders)
                assert cache.nodes[t.node_name].tasks[f"{t.namespace}/{t.name}"].status == t.status


def cpu(ni, field):
    return getattr(ni, field).milli_cpu


def last_nomination(io, key=KEY):
    return [s.get("nominatedNodeName") for k, s in io.status_writes if k == key][-1]


# ---- Pipeline on B of a task Pipelined on A ------------------------------------------------------
def test_fixed_pipeline_elsewhere_moves_the_reservation():
    cache, io = cluster(FIXED)
    cache.pipeline(task(cache), "A")
    cache.pipeline(task(cache, "B"), "B")
    t = cache.find_task("ns", "t")
    assert (t.status, t.node_name, t.nominated_node_name) == (S.PIPELINED, "B", "B")
    a, b = cache.nodes["A"], cache.nodes["B"]
    assert KEY not in a.tasks and cpu(a, "pipelined") == 0 and cpu(a, "idle") == 4000
    assert cpu(b, "pipelined") == 2000 and cpu(b, "idle") == 4000
    assert last_nomination(io) == "B"
    assert cache.stats["fatal"] == 0
    assert_consistent(cache)


@pytest.mark.parametrize("prof", AS_CODED)
def test_as_coded_pipeline_elsewhere_is_fatal(prof):
    cache, _ = cluster(prof)
    cache.pipeline(task(cache), "A")
    with pytest.raises(FatalCacheError, match=r"Node <B>.*already on different node <A>"):
        cache.pipeline(task(cache, "B"), "B")
    assert cache.stats["fatal"] == 1


# ---- Allocate on B (AddBindTask) of a task Pipelined on A ----------------------------------------
def test_fixed_allocate_elsewhere_binds_there_and_releases_the_old_node():
    cache, io = cluster(FIXED)
    cache.pipeline(task(cache), "A")
    cache.add_bind_task(task(cache, "B"))
    assert io.binds == {KEY: "B"}
    t = cache.find_task("ns", "t")
    assert (t.status, t.node_name, t.nominated_node_name) == (S.BINDING, "B", "")
    a, b = cache.nodes["A"], cache.nodes["B"]
    assert KEY not in a.tasks and cpu(a, "pipelined") == 0 and cpu(a, "idle") == 4000
    assert cpu(b, "used") == 2000 and cpu(b, "idle") == 2000 and cpu(b, "pipelined") == 0
    assert last_nomination(io) == ""     # the nomination of A is cleared
    assert_consistent(cache)


@pytest.mark.parametrize("prof", AS_CODED)
def test_as_coded_allocate_elsewhere_fails_and_stays_pipelined_on_a(prof):
    cache, io = cluster(prof)
    cache.pipeline(task(cache), "A")
    with pytest.raises(TaskNodeError, match="already on different node <A>"):
        cache.add_bind_task(task(cache, "B"))
    t = cache.find_task("ns", "t")
    assert (t.status, t.node_name) == (S.PIPELINED, "A") and not io.binds
    assert cpu(cache.nodes["A"], "pipelined") == 2000


# ---- Pipelined -> Binding on the same node, Idle shrank since the snapshot ------------------------
def _shrink_a(cache):
    """A pod of another scheduler lands on A: Idle 4000 -> 1000 (the task needs 2000)."""
    f = pod("f", "pg-f", 3000, node_name="A", phase="Running")
    f["spec"]["schedulerName"] = "other"
    cache.add_pod(f)
    assert cpu(cache.nodes["A"], "idle") == 1000


def test_fixed_bind_after_idle_shrank_is_an_error_and_keeps_the_reservation():
    cache, io = cluster(FIXED)
    cache.pipeline(task(cache), "A")
    writes = len(io.status_writes)
    _shrink_a(cache)
    with pytest.raises(TaskNodeError, match="not enough to put task <ns/t>"):
        cache.add_bind_task(task(cache, "A"))
    t = cache.find_task("ns", "t")
    assert (t.status, t.node_name, t.nominated_node_name) == (S.PIPELINED, "A", "A")
    assert cpu(cache.nodes["A"], "pipelined") == 2000 and not io.binds
    assert len(io.status_writes) == writes          # nothing written for a failed AddBindTask
    assert cache.stats["fatal"] == 0
    assert_consistent(cache)


@pytest.mark.parametrize("prof", AS_CODED)
def test_as_coded_bind_after_idle_shrank_is_fatal(prof):
    cache, _ = cluster(prof)
    cache.pipeline(task(cache), "A")
    _shrink_a(cache)
    with pytest.raises(FatalCacheError, match="not enough to put task <ns/t>"):
        cache.add_bind_task(task(cache, "A"))


def test_fixed_bind_on_its_own_node_converts_the_reservation():
    cache, io = cluster(FIXED)
    cache.pipeline(task(cache), "A")
    cache.add_bind_task(task(cache, "A"))
    a = cache.nodes["A"]
    assert io.binds == {KEY: "A"} and cache.find_task("ns", "t").status == S.BINDING
    assert (cpu(a, "pipelined"), cpu(a, "used"), cpu(a, "idle")) == (0, 2000, 2000)
    assert_consistent(cache)


# ---- the new placement fails: the old reservation comes back ------------------------------------
def test_fixed_failed_pipeline_elsewhere_restores_the_old_reservation():
    # B holds another incarnation of ns/t (same name, other uid): AddTask on B refuses
    other = pod("t", "pg-x", 1000, node_name="B", phase="Running")
    other["metadata"]["uid"] = "ns-t-old"
    other["spec"]["schedulerName"] = "other"
    cache, io = cluster(FIXED, other)
    cache.pipeline(task(cache), "A")
    with pytest.raises(TaskNodeError, match="already on node <B>"):
        cache.pipeline(task(cache, "B"), "B")
    t = cache.jobs["ns/pg-t"].tasks["ns-t"]
    assert (t.status, t.node_name, t.nominated_node_name) == (S.PIPELINED, "A", "A")
    assert cpu(cache.nodes["A"], "pipelined") == 2000 and cpu(cache.nodes["B"], "pipelined") == 0
    assert last_nomination(io) == "A"
    assert_consistent(cache)


# ---- a task the cache already placed (bound meanwhile) -------------------------------------------
def test_fixed_pipeline_of_a_task_running_elsewhere_is_refused():
    cache, _ = make_cache(FIXED, nodes=[node("A", 4000), node("B", 4000)], podgroups=[podgroup("pg-t", 1)],
                          pods=[pod("t", "pg-t", 2000, node_name="A", phase="Running")])
    with pytest.raises(TaskNodeError, match="already on different node <A>"):
        cache.pipeline(task(cache, "B"), "B")
    t = cache.find_task("ns", "t")
    assert (t.status, t.node_name) == (S.RUNNING, "A")
    assert cpu(cache.nodes["A"], "used") == 2000 and cpu(cache.nodes["B"], "pipelined") == 0
    assert_consistent(cache)


@pytest.mark.parametrize("prof", AS_CODED)
def test_as_coded_pipeline_of_a_task_running_elsewhere_is_fatal(prof):
    cache, _ = make_cache(prof, nodes=[node("A", 4000), node("B", 4000)], podgroups=[podgroup("pg-t", 1)],
                          pods=[pod("t", "pg-t", 2000, node_name="A", phase="Running")])
    with pytest.raises(FatalCacheError):
        cache.pipeline(task(cache, "B"), "B")


# ---- UnPipeline when the node is gone -------------------------------------------------------------
@pytest.mark.parametrize("prof", [FIXED, *AS_CODED])
def test_unpipeline_after_the_node_is_gone(prof):
    cache, _ = cluster(prof)
    cache.pipeline(task(cache), "A")
    cache.delete_node(node("A", 4000))
    if prof == FIXED:
        cache.unpipeline(task(cache))
        t = cache.find_task("ns", "t")
        assert (t.status, t.node_name) == (S.PENDING, "")
        cache.pipeline(task(cache, "B"), "B")      # and it can be placed again
        assert cache.find_task("ns", "t").node_name == "B"
        assert_consistent(cache)
    else:
        with pytest.raises(CacheError, match="host A does not exist"):
            cache.unpipeline(task(cache))
        assert cache.find_task("ns", "t").status == S.PIPELINED


# ---- the session path of test_s4_session_path.py --------------------------------------------------
_two_sessions = cache_and_two_sessions


def test_session_path_without_self_exclusion_binds_on_b_instead_of_crashing():
    """pr5045 (no self-exclusion, so t cannot use its own reservation on A) + the fix: allocate
    puts t on B, AddBindTask un-pipelines it from A and binds it to B."""
    cache, io, res = _two_sessions(profile("pr5045", unpipeline_on_replace=True))
    assert res.ok and res.fatal is None and not res.errors
    assert res.binds == {KEY: "B"} and io.binds == {KEY: "B"}
    t = cache.find_task("ns", "t")
    assert (t.status, t.node_name) == (S.BINDING, "B")
    assert cpu(cache.nodes["A"], "pipelined") == 0 and KEY not in cache.nodes["A"].tasks
    assert cache.stats["fatal"] == 0
    assert_consistent(cache)


def test_session_path_with_the_new_profile_keeps_the_reservation():
    cache, io, res = _two_sessions(FIXED)
    assert res.ok and not res.binds and not res.evictions and not io.binds
    assert cache.find_task("ns", "t").node_name == "A" and cpu(cache.nodes["A"], "pipelined") == 2000
    assert_consistent(cache)


def test_profile_contract():
    fixed, new = profile("pr5045-fixed"), profile(FIXED)
    assert new == fixed.with_(unpipeline_on_replace=True)
    for name in ("v1.14", "pr5045", "pr5045-fixed", "annotations", "nomination-only"):
        assert not profile(name).unpipeline_on_replace


# ---- AddBindTask of a task the cache already holds on that node (bound meanwhile) ----------------
def _running_on_overcommitted_a(sw):
    f = pod("f", "pg-f", 3000, node_name="A", phase="Running")
    f["spec"]["schedulerName"] = "other"
    cache, io = make_cache(sw, nodes=[node("A", 4000), node("B", 4000)], podgroups=[podgroup("pg-t", 1)],
                           pods=[pod("t", "pg-t", 2000, node_name="A", phase="Running"), f])
    assert cpu(cache.nodes["A"], "idle") == -1000
    return cache, io


def test_fixed_bind_of_a_task_already_running_there_is_refused_like_v1_14():
    cache, io = _running_on_overcommitted_a(FIXED)
    with pytest.raises(TaskNodeError, match="already on node <A>"):
        cache.add_bind_task(task(cache, "A"))
    t = cache.find_task("ns", "t")
    assert (t.status, t.node_name) == (S.RUNNING, "A") and not io.bind_attempts
    assert cache.stats["fatal"] == 0
    assert_consistent(cache)


@pytest.mark.parametrize("prof", AS_CODED)
def test_as_coded_bind_of_a_task_already_running_on_an_overcommitted_node_is_fatal(prof):
    cache, _ = _running_on_overcommitted_a(prof)
    with pytest.raises(FatalCacheError, match="not enough to put task <ns/t>"):
        cache.add_bind_task(task(cache, "A"))
