"""priority: order and preempt by priority (Volcano ``plugins/priority/priority.go``).

* TaskOrder: higher ``task.priority`` first. JobOrder: higher ``job.priority`` first.
* Preemptable: a victim of another job only if its job's priority is lower than the preemptor
  job's; a victim of the same job only if its task priority is lower than the preemptor's.
* JobStarving: Ready + Waiting < number of tasks.
* No JobPipelined and no Reclaimable in v1.14.0.
"""
from __future__ import annotations

from typing import Any, Mapping

from ha.scheduler.plugins.factory import register
from ha.scheduler.plugins.util import PERMIT, Plugin

PLUGIN_NAME = "priority"


def task_order(l: Any, r: Any) -> int:
    if l.priority == r.priority:
        return 0
    return -1 if l.priority > r.priority else 1


def job_order(l: Any, r: Any) -> int:
    if l.priority > r.priority:
        return -1
    if l.priority < r.priority:
        return 1
    return 0


def priority_victims(jobs: Mapping[str, Any], preemptor: Any, preemptees: list[Any]) -> list[Any]:
    preemptor_job = jobs[preemptor.job]
    victims = []
    for t in preemptees:
        job = jobs[t.job]
        if job.uid != preemptor_job.uid:
            if job.priority < preemptor_job.priority:  # between jobs: job priority
                victims.append(t)
        elif t.priority < preemptor.priority:  # within a job: task priority
            victims.append(t)
    return victims


def job_starving(job: Any) -> bool:
    return job.ready_task_num() + job.waiting_task_num() < len(job.tasks)


@register(PLUGIN_NAME)
class PriorityPlugin(Plugin):
    plugin_name = PLUGIN_NAME

    def on_session_open(self, ssn: Any) -> None:
        ssn.add_task_order_fn(self.name(), task_order)
        ssn.add_job_order_fn(self.name(), job_order)

        def preemptable(preemptor: Any, preemptees: list[Any]) -> tuple[list[Any], int]:
            return priority_victims(ssn.jobs, preemptor, preemptees), PERMIT

        ssn.add_preemptable_fn(self.name(), preemptable)
        ssn.add_job_starving_fns(self.name(), job_starving)
