"""Session open/close: plugin building (registered builders, missing plugins), the JobUpdater's
PodGroup phase write-back through the cache (docs/volcano-semantics.md §5.4, §4.11)."""
from __future__ import annotations

from ha.scheduler.conf import PluginOption
from ha.scheduler.framework import close_session, open_session
from ha.scheduler.framework.job_updater import get_pod_group_phase, is_pod_group_status_updated
from ha.scheduler.scheduler import run_session

from .fw_helpers import GANG_ALL, PREDICATES, conf, make_cache, node, pod, podgroup


def pg_writes(io, key):
    return [pg for k, pg in io.pod_group_writes if k == key]


def test_running_job_phase_written_unchanged_job_not_written():
    c, io = make_cache(nodes=[node("n1", 4000)],
                       podgroups=[podgroup("run", 1, phase="Inqueue"), podgroup("idle", 1, phase="Running")],
                       pods=[pod("r1", "run", 1000, node_name="n1", phase="Running"),
                             pod("i1", "idle", 1000, node_name="n1", phase="Running")])
    # the "idle" PodGroup already says Running with running=1: nothing to write for it
    c.jobs["ns/idle"].pod_group["status"]["running"] = 1
    run_session(c, conf([], []), seed=1)  # no plugins: no condition changes either
    w = pg_writes(io, "ns/run")
    assert w and w[-1]["status"]["phase"] == "Running" and w[-1]["status"]["running"] == 1
    assert pg_writes(io, "ns/idle") == []


def test_pending_job_phase_stays_pending_and_gang_condition_written():
    c, io = make_cache(nodes=[node("n1", 1000)], podgroups=[podgroup("g", 2, phase="Inqueue")],
                       pods=[pod("a", "g", 1000), pod("b", "g", 1000)])
    res = run_session(c, conf(["allocate"], [[GANG_ALL, PREDICATES]]), seed=1)
    assert res.bind_count == 0
    w = pg_writes(io, "ns/g")[-1]["status"]
    assert w["phase"] == "Inqueue"  # stays Inqueue: it was Inqueue
    conds = [cd for cd in w["conditions"] if cd["type"] == "Unschedulable"]
    assert conds and conds[0]["status"] == "True" and conds[0]["transitionID"] == res.session_uid
    # every Pending task got its PodScheduled=False condition (RecordJobStatusEvent)
    written = {k for k, st in io.status_writes}
    assert written == {"ns/a", "ns/b"}


def test_phase_rules():
    c, _ = make_cache(nodes=[node("n1", 4000)], podgroups=[podgroup("g", 2, phase="Pending")],
                      pods=[pod("a", "g", 1000, node_name="n1", phase="Running"), pod("b", "g", 1000)])
    ssn = open_session(c, conf())
    job = ssn.jobs["ns/g"]
    assert get_pod_group_phase(job, unschedulable=False) == "Pending"   # 1 scheduled < 2
    assert get_pod_group_phase(job, unschedulable=True) == "Unknown"    # running + unschedulable
    job.pod_group["spec"]["minMember"] = 1
    assert get_pod_group_phase(job, unschedulable=False) == "Running"
    close_session(ssn)
    assert ssn.closed


def test_status_comparison_ignores_transition_fields():
    old = {"phase": "Inqueue", "conditions": [{"type": "Unschedulable", "status": "True", "transitionID": "a",
                                               "lastTransitionTime": 1.0, "reason": "x"}]}
    new = {"phase": "Inqueue", "running": 0, "conditions": [{"type": "Unschedulable", "status": "True",
                                                             "transitionID": "b", "lastTransitionTime": 2.0,
                                                             "reason": "x"}]}
    assert not is_pod_group_status_updated(new, old)
    new["conditions"][0]["reason"] = "y"
    assert is_pod_group_status_updated(new, old)


def test_registered_builders_restrict_plugins_and_missing_plugin_is_recorded():
    c, _ = make_cache(nodes=[node("n1", 1000)], podgroups=[podgroup("g", 1)], pods=[pod("a", "g", 500)])
    # a configuration file cannot name a plugin the registry lacks (ha.scheduler.conf refuses it);
    # one built in code can, and the session skips it with a recorded error, as Volcano's does
    cf = conf([], [[GANG_ALL, PREDICATES]], registered=["gang"])
    cf.tiers[0].plugins.append(PluginOption(name="no-such-plugin"))
    cf.registered_builders = ("gang", "no-such-plugin")
    ssn = open_session(c, cf)
    assert sorted(ssn.plugins) == ["gang"]
    assert any("predicates" in e for e in ssn.errors) and any("no-such-plugin" in e for e in ssn.errors)
    assert ssn.total_resource.milli_cpu == 1000
    assert [n.name for n in ssn.node_list] == ["n1"]


# ---- the write-back: planned job by job, written together through the cache's status writer -----

class _ReversingWriter:
    """A status writer that runs a session's calls in the opposite order (as a parallel one may)."""

    def __init__(self):
        self.batches = []

    def run(self, calls):
        self.batches.append(len(calls))
        for call in reversed(calls):
            call()


def _two_gangs_cache():
    return make_cache(nodes=[node("n1", 1000)],
                      podgroups=[podgroup("a", 2, phase="Inqueue"), podgroup("b", 2, phase="Inqueue"),
                                 podgroup("run", 1, phase="Running")],
                      pods=[pod("a1", "a", 1000), pod("a2", "a", 1000), pod("b1", "b", 1000),
                            pod("b2", "b", 1000), pod("r1", "run", 100, node_name="n1", phase="Running")])


def _writes(writes):
    """What was written, but for the two fields a session stamps (its uid, the time)."""
    def norm(o):
        if isinstance(o, dict):
            return {k: norm(v) for k, v in o.items() if k not in ("transitionID", "lastTransitionTime")}
        if isinstance(o, (list, tuple)):
            return [norm(v) for v in o]
        return o
    return sorted((repr(norm(w)) for w in writes))


def test_the_write_back_goes_through_the_status_writer_at_once_and_any_order_writes_the_same():
    c1, io1 = _two_gangs_cache()
    run_session(c1, conf(["allocate"], [[GANG_ALL, PREDICATES]]), seed=1)
    c2, io2 = _two_gangs_cache()
    c2.status_writer = w = _ReversingWriter()
    run_session(c2, conf(["allocate"], [[GANG_ALL, PREDICATES]]), seed=1)
    assert w.batches == [3]     # one call per job with something to write, all handed over at once
    assert _writes(io1.pod_group_writes) == _writes(io2.pod_group_writes)
    assert _writes(io1.status_writes) == _writes(io2.status_writes)
    assert {k for k, _ in io2.status_writes} == {"ns/a1", "ns/a2", "ns/b1", "ns/b2"}
    assert [k for k, _ in io2.pod_group_writes][:2] == ["ns/run", "ns/b"]   # the writer's order


def _fail_podgroup_a(io) -> None:
    real = io.update_pod_group

    def update_pod_group(pg):
        if pg["metadata"]["name"] == "a":
            raise IOError("409 Conflict: PodGroup ns/a")
        return real(pg)
    io.update_pod_group = update_pod_group


def test_a_failed_podgroup_write_is_the_sessions_error_and_stops_that_jobs_writes_alone():
    c, io = _two_gangs_cache()
    c.status_writer = _ReversingWriter()
    _fail_podgroup_a(io)
    res = run_session(c, conf(["allocate"], [[GANG_ALL, PREDICATES]]), seed=1)
    assert [e for e in res.errors if "failed to update job" in e] == [
        "failed to update job <ns/a>: 409 Conflict: PodGroup ns/a"]
    assert {k for k, _ in io.status_writes} == {"ns/b1", "ns/b2"}     # a's events are not written
    assert {k for k, _ in io.pod_group_writes} == {"ns/b", "ns/run"}


class _BatchingWriter(_ReversingWriter):
    batch_events = True


def _batching_io(io):
    """Give a RecordingIO the one-request condition writes: each batch recorded, each pod written
    (or failed) as ``update_pod_status`` would, the failures in their slots."""
    io.batches = []

    def update_pod_status_many(pods):
        io.batches.append([f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in pods])
        out = []
        for p in pods:
            try:
                out.append(io.update_pod_status(p))
            except Exception as e:  # noqa: BLE001 - IOError_, in its slot
                out.append(e)
        return out
    io.update_pod_status_many = update_pod_status_many
    return io


def test_a_batching_writer_runs_the_podgroup_writes_and_then_every_jobs_conditions_in_one_request():
    c1, io1 = _two_gangs_cache()
    run_session(c1, conf(["allocate"], [[GANG_ALL, PREDICATES]]), seed=1)
    c2, io2 = _two_gangs_cache()
    _batching_io(io2)
    c2.status_writer = w = _BatchingWriter()
    run_session(c2, conf(["allocate"], [[GANG_ALL, PREDICATES]]), seed=1)
    assert w.batches == [3]                                   # the three PodGroup writes
    assert io2.batches == [["ns/a1", "ns/a2", "ns/b1", "ns/b2"]]   # then the conditions, in job order
    assert _writes(io1.pod_group_writes) == _writes(io2.pod_group_writes)
    assert _writes(io1.status_writes) == _writes(io2.status_writes)


def test_a_batching_writer_leaves_out_the_conditions_of_a_job_whose_podgroup_write_failed():
    c, io = _two_gangs_cache()
    _batching_io(io)
    c.status_writer = _BatchingWriter()
    _fail_podgroup_a(io)
    io.fail_status["ns/b2"] = "409 Conflict: Pod ns/b2"
    res = run_session(c, conf(["allocate"], [[GANG_ALL, PREDICATES]]), seed=1)
    assert [e for e in res.errors if "failed to update job" in e] == [
        "failed to update job <ns/a>: 409 Conflict: PodGroup ns/a"]
    assert io.batches == [["ns/b1", "ns/b2"]]
    assert {k for k, _ in io.status_writes} == {"ns/b1"}
    assert c.stats["status_write_errors"] == 1                # b2's failure, counted as one write's


def test_a_writer_without_batching_or_an_updater_without_it_calls_job_by_job():
    for batching_writer, batching_io in ((True, False), (False, True)):
        c, io = _two_gangs_cache()
        if batching_io:
            _batching_io(io)
        c.status_writer = w = _BatchingWriter() if batching_writer else _ReversingWriter()
        run_session(c, conf(["allocate"], [[GANG_ALL, PREDICATES]]), seed=1)
        assert w.batches == [3] and not getattr(io, "batches", None)
        assert {k for k, _ in io.status_writes} == {"ns/a1", "ns/a2", "ns/b1", "ns/b2"}


# ---- the status comparison is session.go's, field for field ---------------------------------------

def _reference_updated(new, old):
    """isPodGroupStatusUpdated as a plain reading of session.go: the statuses without their
    conditions, the counts and the phase normalised, compared as dicts; the conditions compared
    pairwise without their transition fields."""
    def norm(st):
        out = {k: v for k, v in st.items() if k != "conditions"}
        for k in ("running", "succeeded", "failed"):
            out[k] = int(out.get(k) or 0)
        out["phase"] = out.get("phase") or ""
        return out

    def cond(c):
        return {k: v for k, v in c.items() if k not in ("lastTransitionTime", "transitionID")}
    nc, oc = list(new.get("conditions") or []), list(old.get("conditions") or [])
    return norm(new) != norm(old) or len(nc) != len(oc) or any(cond(a) != cond(b) for a, b in zip(nc, oc))


def test_the_status_comparison_agrees_with_a_plain_reading_of_session_go():
    from hypothesis import given, settings, strategies as st
    small = st.sampled_from([None, 0, 1, 2, "", "x", "Inqueue", "Running", 1.0])
    condition = st.dictionaries(st.sampled_from(["type", "status", "reason", "message", "transitionID",
                                                 "lastTransitionTime"]), small, max_size=6)
    counts = st.dictionaries(st.sampled_from(["running", "succeeded", "failed"]),
                             st.sampled_from([None, 0, 1, 2, 1.0]), max_size=3)
    others = st.dictionaries(st.sampled_from(["phase", "minMember", "x"]), small, max_size=3)
    status = st.builds(lambda c, o: {**c, **o}, counts, others)
    conds = st.none() | st.lists(condition, max_size=3)

    @settings(max_examples=1500, deadline=None, derandomize=True)
    @given(status, status, conds, conds, st.booleans())
    def check(a, b, ca, cb, share):
        new, old = dict(a), dict(b)
        if ca is not None:
            new["conditions"] = ca
        if cb is not None:
            old["conditions"] = list(ca) if share and ca is not None else cb
        assert is_pod_group_status_updated(new, old) == _reference_updated(new, old), (new, old)
        assert not is_pod_group_status_updated(new, dict(new))
    check()
