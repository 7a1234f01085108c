"""Snapshot reuse (ha/scheduler/snapshot_reuse.py): a session gets the last session's clone of a
node or job nothing changed since -- not of one the cache or that session changed, not while the
last session is still held -- and what it gets is what a fresh clone would be; the verifier the
suite runs under finds a change that went unreported."""
from __future__ import annotations

import pytest

from ha.scheduler.framework.session import open_session
from ha.scheduler.scheduler import run_session
from ha.scheduler.snapshot_reuse import JobClones, NodeClones, SnapshotReuseMismatch

from .fw_helpers import GANG_ALL, PREDICATES, conf, make_cache, node, pod, podgroup

ALLOC = conf(["allocate"], [[GANG_ALL, PREDICATES]])


def _cache():
    """n1..n4; a bound pod on n2; a pending gang of one that fits only n1 (the others are small)."""
    return make_cache("v1.14", nodes=[node("n1", 4000), node("n2", 1000), node("n3", 1000), node("n4", 1000)],
                      podgroups=[podgroup("pgr", 1), podgroup("pgp", 1)],
                      pods=[pod("r1", "pgr", 500, node_name="n2", phase="Running"),
                            pod("p1", "pgp", 2000)])


def _session_nodes(cache, c=ALLOC):
    seen = {}
    res = run_session(cache, c, seed=1, session_hook=lambda ssn: seen.update(ssn.nodes))
    return res, seen


def _session_jobs(cache, c=ALLOC):
    seen = {}
    res = run_session(cache, c, seed=1, session_hook=lambda ssn: seen.update(ssn.jobs))
    return res, seen


def test_the_next_session_gets_the_clones_of_unchanged_nodes_and_fresh_ones_of_the_rest():
    cache, io = _cache()
    res, first = _session_nodes(cache)
    assert res.binds == {"ns/p1": "n1"}        # the session changed its clone of n1
    st = cache.node_clones.stats
    assert st == {"reused": 0, "cloned": 4}
    # the cache changes n3 (a new pod bound there) before the next session
    cache.add_pod(pod("r2", "pgr", 100, node_name="n3", phase="Running"))
    _, second = _session_nodes(cache)
    assert second["n2"] is first["n2"] and second["n4"] is first["n4"]
    assert second["n1"] is not first["n1"]     # changed by the session (and by the bind)
    assert second["n3"] is not first["n3"]     # changed by the cache
    assert "ns/r2" in second["n3"].tasks
    assert st == {"reused": 2, "cloned": 6}
    # a third session: nothing changed since the second, which changed nothing
    _, third = _session_nodes(cache)
    assert all(third[n] is second[n] for n in ("n1", "n2", "n3", "n4"))


def test_a_session_still_held_shares_nothing_with_the_next():
    cache, _ = _cache()
    a = open_session(cache, ALLOC, seed=1)     # never released
    b = open_session(cache, ALLOC, seed=1)
    assert not any(b.nodes[n] is a.nodes[n] for n in a.nodes)
    b.release()                                # given back: the next one may reuse b's
    c = open_session(cache, ALLOC, seed=1)
    assert all(c.nodes[n] is not a.nodes[n] for n in a.nodes)
    assert cache.node_clones.stats["reused"] == 4


def test_a_node_that_goes_away_and_comes_back_is_cloned_afresh():
    cache, _ = _cache()
    _, first = _session_nodes(cache)
    cache.delete_node(node("n4", 1000))
    _, second = _session_nodes(cache)
    assert "n4" not in second
    cache.add_node(node("n4", 1000))
    _, third = _session_nodes(cache)
    assert third["n4"] is not first["n4"] and third["n2"] is first["n2"]


def test_switched_off_every_snapshot_clones_everything(monkeypatch):
    monkeypatch.setenv("HA_SNAPSHOT_REUSE", "0")
    cache, _ = _cache()
    seen: list[tuple[dict, dict]] = []
    for _ in range(2):
        run_session(cache, ALLOC, seed=1, session_hook=lambda ssn: seen.append((dict(ssn.nodes), dict(ssn.jobs))))
    (nodes1, jobs1), (nodes2, jobs2) = seen
    assert not any(nodes2[n] is nodes1[n] for n in nodes1)
    assert not any(jobs2[j] is jobs1[j] for j in jobs1)
    # (the plain path counts nothing)
    assert cache.node_clones.stats == {"reused": 0, "cloned": 0}
    assert cache.job_clones.stats == {"reused": 0, "cloned": 0, "settled_close": 0}


def _kept_node_idle(cache, first):
    first["n2"].idle.milli_cpu += 1                              # written past NodeInfo's mutators


def _cache_node_pod(cache, first):
    stored = next(iter(cache.nodes["n2"].tasks.values()))
    stored.pod = dict(stored.pod)                                # a new Pod object, the node not told


def _kept_job_task(cache, first):
    next(iter(first["ns/pgr"].tasks.values())).nominated_node_name = "n9"   # past the mutators


def _cache_job_task(cache, first):
    next(iter(cache.jobs["ns/pgr"].tasks.values())).priority += 1            # the job not told


@pytest.mark.parametrize("seen,scribble,match", [
    ("nodes", _kept_node_idle, r"node 'n2'.*node\.idle"),
    ("nodes", _cache_node_pod, r"node 'n2'.*tasks"),
    ("jobs", _kept_job_task, r"job 'ns/pgr'.*job\.task_status_index"),
    ("jobs", _cache_job_task, r"job 'ns/pgr'.*job\.task_status_index"),
], ids=["kept-node-clone", "cache-node", "kept-job-clone", "cache-job"])
def test_the_verifier_finds_a_change_that_went_unreported(monkeypatch, seen, scribble, match):
    monkeypatch.setenv("HA_VERIFY_SNAPSHOT_REUSE", "1")
    cache, _ = _cache()
    _, first = (_session_nodes if seen == "nodes" else _session_jobs)(cache)
    scribble(cache, first)
    with pytest.raises(SnapshotReuseMismatch, match=match):
        cache.snapshot(lend=True)


def test_without_the_verifier_the_unreported_change_would_be_served(monkeypatch):
    """What the verifier guards against: reuse trusts the reports."""
    monkeypatch.setenv("HA_VERIFY_SNAPSHOT_REUSE", "0")
    cache, _ = _cache()
    _, first = _session_nodes(cache)
    first["n2"].idle.milli_cpu += 1
    snap = cache.snapshot(lend=True)
    assert snap.nodes["n2"] is first["n2"]


def test_an_older_snapshot_given_back_late_is_ignored():
    clones = NodeClones()
    cache, _ = _cache()
    nodes = [cache.nodes[n] for n in ("n1", "n2")]
    t1, a = clones.clone(nodes, lend=True)
    t2, b = clones.clone(nodes, lend=True)
    clones.give_back(t1)                       # a's session ended after b's snapshot: too late
    _, c = clones.clone(nodes, lend=True)
    assert c["n1"] is not a["n1"] and c["n1"] is not b["n1"]
    clones.give_back(t2)                       # b's token is no longer the one lent
    _, d = clones.clone(nodes, lend=True)
    assert d["n1"] is not b["n1"]


# ---- job clones take their job's running sums ----------------------------------------------------

def _job(cache, name):
    return next(j for j in cache.jobs.values() if j.name == name)


def _sums(r):
    return (r.milli_cpu, r.memory, r.scalar_resources)


def test_a_job_clone_takes_the_jobs_running_sums_when_they_are_exact():
    cache, _ = _cache()
    cache.add_pod(pod("r2", "pgr", 300, node_name="n3", phase="Running"))
    cache.add_pod(pod("r3", "pgr", 200))                  # pending: in the total request only
    job = _job(cache, "pgr")
    clone = job.clone()
    assert clone.allocated is not job.allocated and clone.total_request is not job.total_request
    assert _sums(clone.allocated) == (800.0, 2.0 * 2**20, {"pods": 2.0})
    assert _sums(clone.total_request) == (1000.0, 3.0 * 2**20, {"pods": 3.0})
    assert clone.allocated.scalar_resources is not job.allocated.scalar_resources
    assert list(clone.tasks) == list(job.tasks)
    assert {s: list(ts) for s, ts in clone.task_status_index.items()} == {
        s: [u for u in job.tasks if job.tasks[u].status == s] for s in clone.task_status_index}


def test_a_job_clone_adds_its_tasks_up_when_the_sums_may_not_be_exact():
    cache, _ = _cache()
    job = _job(cache, "pgr")
    task = next(iter(job.tasks.values()))
    job.allocated.milli_cpu += 0.5        # a sum a fractional request went through
    job.total_request.milli_cpu += 0.5
    clone = job.clone()
    assert _sums(clone.allocated) == (500.0, 2.0**20, {"pods": 1.0})   # added up again, not taken
    job.allocated.milli_cpu -= 0.5
    job.total_request.milli_cpu -= 0.5
    task.resreq = task.resreq.clone()
    task.resreq.milli_cpu = 0.25          # a fractional request: sums depend on their order
    clone = job.clone()
    assert clone.allocated.milli_cpu == 0.25 and clone.total_request.milli_cpu == 0.25


def test_the_verifier_finds_a_job_sum_out_of_step_with_its_tasks(monkeypatch):
    monkeypatch.setenv("HA_VERIFY_SNAPSHOT_REUSE", "1")
    cache, _ = _cache()
    cache.snapshot(lend=True)
    _job(cache, "pgr").allocated.milli_cpu += 1000   # written past add/delete_task_info
    with pytest.raises(SnapshotReuseMismatch, match=r"job .*pgr.*allocated"):
        cache.snapshot(lend=True)


def test_a_job_clone_adds_its_tasks_up_when_a_sum_keeps_a_count_no_task_has():
    """A Running task that left the allocated statuses leaves the job's allocated sum with a zero
    pod count; added up again there would be no count at all: the clone adds up."""
    cache, _ = _cache()
    job = _job(cache, "pgr")
    task = next(iter(job.tasks.values()))
    from ha.scheduler.api import TaskStatus
    job.update_task_status(task, TaskStatus.RELEASING)
    assert job.allocated.scalar_resources == {"pods": 0.0}
    clone = job.clone()
    assert clone.allocated.scalar_resources is None and clone.allocated.milli_cpu == 0.0
    assert _sums(clone.total_request) == (500.0, 2.0**20, {"pods": 1.0})


def test_a_job_clone_of_tasks_with_an_extended_resource_adds_them_up():
    cache, _ = _cache()
    gpu = pod("g1", "pgr", 100, node_name="n1", phase="Running")
    gpu["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "1"
    cache.add_pod(gpu)
    job = _job(cache, "pgr")
    job.allocated.scalar_resources["nvidia.com/gpu"] += 1000.0   # out of step: only adding up hides it
    clone = job.clone()
    assert clone.allocated.scalar_resources == {"pods": 2.0, "nvidia.com/gpu": 1000.0}


# ---- job clones kept between sessions ------------------------------------------------------------

def test_the_next_session_gets_the_clones_of_unchanged_jobs_and_fresh_ones_of_the_rest():
    cache, _ = _cache()
    cache.add_pod_group(podgroup("pgq", 1))
    cache.add_pod(pod("q1", "pgq", 100, node_name="n4", phase="Running"))
    res, first = _session_jobs(cache)
    assert res.binds == {"ns/p1": "n1"}              # the session changed pgp's clone
    st = cache.job_clones.stats
    assert st == {"reused": 0, "cloned": 3, "settled_close": 0}
    cache.add_pod(pod("r2", "pgr", 100, node_name="n3", phase="Running"))   # the cache changes pgr
    _, second = _session_jobs(cache)
    assert second["ns/pgq"] is first["ns/pgq"]
    assert second["ns/pgp"] is not first["ns/pgp"]   # changed by the session (and the bind)
    assert second["ns/pgr"] is not first["ns/pgr"]   # changed by the cache
    assert "r2" in {t.name for t in second["ns/pgr"].tasks.values()}
    # (pgq's status, Inqueue at open and Running at close, is written every session here: no
    # informer delivers the write, so no close verdict is kept: test_settled_close.py)
    assert st == {"reused": 1, "cloned": 5, "settled_close": 0}
    _, third = _session_jobs(cache)                  # nothing changed since the second
    assert all(third[j] is second[j] for j in second)


def test_a_kept_job_clone_gets_the_header_a_fresh_clone_would_have():
    """What a session writes into every job clone without reporting it -- the PodGroup status,
    fit errors, hyper-node and enqueue fields -- is copied from the cache's job again."""
    cache, _ = _cache()
    _, first = _session_jobs(cache)
    kept = first["ns/pgr"]
    kept.pod_group["status"]["phase"] = "Scribbled"
    kept.pod_group["status"].setdefault("conditions", []).append({"type": "Scribbled"})
    kept.nodes_fit_errors["x"] = object()
    kept.job_fit_errors = "scribbled"
    kept.allocated_hyper_node = "hn-x"
    kept.schedule_start_timestamp = 99.0
    kept.priority = 1234
    snap = cache.snapshot(lend=True)
    again = snap.jobs["ns/pgr"]
    assert again is kept
    fresh = cache.jobs["ns/pgr"].clone()
    assert again.pod_group == fresh.pod_group and again.pod_group is not cache.jobs["ns/pgr"].pod_group
    assert (again.nodes_fit_errors, again.job_fit_errors, again.allocated_hyper_node,
            again.schedule_start_timestamp, again.priority) == (
        {}, fresh.job_fit_errors, fresh.allocated_hyper_node, fresh.schedule_start_timestamp, fresh.priority)


def test_a_task_field_written_in_place_by_the_cache_is_reported():
    """The S6 refresh swaps a guarded task's pod without the job's mutators: it reports."""
    cache, _ = _cache()
    _, first = _session_jobs(cache)
    task = next(iter(cache.jobs["ns/pgr"].tasks.values()))
    cache._refresh_pod(task, dict(task.pod))
    _, second = _session_jobs(cache)
    assert second["ns/pgr"] is not first["ns/pgr"]
    assert next(iter(second["ns/pgr"].tasks.values())).pod is task.pod


def test_a_job_that_goes_away_and_comes_back_is_cloned_afresh():
    cache, _ = _cache()
    _, first = _session_jobs(cache)
    old = cache.jobs.pop("ns/pgr")                   # a job object the pool no longer knows
    from ha.scheduler.api.job_info import JobInfo
    job = cache.jobs["ns/pgr"] = JobInfo("ns/pgr", *[t for t in old.tasks.values()])
    job.set_pod_group(old.pod_group)
    _, second = _session_jobs(cache)
    assert second["ns/pgr"] is not first["ns/pgr"]
    _, third = _session_jobs(cache)
    assert third["ns/pgr"] is second["ns/pgr"]


def test_an_older_job_snapshot_given_back_late_is_ignored():
    clones = JobClones()
    cache, _ = _cache()
    jobs = list(cache.jobs.values())
    t1, a = clones.clone(jobs, lend=True)
    t2, b = clones.clone(jobs, lend=True)
    clones.give_back(t1)
    _, c = clones.clone(jobs, lend=True)
    assert all(c[j] is not a[j] and c[j] is not b[j] for j in a)


def test_a_session_writes_podgroup_statuses_without_touching_the_caches():
    """A job clone's PodGroup shares all under its top level with the cache's (copy_pod_group):
    the enqueued phase, the gang's conditions and the job updater's statuses are written into
    copies put in place, and the cache's PodGroups stay as they were, session after session."""
    from ha.scheduler.api.job_info import copy_object
    cache, io = make_cache("v1.14", nodes=[node("n1", 1000)],
                           podgroups=[podgroup("pend", 1, phase="Pending"), podgroup("big", 2),
                                      podgroup("pgr", 1, phase="Running")],
                           pods=[pod("a", "pend", 100), pod("b1", "big", 800), pod("b2", "big", 800),
                                 pod("r1", "pgr", 100, node_name="n1", phase="Running")])
    before = {u: copy_object(j.pod_group) for u, j in cache.jobs.items()}
    for actions in (["enqueue", "allocate", "backfill"], ["allocate"], ["enqueue", "allocate"]):
        run_session(cache, conf(actions, [[GANG_ALL, PREDICATES]]), seed=1)
        assert {u: j.pod_group for u, j in cache.jobs.items()} == before
    written = {}
    for key, pg in io.pod_group_writes:
        written.setdefault(key, []).append(pg["status"])
    assert written["ns/pend"][0]["phase"] == "Inqueue"          # the enqueue action's write
    assert any(c["type"] == "Unschedulable" and c["status"] == "True"
               for c in written["ns/big"][0]["conditions"])     # a gang of two that fits once


# ---- the allocate fast path's rows of unchanged nodes ---------------------------------------------

def test_the_fast_path_keeps_the_rows_of_unchanged_nodes_and_the_verifier_checks_them(monkeypatch):
    monkeypatch.setenv("HA_VERIFY_SNAPSHOT_REUSE", "1")
    cache, _ = make_cache("v1.14", nodes=[node("n1", 4000), node("n2", 1000), node("n3", 1000)],
                          podgroups=[podgroup("pgr", 1), podgroup("pgb", 1)],
                          pods=[pod("r1", "pgr", 500, node_name="n2", phase="Running"),
                                pod("b1", "pgb", 9000)])      # fits nowhere: every session scans
    kept = []

    def hook(ssn):
        fp = getattr(ssn, "_allocate_fastpath", None)
        kept.append(fp.stats["rows_kept"] if fp is not None else None)
    for _ in range(2):
        run_session(cache, ALLOC, seed=1, session_hook=hook)
    assert kept == [0, 3]
    # a kept row that no longer matches its node (a change nothing reported): the verifier finds it
    name, (n, v, vals) = next(iter(cache.fast_path_rows.items()))
    cache.fast_path_rows[name] = (n, v, vals[:1] + (vals[1] + 1000.0,) + vals[2:])
    with pytest.raises(SnapshotReuseMismatch, match=f"fast path: the row of node '{name}'"):
        run_session(cache, ALLOC, seed=1)
