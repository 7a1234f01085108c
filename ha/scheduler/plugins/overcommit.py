"""overcommit: admit jobs while the cluster, over-committed by a factor, still has room (Volcano
``plugins/overcommit/overcommit.go``; part of Volcano's default tier 2).

idle = total × ``overcommit-factor`` (default 1.2; values below 1 fall back to it) − Σ node used.
JobEnqueueable permits a job without minResources, or one whose minResources plus the minResources
already admitted (Inqueue jobs, and the unfilled part of Running ones) fit ``idle`` on the
dimensions it requests. JobEnqueued adds the job's minResources to the admitted sum.
"""
from __future__ import annotations

from typing import Any, Mapping

from ha.scheduler.plugins.factory import register
from ha.scheduler.plugins.queue_attrs import (
    PG_INQUEUE, PG_RUNNING, allocated_task_num, inqueue_resource, pg_min_member, pg_min_resources,
)
from ha.scheduler.plugins.util import PERMIT, REJECT, Resource, arguments

PLUGIN_NAME = "overcommit"
OVERCOMMIT_FACTOR = "overcommit-factor"
DEFAULT_OVERCOMMIT_FACTOR = 1.2


@register(PLUGIN_NAME)
class OvercommitPlugin:
    argument_keys = (OVERCOMMIT_FACTOR,)

    def __init__(self, args: Mapping[str, Any] | None = None):
        self.arguments = arguments(args)
        self.over_commit_factor = DEFAULT_OVERCOMMIT_FACTOR
        self.idle_resource = Resource()
        self.inqueue_resource = Resource()

    def name(self) -> str:
        return PLUGIN_NAME

    def on_session_open(self, ssn: Any) -> None:
        self.over_commit_factor = self.arguments.get_float(OVERCOMMIT_FACTOR, DEFAULT_OVERCOMMIT_FACTOR)
        if self.over_commit_factor < 1.0:
            self.over_commit_factor = DEFAULT_OVERCOMMIT_FACTOR
        used = Resource()
        for node in ssn.nodes.values():
            used.add(node.used)
        self.idle_resource = ssn.total_resource.clone().multi(self.over_commit_factor).sub_without_assert(used)
        self.inqueue_resource = Resource()
        for job in ssn.jobs.values():
            phase = job.pod_group_phase
            if phase == PG_INQUEUE and pg_min_resources(job) is not None:
                self.inqueue_resource.add(job.get_min_resources())
                continue
            if (phase == PG_RUNNING and pg_min_resources(job) is not None
                    and allocated_task_num(job) >= pg_min_member(job)):
                self.inqueue_resource.add(inqueue_resource(job, job.allocated))

        def job_enqueueable(job: Any) -> int:
            if pg_min_resources(job) is None:
                return PERMIT
            min_req = job.get_min_resources()
            total = self.inqueue_resource.clone().add(min_req)
            ok, _ = total.less_equal_with_dimension_and_resources_name(self.idle_resource, min_req)
            return PERMIT if ok else REJECT

        def job_enqueued(job: Any) -> None:
            if pg_min_resources(job) is not None:
                self.inqueue_resource.add(job.get_min_resources())

        ssn.add_job_enqueueable_fn(self.name(), job_enqueueable)
        ssn.add_job_enqueued_fn(self.name(), job_enqueued)

    def on_session_close(self, ssn: Any) -> None:
        self.idle_resource = Resource()
        self.inqueue_resource = Resource()
