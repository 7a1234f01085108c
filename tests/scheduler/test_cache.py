"""SchedulerCache: event handlers, snapshot clone boundary, bind/evict/pipeline, write-back, resync."""
from __future__ import annotations

import pytest

from ha.scheduler.api import FatalCacheError, TaskNodeError, TaskStatus, copy_object
from ha.scheduler.cache import BindContext, SchedulerCache
from ha.scheduler.interfaces import Binder, Evictor, RecordingIO, StatusUpdater
from ha.scheduler.profiles import profile
from tests.scheduler.cachekit import make_node, make_pod, make_pod_group, make_queue

S = TaskStatus


def new_cache(name="v1.14", **kw):
    io = RecordingIO()
    sw = profile(name, **kw)
    return SchedulerCache(sw, binder=io, evictor=io, status_updater=io), io


def populated(name="v1.14", **kw):
    cache, io = new_cache(name, **kw)
    cache.add_queue(make_queue("default"))
    cache.add_node(make_node("n1", cpu=4000))
    cache.add_node(make_node("n2", cpu=4000))
    cache.add_pod_group(make_pod_group("pg"))
    pods = [make_pod(f"p{i}", group="pg") for i in range(3)]
    for p in pods:
        cache.add_pod(p)
        io.pods[f"ns/{p['metadata']['name']}"] = copy_object(p)   # the API server's own copy
    return cache, io, pods


def task_of(cache, name):
    return cache.jobs["ns/pg"].tasks[f"ns-{name}"]


def test_recording_io_satisfies_protocols():
    io = RecordingIO()
    assert isinstance(io, Binder) and isinstance(io, Evictor) and isinstance(io, StatusUpdater)


def test_add_update_delete_pod_accounting():
    cache, io = new_cache()
    cache.add_node(make_node("n1", cpu=4000))
    running = make_pod("r", group="pg", node="n1", phase="Running", cpu=1500)
    cache.add_pod(running)
    assert cache.nodes["n1"].used.milli_cpu == 1500
    deleting = make_pod("r", group="pg", node="n1", phase="Running", cpu=1500, deleting=True)
    cache.update_pod(running, deleting)
    n = cache.nodes["n1"]
    assert n.releasing.milli_cpu == 1500 and n.idle.milli_cpu == 2500
    assert cache.jobs["ns/pg"].tasks["ns-r"].status == S.RELEASING
    cache.delete_pod(deleting)
    assert n.used.to_plain() == {} and n.idle.milli_cpu == 4000
    assert "ns/pg" not in cache.jobs          # no PodGroup and no tasks: terminated, cleaned up


def test_scheduler_name_filter_and_foreign_assigned_pods():
    cache, io = new_cache()
    cache.add_node(make_node("n1", cpu=4000))
    cache.add_pod(make_pod("foreign", scheduler="default-scheduler"))
    assert cache.find_task("ns", "foreign") is None and cache.stats["filtered_pods"] == 1
    cache.add_pod(make_pod("foreign-run", scheduler="default-scheduler", node="n1", phase="Running"))
    assert cache.nodes["n1"].used.milli_cpu == 1000      # assigned foreign pods use node resources
    # filter transitions: old passes, new does not → delete
    ours = make_pod("x", group="pg")
    cache.add_pod(ours)
    moved = make_pod("x", group="pg", scheduler="other")
    cache.update_pod(ours, moved)
    assert "ns/pg" not in cache.jobs


def test_pod_before_node_gets_placeholder_then_accounted():
    cache, io = new_cache()
    cache.add_queue(make_queue("default"))
    cache.add_pod_group(make_pod_group("pg"))
    cache.add_pod(make_pod("r", group="pg", node="late", phase="Running", cpu=1000))
    assert not cache.nodes["late"].ready()
    assert "late" not in cache.snapshot().nodes
    cache.add_node(make_node("late", cpu=4000))
    assert cache.nodes["late"].used.milli_cpu == 1000 and "late" in cache.snapshot().nodes


def test_terminated_pods_do_not_use_the_node():
    cache, io = new_cache()
    cache.add_node(make_node("n1", cpu=4000))
    cache.add_pod(make_pod("done", group="pg", node="n1", phase="Succeeded"))
    assert cache.nodes["n1"].tasks == {} and cache.jobs["ns/pg"].tasks["ns-done"].status == S.SUCCEEDED


def test_informer_guard_binding_and_pipelined():
    for name, survives in (("v1.14", False), ("pr5045", True)):
        cache, io, pods = populated(name, cache_pipeline=True)
        t = task_of(cache, "p0")
        cache.pipeline(t, "n1")
        assert task_of(cache, "p0").status == S.PIPELINED
        cache.update_pod(pods[0], pods[0])
        assert (task_of(cache, "p0").status == S.PIPELINED) == survives, name
        # a Binding task is protected on every profile
        b = task_of(cache, "p1")
        b.node_name = "n2"
        cache.bind_mode = "queued"
        cache.add_bind_task(b)
        cache.update_pod(pods[1], pods[1])
        assert task_of(cache, "p1").status == S.BINDING and cache.stats["ignored_updates"] >= 1


def test_snapshot_clone_boundary():
    cache, io, pods = populated()
    cache.add_pod_group(make_pod_group("orphan", queue="nosuchqueue"))
    cache.add_pod(make_pod("o1", group="orphan"))
    cache.add_pod(make_pod("nopg", group="missing"))
    snap = cache.snapshot()
    assert set(snap.jobs) == {"ns/pg"}                      # no queue / no PodGroup → skipped
    sj = snap.jobs["ns/pg"]
    st = sj.tasks["ns-p0"]
    ct = task_of(cache, "p0")
    assert st is not ct and st.pod is ct.pod
    st.status = S.ALLOCATED
    assert ct.status == S.PENDING
    assert snap.nodes["n1"] is not cache.nodes["n1"] and snap.node_list == ["n1", "n2"]
    snap.nodes["n1"].idle.milli_cpu = 0
    assert cache.nodes["n1"].idle.milli_cpu == 4000


def test_snapshot_job_priority_from_priority_class():
    cache, io = new_cache()
    cache.add_queue(make_queue("default"))
    cache.add_priority_class({"kind": "PriorityClass", "metadata": {"name": "high"}, "value": 1000})
    cache.add_priority_class({"kind": "PriorityClass", "metadata": {"name": "dflt"}, "value": 5,
                              "globalDefault": True})
    cache.add_pod_group(make_pod_group("a", priority_class="high"))
    cache.add_pod_group(make_pod_group("b"))
    snap = cache.snapshot()
    assert snap.jobs["ns/a"].priority == 1000 and snap.jobs["ns/b"].priority == 5
    p = make_pod("p", group="a")
    p["spec"]["priorityClassName"] = "high"
    cache.add_pod(p)
    assert task_of_job(cache, "ns/a", "ns-p").priority == 1000   # priority admission emulation


def task_of_job(cache, job, uid):
    return cache.jobs[job].tasks[uid]


def test_pod_group_update_same_resource_version_ignored_and_default_queue():
    cache, io = new_cache()
    pg = make_pod_group("pg", min_member=2, queue="")
    cache.add_pod_group(pg)
    assert cache.jobs["ns/pg"].queue == "default" and cache.jobs["ns/pg"].min_available == 2
    same = make_pod_group("pg", min_member=5, rv=1)
    cache.update_pod_group(pg, same)
    assert cache.jobs["ns/pg"].min_available == 2
    cache.update_pod_group(pg, make_pod_group("pg", min_member=5, rv=2))
    assert cache.jobs["ns/pg"].min_available == 5
    cache.add_pod(make_pod("p", group="pg"))
    cache.delete_pod_group(pg)
    assert "ns/pg" in cache.jobs                 # still has a task
    cache.delete_pod(make_pod("p", group="pg"))
    assert "ns/pg" not in cache.jobs


def test_add_bind_task_and_bind_flow():
    cache, io, pods = populated()
    t = task_of(cache, "p0")
    t.node_name = "n1"
    cache.add_bind_task(BindContext(t))
    assert task_of(cache, "p0").status == S.BINDING and io.binds == {"ns/p0": "n1"}
    assert cache.nodes["n1"].used.milli_cpu == 1000


def test_add_bind_task_insufficient_reverts():
    cache, io = new_cache()
    cache.add_node(make_node("n1", cpu=500))
    cache.add_pod(make_pod("big", group="pg", cpu=1000))
    t = cache.jobs["ns/pg"].tasks["ns-big"]
    t.node_name = "n1"
    with pytest.raises(TaskNodeError, match="not enough to put task"):
        cache.add_bind_task(t)
    assert t.status == S.PENDING and cache.nodes["n1"].tasks == {} and io.binds == {}


def test_bind_conflict_triggers_resync_and_unschedulable_condition():
    cache, io, pods = populated()
    session_task = cache.snapshot().jobs["ns/pg"].tasks["ns-p0"]
    session_task.node_name = "n1"
    session_task.pod["spec"]["nodeName"] = "n1"   # Statement.Allocate mutates the shared pod (S9)
    io.pods["ns/p0"] = make_pod("p0", group="pg")  # the API server's copy: unbound
    io.fail_bind["ns/p0"] = "409 Conflict: pod ns/p0 is being deleted"
    cache.add_bind_task(session_task)
    assert cache.stats["bind_errors"] == 1 and "ns/pg/ns-p0" in cache.err_tasks
    key, st = io.status_writes[-1]
    assert key == "ns/p0" and st["conditions"][-1]["reason"] == "SchedulerError"
    # until the resync, the task keeps its node resources
    assert task_of(cache, "p0").status == S.BINDING and cache.nodes["n1"].used.milli_cpu == 1000
    assert cache.process_resync_task() == 1
    assert task_of(cache, "p0").status == S.PENDING and cache.nodes["n1"].used.to_plain() == {}
    assert not cache.err_tasks


def test_resync_deletes_task_when_pod_is_gone_and_retries_on_error():
    cache, io, pods = populated()
    t = task_of(cache, "p2")
    cache.resync_task(t)
    del io.pods["ns/p2"]
    cache.process_resync_task()
    assert "ns-p2" not in cache.jobs["ns/pg"].tasks
    bare = SchedulerCache(profile("v1.14"))
    bare.add_pod(make_pod("x", group="pg"))
    bare.resync_task(bare.jobs["ns/pg"].tasks["ns-x"])
    assert bare.process_resync_task() == 0 and bare.err_tasks["ns/pg/ns-x"] == 1   # stays queued


def test_evict_marks_releasing_and_calls_evictor():
    cache, io = new_cache()
    cache.add_queue(make_queue("default"))
    cache.add_node(make_node("n1", cpu=4000))
    cache.add_pod_group(make_pod_group("pg"))
    cache.add_pod(make_pod("r", group="pg", node="n1", phase="Running", cpu=3000))
    t = cache.jobs["ns/pg"].tasks["ns-r"]
    cache.evict(t, "preempt")
    assert t.status == S.RELEASING and io.evictions == ["ns/r"] and io.evict_reasons["ns/r"] == "preempt"
    n = cache.nodes["n1"]
    assert n.releasing.milli_cpu == 3000 and n.future_idle().milli_cpu == 4000
    io.fail_evict["ns/x"] = "500"
    cache.add_pod(make_pod("x", group="pg", node="n1", phase="Running", cpu=100))
    cache.evict(cache.jobs["ns/pg"].tasks["ns-x"], "r")
    assert "ns/pg/ns-x" in cache.err_tasks


def test_pipeline_per_profile():
    # v1.14: Statement.pipeline is empty → nothing happens
    cache, io, _ = populated("v1.14")
    cache.pipeline(task_of(cache, "p0"), "n1")
    assert task_of(cache, "p0").status == S.PENDING and io.status_writes == []
    # PR #5045: persisted + nomination written
    cache, io, _ = populated("pr5045")
    cache.pipeline(task_of(cache, "p0"), "n1")
    t = task_of(cache, "p0")
    assert t.status == S.PIPELINED and t.node_name == "n1" and t.nominated_node_name == "n1"
    assert cache.nodes["n1"].pipelined.milli_cpu == 1000 and io.nominated_node_name("ns/p0") == "n1"
    cache.unpipeline(t)
    assert t.status == S.PENDING and t.node_name == "" and cache.nodes["n1"].pipelined.to_plain() == {}
    # the annotation-persistence design: annotations instead of the nomination
    cache, io, _ = populated("annotations")
    cache.pipeline(task_of(cache, "p0"), "n1")
    assert task_of(cache, "p0").status == S.PIPELINED and io.status_writes == []
    assert io.annotation_patches[-1] == ("ns/p0", {"volcano.sh/pipelined-status": "true",
                                                   "volcano.sh/pipelined-node": "n1"})
    # PR #5663 nomination-only: nomination but no reservation
    cache, io, _ = populated("nomination-only")
    cache.pipeline(task_of(cache, "p0"), "n1")
    assert task_of(cache, "p0").status == S.PENDING and task_of(cache, "p0").nominated_node_name == "n1"
    assert cache.nodes["n1"].pipelined.to_plain() == {} and io.nominated_node_name("ns/p0") == "n1"


def test_pipelined_task_bind_per_profile():
    """PR: AddBindTask of a task pipelined on the node uses UpdateTask and clears the nomination."""
    cache, io, _ = populated("pr5045")
    t = task_of(cache, "p0")
    cache.pipeline(t, "n1")
    cache.add_bind_task(t)
    assert t.status == S.BINDING and cache.nodes["n1"].pipelined.to_plain() == {}
    assert cache.nodes["n1"].used.milli_cpu == 1000 and io.nominated_node_name("ns/p0") == ""
    # S4: pipelined on n1, bound to n2 → "already on different node"
    cache, io, _ = populated("pr5045")
    t = task_of(cache, "p1")
    cache.pipeline(t, "n1")
    session = t.clone()
    session.node_name = "n2"
    with pytest.raises(TaskNodeError, match="already on different node <n1>"):
        cache.add_bind_task(session)
    assert t.status == S.PIPELINED
    # S4: Pipeline on another node → UpdateTask's AddTask fails → klog.Fatalf
    with pytest.raises(FatalCacheError):
        cache.pipeline(session, "n2")
    assert cache.stats["fatal"] == 1


def test_update_job_status_writes_conditions_and_v114_nomination():
    cache, io, _ = populated("v1.14")
    snap = cache.snapshot()
    job = snap.jobs["ns/pg"]
    a, b, c = (job.tasks[f"ns-p{i}"] for i in range(3))
    job.update_task_status(a, S.PIPELINED)
    a.node_name, a.eviction_occurred = "n1", True
    job.update_task_status(b, S.PIPELINED)
    b.node_name = "n2"                                  # pipelined without eviction: no nomination
    cache.update_job_status(job, update_pg=True)
    assert io.pod_group_writes and io.pod_group_writes[-1][0] == "ns/pg"
    writes = dict(io.status_writes)
    assert writes["ns/p0"]["nominatedNodeName"] == "n1"
    assert writes["ns/p1"].get("nominatedNodeName", "") == ""
    assert all(w["conditions"][-1]["type"] == "PodScheduled" for w in writes.values())
    assert writes["ns/p0"]["conditions"][-1]["reason"] == "Unschedulable"
    assert set(writes) == {"ns/p0", "ns/p1", "ns/p2"}
    # the cache's pods are not changed by the write (the informer delivers it)
    assert task_of(cache, "p0").pod["status"]["nominatedNodeName"] == ""
    # PR #5045: the session-end path never nominates
    cache, io, _ = populated("pr5045")
    job = cache.snapshot().jobs["ns/pg"]
    a = job.tasks["ns-p0"]
    job.update_task_status(a, S.PIPELINED)
    a.node_name, a.eviction_occurred = "n1", True
    cache.record_job_status_event(job)
    assert all(w.get("nominatedNodeName", "") == "" for _, w in io.status_writes)


def test_condition_not_rewritten_when_unchanged():
    cache, io, pods = populated("v1.14")
    job = cache.snapshot().jobs["ns/pg"]
    cache.record_job_status_event(job)
    n = len(io.status_writes)
    for p in pods:   # the informer delivered the written status
        p["status"] = dict(io.pods[f"ns/{p['metadata']['name']}"]["status"])
    cache.record_job_status_event(cache.snapshot().jobs["ns/pg"])
    assert len(io.status_writes) == n


def test_nominate_for_expectation_writes_target_on_bind():
    cache, io, _ = populated("v1.14", nominate_for_expectation=True)
    t = task_of(cache, "p0")
    t.node_name = "n2"
    cache.add_bind_task(t)
    assert [op for op, _ in io.ops()][-2:] == ["update_pod_status", "bind"]
    assert io.nominated_node_name("ns/p0") == "n2"


def test_digest_shape():
    cache, io, _ = populated("pr5045")
    cache.pipeline(task_of(cache, "p0"), "n1")
    d = cache.digest()
    assert d["tasks"]["ns-p0"] == ["Pipelined", "n1"] and d["tasks"]["ns-p1"] == ["Pending", ""]
    assert d["nodes"]["n1"]["pipelined"] == {"cpu": 1000, "memory": 10**9, "pods": 1}
    assert set(d["nodes"]["n1"]) == {"idle", "used", "releasing", "pipelined"}


def test_node_delete_and_update():
    cache, io, _ = populated()
    cache.update_node(None, make_node("n1", cpu=8000))
    assert cache.nodes["n1"].idle.milli_cpu == 8000 and cache.node_list == ["n1", "n2"]
    cache.delete_node(make_node("n2"))
    assert "n2" not in cache.nodes and cache.node_list == ["n1"]


def test_a_placeholder_node_made_real_joins_the_node_list_once():
    cache, io = new_cache()
    cache.add_node(make_node("n1"))
    cache.add_pod(make_pod("p0", group="pg", node="n9", phase="Running"))   # before its node
    assert "n9" in cache.nodes and cache.node_list == ["n1"]
    cache.add_node(make_node("n9"))
    cache.update_node(None, make_node("n9", cpu=8000))
    cache.add_node(make_node("n2"))
    assert cache.node_list == ["n1", "n9", "n2"] and cache.nodes["n9"].idle.milli_cpu == 7000


def test_queue_handlers():
    cache, io = new_cache()
    q = make_queue("q1", weight=3)
    cache.add_queue(q)
    assert cache.queues["q1"].weight == 3 and cache.queues["q1"].reclaimable()
    cache.delete_queue(q)
    assert cache.queues == {}


def test_nomination_and_annotation_writes_happen_outside_the_cache_lock():
    """The instance's informer handlers take the cache lock on the event loop: an API write made
    while holding it (slow, or retrying through a partition) would stall every informer of the
    instance. Pipeline and unpipeline queue their writes until the lock is released. AddBindTask's
    clearing of the nomination is the exception Go makes (a synchronous write under the lock, before
    the bind is queued: test_addbindtask_clears_the_nomination_before_the_bind_is_queued)."""
    from ha.scheduler.cache import SchedulerCache
    from ha.scheduler.interfaces import RecordingIO
    from ha.scheduler.profiles import profile

    held_during_write = []

    class Probe(RecordingIO):
        def update_pod_status(self, pod):
            held_during_write.append(("status", cache.mutex._is_owned()))
            return super().update_pod_status(pod)

        def patch_pod_annotations(self, namespace, name, annotations):
            held_during_write.append(("annotations", cache.mutex._is_owned()))
            return super().patch_pod_annotations(namespace, name, annotations)

    for prof in ("pr5045", "annotations", "nomination-only"):
        io = Probe()
        cache = SchedulerCache(switches=profile(prof, nominate_for_expectation=(prof == "nomination-only")),
                               binder=io, evictor=io, status_updater=io)
        cache.add_node({"kind": "Node", "metadata": {"name": "n1", "uid": "n1"},
                        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "10"}}})
        for name in ("p1", "p2"):
            cache.add_pod({"kind": "Pod", "metadata": {"name": name, "namespace": "ns", "uid": f"u-{name}",
                                                      "annotations": {"scheduling.k8s.io/group-name": "pg"}},
                           "spec": {"schedulerName": "volcano", "nodeName": "",
                                    "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
                           "status": {"phase": "Pending"}})
        job = next(iter(cache.jobs.values()))
        t1, t2 = (job.tasks[u] for u in ("u-p1", "u-p2"))
        cache.pipeline(t1.clone(), "n1")
        cache.unpipeline(t1.clone())
        cache.pipeline(t2.clone(), "n1")
        assert held_during_write, prof                       # the profile does write
        assert not any(held for _, held in held_during_write), (prof, held_during_write)
        del held_during_write[:]
        bound = t2.clone()
        bound.node_name = "n1"
        cache.add_bind_task(bound)
        # the bind's own writes: the PR's nomination clear under the lock (Go), the rest outside
        status = [held for op, held in held_during_write if op == "status"]
        if prof == "pr5045":
            assert status == [True], held_during_write
        else:
            assert not any(status), (prof, held_during_write)
        assert not any(held for op, held in held_during_write if op == "annotations"), (prof, held_during_write)
        held_during_write.clear()


@pytest.mark.parametrize("bind_first", [False, True])
def test_addbindtask_clears_the_nomination_before_the_bind_is_queued(bind_first):
    """PR head's order (Go: a synchronous status write under the cache lock, then the bind is
    queued): with a bind worker the bind can never be written before the clear. The switch
    ``bind_before_nomination_clear`` brings back the order before it: the bind is queued first
    and the clear written once the lock is released (the bind worker may take the bind
    meanwhile: tests/cluster_state/test_guard_refresh.py shows the 409 that follows)."""
    io = RecordingIO()
    cache = SchedulerCache(profile("pr5045", bind_before_nomination_clear=bind_first), binder=io,
                           evictor=io, status_updater=io, bind_mode="queued")
    cache.add_queue(make_queue("default"))
    cache.add_node(make_node("n1", cpu=4000))
    cache.add_pod_group(make_pod_group("pg"))
    pod = make_pod("p0", group="pg", nominated="n1")
    cache.add_pod(pod)
    io.pods["ns/p0"] = copy_object(pod)
    queued_at_write: list[int] = []
    write = io.update_pod_status

    def recording_write(p):
        queued_at_write.append((len(cache.bind_queue), cache.mutex._is_owned()))
        return write(p)

    io.update_pod_status = recording_write
    t = task_of(cache, "p0")
    t.node_name = "n1"
    cache.add_bind_task(BindContext(t))
    if bind_first:
        assert queued_at_write == [(1, False)]        # the bind queued, then the clear, unlocked
    else:
        assert queued_at_write == [(0, True)]         # the clear went out before the bind was queued
    assert len(cache.bind_queue) == 1 and io.binds == {}
    assert (io.pods["ns/p0"]["status"]["nominatedNodeName"]) == ""
    cache.process_bind_task()
    assert io.binds == {"ns/p0": "n1"}


def test_resync_with_a_clock_waits_each_failed_task_its_turn():
    """The continuous resync worker's pass (``now`` given): a task whose sync failed is retried
    after 5 ms, 10 ms, 20 ms … (errTasks' rate limiter); a pass without ``now`` tries them all."""
    cache, io, pods = populated()
    t = task_of(cache, "p0")
    calls: list[str] = []

    def failing_get(ns, name):
        calls.append(name)
        raise RuntimeError("connection refused")

    io.get_pod = failing_get
    cache.pod_getter = io
    cache.resync_task(t)
    assert cache.process_resync_task(now=100.0) == 0 and calls == ["p0"]
    assert cache.process_resync_task(now=100.004) == 0 and calls == ["p0"]          # not due yet
    assert cache.process_resync_task(now=100.0051) == 0 and calls == ["p0", "p0"]   # 5 ms later
    assert cache.process_resync_task(now=100.0140) == 0 and len(calls) == 2          # now 10 ms
    assert cache.process_resync_task(now=100.0152) == 0 and len(calls) == 3
    assert cache.process_resync_task() == 0 and len(calls) == 4                      # after a session
    del io.get_pod                                                                   # the API answers again
    assert cache.process_resync_task(now=1000.0) == 1 and not cache.err_tasks
