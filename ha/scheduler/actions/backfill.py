"""backfill (``actions/backfill/backfill.go``): places BestEffort Pending tasks (and un-pipelines
BestEffort Pipelined ones first) with ``ssn.allocate`` — no statement, dispatched as soon as the
job is ready. Deviation: no sharding (one candidate group)."""
from __future__ import annotations

from typing import Any

from ha.scheduler.api import TaskStatus
from ha.scheduler.api.types import FitErrors
from ha.scheduler.framework.registry import register_action
from ha.scheduler.framework.util import (PredicateHelper, PriorityQueue, prioritize_nodes,
                                         select_best_node_and_score)

ENABLE_PREDICATE_ERR_CACHE_KEY = "predicateErrorCacheEnable"


class BackfillAction:
    def __init__(self) -> None:
        self.enable_predicate_error_cache = True

    def name(self) -> str:
        return "backfill"

    def initialize(self) -> None:
        pass

    def uninitialize(self) -> None:
        pass

    def execute(self, ssn: Any) -> None:
        self.enable_predicate_error_cache = ssn.conf.action_arguments(self.name()).get_bool(
            ENABLE_PREDICATE_ERR_CACHE_KEY, True)
        for task in self.pick_up_pending_tasks(ssn):
            job = ssn.jobs[task.job]
            ph = PredicateHelper(ssn.cache)
            fe = FitErrors()
            err = ssn.pre_predicate_fn(task)
            if err is not None:
                for n in ssn.nodes.values():
                    fe.set_node_error(n.name, err)
                job.nodes_fit_errors[task.uid] = fe
                continue
            predicate_nodes, fit_errors = ph.predicate_nodes(task, ssn.node_list, ssn.predicate_for_allocate_action,
                                                             self.enable_predicate_error_cache)
            if not predicate_nodes:
                job.nodes_fit_errors[task.uid] = fit_errors
                continue
            node = predicate_nodes[0]
            if len(predicate_nodes) > 1:
                scores = prioritize_nodes(task, predicate_nodes, ssn.batch_node_order_fn,
                                          ssn.node_order_map_fn, ssn.node_order_reduce_fn)
                node = ssn.best_node_fn(task, scores)
                if node is None:
                    node, _ = select_best_node_and_score(scores, ssn.rng)
                if node is None:
                    continue
            try:
                ssn.allocate(task, node)
            except Exception as e:  # noqa: BLE001 - Volcano records the error as a fit error
                if isinstance(e, BaseException) and not isinstance(e, Exception):
                    raise
                fe.set_node_error(node.name, e)
                job.nodes_fit_errors[task.uid] = fe
                ssn.record_error(f"backfill: failed to bind task {task.pod_key} on {node.name}: {e}")

    def pick_up_pending_tasks(self, ssn: Any) -> list[Any]:
        queues = PriorityQueue(ssn.queue_order_fn)
        jobs: dict[Any, PriorityQueue] = {}
        tasks: dict[Any, PriorityQueue] = {}
        for job in list(ssn.jobs.values()):
            if job.is_pending():
                continue
            idx = job.task_status_index
            if not (idx.get(TaskStatus.PENDING) or idx.get(TaskStatus.PIPELINED)):
                continue    # nothing to pick up; job_valid, a question, is not asked
            vr = ssn.job_valid(job)
            if vr is not None and not vr.passed:
                continue
            queue = ssn.queues.get(job.queue)
            if queue is None:
                continue
            for task in list((job.task_status_index.get(TaskStatus.PENDING) or {}).values()):
                if not task.best_effort or task.sch_gated:
                    continue
                tasks.setdefault(job.uid, PriorityQueue(ssn.task_order_fn)).push(task)
            for task in list((job.task_status_index.get(TaskStatus.PIPELINED) or {}).values()):
                if not task.best_effort:
                    continue
                stmt = ssn.statement()
                try:
                    stmt.un_pipeline(task)
                except Exception as e:  # noqa: BLE001
                    ssn.record_error(f"failed to unpipeline task {task.pod_key}: {e}")
                    continue
                tasks.setdefault(job.uid, PriorityQueue(ssn.task_order_fn)).push(task)
            if job.uid not in tasks:
                continue
            if queue.uid not in jobs:
                queues.push(queue)
                jobs[job.queue] = PriorityQueue(ssn.job_order_fn)
            jobs[job.queue].push(job)
        pending: list[Any] = []
        while not queues.empty():
            queue = queues.pop()
            jq = jobs[queue.uid]
            while not jq.empty():
                job = jq.pop()
                tq = tasks[job.uid]
                while not tq.empty():
                    pending.append(tq.pop())
        return pending


def new() -> BackfillAction:
    return BackfillAction()


register_action("backfill", new)
