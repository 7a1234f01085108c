"""Actions and each switch of PR #5045's design / PR #5663 in a small constructed session (real cache,
RecordingIO, real plugins), run through ``ha.scheduler.scheduler.run_session``."""
from __future__ import annotations

from ha.scheduler.api import TaskStatus
from ha.scheduler.profiles import Switches, profile
from ha.scheduler.scheduler import Scheduler, run_session

from .fw_helpers import (CONFORMANCE, GANG_ALL, PREDICATES, PRIORITY_ALL, cache_task, conf, make_cache,
                         node, pod, podgroup, ssn_task)

ALLOC = conf(["allocate"], [[GANG_ALL, PREDICATES]])


def br3(sw):
    """n1 4000m; x1 2000m Releasing; gang pgj (min 3) j1..j3 1000m."""
    return make_cache(sw, nodes=[node("n1", 4000)], podgroups=[podgroup("pgj", 3), podgroup("pgx", 1)],
                      pods=[pod("x1", "pgx", 2000, node_name="n1", phase="Running", deleting=True),
                            pod("j1", "pgj", 1000), pod("j2", "pgj", 1000), pod("j3", "pgj", 1000)])


def statuses(ssn, *keys):
    return [ssn_task(ssn, k).status for k in keys]


# -- three_way_commit / commit_pipelined_only (BR3, S2) ---------------------------------------

def test_v1_14_keeps_pipelined_statement_neither_committed_nor_discarded():
    c, io = br3("v1.14")
    seen = {}
    res = run_session(c, ALLOC, seed=1, session_hook=lambda s: seen.update(
        st=statuses(s, "ns/j1", "ns/j2", "ns/j3"), idle=s.nodes["n1"].idle.milli_cpu))
    assert res.binds == {} and io.binds == {}
    # the phantom reservation: two Allocated, one Pipelined, still in the session at the end
    assert sorted(seen["st"]) == sorted([TaskStatus.ALLOCATED, TaskStatus.ALLOCATED, TaskStatus.PIPELINED])
    assert seen["idle"] == 0
    assert res.pipelined == {"ns/j3": "n1"} or len(res.pipelined) == 1
    assert cache_task(c, "ns/j1").status == TaskStatus.PENDING


def test_three_way_commit_binds_part_of_the_gang():
    c, io = br3(Switches(three_way_commit=True))
    res = run_session(c, ALLOC, seed=1)
    assert sorted(io.binds) == ["ns/j1", "ns/j2"] and res.bind_count == 2  # S2
    assert len(res.committed_pipelines) == 1


def test_commit_pipelined_only_binds_nothing_keeps_pipeline():
    c, io = br3(Switches(commit_pipelined_only=True))
    seen = {}
    res = run_session(c, ALLOC, seed=1, session_hook=lambda s: seen.update(
        st=sorted(statuses(s, "ns/j1", "ns/j2", "ns/j3")), idle=s.nodes["n1"].idle.milli_cpu))
    assert io.binds == {} and res.bind_count == 0
    assert seen["st"] == sorted([TaskStatus.PENDING, TaskStatus.PENDING, TaskStatus.PIPELINED])
    assert seen["idle"] == 2000  # the Allocate ops were rolled back
    assert len(res.committed_pipelines) == 1


def test_three_way_commit_with_cache_pipeline_persists_the_pipelined_task():
    c, io = br3(profile("pr5045"))
    res = run_session(c, ALLOC, seed=1)
    (key, nd), = res.committed_pipelines.items()
    assert nd == "n1"
    assert cache_task(c, key).status == TaskStatus.PIPELINED
    assert c.nodes["n1"].pipelined.milli_cpu == 1000


def test_gang_not_pipelined_is_discarded():
    # no Releasing: j3 fits nowhere, the gang is neither ready nor pipelined -> discarded in any mode
    for sw in (Switches(), Switches(three_way_commit=True)):
        c, io = make_cache(sw, nodes=[node("n1", 2000)], podgroups=[podgroup("pgj", 3)],
                           pods=[pod("j1", "pgj", 1000), pod("j2", "pgj", 1000), pod("j3", "pgj", 1000)])
        seen = {}
        run_session(c, ALLOC, seed=1, session_hook=lambda s: seen.update(
            st=statuses(s, "ns/j1", "ns/j2", "ns/j3"), idle=s.nodes["n1"].idle.milli_cpu))
        assert io.binds == {} and seen["st"] == [TaskStatus.PENDING] * 3 and seen["idle"] == 2000


# -- pipelined_first (S5 / BR6) ---------------------------------------------------------------

def br6(sw):
    return make_cache(sw, nodes=[node("n1", 3000)], podgroups=[podgroup("pga", 1), podgroup("pgb", 2)],
                      pods=[pod("a1", "pga", 1000, node_name="n1", phase="Running"), pod("a2", "pga", 1000),
                            pod("b1", "pgb", 1000), pod("b2", "pgb", 1000)])


def test_pipelined_first_reorders_ready_jobs_ahead_of_gangs():
    c, io = br6(Switches())
    run_session(c, ALLOC, seed=1)
    assert sorted(io.binds) == ["ns/b1", "ns/b2"]  # gang's non-ready-first order
    c, io = br6(Switches(pipelined_first=True, three_way_commit=True))
    run_session(c, ALLOC, seed=1)
    assert sorted(io.binds) == ["ns/a2"]  # pga is "pipelined" and goes first; pgb gets 1 of 2


# -- self_exclusion / update_task_on_allocate (S1) --------------------------------------------

def exact_fit(sw):
    """n1 2000m empty; p (2000m) Pending with nominatedNodeName=n1 -> rebuilt Pipelined on n1."""
    return make_cache(sw, nodes=[node("n1", 2000)], podgroups=[podgroup("pgp", 1)],
                      pods=[pod("p", "pgp", 2000, nominated="n1")])


def test_pr5045_self_competition_and_the_fix():
    c, io = exact_fit(profile("pr5045"))
    assert cache_task(c, "ns/p").status == TaskStatus.PIPELINED
    res = run_session(c, ALLOC, seed=1)
    assert io.binds == {} and res.bind_count == 0  # FutureIdle = 2000 + 0 - 2000 counts itself (S1)
    assert cache_task(c, "ns/p").status == TaskStatus.PIPELINED
    c, io = exact_fit(profile("pr5045-fixed"))
    res = run_session(c, ALLOC, seed=1)
    assert io.binds == {"ns/p": "n1"}
    assert c.nodes["n1"].pipelined.milli_cpu == 0  # Pipelined -> Binding via UpdateTask


# -- repipeline_guard -------------------------------------------------------------------------

def releasing_reserved(sw):
    """n1 2000m: v (2000m Running, deleting); p (2000m) nominated n1 -> Pipelined on n1."""
    return make_cache(sw, nodes=[node("n1", 2000)], podgroups=[podgroup("pgp", 1), podgroup("pgv", 1)],
                      pods=[pod("v", "pgv", 2000, node_name="n1", phase="Running", deleting=True),
                            pod("p", "pgp", 2000, nominated="n1")])


def test_repipeline_guard_keeps_the_reservation():
    seen = {}
    hook = lambda s: seen.update(st=ssn_task(s, "ns/p").status, node=ssn_task(s, "ns/p").node_name)  # noqa: E731
    c, io = releasing_reserved(profile("pr5045-fixed"))
    res = run_session(c, ALLOC, seed=1, session_hook=hook)
    assert seen == {"st": TaskStatus.PIPELINED, "node": "n1"} and res.errors == []
    assert cache_task(c, "ns/p").status == TaskStatus.PIPELINED
    # without the guard the same Pipeline fails ("already on node"); the PR rolls it back with a
    # recorded UnPipeline, and the job (not pipelined any more) is discarded, which re-pipelines it
    c, io = releasing_reserved(profile("pr5045-fixed", repipeline_guard=False))
    res = run_session(c, ALLOC, seed=1, session_hook=hook)
    assert any("already on node" in e for e in res.errors)
    assert seen == {"st": TaskStatus.PIPELINED, "node": "n1"}


# -- overflow_unpipeline (the PR head's overflow pre-pass) -------------------------------------

def overflow(sw):
    """n1 2000m fully used by r (Running, not terminating); p nominated n1 -> Pipelined overflow."""
    return make_cache(sw, nodes=[node("n1", 2000)], podgroups=[podgroup("pgp", 1), podgroup("pgr", 1)],
                      pods=[pod("r", "pgr", 2000, node_name="n1", phase="Running"),
                            pod("p", "pgp", 2000, nominated="n1")])


def test_overflow_unpipeline_drops_overflowing_reservation():
    c, io = overflow(profile("pr5045", overflow_unpipeline=False))
    run_session(c, ALLOC, seed=1)
    assert cache_task(c, "ns/p").status == TaskStatus.PIPELINED
    c, io = overflow(profile("pr5045"))
    run_session(c, ALLOC, seed=1)
    assert cache_task(c, "ns/p").status == TaskStatus.PENDING  # written to the cache at once (S7)
    assert c.nodes["n1"].pipelined.milli_cpu == 0
    assert ("ns/p", "") in [(k, s.get("nominatedNodeName")) for k, s in io.status_writes]


# -- enqueue / auto-enqueue -------------------------------------------------------------------

def test_allocate_auto_enqueues_only_without_enqueue_action():
    def cl():
        return make_cache("v1.14", nodes=[node("n1", 2000)], podgroups=[podgroup("pg", 1, phase="Pending")],
                          pods=[pod("a", "pg", 1000)])
    c, io = cl()
    run_session(c, ALLOC, seed=1)
    assert io.binds == {"ns/a": "n1"}
    c, io = cl()
    run_session(c, conf(["allocate"], [[GANG_ALL, PREDICATES]]) if False else
                conf(["enqueue", "allocate"], [[GANG_ALL, PREDICATES]]), seed=1)
    # enqueue moves the PodGroup (no minResources) to Inqueue first, then allocate binds
    assert io.binds == {"ns/a": "n1"}
    c, io = cl()
    from ha.scheduler.conf import SchedulerConf
    only_alloc_with_enqueue_configured = SchedulerConf.from_dict(
        {"actions": ["allocate", "enqueue"], "tiers": [[GANG_ALL, PREDICATES]]}, source="t")
    run_session(c, only_alloc_with_enqueue_configured, seed=1)
    assert io.binds == {}  # enqueue configured: allocate skips Pending PodGroups


# -- preempt: taskEligibleToPreempt and BR7 ---------------------------------------------------

PREEMPT = conf(["preempt"], [[PRIORITY_ALL, GANG_ALL, CONFORMANCE], [PREDICATES]])


PCS = [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": {"name": n, "uid": n, "resourceVersion": 1, "creationTimestamp": 0.0},
        "value": v, "globalDefault": False, "preemptionPolicy": "PreemptLowerPriority"}
       for n, v in (("low", 1), ("high", 100))]


def br7(nominated: str, sw="v1.14"):
    return make_cache(sw, nodes=[node("n1", 2000)], priority_classes=PCS,
                      podgroups=[podgroup("pgl", 0, pc="low"), podgroup("pgg", 1, pc="high")],
                      pods=[pod("l1", "pgl", 2000, node_name="n1", phase="Running", priority=1),
                            pod("g1", "pgg", 2000, priority=100, nominated=nominated)])


def test_preempt_evicts_and_pipelines_without_stale_nomination():
    c, io = br7("")
    res = run_session(c, PREEMPT, seed=1)
    assert io.evictions == ["ns/l1"] and res.pipelined == {"ns/g1": "n1"}
    # v1.14: the nomination is written at close for a pipelined-after-eviction context
    assert io.pods["ns/g1"]["status"]["nominatedNodeName"] == "n1"


def test_preempt_blocked_by_stale_nomination_BR7():
    # allocate runs g1's PrePredicate first (n1 is full, so it places nothing); with the cycle state
    # filled, preempt's check of the nominated node passes the predicates: "not eligible". Without
    # that PrePredicate the check would fail with Volcano's cycle-state Error and g1 would preempt
    # (tests/scheduler/test_preempt_cycle_state.py).
    c, io = br7("n1")
    for _ in range(2):
        res = run_session(c, conf(["allocate", "preempt"], [[PRIORITY_ALL, GANG_ALL, CONFORMANCE], [PREDICATES]]),
                          seed=1)
        assert io.evictions == [] and res.evict_count == 0


def test_preempt_policy_never_not_eligible():
    c, io = br7("")
    c.find_task("ns", "g1").pod["spec"]["preemptionPolicy"] = "Never"
    run_session(c, PREEMPT, seed=1)
    assert io.evictions == []


# -- reclaim ------------------------------------------------------------------------------------

def test_reclaim_evicts_running_task_of_other_queue():
    from .fw_helpers import queue
    c, io = make_cache("v1.14", nodes=[node("n1", 2000)], queues=[queue("q1"), queue("q2")],
                       podgroups=[podgroup("pga", 0, q="q1"), podgroup("pgb", 1, q="q2")],
                       pods=[pod("a1", "pga", 2000, node_name="n1", phase="Running"),
                             pod("b1", "pgb", 1000)])
    rc = conf(["reclaim"], [[{"name": "gang", "enabledJobStarving": True, "enabledReclaimable": True,
                              "enabledJobPipelined": True}, CONFORMANCE],
                            [{"name": "proportion", "enabledReclaimable": True, "enabledQueueOrder": True,
                              "enablePreemptive": True}, PREDICATES]])
    res = run_session(c, rc, seed=1)
    assert io.evictions == ["ns/a1"] and res.pipelined == {"ns/b1": "n1"}


# -- backfill / scheduler ---------------------------------------------------------------------

def test_backfill_binds_best_effort_and_scheduler_counts_sessions():
    be = pod("be", "pgb", 0, mem=0)
    be["spec"]["containers"][0]["resources"]["requests"] = {}
    c, io = make_cache("v1.14", nodes=[node("n1", 1000)], podgroups=[podgroup("pgb", 1)], pods=[be])
    s = Scheduler(c, conf(["allocate", "backfill"], [[GANG_ALL, PREDICATES]]), seed=3)
    res = s.run_once()
    assert io.binds == {"ns/be": "n1"} and res.binds == {"ns/be": "n1"} and s.sessions == 1
    assert res.ok and res.to_dict()["bind_count"] == 1
