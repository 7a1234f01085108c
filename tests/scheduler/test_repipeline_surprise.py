"""The re-pipeline surprise (examples/README.md "The re-pipeline surprise"), in memory.

Measured live, pr5045 recorded a pod "pipelined" on the same node session after session. Three
things were behind it:

1. a model bug, fixed: the overflow pre-pass (``overflow_unpipeline``) caught every exception of
   ``ssn.un_pipeline``, including ``ResourceUnderflow`` — Volcano's assert panic, raised when drf's
   DeallocateFunc subtracts a task that was Pipelined before the session opened (drf's
   ``allocated`` counts only allocated tasks). The task was left half un-pipelined (Pending in
   the session, off its node), preempt placed it again on the same node, and the commit called
   Cache.Pipeline once more, writing the nomination again — every session the node overflowed.
   Volcano panics there; the model now ends the session the same way (``SessionResult.panic``).
2. the PR as coded, where no assert fires: the pre-pass un-pipelines a reservation on a node that
   overflows because a victim's eviction failed and the victim came back Running; preempt
   evicts it again and re-pipelines the task on the same node; Cache.Pipeline writes the
   nomination again — every session until an eviction goes through.
3. what the decision record counts: ``run_session`` records every session task Pipelined at the
   end of a session. A reservation the cache keeps across sessions is recorded once per session
   although ``repipeline_guard`` makes the Pipeline a no-op and no Cache.Pipeline runs: the
   ratio of ``repeat_pipelines`` measures sessions spent Pipelined, not duplicate decisions.
"""
from __future__ import annotations

import pytest

from ha.experiment.repeat_pipelines import repeat_pipelines
from ha.scheduler.api import TaskStatus
from ha.scheduler.profiles import profile
from ha.scheduler.scheduler import Scheduler

from .fw_helpers import (CONFORMANCE, GANG_ALL, PREDICATES, PRIORITY_ALL, cache_task, conf, make_cache,
                         node, pod, podgroup)

S = TaskStatus
DRF = {"name": "drf", "enabledPreemptable": True, "enabledJobOrder": True}
PREEMPTING = conf(["allocate", "preempt"], [[PRIORITY_ALL, GANG_ALL, CONFORMANCE], [DRF, PREDICATES]])


def nominations(io, key: str) -> list[str]:
    """The nominatedNodeName of every status write of ``key`` that changed it (Cache.Pipeline /
    UnPipeline writes; session-end condition writes carry the pod copy's value)."""
    return [st.get("nominatedNodeName", "") for k, st in io.status_writes if k == key]


PCS = [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": {"name": n, "uid": n, "resourceVersion": 1, "creationTimestamp": 0.0},
        "value": v, "globalDefault": False, "preemptionPolicy": "PreemptLowerPriority"}
       for n, v in (("low", 1), ("high", 100))]


def overflowing(sw):
    """n1 4000m full with two low-priority pods (evictions of them fail with 409, so a victim comes
    back Running at its resync, as in the live run); high-priority p holds a reservation on n1 that
    Cache.Pipeline persisted in an earlier session, its pod copy without the nomination (the
    informer guard keeps it so). Pipelined 2000 > Idle 0 + Releasing 0: n1 overflows."""
    c, io = make_cache(sw, nodes=[node("n1", 4000)], priority_classes=PCS,
                       podgroups=[podgroup("pgr1", 0, pc="low"), podgroup("pgr2", 0, pc="low"),
                                  podgroup("pgp", 1, pc="high")],
                       pods=[pod("r1", "pgr1", 2000, node_name="n1", phase="Running", priority=1),
                             pod("r2", "pgr2", 2000, node_name="n1", phase="Running", priority=1),
                             pod("p", "pgp", 2000, priority=100)])
    c.pipeline(cache_task(c, "ns/p").clone(), "n1")
    io.status_writes.clear()
    io.fail_evict.update({"ns/r1": "409 Conflict", "ns/r2": "409 Conflict"})
    assert c.nodes["n1"].has_pipelined_overflow()
    return c, io


def test_the_prepass_panics_where_volcano_panics_instead_of_repipelining():
    """Before the fix every session went: pre-pass swallows drf's assert (p Pending in the session,
    off n1) -> preempt evicts r2 (fails: r2 resyncs back to Running) and pipelines p on n1 again ->
    commit -> Cache.Pipeline(p, n1) -> nomination write "n1" -> and the next session the same:
    committed_pipelines {"ns/p": "n1"} three sessions running. Now the session ends with the
    assert, as Volcano's would, and nothing is evicted or written."""
    c, io = overflowing(profile("pr5045"))
    sched = Scheduler(c, PREEMPTING, seed=1)
    for _ in range(3):
        res = sched.run_once()
        assert res.committed_pipelines == {} and res.evictions == []
        assert res.panic is not None and "not sufficient" in res.panic
        c.process_resync_task()
    assert [r.op for r in io.records if r.op == "evict"] == [] and nominations(io, "ns/p") == []
    assert cache_task(c, "ns/p").status == S.PIPELINED and c.nodes["n1"].pipelined.milli_cpu == 2000


@pytest.mark.parametrize("name", ["pr5045", "pr5045-s6fixed"])
def test_without_drf_the_pr_unpipelines_and_repipelines_while_evictions_fail(name):
    """The PR as coded, no assert in the way: every session the pre-pass un-pipelines p (cache
    too, nomination cleared), preempt evicts r2 and pipelines p on n1 again (the guard cannot
    help: p is Pending by then), the commit runs Cache.Pipeline and writes the nomination again —
    for as long as the eviction fails and r2 comes back Running at its resync, so that n1
    overflows again. pr5045-s6fixed does the same: the cause is the failed eviction, not the
    stale pod copy. Once the eviction goes through, the reservation stays and nothing repeats."""
    tiers = [[PRIORITY_ALL, GANG_ALL, CONFORMANCE], [PREDICATES]]
    c, io = overflowing(profile(name))
    sched = Scheduler(c, conf(["allocate", "preempt"], tiers), seed=1)
    for session in range(3):
        res = sched.run_once()
        assert res.ok and res.evictions == ["ns/r2"] and res.committed_pipelines == {"ns/p": "n1"}
        assert res.new_pipelines == {"ns/p": "n1"}   # Pipelined at open and at the end, yet decided
        assert nominations(io, "ns/p")[-3:] == ["", "n1", ""]   # cleared, re-nominated, condition
        c.process_resync_task()
        assert cache_task(c, "ns/r2").status == S.RUNNING and c.nodes["n1"].has_pipelined_overflow()
    io.fail_evict.clear()
    assert sched.run_once().committed_pipelines == {"ns/p": "n1"}
    for _ in range(2):
        res = sched.run_once()
        assert res.committed_pipelines == {} and res.evictions == [] and res.pipelined == {"ns/p": "n1"}
        assert res.new_pipelines == {}


def test_the_seed_rule_hits_the_same_assert():
    """The PR description's fast-path un-pipeline (profile ``seed000``) fires the same DeallocateFunc on a task Pipelined before
    the session: with drf the exact-fit self-competition case panics (Volcano as written would)."""
    c, io = make_cache(profile("seed000"), nodes=[node("n1", 2000)], podgroups=[podgroup("pgp", 1)],
                       pods=[pod("p", "pgp", 2000, nominated="n1")])
    res = Scheduler(c, conf(["allocate"], [[GANG_ALL], [DRF, PREDICATES]]), seed=1).run_once()
    assert res.panic is not None and "not sufficient" in res.panic and io.binds == {}
    c, io = make_cache(profile("seed000"), nodes=[node("n1", 2000)], podgroups=[podgroup("pgp", 1)],
                       pods=[pod("p", "pgp", 2000, nominated="n1")])
    res = Scheduler(c, conf(["allocate"], [[GANG_ALL, PREDICATES]]), seed=1).run_once()
    assert res.ok and io.binds == {"ns/p": "n1"}


def records(instance: str, results, field: str = "pipelined") -> list[dict]:
    """The pipeline decision records ha/runtime/instance.py writes for these session results
    (from ``res.pipelined``; ``field="new_pipelines"``: from the session's decisions instead)."""
    return [{"op": "pipeline", "instance": instance, "session": i, "pod": k, "node": n, "ok": True}
            for i, res in enumerate(results) for k, n in sorted(getattr(res, field).items())]


def test_a_kept_reservation_is_recorded_every_session_without_a_second_pipeline():
    """p waits on n1 for v to go. Under v1.14 each session pipelines p again (nothing persists);
    under pr5045-s6fixed the first session pipelines it and the guard makes every later Pipeline
    a no-op. The decision records count four sessions either way."""
    def waiting(name):
        c, io = make_cache(profile(name), nodes=[node("n1", 2000)],
                           podgroups=[podgroup("pgp", 1), podgroup("pgv", 1)],
                           pods=[pod("v", "pgv", 2000, node_name="n1", phase="Running", deleting=True),
                                 pod("p", "pgp", 2000)])
        sched = Scheduler(c, conf(["allocate"], [[GANG_ALL, PREDICATES]]), seed=1)
        return c, io, [sched.run_once() for _ in range(4)]

    c, io, results = waiting("pr5045-s6fixed")
    assert [r.pipelined for r in results] == [{"ns/p": "n1"}] * 4
    assert [r.committed_pipelines for r in results] == [{"ns/p": "n1"}, {}, {}, {}]
    assert nominations(io, "ns/p").count("n1") >= 1 and io.status_writes[0][1]["nominatedNodeName"] == "n1"
    assert repeat_pipelines(records("scheduler-1", results)) == {"scheduler-1": 4.0}
    # SessionResult.new_pipelines leaves the kept reservation out: one decision
    assert [r.new_pipelines for r in results] == [{"ns/p": "n1"}, {}, {}, {}]
    assert repeat_pipelines(records("scheduler-1", results, "new_pipelines")) == {"scheduler-1": 1.0}

    c, io, results = waiting("v1.14")
    assert [r.pipelined for r in results] == [{"ns/p": "n1"}] * 4      # decided anew each session
    assert cache_task(c, "ns/p").status == S.PENDING
    assert repeat_pipelines(records("scheduler-1", results)) == {"scheduler-1": 4.0}
    assert [r.new_pipelines for r in results] == [{"ns/p": "n1"}] * 4
    assert repeat_pipelines(records("scheduler-1", results, "new_pipelines")) == {"scheduler-1": 4.0}


@pytest.mark.parametrize("name", ["pr5045", "pr5045-s6fixed"])
def test_a_failed_nomination_write_forgets_the_reservation_and_the_next_session_repipelines(name):
    """Path 3, the PR as coded: Cache.Pipeline's nomination write fails (409: the pod copy is
    behind the API server), resyncTask rebuilds the task from the API's pod — which has no
    nomination, the write failed — so it is Pending again, and the next session pipelines it on
    the same node once more. The S6 fix does not change it."""
    c, io = make_cache(profile(name), nodes=[node("n1", 2000)],
                       podgroups=[podgroup("pgp", 1), podgroup("pgv", 1)],
                       pods=[pod("v", "pgv", 2000, node_name="n1", phase="Running", deleting=True),
                             pod("p", "pgp", 2000)])
    sched = Scheduler(c, conf(["allocate"], [[GANG_ALL, PREDICATES]]), seed=1)
    io.fail_status["ns/p"] = "409 Conflict: the object has been modified"
    first = sched.run_once()
    assert first.committed_pipelines == {"ns/p": "n1"} and c.stats["status_write_errors"] >= 1
    assert cache_task(c, "ns/p").status == S.PIPELINED       # until the resync runs
    c.process_resync_task()
    assert cache_task(c, "ns/p").status == S.PENDING and c.nodes["n1"].pipelined.milli_cpu == 0
    del io.fail_status["ns/p"]
    second = sched.run_once()
    assert second.committed_pipelines == {"ns/p": "n1"} and second.new_pipelines == {"ns/p": "n1"}
    assert nominations(io, "ns/p")[0] == "n1" and cache_task(c, "ns/p").status == S.PIPELINED
    third = sched.run_once()
    assert third.new_pipelines == {} and third.pipelined == {"ns/p": "n1"}
