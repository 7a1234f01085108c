"""reclaim (``actions/reclaim/reclaim.go``, v1.14.0).

* Jobs not Pending, JobValid, queue known; every such queue goes into a QueueOrder queue; starving
  jobs (with their Pending non-gated tasks) into per-queue JobOrder queues.
* Pop a queue (skipped if Overused); while it has starving jobs: pop a job, new statement; while
  the job starves pop a task — skip policy Never, skip unless ``ssn.preemptive(queue, task)``, skip
  if PrePredicate fails — and ``reclaim_for_task``. Then **commit if JobPipelined, else discard**;
  if the queue still has jobs push it back (the inner loop then goes on with the same queue, so
  the queue is effectively pushed twice, as in Go).
* ``reclaim_for_task``: nodes passing ``PredicateForPreemptAction`` (minus allocate's
  UnschedulableAndUnresolvable ones); per node the reclaimees are clones of tasks that are exactly
  **Running**, preemptable, of a job in a *different*, Reclaimable queue; victims =
  ``ssn.reclaimable``; ``ValidateVictims``; evict in victim order adding each to FutureIdle until
  the task fits, then Pipeline (``eviction_occurred`` if anything was evicted) and stop.

The gang-aware eviction design: ``gangAwareEnable`` (or ``reclaim.gangAwareEnable``) runs only the
gang-aware path (``gang_path.execute_gang_path``), which — unlike legacy reclaim — nominates the
whole gang. Without it the legacy loop runs with the sticky-domain retrofit, as in preempt.
"""
from __future__ import annotations

from typing import Any

from ha.scheduler.api import TaskStatus, ZERO
from ha.scheduler.actions.utils import gang_path
from ha.scheduler.framework.statement import Statement, StatementError
from ha.scheduler.framework.util import PredicateHelper, PriorityQueue, victims_suffice
from ha.scheduler.framework.registry import register_action

ENABLE_PREDICATE_ERR_CACHE_KEY = "predicateErrorCacheEnable"


class ReclaimAction:
    def __init__(self) -> None:
        self.enable_predicate_error_cache = True
        self.sticky: gang_path.StickyDomains | None = None

    def name(self) -> str:
        return "reclaim"

    def initialize(self) -> None:
        pass

    def uninitialize(self) -> None:
        pass

    def execute(self, ssn: Any) -> None:
        self.enable_predicate_error_cache = ssn.conf.action_arguments(self.name()).get_bool(
            ENABLE_PREDICATE_ERR_CACHE_KEY, True)
        if gang_path.gang_aware_enabled(ssn, self.name()):
            # the gang-aware design's path is independent: none of the legacy logic runs
            gang_path.execute_gang_path(ssn, self.name())
            return
        self.sticky = gang_path.StickyDomains(ssn)
        queues = PriorityQueue(ssn.queue_order_fn)
        queue_map: dict[Any, Any] = {}
        preemptors_map: dict[Any, PriorityQueue] = {}
        preemptor_tasks: dict[Any, PriorityQueue] = {}

        for job in list(ssn.jobs.values()):
            if job.is_pending():
                continue
            vr = ssn.job_valid(job)
            if vr is not None and not vr.passed:
                continue
            queue = ssn.queues.get(job.queue)
            if queue is None:
                ssn.record_error(f"failed to find queue <{job.queue}> for job <{job.namespace}/{job.name}>")
                continue
            if queue.uid not in queue_map:
                queue_map[queue.uid] = queue
                queues.push(queue)
            if ssn.job_starving(job):
                preemptors_map.setdefault(job.queue, PriorityQueue(ssn.job_order_fn)).push(job)
                tq = PriorityQueue(ssn.task_order_fn)
                for task in (job.task_status_index.get(TaskStatus.PENDING) or {}).values():
                    if task.sch_gated:
                        continue
                    tq.push(task)
                preemptor_tasks[job.uid] = tq

        while not queues.empty():
            queue = queues.pop()
            if ssn.overused(queue):
                continue
            while True:
                jobs_q = preemptors_map.get(queue.uid)
                if jobs_q is None or jobs_q.empty():
                    break
                job = jobs_q.pop()
                stmt = ssn.statement()
                while True:
                    if not ssn.job_starving(job):
                        break
                    tasks_q = preemptor_tasks.get(job.uid)
                    if tasks_q is None or tasks_q.empty():
                        break
                    task = tasks_q.pop()
                    if task.preemption_policy == "Never":
                        continue
                    if not ssn.preemptive(queue, task):
                        continue
                    if ssn.pre_predicate_fn(task) is not None:
                        continue
                    self.reclaim_for_task(ssn, stmt, task, job)
                    if self.sticky.failed(job.uid):
                        break  # sticky domain, fail fast: the pinned domain cannot take this task
                if ssn.job_pipelined(job):
                    stmt.commit()
                else:
                    stmt.discard()
                if not jobs_q.empty():
                    queues.push(queue)

    def reclaim_for_task(self, ssn: Any, stmt: Statement, task: Any, job: Any) -> bool:
        total_nodes = ssn.filter_out_unschedulable_and_unresolvable_nodes_for_task(task)
        ph = PredicateHelper(ssn.cache)
        predicate_nodes, _ = ph.predicate_nodes(task, total_nodes, ssn.predicate_for_preempt_action,
                                                self.enable_predicate_error_cache)
        if self.sticky is None:
            return self.reclaim_on_nodes(ssn, stmt, task, job, predicate_nodes)
        return self.sticky.run(job, predicate_nodes,
                               lambda nodes: self.reclaim_on_nodes(ssn, stmt, task, job, nodes))

    def reclaim_on_nodes(self, ssn: Any, stmt: Statement, task: Any, job: Any, predicate_nodes: list[Any]) -> bool:
        """The node loop of ``reclaimForTask``; True when the task was pipelined somewhere."""
        for n in predicate_nodes:
            reclaimees = []
            for t in list(n.tasks.values()):
                if t.status != TaskStatus.RUNNING or not t.preemptable:
                    continue
                j = ssn.jobs.get(t.job)
                if j is None:
                    continue
                if j.queue != job.queue:
                    q = ssn.queues.get(j.queue)
                    if q is None or not q.reclaimable():
                        continue
                    reclaimees.append(t.clone())
            if not reclaimees:
                continue
            victims = ssn.reclaimable(task, reclaimees)
            if not victims_suffice(task, n, victims):
                continue
            vq = ssn.build_victims_priority_queue(victims, task)
            resreq = task.init_resreq.clone()
            available = n.future_idle()
            eviction_occurred = False
            while not vq.empty():
                reclaimee = vq.pop()
                try:
                    stmt.evict(reclaimee, "reclaim")
                except StatementError as e:
                    ssn.record_error(f"failed to reclaim task {reclaimee.pod_key} for {task.pod_key}: {e}")
                    continue
                available.add(reclaimee.resreq)
                eviction_occurred = True
                if resreq.less_equal(available, ZERO):
                    break
            if task.init_resreq.less_equal(available, ZERO):
                try:
                    stmt.pipeline(task, n.name, eviction_occurred)
                except StatementError as e:
                    ssn.record_error(f"failed to pipeline task {task.pod_key} on {n.name}: {e}")
                    stmt.un_pipeline(task)
                return True
        return False


def new() -> ReclaimAction:
    return ReclaimAction()


register_action("reclaim", new)
