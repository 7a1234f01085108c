"""enqueue (``actions/enqueue/enqueue.go``): a Pending PodGroup becomes Inqueue when it has no
``minResources`` or ``JobEnqueueable`` allows it. One job per queue visit, queues in QueueOrder."""
from __future__ import annotations

from typing import Any

from ha.scheduler.api.job_info import writable_status
from ha.scheduler.framework.util import PriorityQueue
from ha.scheduler.framework.registry import register_action


class EnqueueAction:
    def name(self) -> str:
        return "enqueue"

    def initialize(self) -> None:
        pass

    def uninitialize(self) -> None:
        pass

    def execute(self, ssn: Any) -> None:
        queues = PriorityQueue(ssn.queue_order_fn)
        queue_set: set[Any] = set()
        jobs_map: dict[Any, PriorityQueue] = {}
        for job in list(ssn.jobs.values()):
            if not job.schedule_start_timestamp:
                job.schedule_start_timestamp = ssn.clock.now()
            queue = ssn.queues.get(job.queue)
            if queue is None:
                ssn.record_error(f"failed to find queue <{job.queue}> for job <{job.namespace}/{job.name}>")
                continue
            if queue.uid not in queue_set:
                queue_set.add(queue.uid)
                queues.push(queue)
            if job.is_pending():
                jobs_map.setdefault(job.queue, PriorityQueue(ssn.job_order_fn)).push(job)

        while not queues.empty():
            queue = queues.pop()
            jobs = jobs_map.get(queue.uid)
            if jobs is None or jobs.empty():
                continue
            job = jobs.pop()
            min_resources = ((job.pod_group or {}).get("spec") or {}).get("minResources")
            if min_resources is None or ssn.job_enqueueable(job):
                ssn.job_enqueued(job)
                writable_status(job.pod_group)["phase"] = "Inqueue"
                ssn.jobs[job.uid] = job
            queues.push(queue)


def new() -> EnqueueAction:
    return EnqueueAction()


register_action("enqueue", new)
