"""allocate (``actions/allocate/allocate.go``, v1.14.0, with PR #5045 / #5663 behind switches).

v1.14.0 (all switches off):

* Context: every job that is not Pending (Pending PodGroups become Inqueue in the session when
  ``enqueue`` is not configured), is JobValid, has a queue; its **Pending**, non-gated,
  non-BestEffort tasks in TaskOrder. Queues by QueueOrder, jobs by JobOrder.
* Loop: pop a queue (dropped for the action if Overused), pop its best job, place tasks with a new
  statement. ``JobReady`` → commit (push the job back if tasks remain); otherwise the statement is
  **left alone** (neither committed nor discarded, BR3); the queue goes back.
* Per task: Allocatable, role fit errors, PrePredicate (break), nominated-node fast path
  (``pod.status.nominatedNodeName`` when it fits FutureIdle), else all nodes; resource check is
  ``InitResreq ≤ FutureIdle``; nodes grouped Idle-fit first, FutureIdle-fit second; Idle fit →
  Allocate, else FutureIdle fit → Pipeline. Stop as soon as the job is ready.

Switches (``ssn.switches``):

* ``overflow_unpipeline`` (deprecated name ``futureidle_unpipeline``) — PR #5045 as coded
  (2053c7114): the ``unpipelineOverflowedPipelinedTasks`` pre-pass (nodes in shuffled order; on a
  node whose Pipelined > Idle + Releasing, un-pipeline the lowest-priority Pipelined tasks through
  ``ssn.un_pipeline`` — session and cache at once, S7 — and ``denominateJob`` a job left
  starving). Only an error ``UnPipeline`` returns (``CacheError``) is logged and skipped; an assert
  panic (``ResourceUnderflow``: the DeallocateFunc of drf / proportion subtracting a task that was
  Pipelined before the session opened, which their ``allocated`` never counted) ends the session,
  as it crashes Volcano.
* ``fastpath_unpipeline`` — the PR description's fix for a Pipelined task competing with its own
  reservation in its nominated node's FutureIdle, as written (ba1e9c5bd): the nominated-node fast
  path is taken by every task with a nomination (not only Pipelined ones); when the task does not
  fit its nominated node's FutureIdle and is Pipelined on that node, it is un-pipelined in the
  session only (``Statement.un_pipeline_in_session``, ba1e9c5bd's ``UnPipeline``: nothing recorded,
  the cache keeps its reservation until a commit re-places the task) and goes through the normal
  node scan.
* ``pipelined_first`` — two contexts, JobPipelined jobs first (S5); worksheets hold Pipelined and
  Pending tasks, Pipelined first; the fast path is taken only for a Pipelined task with a
  nomination (``task.nominated_node_name``; the PR head's rule, unless ``fastpath_unpipeline``);
  a failed Pipeline is rolled back with UnPipeline.
* ``three_way_commit`` — JobReady → commit; JobPipelined → commit (binds part of a gang, S2);
  otherwise discard.
* ``commit_pipelined_only`` — PR #5663: the JobPipelined branch keeps only Pipeline ops
  (``Statement.commit_pipelined``); implies the three-way resolution.
* ``self_exclusion`` — every FutureIdle check for a task Pipelined on that very node adds its own
  reservation back (the S1 fix used by ``pr5045-fixed``).
* ``sync_nominated_node`` — the fast path reads ``task.nominated_node_name`` (transaction context)
  instead of ``pod.status.nominatedNodeName``.

Network topology (v1.14.0, ``allocate.go:171-176,300-335,343-505,551-688``): jobs with a
``networkTopology`` wait while the hypernodes are not ready; ``highestTierName`` is resolved to a
tier when the job is popped (``updateJobTier``). A **hard** job (mode hard, highestTierAllowed set)
is placed by ``allocate_for_job``: for each gradient of ``HyperNodeGradientForJobFn`` (lowest tier
first), a dry run in every hypernode of the gradient (statement saved and discarded), the runs
leaving the job Ready or Pipelined kept, the best by the hypernode-order score (``HyperNodeOrderFn``
of the sub-job's own dry run; ties random) recovered onto a new statement; committed only when
JobReady, and the job's ``allocated_hyper_node`` becomes the LCA of the old one and the chosen
hypernode. Other jobs use the cluster-top hypernode (all nodes); for a job with a topology each
task carries the sub-job's allocated hypernode (``task.job_allocated_hyper_node``, read by the
plugin's node score), which grows to the LCA of the placed nodes' lowest-tier hypernodes and is kept
when a soft job becomes ready. When the gang-aware eviction design's ``GangSearchSpaceFn`` answers
for a job (the network-topology-aware plugin does when its ``enabledHyperNodeGradient`` is off),
that hook places the job in one of its domains instead (gang_domains.py). A job with a network
topology never takes the vectorised fast path.

Deviations: sub-group policies are not modelled (every job is its default sub-job); no sharding;
random node and hypernode tie-breaks use ``ssn.rng``.
"""
from __future__ import annotations

import logging
from typing import Any

from ha.scheduler.api import CacheError, TaskStatus, ZERO
from ha.scheduler.profiles import switch_on as _sw
from ha.scheduler.api.types import Status, StatusCode, FitError, FitErrors, wrap_insufficient_resource_reason
from ha.scheduler.api.hypernode_info import CLUSTER_TOP_HYPERNODE
from ha.scheduler.api.job_info import writable_status
from ha.scheduler.actions.allocate import fastpath
from ha.scheduler.actions.allocate.future_idle import future_idle_for
from ha.scheduler.actions.allocate.gang_domains import NOT_HANDLED, allocate_in_domains, undo_side_effects
from ha.scheduler.framework.hypernodes import (find_hyper_node_for_node, prioritize_hyper_nodes,
                                               select_best_hyper_node_and_score)
from ha.scheduler.framework.statement import OperationKind, Statement, StatementError, save_operations
from ha.scheduler.framework.registry import register_action
from ha.scheduler.framework.util import (PredicateHelper, PriorityQueue, prioritize_nodes,
                                         select_best_node_and_score)

log = logging.getLogger(__name__)

ENABLE_PREDICATE_ERR_CACHE_KEY = "predicateErrorCacheEnable"


class _AllocateContext:
    def __init__(self, ssn: Any):
        self.queues = PriorityQueue(ssn.queue_order_fn)
        self.jobs_by_queue: dict[Any, PriorityQueue] = {}
        self.tasks: dict[Any, PriorityQueue] = {}

    def add(self, ssn: Any, job: Any, tasks: PriorityQueue) -> None:
        if job.queue not in self.jobs_by_queue:
            self.jobs_by_queue[job.queue] = PriorityQueue(ssn.job_order_fn)
            self.queues.push(ssn.queues[job.queue])
        self.jobs_by_queue[job.queue].push(job)
        self.tasks[job.uid] = tasks


class AllocateAction:
    def __init__(self) -> None:
        self.ssn: Any = None
        # recorder.SaveSubJobDecision: (job, hypernode for the job) -> the sub-job's hypernode
        self._sub_job_decisions: dict[tuple[Any, str], str] = {}
        self.enable_predicate_error_cache = True
        self.ph: PredicateHelper | None = None
        self.fastpath: Any = None  # actions/allocate/fastpath.py, decided once per session

    def name(self) -> str:
        return "allocate"

    def initialize(self) -> None:
        pass

    def uninitialize(self) -> None:
        pass

    def parse_arguments(self, ssn: Any) -> None:
        args = ssn.conf.action_arguments(self.name())
        self.enable_predicate_error_cache = args.get_bool(ENABLE_PREDICATE_ERR_CACHE_KEY, True)

    # ------------------------------------------------------------------------------------------
    def execute(self, ssn: Any) -> None:
        self.parse_arguments(ssn)
        self.ssn = ssn
        self._sub_job_decisions = {}
        self.fastpath = fastpath.for_session(ssn)
        if _sw(ssn, "overflow_unpipeline"):
            self.unpipeline_overflowed_pipelined_tasks()
        actx, pipeline_actx = self.build_allocate_context()
        if _sw(ssn, "pipelined_first"):
            self.allocate_resources(pipeline_actx)
        self.allocate_resources(actx)

    # -- PR #5045 pre-pass ----------------------------------------------------------------------
    def unpipeline_overflowed_pipelined_tasks(self) -> None:
        ssn = self.ssn
        nodes = list(ssn.node_list)
        ssn.rng.shuffle(nodes)
        for node in nodes:
            if node is None or not node.has_pipelined_overflow():
                continue
            name = node.name
            q = PriorityQueue(lambda l, r: not ssn.task_order_fn(l, r))
            for nt in node.tasks.values():
                if nt.status != TaskStatus.PIPELINED:
                    continue
                job = ssn.jobs.get(nt.job)
                if job is None:
                    continue
                task = job.tasks.get(nt.uid)
                if task is None:
                    continue
                q.push(task)
            while not q.empty():
                task = q.pop()
                if task.status != TaskStatus.PIPELINED or task.node_name != name:
                    continue
                cur = ssn.nodes.get(name)
                if cur is None or not cur.has_pipelined_overflow():
                    break
                try:
                    ssn.un_pipeline(task)
                except CacheError as e:   # the error UnPipeline returns: Volcano logs and goes on
                    ssn.record_error(f"failed to unpipeline task {task.pod_key} from {name}: {e}")
                    continue
                job = ssn.jobs.get(task.job)
                if job is not None and ssn.job_starving(job):
                    self.denominate_job(job)

    def denominate_job(self, job: Any) -> None:
        ssn = self.ssn
        for task in list((job.task_status_index.get(TaskStatus.PIPELINED) or {}).values()):
            if task.status != TaskStatus.PIPELINED:
                continue
            try:
                ssn.un_pipeline(task)
            except CacheError as e:   # (a panic is no error: it ends the session)
                ssn.record_error(f"failed to denominate task {task.pod_key}: {e}")

    # -- context --------------------------------------------------------------------------------
    def build_allocate_context(self) -> tuple[_AllocateContext, _AllocateContext]:
        ssn = self.ssn
        actx = _AllocateContext(ssn)
        pipeline_actx = _AllocateContext(ssn)
        pipelined_first = _sw(ssn, "pipelined_first")
        for job in list(ssn.jobs.values()):
            if job.is_pending():
                if ssn.enabled_action_map.get("enqueue"):
                    continue
                # No enqueue action: Pending PodGroups become Inqueue (session only).
                writable_status(job.pod_group)["phase"] = "Inqueue"
            idx = job.task_status_index
            if not (idx.get(TaskStatus.PENDING) or (pipelined_first and idx.get(TaskStatus.PIPELINED))):
                continue    # its worksheet would be empty; what is asked before it has no effect
            vr = ssn.job_valid(job)
            if vr is not None and not vr.passed:
                continue
            if job.queue not in ssn.queues:
                continue
            if not ssn.hyper_nodes_ready_to_schedule and job.contains_network_topology():
                continue
            tasks = self.organize_job_worksheet(job)
            if tasks.empty():
                continue
            if pipelined_first and ssn.job_pipelined(job):
                pipeline_actx.add(ssn, job, tasks)
            else:
                actx.add(ssn, job, tasks)
        return actx, pipeline_actx

    def organize_job_worksheet(self, job: Any) -> PriorityQueue:
        ssn = self.ssn
        if _sw(ssn, "pipelined_first"):
            def less(l: Any, r: Any) -> bool:
                if l.status != r.status:
                    return l.status == TaskStatus.PIPELINED
                return ssn.task_order_fn(l, r)
            statuses = (TaskStatus.PIPELINED, TaskStatus.PENDING)
        else:
            less = ssn.task_order_fn
            statuses = (TaskStatus.PENDING,)
        q = PriorityQueue(less)
        for st in statuses:
            for task in (job.task_status_index.get(st) or {}).values():
                if task.sch_gated:
                    continue
                if task.resreq.is_empty():  # BestEffort: left to backfill
                    continue
                q.push(task)
        return q

    # -- main loop ------------------------------------------------------------------------------
    def allocate_resources(self, actx: _AllocateContext) -> None:
        ssn = self.ssn
        resolve = _sw(ssn, "three_way_commit") or _sw(ssn, "commit_pipelined_only")
        queues = actx.queues
        while not queues.empty():
            queue = queues.pop()
            if ssn.overused(queue):
                continue
            jobs = actx.jobs_by_queue.get(queue.uid)
            if jobs is None or jobs.empty():
                continue
            job = jobs.pop()
            update_job_tier(ssn.hyper_node_tier_name_map, job)
            tasks = actx.tasks.get(job.uid)
            if tasks is not None:
                hard = job.contains_hard_topology() and not self._domain_hook_applies(job)
                if hard:
                    stmt, decision = self.allocate_for_job(job, tasks)
                else:
                    stmt, decision = self.allocate_resources_for_tasks(job, tasks), ""
                if stmt is not None:
                    if ssn.job_ready(job):
                        stmt.commit()
                        if hard:
                            ssn.mark_job_dirty(job.uid)
                            self._update_decision_to_job(job, decision)
                        if len(tasks) > 0:
                            jobs.push(job)
                    elif resolve:
                        if ssn.job_pipelined(job):
                            if _sw(ssn, "commit_pipelined_only"):
                                stmt.commit_pipelined()
                            else:
                                stmt.commit()
                        else:
                            stmt.discard()
                    # v1.14.0: a pipelined job's statement is kept as is (BR3).
            queues.push(queue)

    def _nominated_node(self, task: Any) -> str:
        ssn = self.ssn
        if _sw(ssn, "pipelined_first") and not _sw(ssn, "fastpath_unpipeline"):
            # PR #5045's head: only a Pipelined task with a (transaction-context) nomination.
            if task.status != TaskStatus.PIPELINED:
                return ""
            return task.nominated_node_name or ""
        if _sw(ssn, "sync_nominated_node"):
            return task.nominated_node_name or ""
        return ((task.pod.get("status") or {}).get("nominatedNodeName") or "")

    # -- network topology (hard mode) -----------------------------------------------------------
    def _domain_hook_applies(self, job: Any) -> bool:
        """Gang domains: a GangSearchSpaceFn that answers for this job places it (gang_domains.py)."""
        if not getattr(self.ssn, "gang_search_space_fns", None):
            return False
        from ha.scheduler.framework.gang_eviction import PURPOSE_ALLOCATE
        return bool(self.ssn.gang_valid_domains(job, PURPOSE_ALLOCATE))

    def allocate_for_job(self, job: Any, tasks: PriorityQueue) -> tuple[Statement | None, str]:
        """``allocateForJob``: dry-run the job in each hypernode of each gradient; recover the best
        run of the first gradient that has one. Returns (statement, chosen hypernode)."""
        ssn = self.ssn
        if tasks.empty():
            return None, ""
        snapshot = job.sub_job_allocated_hyper_node       # recorder.SnapshotSubJobStatus
        top = ssn.hyper_nodes.get(CLUSTER_TOP_HYPERNODE)
        if top is None:   # a session not opened by open_session has no hypernode view
            return None, ""
        for gradient in ssn.hyper_node_gradient_for_job_fn(job, top):
            backups: dict[str, Statement] = {}
            remains: dict[str, PriorityQueue] = {}
            scores: dict[str, float] = {}
            for hn in gradient:
                job.reset_fit_err()
                copy = tasks.clone()
                stmts: list[Statement] = []
                total = 0.0
                while not copy.empty():
                    stmt, score = self.allocate_for_sub_job(job, copy, hn)
                    if stmt is None or not stmt.operations:
                        break
                    stmts.append(stmt)
                    total += score
                    if ssn.job_ready(job):
                        break
                decision = job.sub_job_allocated_hyper_node
                job.sub_job_allocated_hyper_node = snapshot   # recorder.RecoverSubJobStatus
                merged = save_operations(*stmts)
                if merged.operations and (ssn.job_ready(job) or ssn.job_pipelined(job)):
                    backups[hn.name] = merged
                    remains[hn.name] = copy
                    scores[hn.name] = total
                    self._sub_job_decisions[(job.uid, hn.name)] = decision
                for st in stmts:
                    st.discard()
            if not scores:
                continue
            best_score = max(scores.values())
            tied = sorted(n for n, sc in scores.items() if sc == best_score)
            best = tied[ssn.rng.randrange(len(tied))] if len(tied) > 1 else tied[0]
            final = ssn.statement()
            final.recover_operations(backups[best])
            tasks.replace_with(remains[best])
            return final, best
        return None, ""

    def allocate_for_sub_job(self, job: Any, tasks: PriorityQueue, hyper_node: Any) -> tuple[Statement | None, float]:
        """``allocateForSubJob`` for the default sub-job: its gradient is [[hyper_node]] (no
        sub-group policy); dry run, score with HyperNodeOrderFn, recover."""
        ssn = self.ssn
        if tasks.empty():
            return None, 0.0
        job.reset_fit_err()
        copy = tasks.clone()
        stmt = self.allocate_resources_for_tasks(job, copy, nodes=ssn.real_nodes_list.get(hyper_node.name) or [],
                                                 hyper_node=hyper_node.name)
        if stmt is None or not stmt.operations:
            return None, 0.0
        backup = save_operations(stmt)
        stmt.discard()
        candidates = {hyper_node.name: ssn.real_nodes_list.get(hyper_node.name) or []}
        best, score = select_best_hyper_node_and_score(
            prioritize_hyper_nodes(candidates, job, ssn.hyper_node_order_map_fn), ssn.rng)
        if not best:
            return None, 0.0
        final = ssn.statement()
        final.recover_operations(backup)
        job.sub_job_allocated_hyper_node = ssn.hyper_nodes.get_lca_hyper_node(job.sub_job_allocated_hyper_node, best)
        tasks.replace_with(copy)
        return final, score

    def _update_decision_to_job(self, job: Any, hyper_node: str) -> None:
        """``recorder.UpdateDecisionToJob``: the job's and the sub-job's allocated hypernodes
        become the LCA with this session's decision."""
        if not hyper_node:
            return
        hns = self.ssn.hyper_nodes
        job.allocated_hyper_node = hns.get_lca_hyper_node(job.allocated_hyper_node, hyper_node)
        sub = self._sub_job_decisions.get((job.uid, hyper_node), "")
        if sub:
            job.sub_job_allocated_hyper_node = hns.get_lca_hyper_node(job.sub_job_allocated_hyper_node, sub)

    def allocate_resources_for_tasks(self, job: Any, tasks: PriorityQueue,
                                     nodes: list[Any] | None = None,
                                     hyper_node: str = CLUSTER_TOP_HYPERNODE) -> Statement | None:
        ssn = self.ssn
        if nodes is None:
            # --- gang-domain hook (gang_domains.py): a job a GangSearchSpaceFn constrains is placed
            # within one of its domains; ``nodes`` restricts this call to one domain. ---
            if getattr(ssn, "gang_search_space_fns", None):
                res = allocate_in_domains(self, job, tasks)
                if res is not NOT_HANDLED:
                    return res
            nodes = ssn.node_list
        queue = ssn.queues[job.queue]
        if not nodes:
            return None
        stmt = ssn.statement()
        ph = PredicateHelper(ssn.cache)
        topology = job.with_network_topology()
        allocated_hn = job.sub_job_allocated_hyper_node
        fast_ok = self.fastpath is not None and nodes is ssn.node_list and not topology
        while not tasks.empty():
            task = tasks.pop()
            if not ssn.allocatable(queue, task):
                continue
            if job.task_has_fit_errors(task):
                fe = FitErrors()
                fe.set_error(f"Task {task.name} with role spec {task.task_role} has already predicated failed, skip")
                job.nodes_fit_errors[task.uid] = fe
                continue
            err = ssn.pre_predicate_fn(task)
            if err is not None:
                fe = FitErrors()
                for n in nodes:
                    fe.set_node_error(n.name, err)
                job.nodes_fit_errors[task.uid] = fe
                break

            predicate_nodes: list[Any] = []
            fit_errors: FitErrors | None = None
            nominated = self._nominated_node(task)
            if nominated:
                nn = ssn.nodes.get(nominated)
                if nodes is not ssn.node_list and nn is not None and nn not in nodes:
                    nn = None  # gang domains: the nomination lies outside this call's domain
                if nn is not None and task.init_resreq.less_equal(future_idle_for(ssn, task, nn), ZERO):
                    predicate_nodes, fit_errors = ph.predicate_nodes(task, [nn], self.predicate,
                                                                     self.enable_predicate_error_cache)
                elif (nn is not None and _sw(ssn, "fastpath_unpipeline")
                      and task.status == TaskStatus.PIPELINED and task.node_name == nn.name):
                    # the PR's description: the stale reservation goes, the node scan decides
                    stmt.un_pipeline_in_session(task)
            fast_sel = vector_fe = None
            if not predicate_nodes:
                if fast_ok:
                    # vectorised scan with the same result; empty: the FitErrors from the
                    # arrays, or (when they cannot tell) from the scalar scan below
                    fast_sel = self.fastpath.predicate_nodes(task, ph, self.enable_predicate_error_cache,
                                                             self.predicate)
                    if fast_sel is not None and len(fast_sel) == 0:
                        fast_sel = None
                        vector_fe = self.fastpath.fit_errors(task, ph, self.predicate,
                                                             self.enable_predicate_error_cache)
                if vector_fe is not None:
                    fit_errors = vector_fe
                elif fast_sel is None:
                    predicate_nodes, fit_errors = ph.predicate_nodes(task, nodes, self.predicate,
                                                                     self.enable_predicate_error_cache)
            if fast_sel is None and not predicate_nodes:
                if fit_errors is not None and hyper_node != CLUSTER_TOP_HYPERNODE:
                    fit_errors.set_hyper_node(hyper_node)
                job.nodes_fit_errors[task.uid] = fit_errors
                if job.need_continue_allocating():
                    continue
                break

            if topology:
                task.job_allocated_hyper_node = allocated_hn
                job.report_change()
            if fast_sel is not None:
                best = self.fastpath.prioritize_nodes(task, fast_sel)
            else:
                best = self.prioritize_nodes(task, predicate_nodes)
            if best is None:
                continue
            self.allocate_resources_for_task(stmt, task, best)
            if topology:
                # getNewAllocatedHyperNode: grow to the LCA with the node's lowest-tier hypernode
                hn = find_hyper_node_for_node(ssn, best.name)
                if hn:
                    allocated_hn = hn if not allocated_hn else ssn.hyper_nodes.get_lca_hyper_node(hn, allocated_hn)
            if ssn.job_ready(job):
                break

        if ssn.job_ready(job):
            if job.is_soft_topology_mode():
                job.sub_job_allocated_hyper_node = allocated_hn
            return stmt
        if ssn.job_pipelined(job):
            return stmt
        stmt.discard()
        return None

    def prioritize_nodes(self, task: Any, predicate_nodes: list[Any]) -> Any:
        ssn = self.ssn
        idle_nodes = []
        future_nodes = []
        for n in predicate_nodes:
            if _sw(ssn, "planted_skip_fit") or task.init_resreq.less_equal(n.idle, ZERO):
                idle_nodes.append(n)
            elif task.init_resreq.less_equal(future_idle_for(ssn, task, n), ZERO):
                future_nodes.append(n)
        for group in (idle_nodes, future_nodes):
            if not group:
                continue
            if len(group) == 1:
                return group[0]
            scores = prioritize_nodes(task, group, ssn.batch_node_order_fn, ssn.node_order_map_fn,
                                      ssn.node_order_reduce_fn)
            best = ssn.best_node_fn(task, scores)
            if best is None:
                best, _ = select_best_node_and_score(scores, ssn.rng)
            if best is not None:
                return best
        return None

    def allocate_resources_for_task(self, stmt: Statement, task: Any, node: Any) -> None:
        ssn = self.ssn
        if _sw(ssn, "planted_skip_fit") or task.init_resreq.less_equal(node.idle, ZERO):
            try:
                stmt.allocate(task, node)
            except StatementError as e:
                ssn.record_error(f"failed to allocate task {task.pod_key} on {node.name}: {e}")
                stmt.un_allocate(task)
            return
        if task.init_resreq.less_equal(future_idle_for(ssn, task, node), ZERO):
            try:
                stmt.pipeline(task, node.name, False)
            except StatementError as e:
                ssn.record_error(f"failed to pipeline task {task.pod_key} on {node.name}: {e}")
                if _sw(ssn, "pipelined_first") or _sw(ssn, "cache_pipeline"):
                    # PR #5045 rolls the failed Pipeline back; v1.14.0 only logs (partial state).
                    stmt.un_pipeline(task)

    def predicate(self, task: Any, node: Any) -> Any:
        if _sw(self.ssn, "planted_skip_fit"):    # test-only planted bug (profiles.py)
            return self.ssn.predicate_for_allocate_action(task, node)
        ok, names = task.init_resreq.less_equal_with_resources_name(future_idle_for(self.ssn, task, node), ZERO)
        if not ok:
            return FitError.with_status(task, node, Status(StatusCode.UNSCHEDULABLE,
                                                           wrap_insufficient_resource_reason(names)))
        return self.ssn.predicate_for_allocate_action(task, node)


def update_job_tier(tier_name_map: dict[str, int], job: Any) -> None:
    """``updateJobTier``: a ``highestTierName`` without ``highestTierAllowed`` becomes the tier of
    that name among the hypernodes (the name is then cleared); an unknown name leaves both."""
    nt = job.network_topology()
    if nt is None or not nt.get("highestTierName") or nt.get("highestTierAllowed") is not None:
        return
    tier = tier_name_map.get(nt["highestTierName"])
    if tier is not None:
        nt["highestTierAllowed"] = tier
        nt["highestTierName"] = ""


def new() -> AllocateAction:
    return AllocateAction()


register_action("allocate", new)


def dry_run_allocate(ssn: Any, job: Any, tasks: list[Any], domain: list[Any]) -> list[tuple[Any, str]] | None:
    """The gang-aware design nominates what allocate would do: run ``allocate_resources_for_tasks``
    for the gang on the domain only, read the placements, undo everything (including the shared
    pod's spec.nodeName, the job's fit errors and the tasks' last transactions). None unless the
    job ends Pipelined/Ready."""
    alloc = AllocateAction()
    alloc.parse_arguments(ssn)
    alloc.ssn = ssn
    with undo_side_effects(job, tasks):
        stmt = alloc.allocate_resources_for_tasks(job, PriorityQueue(ssn.task_order_fn, tasks), nodes=domain)
        if stmt is None:
            return None
        placements = [(op.task, op.task.node_name) for op in stmt.operations
                      if op.name in (OperationKind.ALLOCATE, OperationKind.PIPELINE)]
        ok = bool(placements) and ssn.job_pipelined(job)
        stmt.discard()
    return placements if ok else None
