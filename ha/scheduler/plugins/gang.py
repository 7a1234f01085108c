"""gang: all-or-nothing scheduling by ``minMember`` (Volcano ``plugins/gang/gang.go``).

* JobValid: enough valid tasks per role and in total (Pending, Pipelined, Allocated statuses,
  Succeeded) to reach minMember.
* JobReady / JobPipelined from the job's counters and per-role minimums (``is_ready`` /
  ``is_pipelined`` and ``check_task_ready`` / ``check_task_pipelined`` of
  ``ha/scheduler/api/job_info.py``, Volcano's ``api/job_info.go``); JobStarving from the counters
  alone (``is_starving``).
* Preemptable / Reclaimable: a victim only while its job keeps more than minMember ready tasks,
  counting down per job in the order the candidates are given.
* JobOrder: jobs that are not ready first.
* At session close, each job with tasks gets the PodGroup condition ``Unschedulable`` ("N/M tasks in
  gang unschedulable: <fit error>") or ``Scheduled``.
"""
from __future__ import annotations

from typing import Any, Mapping

from ha.scheduler.api import TaskStatus, ValidateResult, allocated_status
from ha.scheduler.plugins.factory import register
from ha.scheduler.plugins.util import PERMIT, REJECT, Plugin

PLUGIN_NAME = "gang"

# volcano.sh/apis scheduling/v1beta1 reasons and condition types
NOT_ENOUGH_PODS_OF_TASK_REASON = "NotEnoughPodsOfTask"
NOT_ENOUGH_PODS_REASON = "NotEnoughTasks"
NOT_ENOUGH_RESOURCES_REASON = "NotEnoughResources"
POD_GROUP_UNSCHEDULABLE = "Unschedulable"
POD_GROUP_SCHEDULED = "Scheduled"


def _sub_job_check(job: Any, method: str) -> bool:
    # Sub-group policies are not modelled; a job without them passes these checks in Volcano too.
    fn = getattr(job, method, None)
    return True if fn is None else bool(fn())


def job_valid(job: Any) -> ValidateResult | None:
    if not job.check_task_valid():
        return ValidateResult(False, NOT_ENOUGH_PODS_OF_TASK_REASON,
                              "Not enough valid pods of each task for gang-scheduling")
    if not _sub_job_check(job, "check_sub_job_valid"):
        return ValidateResult(False, NOT_ENOUGH_PODS_OF_TASK_REASON,
                              "Not enough valid subGroups of each task for gang-scheduling")
    vtn = job.valid_task_num()
    if vtn < job.min_available:
        return ValidateResult(False, NOT_ENOUGH_PODS_REASON,
                              f"Not enough valid tasks for gang-scheduling, valid: {vtn}, "
                              f"min: {job.min_available}")
    return None


def job_ready(job: Any) -> bool:
    return bool(job.check_task_ready() and _sub_job_check(job, "check_sub_job_ready") and job.is_ready())


def job_pipelined(job: Any) -> int:
    ok = job.check_task_pipelined() and _sub_job_check(job, "check_sub_job_pipelined") and job.is_pipelined()
    return PERMIT if ok else REJECT


def job_starving(job: Any) -> bool:
    # Per-role minimums are deliberately ignored here (as in Volcano's preemption path).
    return bool(job.is_starving())


def job_order(l: Any, r: Any) -> int:
    l_ready, r_ready = l.is_ready(), r.is_ready()
    if l_ready == r_ready:
        return 0
    return 1 if l_ready else -1


def gang_victims(jobs: Mapping[str, Any], preemptees: list[Any]) -> list[Any]:
    """Keep every job at ``minMember`` ready tasks: at most Ready − minMember victims per job."""
    victims = []
    occupied: dict[str, int] = {}
    for t in preemptees:
        job = jobs[t.job]
        if job.uid not in occupied:
            occupied[job.uid] = job.ready_task_num()
        if occupied[job.uid] > job.min_available:
            occupied[job.uid] -= 1
            victims.append(t)
    return victims


def schedulable_task_num(job: Any) -> int:
    """Ready tasks plus Pending tasks whose (last) transaction reached an allocated status."""
    n = 0
    for t in job.task_status_index.get(TaskStatus.PENDING, {}).values():
        ctx = t.last_transaction if getattr(t, "last_transaction", None) is not None else t
        if allocated_status(ctx.status):
            n += 1
    return n + job.ready_task_num()


@register(PLUGIN_NAME)
class GangPlugin(Plugin):
    plugin_name = PLUGIN_NAME

    def on_session_open(self, ssn: Any) -> None:
        ssn.add_job_valid_fn(self.name(), job_valid)

        def preemptable(preemptor: Any, preemptees: list[Any]) -> tuple[list[Any], int]:
            return gang_victims(ssn.jobs, preemptees), PERMIT

        ssn.add_reclaimable_fn(self.name(), preemptable)
        ssn.add_preemptable_fn(self.name(), preemptable)
        ssn.add_job_order_fn(self.name(), job_order)
        ssn.add_job_ready_fn(self.name(), job_ready)
        ssn.add_job_pipelined_fn(self.name(), job_pipelined)
        ssn.add_job_starving_fns(self.name(), job_starving)

    def on_session_close(self, ssn: Any) -> None:
        now = ssn.clock.now()
        sid = str(ssn.uid)
        for job in ssn.jobs.values():
            if not job.tasks:
                continue
            if not job.is_ready():
                unready = job.min_available - schedulable_task_num(job)
                msg = f"{unready}/{len(job.tasks)} tasks in gang unschedulable: {job.fit_error()}"
                cond = {"type": POD_GROUP_UNSCHEDULABLE, "status": "True", "lastTransitionTime": now,
                        "transitionID": sid, "reason": NOT_ENOUGH_RESOURCES_REASON,
                        "message": msg}
            else:
                cond = {"type": POD_GROUP_SCHEDULED, "status": "True", "lastTransitionTime": now,
                        "transitionID": sid, "reason": "tasks in gang are ready to be scheduled",
                        "message": ""}
            ssn.update_pod_group_condition(job, cond)
