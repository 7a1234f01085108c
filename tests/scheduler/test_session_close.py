"""Session open/close: plugin building (registered builders, missing plugins), the JobUpdater's
PodGroup phase write-back through the cache (volcano-semantics.md §5.4, §4.11)."""
from __future__ import annotations

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
    ssn = open_session(c, conf([], [[GANG_ALL, PREDICATES, {"name": "no-such-plugin"}]],
                               registered=["gang", "no-such-plugin"]))
    assert sorted(ssn.plugins) == ["gang"]
    assert any("predicates" in e for e in ssn.errors) and any("no-such-plugin" in e for e in ssn.errors)
    assert ssn.total_resource.milli_cpu == 1000
    assert [n.name for n in ssn.node_list] == ["n1"]
