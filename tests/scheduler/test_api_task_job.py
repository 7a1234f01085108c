"""TaskInfo / JobInfo / getTaskStatus semantics (api/job_info.go, api/helpers.go, PR #5045, the
annotation-persistence design)."""
from __future__ import annotations

import pytest

from ha.scheduler.api import (JobInfo, TaskInfo, TaskStatus, allocated_status, completed_status,
                              get_task_status, preemptable_status, scheduled_status)
from ha.scheduler.profiles import profile
from tests.scheduler.cachekit import make_pod, make_pod_group

S = TaskStatus


def test_status_bits_and_names():
    assert [int(s) for s in S] == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
    assert str(S.PIPELINED) == "Pipelined" and str(S(3)) == "Unknown"
    assert not allocated_status(S.PIPELINED) and allocated_status(S.BINDING)
    assert preemptable_status(S.RUNNING) and not preemptable_status(S.BINDING)
    assert completed_status(S.FAILED) and scheduled_status(S.BOUND) and not scheduled_status(S.BINDING)


@pytest.mark.parametrize("phase,node,deleting,nominated,v114,pr", [
    ("Running", "n1", False, "", S.RUNNING, S.RUNNING),
    ("Running", "n1", True, "", S.RELEASING, S.RELEASING),
    ("Pending", "", True, "n1", S.RELEASING, S.RELEASING),
    ("Pending", "", False, "", S.PENDING, S.PENDING),
    ("Pending", "", False, "n1", S.PENDING, S.PIPELINED),
    ("Pending", "n2", False, "n1", S.BOUND, S.BOUND),
    ("Succeeded", "n1", False, "", S.SUCCEEDED, S.SUCCEEDED),
    ("Failed", "n1", False, "", S.FAILED, S.FAILED),
    ("Unknown", "n1", False, "", S.UNKNOWN, S.UNKNOWN),
    ("Weird", "n1", False, "", S.UNKNOWN, S.UNKNOWN),
])
def test_get_task_status_table(phase, node, deleting, nominated, v114, pr):
    pod = make_pod("p", node=node, phase=phase, deleting=deleting, nominated=nominated)
    assert get_task_status(pod, profile("v1.14")) == v114
    assert get_task_status(pod, profile("pr5045")) == pr


def test_annotation_persistence_reconstructs_pipelined():
    ann = {"volcano.sh/pipelined-status": "true", "volcano.sh/pipelined-node": "n3",
           "volcano.sh/eviction-occurred": "true"}
    pod = make_pod("p", annotations=ann)
    assert get_task_status(pod, profile("v1.14")) == S.PENDING
    t = TaskInfo(pod, profile("annotations"))
    assert t.status == S.PIPELINED and t.node_name == "n3" and t.eviction_occurred


def test_new_task_info_fields():
    pod = make_pod("p", group="pg1", priority=7, annotations={"volcano.sh/task-spec": "worker",
                                                              "volcano.sh/preemptable": "false"})
    pod["spec"]["initContainers"] = [{"name": "i", "resources": {"requests": {"cpu": "3000m"}}}]
    pod["spec"]["preemptionPolicy"] = "Never"
    pod["spec"]["nodeSelector"] = {"zone": "a"}
    t = TaskInfo(pod)
    assert t.job == "ns/pg1" and t.task_role == "worker" and not t.preemptable
    assert t.priority == 7 and t.resreq.milli_cpu == 3000 and t.resreq.scalar_resources["pods"] == 1
    assert t.preemption_policy == "Never" and t.node_selector == {"zone": "a"} and not t.best_effort
    pod["metadata"]["annotations"]["volcano.sh/task-priority"] = "42"
    assert TaskInfo(pod).priority == 42
    assert TaskInfo(make_pod("q")).priority == 1 and TaskInfo(make_pod("q")).preemptable
    be = make_pod("be", cpu=0, memory=0)
    assert TaskInfo(be).best_effort
    assert TaskInfo(make_pod("nogroup")).job == ""


def test_sidecar_init_container_adds_to_request():
    pod = make_pod("p", cpu=1000)
    pod["spec"]["initContainers"] = [{"name": "s", "restartPolicy": "Always",
                                      "resources": {"requests": {"cpu": "500m"}}}]
    assert TaskInfo(pod).resreq.milli_cpu == 1500


def test_clone_drops_eviction_occurred_shares_pod():
    t = TaskInfo(make_pod("p", nominated="n1"), profile("pr5045"))
    t.eviction_occurred = True
    t.generate_last_tx_context()
    c = t.clone()
    assert c.pod is t.pod and not c.eviction_occurred
    assert c.last_transaction.eviction_occurred and c.last_transaction is not t.last_transaction
    assert c.node_name == "n1" and c.status == S.PIPELINED and c.nominated_node_name == "n1"
    # the requests are shared (never mutated in place; Volcano clones them)
    assert c.resreq is t.resreq and c.init_resreq is t.init_resreq and c.resreq.milli_cpu == 1000


def _job(n_pending=0, n_running=0, n_pipelined=0, min_member=1, roles=None):
    job = JobInfo("ns/pg")
    job.set_pod_group(make_pod_group("pg", min_member=min_member))
    i = 0
    for status, n in ((S.PENDING, n_pending), (S.RUNNING, n_running), (S.PIPELINED, n_pipelined)):
        for _ in range(n):
            t = TaskInfo(make_pod(f"t{i}", group="pg", node="n1" if status != S.PENDING else ""))
            t.status = status
            if roles:
                t.task_role = roles[i % len(roles)]
            job.add_task_info(t)
            i += 1
    return job


def test_job_counters_and_gang_predicates():
    job = _job(n_pending=2, n_running=1, n_pipelined=1, min_member=3)
    assert job.ready_task_num() == 1 and job.waiting_task_num() == 1 and job.valid_task_num() == 4
    assert not job.is_ready() and not job.is_pipelined() and job.is_starving()
    job2 = _job(n_pending=1, n_running=2, n_pipelined=1, min_member=3)
    assert not job2.is_ready() and job2.is_pipelined() and not job2.is_starving()
    assert job2.allocated.milli_cpu == 2000 and job2.total_request.milli_cpu == 4000
    assert JobInfo("x").is_pending()  # no PodGroup → pending


def test_update_task_status_moves_index_and_allocated():
    job = _job(n_pending=1)
    t = next(iter(job.tasks.values()))
    job.update_task_status(t, S.ALLOCATED)
    assert S.PENDING not in job.task_status_index and job.allocated.milli_cpu == 1000
    job.delete_task_info(t)
    assert job.tasks == {} and job.allocated.milli_cpu == 0 and job.total_request.milli_cpu == 0


def test_clone_is_deep_except_pods_and_what_is_under_the_pod_group():
    """Tasks are cloned, pods shared; the PodGroup's top level is the clone's own and what is
    under it shared: a status is written through a copy put in its place (writable_status)."""
    from ha.scheduler.api.job_info import writable_status
    job = _job(n_pending=1, n_running=1)
    job.pod_group["status"]["conditions"] = [{"type": "Scheduled", "status": "True"}]
    c = job.clone()
    assert c.tasks.keys() == job.tasks.keys() and all(c.tasks[k] is not job.tasks[k] for k in c.tasks)
    assert all(c.tasks[k].pod is job.tasks[k].pod for k in c.tasks)
    assert c.pod_group is not job.pod_group and c.pod_group == job.pod_group
    st = writable_status(c.pod_group)
    st["phase"] = "Running"
    st["conditions"].append({"type": "Unschedulable", "status": "True"})
    assert c.pod_group["status"] is st and st["phase"] == "Running" and len(st["conditions"]) == 2
    assert job.pod_group["status"]["phase"] == "Inqueue"
    assert job.pod_group["status"]["conditions"] == [{"type": "Scheduled", "status": "True"}]
    c.pod_group["status"] = {"phase": "Unknown"}      # the job updater's new status
    assert job.pod_group["status"]["phase"] == "Inqueue"


def test_role_checks():
    job = _job(n_pending=2, n_running=1, min_member=3, roles=["ps", "worker", "worker"])
    job.task_min_available = {"ps": 1, "worker": 2}
    job.task_min_available_total = 3
    assert job.check_task_valid()
    assert not job.check_task_ready()
    assert not job.check_task_pipelined()
    assert job.check_task_starving()


@pytest.mark.parametrize("minimums", [{}, {"ps": 0}, {"ps": 0, "worker": 0}, {"worker": -1}])
def test_role_checks_without_a_role_minimum_answer_as_counting_would(minimums, monkeypatch):
    """No role asks for a task: the checks answer without counting the tasks, and the answers
    are the counting ones, over jobs in every mix of statuses."""
    for n_pending, n_running, min_member in ((0, 0, 0), (2, 1, 3), (3, 0, 1), (0, 4, 5)):
        job = _job(n_pending=n_pending, n_running=n_running, min_member=min_member,
                   roles=(["ps", "worker", "worker", "worker"] * 2)[:n_pending + n_running])
        job.task_min_available = dict(minimums)
        job.task_min_available_total = sum(minimums.values())
        quick = [job.check_task_valid(), job.check_task_ready(), job.check_task_pipelined(),
                 job.check_task_starving()]
        with monkeypatch.context() as m:
            m.setattr(JobInfo, "_no_role_minimum", lambda self: False)
            counted = [job.check_task_valid(), job.check_task_ready(), job.check_task_pipelined(),
                       job.check_task_starving()]
        assert quick == counted == [True, True, True, False]
    job.task_min_available = {"ps": 0, "worker": 1}     # a minimum: counted, not assumed
    assert not job._no_role_minimum()


def test_task_scheduling_reason_nomination_only_with_eviction():
    job = _job(n_pending=1)
    t = next(iter(job.tasks.values()))
    job.update_task_status(t, S.PIPELINED)
    t.node_name = "n1"
    assert job.task_scheduling_reason(t.uid)[0] == "Unschedulable"
    assert job.task_scheduling_reason(t.uid)[2] == ""
    t.eviction_occurred = True
    assert job.task_scheduling_reason(t.uid)[2] == "n1"
    # after a discard the last transaction decides
    t.generate_last_tx_context()
    t.eviction_occurred = False
    t.node_name = ""
    assert job.task_scheduling_reason(t.uid)[2] == "n1"


def test_need_continue_allocating():
    job = _job(n_pending=3, min_member=3)
    assert not job.need_continue_allocating()         # minAvailable == len(tasks)
    job2 = _job(n_pending=4, min_member=2)
    assert job2.need_continue_allocating()
