"""preempt (``actions/preempt/preempt.go``, v1.14.0; PR #5045 changes nothing here but the
dropped ``evictionOccurred`` argument).

* Preemptors: jobs not Pending, JobValid, queue known, **JobStarving**; their Pending non-gated
  tasks in TaskOrder; jobs per queue in JobOrder.
* Between jobs of one queue: per preemptor job a statement; while the job starves, pop a task and
  ``preempt`` it with victims that are Bound/Running, preemptable, BestEffort-compatible, of a
  **different job in the same queue**; then **commit if JobPipelined, else discard** (and try the
  next job); a job that got an assignment is pushed back.
* Within a job (for every collected job, inside the queue loop as in Go): per Pending task a new
  statement, victims from the same job, **always commit**; stop at the first task with nothing
  assigned.
* ``preempt(task)``: ``taskEligibleToPreempt`` (policy Never; a nominated node that is missing, or
  passes the plugin predicates — BR7: a stale nomination blocks preemption forever, in the sessions
  where allocate ran the task's PrePredicate; without it the predicates answer the cycle-state
  Error (ha/scheduler/plugins/predicates.py) and the task stays eligible —, or fails
  with a non-FitError, or holds a lower-priority pod terminating by preemption), PrePredicate, the
  nodes minus allocate's UnschedulableAndUnresolvable ones filtered with
  ``PredicateForPreemptAction``, then ``normalPreempt``: nodes by descending score; per node
  victims = ``ssn.preemptable`` over clones of the filtered node tasks, ``ValidateVictims``,
  evict in victim order until ``Allocatable && InitResreq ≤ FutureIdle``, then Pipeline with
  ``eviction_occurred`` = something was evicted, and stop.

The gang-aware eviction design: with the action argument ``gangAwareEnable`` (or
``preempt.gangAwareEnable``) the action runs only ``gang_path.execute_gang_path`` (bundles, domains,
dry-run allocate, nominate the whole gang). Without it the legacy loop above runs, retrofitted with
sticky domains: a job whose GangSearchSpaceFn returns a *hard* search space pins the domain
its first preempting task succeeded in; a later task failing there ends the job's turn.

Go map order. ``queues`` (and ``underRequest``, built by ranging over ``ssn.Jobs``) are Go maps:
every ``range`` starts at a random position, so the order changes from session to session. The
order matters: the within-job pass runs inside the queue loop over *every* starving job and
rebuilds (and drains) their task queues, so a queue visited later has lost its jobs' between-jobs
turn for this session (BR1's h1 does not preempt in a session that visits q2 before q1). The model
draws both orders from ``ssn.rng`` per session (:func:`go_map_order`, a uniform shuffle). Go's
own distribution is not uniform (a small map iterates as a random rotation of its slots, so the
insertion order is the likeliest) and depends on the Go release; what the model must not do is
what it did before: iterate in cache insertion order, the same in every session, which turned a
per-session chance into "this run never preempts" (tests/scheduler/test_preempt_map_order.py).

Deviation: topology-aware preemption (``enableTopologyAwarePreemption``) is not modelled; when
asked for it the action records an error and uses normal preemption.
"""
from __future__ import annotations

from typing import Any, Callable

from ha.scheduler.api import TaskStatus, ZERO, preemptable_status
from ha.scheduler.api.types import FitError
from ha.scheduler.actions.utils import gang_path
from ha.scheduler.framework.statement import Statement, StatementError
from ha.scheduler.framework.registry import register_action
from ha.scheduler.framework.util import (PredicateHelper, PriorityQueue, prioritize_nodes, sort_nodes,
                                         victims_suffice)

ENABLE_PREDICATE_ERR_CACHE_KEY = "predicateErrorCacheEnable"
ENABLE_TOPOLOGY_AWARE_PREEMPTION_KEY = "enableTopologyAwarePreemption"


class NotEligible(Exception):
    pass


def go_map_order(ssn: Any, items: list[Any]) -> list[Any]:
    """The order a Go ``range`` over a map would visit ``items`` in: random, drawn afresh from the
    session's rng (no draw for fewer than two items)."""
    out = list(items)
    if len(out) > 1:
        ssn.rng.shuffle(out)
    return out


def pod_priority(pod: dict) -> int:
    p = (pod.get("spec") or {}).get("priority")
    return int(p) if p is not None else 0


def pod_terminating_by_preemption(pod: dict) -> bool:
    if (pod.get("metadata") or {}).get("deletionTimestamp") is None:
        return False
    for c in (pod.get("status") or {}).get("conditions") or ():
        if c.get("type") == "DisruptionTarget":
            return c.get("status") == "True" and c.get("reason") == "PreemptionByScheduler"
    return False


class PreemptAction:
    def __init__(self) -> None:
        self.ssn: Any = None
        self.enable_predicate_error_cache = True
        self.enable_topology_aware_preemption = False
        self.gang_aware_enable = False
        self.sticky: gang_path.StickyDomains | None = None

    def name(self) -> str:
        return "preempt"

    def initialize(self) -> None:
        pass

    def uninitialize(self) -> None:
        pass

    def parse_arguments(self, ssn: Any) -> None:
        args = ssn.conf.action_arguments(self.name())
        self.enable_predicate_error_cache = args.get_bool(ENABLE_PREDICATE_ERR_CACHE_KEY, True)
        self.enable_topology_aware_preemption = args.get_bool(ENABLE_TOPOLOGY_AWARE_PREEMPTION_KEY, False)
        self.gang_aware_enable = gang_path.gang_aware_enabled(ssn, self.name())
        if self.enable_topology_aware_preemption:
            ssn.record_error("preempt: topology-aware preemption is not modelled; using normal preemption")
        self.ssn = ssn

    def execute(self, ssn: Any) -> None:
        self.parse_arguments(ssn)
        if self.gang_aware_enable:
            # the gang-aware design's path is independent: none of the legacy logic runs
            gang_path.execute_gang_path(ssn, self.name())
            return
        self.sticky = gang_path.StickyDomains(ssn)
        preemptors_map: dict[Any, PriorityQueue] = {}
        preemptor_tasks: dict[Any, PriorityQueue] = {}
        under_request: list[Any] = []
        queues: dict[Any, Any] = {}

        for job in go_map_order(ssn, list(ssn.jobs.values())):
            if job.is_pending():
                continue
            vr = ssn.job_valid(job)
            if vr is not None and not vr.passed:
                continue
            queue = ssn.queues.get(job.queue)
            if queue is None:
                continue
            queues.setdefault(queue.uid, queue)
            if not ssn.job_starving(job):
                continue
            preemptors_map.setdefault(job.queue, PriorityQueue(ssn.job_order_fn)).push(job)
            under_request.append(job)
            q = PriorityQueue(ssn.task_order_fn)
            for task in (job.task_status_index.get(TaskStatus.PENDING) or {}).values():
                if task.sch_gated:
                    continue
                q.push(task)
            preemptor_tasks[job.uid] = q

        ph = PredicateHelper(ssn.cache)
        for queue in go_map_order(ssn, list(queues.values())):
            # Preemption between jobs within the queue.
            while True:
                preemptors = preemptors_map.get(queue.uid)
                if preemptors is None or preemptors.empty():
                    break
                preemptor_job = preemptors.pop()
                stmt = ssn.statement()
                assigned = False
                while True:
                    if not ssn.job_starving(preemptor_job):
                        break
                    tq = preemptor_tasks[preemptor_job.uid]
                    if tq.empty():
                        break
                    preemptor = tq.pop()

                    def between_jobs(task: Any, preemptor: Any = preemptor, pj: Any = preemptor_job) -> bool:
                        if not preemptable_status(task.status):
                            return False
                        if preemptor.best_effort and not task.best_effort:
                            return False
                        if not task.preemptable:
                            return False
                        job = ssn.jobs.get(task.job)
                        if job is None:
                            return False
                        return job.queue == pj.queue and preemptor.job != task.job

                    assigned = self.preempt(ssn, stmt, preemptor, between_jobs, ph)
                    if self.sticky.failed(preemptor_job.uid):
                        break  # sticky domain, fail fast: the pinned domain cannot take this task
                if ssn.job_pipelined(preemptor_job):
                    stmt.commit()
                else:
                    stmt.discard()
                    continue
                if assigned:
                    preemptors.push(preemptor_job)

            # Preemption between tasks within a job.
            for job in under_request:
                tq = PriorityQueue(ssn.task_order_fn)
                for task in (job.task_status_index.get(TaskStatus.PENDING) or {}).values():
                    if task.sch_gated:
                        continue
                    tq.push(task)
                preemptor_tasks[job.uid] = tq
                while not tq.empty():
                    preemptor = tq.pop()
                    stmt = ssn.statement()

                    def within_job(task: Any, preemptor: Any = preemptor) -> bool:
                        if not preemptable_status(task.status):
                            return False
                        if preemptor.best_effort and not task.best_effort:
                            return False
                        if not task.preemptable:
                            return False
                        return preemptor.job == task.job

                    assigned = self.preempt(ssn, stmt, preemptor, within_job, ph)
                    stmt.commit()
                    if not assigned:
                        break

    # ------------------------------------------------------------------------------------------
    def preempt(self, ssn: Any, stmt: Statement, preemptor: Any, filter_fn: Callable[[Any], bool],
                ph: PredicateHelper) -> bool:
        try:
            self.task_eligible_to_preempt(preemptor)
        except NotEligible:
            return False
        if ssn.pre_predicate_fn(preemptor) is not None:
            return False
        all_nodes = ssn.filter_out_unschedulable_and_unresolvable_nodes_for_task(preemptor)
        predicate_nodes, _ = ph.predicate_nodes(preemptor, all_nodes, ssn.predicate_for_preempt_action,
                                                self.enable_predicate_error_cache)
        # one shard group (no sharding modelled)
        if self.sticky is None:
            return self.normal_preempt(ssn, stmt, preemptor, filter_fn, predicate_nodes)
        return self.sticky.run(ssn.jobs.get(preemptor.job), predicate_nodes,
                               lambda nodes: self.normal_preempt(ssn, stmt, preemptor, filter_fn, nodes))

    def normal_preempt(self, ssn: Any, stmt: Statement, preemptor: Any, filter_fn: Callable[[Any], bool],
                       predicate_nodes: list[Any]) -> bool:
        # Most attempts find no node whose victims would make room. Victims are asked of every
        # node first, in the order the nodes came: the preemptable functions and the scoring
        # only read the session, so while nothing is evicted a node's victims are the same
        # whichever order the nodes are visited in; with no node enough the result is False
        # whatever the scores, and the scoring (the larger part of an attempt) is skipped. When
        # a node is enough, the nodes are scored and visited in their order as before, each
        # using the victims found here until the first eviction changes the session.
        candidates: dict[str, tuple[list[Any], bool]] = {}
        enough = False
        for node in predicate_nodes:
            preemptees = [t.clone() for t in list(node.tasks.values()) if filter_fn is None or filter_fn(t)]
            victims = ssn.preemptable(preemptor, preemptees)
            ok = victims_suffice(preemptor, node, victims)
            candidates[node.name] = (victims, ok)
            enough = enough or ok
        if not enough:
            return False
        scores = prioritize_nodes(preemptor, predicate_nodes, ssn.batch_node_order_fn, ssn.node_order_map_fn,
                                  ssn.node_order_reduce_fn)
        selected = sort_nodes(scores)
        job = ssn.jobs.get(preemptor.job)
        if job is None:
            return False
        current_queue = ssn.queues.get(job.queue)
        assigned = False
        evicted = False
        for node in selected:
            found = None if evicted else candidates.get(node.name)
            if found is not None:
                victims, ok = found
            else:
                preemptees = [t.clone() for t in list(node.tasks.values()) if filter_fn is None or filter_fn(t)]
                victims = ssn.preemptable(preemptor, preemptees)
                ok = victims_suffice(preemptor, node, victims)
            if not ok:
                continue
            evicted = True
            vq = ssn.build_victims_priority_queue(victims, preemptor)
            preempted_any = False
            while not vq.empty():
                if ssn.allocatable(current_queue, preemptor) and preemptor.init_resreq.less_equal(node.future_idle(), ZERO):
                    break
                preemptee = vq.pop()
                try:
                    stmt.evict(preemptee, "preempt")
                except StatementError as e:
                    ssn.record_error(f"failed to preempt task {preemptee.pod_key} for {preemptor.pod_key}: {e}")
                    continue
                if not preemptee.resreq.is_empty():
                    preempted_any = True
            if ssn.allocatable(current_queue, preemptor) and preemptor.init_resreq.less_equal(node.future_idle(), ZERO):
                try:
                    stmt.pipeline(preemptor, node.name, preempted_any)
                except StatementError as e:
                    ssn.record_error(f"failed to pipeline task {preemptor.pod_key} on {node.name}: {e}")
                    stmt.un_pipeline(preemptor)
                assigned = True  # pipeline errors are ignored, as in Volcano
                break
        return assigned

    def task_eligible_to_preempt(self, preemptor: Any) -> None:
        """Raises NotEligible. The nomination read is ``pod.status.nominatedNodeName`` (Volcano
        never clears it: a stale one whose node passes the predicates blocks preemption, BR7). The
        predicate runs before this action's PrePredicate: for a task allocate skipped this session
        (its queue overused) it fails with the cycle-state Error, so the nomination is no bar."""
        ssn = self.ssn
        if preemptor.preemption_policy == "Never":
            raise NotEligible("preemptionPolicy is Never")
        nom = ((preemptor.pod.get("status") or {}).get("nominatedNodeName") or "")
        if not nom:
            return
        node = ssn.nodes.get(nom)
        if node is None:
            raise NotEligible("the pod's nominated node is not found in the session")
        err = ssn.predicate_fn(preemptor, node)
        if err is None:
            raise NotEligible("the pod's nominated node is already schedulable")
        if not isinstance(err, FitError):
            raise NotEligible(f"the predicate returned a non-FitError error: {err}")
        if err.status.contains_unschedulable_and_unresolvable():
            return
        prio = pod_priority(preemptor.pod)
        for p in node.pods():
            if pod_priority(p) < prio and pod_terminating_by_preemption(p):
                raise NotEligible("a terminating pod caused by preemption on the nominated node")


def new() -> PreemptAction:
    return PreemptAction()


register_action("preempt", new)
