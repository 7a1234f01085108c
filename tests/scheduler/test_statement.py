"""Statement: Allocate / Pipeline / Evict in the session, Commit in order, Discard in reverse, the
un-operations, LastTransaction, Save/RecoverOperations, and the statement-level switches — built
on a real SchedulerCache + RecordingIO (docs/volcano-semantics.md §6)."""
from __future__ import annotations

import pytest

from ha.scheduler.api import TaskStatus
from ha.scheduler.framework import EventHandler
from ha.scheduler.framework.statement import OperationKind, StatementError, save_operations
from ha.scheduler.profiles import Switches

from .fw_helpers import cache_task, make_cache, node, pod, podgroup, session, ssn_task


def cluster(sw: Switches | str = "v1.14", *, releasing: bool = True, nominated: str = ""):
    """n1 4000m: x1 (2000m, Running, deleting → Releasing if ``releasing``); gang pgj (min 3):
    j1, j2, j3 1000m each; pgx for x1."""
    pods = [pod("x1", "pgx", 2000, node_name="n1", phase="Running", deleting=releasing),
            pod("j1", "pgj", 1000), pod("j2", "pgj", 1000), pod("j3", "pgj", 1000, nominated=nominated)]
    return make_cache(sw, nodes=[node("n1", 4000)], podgroups=[podgroup("pgj", 3), podgroup("pgx", 1)],
                      pods=pods)


def record_events(ssn):
    ev: list[tuple[str, str]] = []
    ssn.add_event_handler(EventHandler(allocate_func=lambda e: ev.append(("alloc", e.task.name)),
                                       deallocate_func=lambda e: ev.append(("dealloc", e.task.name))))
    return ev


def cpu(r) -> float:
    return r.milli_cpu


# -- Allocate ---------------------------------------------------------------------------------

def test_allocate_commit_binds_through_the_cache():
    c, io = cluster(releasing=False)
    ssn = session(c)
    n1 = ssn.nodes["n1"]
    t = ssn_task(ssn, "ns/j1")
    stmt = ssn.statement()
    stmt.allocate(t, n1)
    assert t.status == TaskStatus.ALLOCATED and t.node_name == "n1"
    assert cpu(n1.idle) == 1000 and cpu(n1.used) == 3000
    assert t.pod["spec"]["nodeName"] == "n1"  # the shared pod is mutated (docs/volcano-semantics.md S9)
    assert cache_task(c, "ns/j1").status == TaskStatus.PENDING  # nothing reached the cache yet
    stmt.commit()
    assert t.status == TaskStatus.BINDING
    assert list(io.binds) == ["ns/j1"]
    assert cache_task(c, "ns/j1").status == TaskStatus.BINDING
    assert ssn.bind_log == [("ns/j1", "n1")]


def test_allocate_discard_restores_and_keeps_last_transaction():
    c, _ = cluster(releasing=False)
    ssn = session(c)
    ev = record_events(ssn)
    n1 = ssn.nodes["n1"]
    t = ssn_task(ssn, "ns/j1")
    stmt = ssn.statement()
    stmt.allocate(t, n1)
    stmt.discard()
    assert t.status == TaskStatus.PENDING and t.node_name == ""
    assert cpu(n1.idle) == 2000 and "ns/j1" not in n1.tasks
    assert t.last_transaction is not None
    assert t.last_transaction.status == TaskStatus.ALLOCATED and t.last_transaction.node_name == "n1"
    assert ev == [("alloc", "j1"), ("dealloc", "j1")]
    # the shared pod's nodeName is never reset (v1.14.0)
    assert t.pod["spec"]["nodeName"] == "n1"


def test_discard_runs_in_reverse_and_is_not_idempotent():
    c, _ = cluster()
    ssn = session(c)
    n1 = ssn.nodes["n1"]
    stmt = ssn.statement()
    j1, j2, x1 = ssn_task(ssn, "ns/j1"), ssn_task(ssn, "ns/j2"), ssn_task(ssn, "ns/x1")
    stmt.allocate(j1, n1)
    stmt.pipeline(j2, "n1")
    ev = record_events(ssn)
    stmt.discard()
    assert [o.name for o in stmt.operations] == [OperationKind.ALLOCATE, OperationKind.PIPELINE]
    assert ev == [("dealloc", "j2"), ("dealloc", "j1")]  # reverse order
    # Discard does not clear the list: a second discard repeats every handler (docs/volcano-semantics.md §6)
    stmt.discard()
    assert ev[2:] == [("dealloc", "j2"), ("dealloc", "j1")]
    assert x1.status == TaskStatus.RELEASING


# -- Evict ------------------------------------------------------------------------------------

def test_evict_commit_and_unevict_restores_running_even_for_bound():
    c, io = make_cache(nodes=[node("n1", 4000)], podgroups=[podgroup("pga", 1)],
                       pods=[pod("a1", "pga", 1000, node_name="n1", phase="Pending"),   # Bound
                             pod("a2", "pga", 1000, node_name="n1", phase="Running")])
    ssn = session(c)
    n1 = ssn.nodes["n1"]
    a1, a2 = ssn_task(ssn, "ns/a1"), ssn_task(ssn, "ns/a2")
    assert a1.status == TaskStatus.BOUND
    stmt = ssn.statement()
    stmt.evict(a1, "preempt")
    assert a1.status == TaskStatus.RELEASING
    assert cpu(n1.releasing) == 1000 and cpu(n1.idle) == 2000 and cpu(n1.used) == 2000
    stmt.discard()
    assert a1.status == TaskStatus.RUNNING  # unevict: always Running (docs/volcano-semantics.md §6)
    assert cpu(n1.releasing) == 0
    stmt2 = ssn.statement()
    stmt2.evict(a2, "reclaim")
    stmt2.commit()
    assert list(io.evictions) == ["ns/a2"]
    assert cache_task(c, "ns/a2").status == TaskStatus.RELEASING
    assert ssn.evict_log == [("ns/a2", "reclaim")]


# -- Pipeline ---------------------------------------------------------------------------------

def test_pipeline_commit_v1_14_does_not_reach_the_cache():
    c, io = cluster("v1.14")
    ssn = session(c)
    n1 = ssn.nodes["n1"]
    j3 = ssn_task(ssn, "ns/j3")
    stmt = ssn.statement()
    stmt.pipeline(j3, "n1", True)
    assert j3.status == TaskStatus.PIPELINED and j3.eviction_occurred
    assert cpu(n1.pipelined) == 1000 and cpu(n1.idle) == 2000  # Idle untouched
    stmt.commit()
    assert cache_task(c, "ns/j3").status == TaskStatus.PENDING
    assert cpu(c.nodes["n1"].pipelined) == 0
    assert io.status_writes == []


def test_pipeline_commit_with_cache_pipeline_persists():
    c, io = cluster("pr5045")
    ssn = session(c)
    j3 = ssn_task(ssn, "ns/j3")
    stmt = ssn.statement()
    stmt.pipeline(j3, "n1")
    assert j3.nominated_node_name == "n1"  # sync_nominated_node
    stmt.commit()
    ct = cache_task(c, "ns/j3")
    assert ct.status == TaskStatus.PIPELINED and ct.node_name == "n1"
    assert cpu(c.nodes["n1"].pipelined) == 1000
    assert io.status_writes[-1][0] == "ns/j3" and io.status_writes[-1][1]["nominatedNodeName"] == "n1"


def test_unpipeline_is_recorded_only_with_cache_pipeline():
    c, _ = cluster("v1.14")
    ssn = session(c)
    j3 = ssn_task(ssn, "ns/j3")
    stmt = ssn.statement()
    stmt.pipeline(j3, "n1")
    stmt.un_pipeline(j3)
    assert [o.name for o in stmt.operations] == [OperationKind.PIPELINE]
    assert j3.status == TaskStatus.PENDING and cpu(ssn.nodes["n1"].pipelined) == 0

    c2, _ = cluster("pr5045", nominated="n1")  # j3 rebuilt Pipelined on n1 (reconstruct_pipelined)
    assert cache_task(c2, "ns/j3").status == TaskStatus.PIPELINED
    ssn2 = session(c2)
    j3b = ssn_task(ssn2, "ns/j3")
    stmt2 = ssn2.statement()
    stmt2.un_pipeline(j3b)
    assert [(o.name, o.reason) for o in stmt2.operations] == [(OperationKind.UNPIPELINE, "n1")]
    assert j3b.nominated_node_name == ""
    stmt2.discard()  # re-pipelines in the session
    assert j3b.status == TaskStatus.PIPELINED and j3b.node_name == "n1"
    stmt2.un_pipeline(j3b)
    stmt2.operations = stmt2.operations[-1:]
    stmt2.commit()  # → cache.unpipeline
    assert cache_task(c2, "ns/j3").status == TaskStatus.PENDING
    assert cpu(c2.nodes["n1"].pipelined) == 0


def test_repipeline_guard():
    for guard in (False, True):
        c, _ = cluster(Switches(reconstruct_pipelined=True, repipeline_guard=guard), nominated="n1")
        ssn = session(c)
        j3 = ssn_task(ssn, "ns/j3")
        assert j3.status == TaskStatus.PIPELINED and j3.node_name == "n1"
        stmt = ssn.statement()
        if guard:
            stmt.pipeline(j3, "n1")
            assert stmt.operations == []  # no-op, nothing recorded
        else:
            with pytest.raises(StatementError, match="already on node"):
                stmt.pipeline(j3, "n1")
            assert stmt.operations == []


def test_update_task_on_allocate_turns_pipelined_into_allocated():
    for on in (False, True):
        c, _ = cluster(Switches(reconstruct_pipelined=True, update_task_on_allocate=on), nominated="n1",
                       releasing=False)
        ssn = session(c)
        n1 = ssn.nodes["n1"]
        j3 = ssn_task(ssn, "ns/j3")
        assert cpu(n1.pipelined) == 1000
        stmt = ssn.statement()
        if on:
            stmt.allocate(j3, n1)
            assert j3.status == TaskStatus.ALLOCATED
            assert cpu(n1.pipelined) == 0 and cpu(n1.used) == 3000 and cpu(n1.idle) == 1000
        else:
            with pytest.raises(StatementError, match="already on node"):
                stmt.allocate(j3, n1)
            stmt.un_allocate(j3)  # what allocate does on error
            assert j3.status == TaskStatus.PENDING and "ns/j3" not in n1.tasks


def test_commit_pipelined_keeps_only_pipeline_ops():
    c, io = cluster(Switches(commit_pipelined_only=True, sync_nominated_node=True))
    ssn = session(c)
    n1 = ssn.nodes["n1"]
    j1, j2, j3 = (ssn_task(ssn, f"ns/j{i}") for i in (1, 2, 3))
    stmt = ssn.statement()
    stmt.allocate(j1, n1)
    stmt.allocate(j2, n1)
    stmt.pipeline(j3, "n1")
    stmt.commit_pipelined()
    assert io.binds == {}
    assert j1.status == TaskStatus.PENDING and j2.status == TaskStatus.PENDING
    assert j1.last_transaction is not None and j1.last_transaction.status == TaskStatus.ALLOCATED
    assert j3.status == TaskStatus.PIPELINED and j3.last_transaction is None
    assert stmt.operations == []
    assert cpu(n1.idle) == 2000 and cpu(n1.pipelined) == 1000


# -- Save / Recover ---------------------------------------------------------------------------

def test_save_discard_recover_round_trip():
    c, io = cluster()
    ssn = session(c)
    n1 = ssn.nodes["n1"]
    j1, j2, j3 = (ssn_task(ssn, f"ns/j{i}") for i in (1, 2, 3))
    stmt = ssn.statement()
    stmt.allocate(j1, n1)
    stmt.allocate(j2, n1)
    stmt.pipeline(j3, "n1")
    before = (cpu(n1.idle), cpu(n1.used), cpu(n1.pipelined))
    saved = save_operations(stmt)
    stmt.discard()
    assert (cpu(n1.idle), cpu(n1.pipelined)) == (2000, 0)
    stmt2 = ssn.statement()
    stmt2.recover_operations(saved)
    assert (cpu(n1.idle), cpu(n1.used), cpu(n1.pipelined)) == before
    job = ssn.jobs["ns/pgj"]
    # the clones replaced the originals in the job
    assert job.tasks[j1.uid] is not j1 and job.tasks[j1.uid].status == TaskStatus.ALLOCATED
    assert job.tasks[j3.uid].status == TaskStatus.PIPELINED
    assert [o.name for o in stmt2.operations] == [OperationKind.ALLOCATE, OperationKind.ALLOCATE,
                                                  OperationKind.PIPELINE]
    stmt2.commit()
    assert sorted(io.binds) == ["ns/j1", "ns/j2"]


def test_recover_drops_pipeline_with_repipeline_guard_S3():
    c, _ = cluster(Switches(repipeline_guard=True))
    ssn = session(c)
    j3 = ssn_task(ssn, "ns/j3")
    stmt = ssn.statement()
    stmt.pipeline(j3, "n1")
    saved = save_operations(stmt)
    stmt.discard()
    stmt2 = ssn.statement()
    stmt2.recover_operations(saved)
    # the saved clone is already Pipelined on n1: the guard returns early, the op is lost (S3)
    assert stmt2.operations == []
    assert cpu(ssn.nodes["n1"].pipelined) == 0
