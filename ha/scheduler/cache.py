"""SchedulerCache: Volcano's ``pkg/scheduler/cache`` (v1.14.0) with the PR #5045 /
annotation-persistence / KEP-5278 variants behind switches (``ha.scheduler.profiles``).

Pure and synchronous: informer events are method calls, all writes to the world go through the
Binder / Evictor / StatusUpdater / PodGetter interfaces (``ha.scheduler.interfaces``). Where Volcano
runs a goroutine (evictions, nomination writes, binds) the call is made inline, in order.

Errors: where a Volcano cache function returns an ``error`` this raises ``CacheError`` (node
accounting errors are ``TaskNodeError``); where Volcano calls ``klog.Fatalf`` it raises
``FatalCacheError`` (a BaseException) and counts it in ``stats["fatal"]``.
"""
from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from ha.scheduler.api import (ALL_NODE_UNAVAILABLE_MSG, EVICTION_OCCURRED_ANNOTATION, GROUP_NAME_ANNOTATION,
                              PIPELINED_NODE_ANNOTATION,
                              PIPELINED_STATUS_ANNOTATION, POD_REASON_SCHEDULER_ERROR, CacheError, ClusterInfo,
                              FatalCacheError, JobInfo, NodeInfo, QueueInfo, TaskInfo, TaskNodeError, TaskStatus,
                              job_terminated)
from ha.scheduler.api.job_info import PodGroupPhase, copy_object, same_sums
from ha.scheduler.api.hypernode_info import JOB_ALLOCATED_HYPERNODE_ANNOTATION, HyperNodesInfo
from ha.scheduler.profiles import Switches, profile
from ha.scheduler.acceleration import Acceleration
from ha.scheduler.snapshot_reuse import JobClones, NodeClones, SnapshotReuseMismatch

__all__ = ["SchedulerCache", "BindContext", "HANDLER_STEMS"]

log = logging.getLogger(__name__)

_S = TaskStatus
_STATUS_NAME = {s: str(s) for s in TaskStatus}   # digest(): a status's name, looked up
PENDING, ALLOCATED, PIPELINED, BINDING, BOUND, RUNNING, RELEASING, SUCCEEDED, FAILED = (
    _S.PENDING, _S.ALLOCATED, _S.PIPELINED, _S.BINDING, _S.BOUND, _S.RUNNING, _S.RELEASING,
    _S.SUCCEEDED, _S.FAILED)
_ALLOCATED = frozenset({BOUND, BINDING, RUNNING, ALLOCATED})
_TERMINATED = frozenset({SUCCEEDED, FAILED})
_EMPTY: dict = {}


@dataclass
class BindContext:
    """cache.BindContext: the session's task (its node_name is the bind target) + plugin extensions."""
    task_info: TaskInfo
    extensions: dict[str, Any] = field(default_factory=dict)


def _md(obj: dict) -> dict:
    return obj.get("metadata") or _EMPTY


def _key(obj: dict) -> str:
    md = obj.get("metadata") or _EMPTY
    return f"{md.get('namespace', '')}/{md.get('name', '')}"


def _same_request(prev: TaskInfo | None, pod: dict) -> Any:
    """A clone of ``prev``'s parsed resource request if ``pod`` asks for exactly the same resources
    as the pod ``prev`` was built from (the common update: status, annotations; pod requests are
    immutable in Kubernetes), else None (parse again). Compares what get_pod_resource_request
    reads: containers, initContainers, overhead."""
    if prev is None:
        return None
    a = prev.pod.get("spec") or _EMPTY
    b = pod.get("spec") or _EMPTY
    if a is not b and (a.get("containers") != b.get("containers")
                       or a.get("initContainers") != b.get("initContainers")
                       or a.get("overhead") != b.get("overhead")):
        return None
    return prev.init_resreq.clone()


# informer kind -> the cache's handler stem (add_<stem> / update_<stem> / delete_<stem>)
# errTasks' rate limiter (client-go's default per-item exponential failure backoff)
RESYNC_BASE_S = 0.005
RESYNC_MAX_S = 1000.0

HANDLER_STEMS: dict[str, str] = {"Pod": "pod", "Node": "node", "PodGroup": "pod_group", "Queue": "queue",
                                 "PriorityClass": "priority_class", "HyperNode": "hyper_node"}


@dataclass
class StatusWrite:
    """What a job's UpdateJobStatus sends at session close: ``head`` (the PodGroup write and the
    job's hyper-node fields in the cache; raises what the PodGroup write raises) and then
    ``events``, the (task, pod) of each PodScheduled condition or nomination that changed.
    Calling it does both in Volcano's order, the events one write each, and stops after a
    failed head. A status writer may instead run the heads of many jobs and then send their
    events together (``SchedulerCache.write_unschedulable_many``)."""
    head: Callable[[], None] | None
    events: list
    cache: "SchedulerCache"

    def __call__(self) -> None:
        if self.head is not None:
            self.head()
        for t, new_pod in self.events:
            self.cache._write_unschedulable(t, new_pod)


class SchedulerCache:
    """The informer-fed cache of one scheduler instance.

    Extra keyword arguments (beyond the model's interfaces (docs/design.md)):
      * ``pod_getter`` — resyncTask's GET (defaults to the binder if it has ``get_pod``);
      * ``bind_mode`` — "sync": ``add_bind_task`` binds at once (deterministic runs);
        "queued": binds wait for ``process_bind_task()`` (Volcano's 20 ms bind loop);
      * ``batch_num`` — BATCH_BIND_NUM (tasks per binder call in ``process_bind_task``);
      * ``node_selector`` — {label: value} pairs a node needs one of (nodeCanAddCache);
      * ``pod_priority_admission`` — emulate the Kubernetes Priority admission plugin: a pod
        without ``spec.priority`` takes the value of its (or the global default) PriorityClass.
    """

    def __init__(self, switches: Switches | None = None, binder: Any = None, evictor: Any = None,
                 status_updater: Any = None, scheduler_names: Iterable[str] = ("volcano",),
                 default_queue: str = "default", *, pod_getter: Any = None, bind_mode: str = "sync",
                 batch_num: int = 1, node_selector: dict[str, str] | None = None,
                 pod_priority_admission: bool = True, clock: Any = None,
                 acceleration: Acceleration | None = None):
        self.switches = switches if switches is not None else profile("v1.14")
        # read once, here (ha/scheduler/acceleration.py); every session of this cache gets it
        self.acceleration = acceleration if acceleration is not None else Acceleration.from_environ()
        if clock is None:
            from ha.scheduler.interfaces import WallClock
            clock = WallClock()
        self.clock = clock   # the sessions' time (ha.scheduler.interfaces.Clock)
        self.binder = binder
        self.evictor = evictor
        self.status_updater = status_updater
        if pod_getter is None and binder is not None and hasattr(binder, "get_pod"):
            pod_getter = binder
        self.pod_getter = pod_getter
        self.scheduler_names = frozenset(scheduler_names)
        self.default_queue = default_queue
        if bind_mode not in ("sync", "queued"):
            raise ValueError(f"bind_mode must be 'sync' or 'queued', not {bind_mode!r}")
        self.bind_mode = bind_mode
        self.batch_num = max(1, int(batch_num))
        self.node_selector_labels = {f"{k}:{v}" for k, v in (node_selector or {}).items()}
        self.pod_priority_admission = pod_priority_admission

        self.mutex = threading.RLock()
        self.jobs: dict[str, JobInfo] = {}
        self.nodes: dict[str, NodeInfo] = {}
        self.queues: dict[str, QueueInfo] = {}
        self.priority_classes: dict[str, dict] = {}
        self.default_priority_class: dict | None = None
        self.default_priority = 0
        self.node_list: list[str] = []
        # node clones kept between sessions for the next snapshot (snapshot_reuse.py)
        self.node_clones = NodeClones(self.acceleration)
        self.job_clones = JobClones(self.acceleration)
        # the allocate fast path's rows of the last build, by node: kept for the nodes whose
        # clone the next snapshot reuses (actions/allocate/fastpath.py _load_rows)
        self.fast_path_rows: dict | None = None
        # what runs a session's write-back calls (framework/job_updater.py): None, in order in the
        # session; a live instance sets its environment's (in parallel)
        self.status_writer: Any = None
        # HyperNodes (topology.volcano.sh/v1alpha1) and the node labels their selectors match
        self.hyper_nodes_info = HyperNodesInfo()
        self._node_labels: dict[str, dict] = {}
        # pods without a job (no group annotation) live only on nodes; keep them to digest/inspect
        self.bind_queue: list[BindContext] = []
        self.err_tasks: OrderedDict[str, int] = OrderedDict()   # "job/uid" -> failed sync attempts
        self._resync_due: dict[str, float] = {}                  # "job/uid" -> next try (monotonic)
        self.deleted_jobs: OrderedDict[str, None] = OrderedDict()
        self.stats: dict[str, int] = {
            "pods_added": 0, "pods_updated": 0, "pods_deleted": 0, "filtered_pods": 0,
            "ignored_updates": 0, "add_task_errors": 0, "bind_errors": 0, "resyncs": 0,
            "resync_failures": 0, "fatal": 0, "evict_errors": 0, "status_write_errors": 0,
            "refreshed_pods": 0,
        }
        self.errors: list[str] = []  # recent error messages (bounded), like klog.Errorf lines

    def handlers(self, kind: str) -> tuple[Any, Any, Any]:
        """(add, update or None, delete) for an informer of ``kind`` (see HANDLER_STEMS)."""
        stem = HANDLER_STEMS.get(kind)
        if stem is None:
            raise KeyError(f"the scheduler cache has no handlers for kind {kind!r}; known: {', '.join(HANDLER_STEMS)}")
        return (getattr(self, f"add_{stem}"), getattr(self, f"update_{stem}", None), getattr(self, f"delete_{stem}"))

    # ==== helpers ================================================================================
    def _error(self, msg: str) -> None:
        if len(self.errors) >= 1000:
            del self.errors[:500]
        self.errors.append(msg)
        log.debug(msg)

    def new_task_info(self, pod: dict, init_req: Any = None) -> TaskInfo:
        """sc.NewTaskInfo: api.TaskInfo(pod) (+ the priority admission emulation)."""
        ti = TaskInfo(pod, self.switches, init_req)
        if self.pod_priority_admission and (pod.get("spec") or _EMPTY).get("priority") is None:
            prio = self._admitted_priority(pod)
            if prio is not None:
                ti.priority = prio
        return ti

    def _admitted_priority(self, pod: dict) -> int | None:
        """The Priority admission emulation: the value of the pod's PriorityClass (or the global
        default) for a pod without ``spec.priority`` and without a task-priority annotation;
        None when it does not apply."""
        spec = pod.get("spec") or _EMPTY
        if spec.get("priority") is not None:
            return None
        pcn = spec.get("priorityClassName")
        pc = self.priority_classes.get(pcn) if pcn else self.default_priority_class
        if pc is None or "volcano.sh/task-priority" in (_md(pod).get("annotations") or _EMPTY):
            return None
        return int(pc.get("value") or 0)

    def _find_job_and_task(self, ti: TaskInfo) -> tuple[JobInfo, TaskInfo]:
        job = self.jobs.get(ti.job)
        if job is None:
            raise CacheError(f"failed to find Job {ti.job} for Task {ti.uid}")
        task = job.tasks.get(ti.uid)
        if task is None:
            raise CacheError(f"failed to find task in status {ti.status} by id {ti.uid}")
        return job, task

    # ==== pods (event_handlers.go) ===============================================================
    def _add_task(self, pi: TaskInfo) -> None:
        if pi.node_name:
            node = self.nodes.get(pi.node_name)
            if node is None:  # pod before its node: placeholder NodeInfo(nil)
                node = self.nodes[pi.node_name] = NodeInfo(None)
                node.name = pi.node_name
            if pi.status not in _TERMINATED:
                node.add_task(pi)  # TaskNodeError propagates: the task then is in no job either
        if pi.job:   # _get_or_create_job, inlined (once per added pod)
            job = self.jobs.get(pi.job)
            if job is None:
                job = self.jobs[pi.job] = JobInfo(pi.job)
            job.add_task_info(pi)

    def _delete_task(self, ti: TaskInfo) -> None:
        if ti.job:
            job = self.jobs.get(ti.job)
            if job is not None:
                job.delete_task_info(ti)
        if ti.node_name and ti.status not in _TERMINATED:
            node = self.nodes.get(ti.node_name)
            if node is not None:
                node.remove_task(ti)

    @staticmethod
    def _job_and_uid(pod: dict) -> tuple[str, str]:
        """(job id, task uid) of a pod without building a TaskInfo (hot path)."""
        md = pod.get("metadata") or _EMPTY
        ns = md.get("namespace", "")
        gn = (md.get("annotations") or _EMPTY).get("scheduling.k8s.io/group-name")
        return (f"{ns}/{gn}" if gn else ""), (md.get("uid") or f"{ns}-{md.get('name', '')}")

    def _delete_pod(self, pod: dict) -> None:
        job_id, uid = self._job_and_uid(pod)
        job = self.jobs.get(job_id)
        task = job.tasks.get(uid) if job is not None else None
        if task is None:  # fall back to a task rebuilt from the pod
            task = TaskInfo(pod, self.switches)
        self._delete_task(task)
        job = self.jobs.get(job_id)
        if job is not None and job_terminated(job):
            self._delete_job(job)

    def _allocated_pod_in_cache(self, pod: dict) -> bool:
        job_id, uid = self._job_and_uid(pod)
        job = self.jobs.get(job_id)
        if job is None:
            return False
        t = job.tasks.get(uid)
        if t is None:
            return False
        if t.status in _ALLOCATED:
            return True
        return t.status == PIPELINED and self.switches.informer_guard_pipelined

    def _update_pod(self, old: dict, new: dict) -> None:
        """updatePod = deletePod(old) + addPod(new), with the same resulting state
        (tests/scheduler/test_cache_update_fastpath.py) in cheaper steps for the common updates
        (annotations, conditions): a stored task the new pod would rebuild equal is kept and the
        pod swapped in (``TaskInfo.rebuilt_equal``); one that keeps its job, uid, name, node and
        status is swapped for the new one (``_replace_task``), without unwinding and redoing the
        job's bookkeeping. (Once per informer event: look-ups done once.)"""
        omd = old.get("metadata") or _EMPTY
        nmd = new.get("metadata") or _EMPTY
        ns = omd.get("namespace", "")
        gn = (omd.get("annotations") or _EMPTY).get(GROUP_NAME_ANNOTATION)
        job_id = f"{ns}/{gn}" if gn else ""
        uid = omd.get("uid") or f"{ns}-{omd.get('name', '')}"
        job = self.jobs.get(job_id)
        prev = job.tasks.get(uid) if job is not None else None
        nann = nmd.get("annotations") or _EMPTY
        spec = new.get("spec") or _EMPTY
        # new has old's ids (so its task is prev's): the look-ups of old serve new too
        nuid = nmd.get("uid")
        same_ids = (nuid == omd.get("uid") and (nuid or nmd.get("name") == omd.get("name"))
                    and nmd.get("namespace", "") == ns and nann.get(GROUP_NAME_ANNOTATION) == gn)
        if not spec.get("nodeName"):   # _allocated_pod_in_cache(new)
            if same_ids:
                t = prev
            else:
                nj, nu = self._job_and_uid(new)
                j = self.jobs.get(nj)
                t = j.tasks.get(nu) if j is not None else None
            if t is not None and (t.status in _ALLOCATED or (
                    t.status == PIPELINED and self.switches.informer_guard_pipelined)):
                self.stats["ignored_updates"] += 1
                if self.switches.refresh_guarded_pod and t.pod is not new:
                    self._refresh_pod(t, new)
                return
        if not nmd.get("ownerReferences") and omd.get("ownerReferences"):
            new.setdefault("metadata", {})["ownerReferences"] = omd["ownerReferences"]
            nmd = new["metadata"]
        alive = prev is not None and (job.pod_group is not None or len(job.tasks) > 1)  # delete keeps the job
        if alive and same_ids and prev.rebuilt_equal(
                new, self.switches, self._admitted_priority(new)
                if self.pod_priority_admission and spec.get("priority") is None else None,
                md=nmd, spec=spec, ann=nann):
            # keep the object, swap in the pod, move it as delete + add would (orders, node copy)
            prev.pod = new
            if prev.node_name:
                self._replace_task(job, prev, prev)
            else:
                job.replace_task_info(prev, prev)
            return
        try:
            ti = self.new_task_info(new, _same_request(prev, new))
        except Exception:
            self._delete_pod(old)   # as delete + add: the old task is gone even if the new fails
            raise
        if (alive and ti.uid == uid and ti.job == job_id and ti.status == prev.status
                and ti.node_name == prev.node_name and ti.name == prev.name
                and ti.namespace == prev.namespace):
            self._replace_task(job, prev, ti)
            return
        self._delete_pod(old)
        self._add_task(ti)

    def _refresh_pod(self, task: TaskInfo, pod: dict) -> None:
        """S6 fix: the pod copy of a task whose update the guard ignores follows the informer (on
        the job's task and the node's copy); status, node and reservation stay the cache's."""
        task.pod = pod
        job = self.jobs.get(task.job)
        if job is not None:
            job.report_change()
        node = self.nodes.get(task.node_name) if task.node_name else None
        if node is not None:
            node.refresh_task_pod(task, pod)
        self.stats["refreshed_pods"] += 1

    def _replace_task(self, job: JobInfo, prev: TaskInfo, ti: TaskInfo) -> None:
        """``_delete_task(prev)`` + ``_add_task(ti)`` for a task keeping its job, uid, name, node
        and status, the job holding other tasks or a PodGroup (so deleting never ends it)."""
        name = ti.node_name
        if name:
            node = self.nodes.get(name)
            live = ti.status not in _TERMINATED
            if node is not None and live:
                if node.swap_task(ti):   # same status and request: accounting unchanged
                    job.replace_task_info(prev, ti)
                    return
                node.remove_task(prev)
            if node is None:  # as _add_task: placeholder NodeInfo(nil)
                node = self.nodes[name] = NodeInfo(None)
                node.name = name
            if live:
                try:
                    node.add_task(ti)
                except TaskNodeError:
                    job.delete_task_info(prev)   # delete + add leaves the task in no job either
                    raise
        job.replace_task_info(prev, ti)

    def add_pod(self, pod: dict) -> None:
        """AddPod (after the informer's responsibleForPod filter)."""
        spec = pod.get("spec") or _EMPTY   # _responsible_for_pod, inlined (once per added pod)
        if not (spec.get("schedulerName") in self.scheduler_names or spec.get("nodeName")):
            self.stats["filtered_pods"] += 1
            return
        with self.mutex:
            self.stats["pods_added"] += 1
            try:
                self._add_task(self.new_task_info(pod))
            except TaskNodeError as e:
                self.stats["add_task_errors"] += 1
                self._error(f"Failed to add pod <{_key(pod)}> into cache: {e}")

    def update_pod(self, old: dict, new: dict) -> None:
        """UpdatePod, with FilteringResourceEventHandler's add/delete translation."""
        names = self.scheduler_names
        # _responsible_for_pod(old) and (new), inlined (once per informer event)
        spec = (old.get("spec") or _EMPTY) if old is not None else None
        old_ok = spec is not None and (spec.get("schedulerName") in names or bool(spec.get("nodeName")))
        spec = new.get("spec") or _EMPTY
        if not (spec.get("schedulerName") in names or spec.get("nodeName")):
            if old_ok:
                self.delete_pod(old)
            else:
                self.stats["filtered_pods"] += 1
            return
        if not old_ok:
            self.add_pod(new)
            return
        with self.mutex:
            self.stats["pods_updated"] += 1
            try:
                self._update_pod(old, new)
            except TaskNodeError as e:
                self.stats["add_task_errors"] += 1
                self._error(f"Failed to update pod {_key(old)} in cache: {e}")

    def delete_pod(self, pod: dict) -> None:
        """DeletePod (delete tombstones always pass the filter)."""
        with self.mutex:
            self.stats["pods_deleted"] += 1
            self._delete_pod(pod)

    # ==== jobs cleanup ===========================================================================
    def _delete_job(self, job: JobInfo) -> None:
        self.deleted_jobs[f"{job.uid}|{job.pg_uid}"] = None
        self.process_cleanup_job()

    def process_cleanup_job(self) -> int:
        """processCleanupJob: drop terminated jobs (no PodGroup, no tasks); keep others queued."""
        done = 0
        with self.mutex:
            for key in list(self.deleted_jobs):
                uid, _, pg_uid = key.rpartition("|")
                job = self.jobs.get(uid)
                if job is None:
                    del self.deleted_jobs[key]
                    continue
                if job_terminated(job):
                    if job.pg_uid == pg_uid:
                        del self.jobs[uid]
                        done += 1
                    del self.deleted_jobs[key]
                # else: Volcano re-queues with rate limiting; the key stays for the next pass
        return done

    def is_job_terminated(self, job_id: str) -> bool:
        with self.mutex:
            job = self.jobs.get(job_id)
            return job is None or job_terminated(job)

    # ==== nodes ==================================================================================
    def _node_can_add_cache(self, node: dict) -> bool:
        if not self.node_selector_labels:
            return True
        for k, v in (_md(node).get("labels") or _EMPTY).items():
            if f"{k}:{v}" in self.node_selector_labels:
                return True
        return False

    def _add_or_update_node(self, node: dict) -> None:
        name = _md(node).get("name", "")
        ni = self.nodes.get(name)
        if ni is not None:
            ni.set_node(node)
            if name not in self.node_list:   # a placeholder (its pods came first) made real
                self.node_list.append(name)
        else:
            # node_list only names nodes of self.nodes: a new one is not in it (no O(n) scan,
            # which made a list of n nodes O(n^2))
            self.nodes[name] = NodeInfo(node)
            self.node_list.append(name)
        labels = _md(node).get("labels") or {}
        if self._node_labels.get(name) != labels:
            # a new node or new labels: re-match it against the HyperNodes' Node members
            self._node_labels[name] = dict(labels)
            self.hyper_nodes_info.node_changed(name, labels, self._node_labels)

    def _remove_node(self, name: str) -> None:
        if name in self.node_list:
            self.node_list.remove(name)
        if name not in self.nodes:
            raise CacheError(f"node <{name}> does not exist")
        del self.nodes[name]
        if self._node_labels.pop(name, None) is not None:
            self.hyper_nodes_info.node_changed(name, None, self._node_labels)

    def add_node(self, node: dict) -> None:
        """AddNode → SyncNode → AddOrUpdateNode (the node queue is processed inline)."""
        with self.mutex:
            if self._node_can_add_cache(node):
                self._add_or_update_node(node)

    def update_node(self, old: dict | None, new: dict) -> None:
        self.add_node(new)

    def delete_node(self, node: dict) -> None:
        """DeleteNode → SyncNode finds it gone → RemoveNode (its NodeInfo and tasks are dropped)."""
        with self.mutex:
            try:
                self._remove_node(_md(node).get("name", ""))
            except CacheError as e:
                self._error(f"Failed to delete node: {e}")

    # ==== hypernodes (topology.volcano.sh/v1alpha1) =============================================
    def add_hyper_node(self, hn: dict) -> None:
        """AddHyperNode / UpdateHyperNode: store the object and re-resolve the tree."""
        with self.mutex:
            self.hyper_nodes_info.update_hyper_node(hn, self._node_labels)
            if not self.hyper_nodes_info.ready:
                self._error(f"HyperNodes not ready: {self.hyper_nodes_info.error}")

    def update_hyper_node(self, old: dict | None, new: dict) -> None:
        self.add_hyper_node(new)

    def delete_hyper_node(self, hn: dict) -> None:
        with self.mutex:
            self.hyper_nodes_info.delete_hyper_node(_md(hn).get("name", ""), self._node_labels)

    def inject_hyper_nodes(self, hyper_nodes: dict, set_by_tier: dict, real_nodes: dict) -> None:
        """The Go unit-test harness's ``NewHyperNodesInfoWithCache`` (scenario ``hypernode_cache``)."""
        with self.mutex:
            self.hyper_nodes_info.inject(hyper_nodes, set_by_tier, real_nodes)

    # ==== pod groups =============================================================================
    def _set_pod_group(self, pg: dict) -> None:
        md = _md(pg)
        job_id = f"{md.get('namespace', '')}/{md.get('name', '')}"
        job = self.jobs.get(job_id)
        if job is None:
            job = self.jobs[job_id] = JobInfo(job_id)
        job.set_pod_group(pg)
        if not (pg.get("spec") or _EMPTY).get("queue"):
            job.queue = self.default_queue

    def add_pod_group(self, pg: dict) -> None:
        with self.mutex:
            md = pg.setdefault("metadata", {})
            if md.get("annotations") is None:
                md["annotations"] = {}
            self._set_pod_group(pg)

    def update_pod_group(self, old: dict | None, new: dict) -> None:
        """An update whose resourceVersion did not change is ignored."""
        if old is not None:
            rv_old, rv_new = _md(old).get("resourceVersion"), _md(new).get("resourceVersion")
            if rv_old is not None and rv_old == rv_new:
                return
        self.add_pod_group(new)

    def delete_pod_group(self, pg: dict) -> None:
        md = _md(pg)
        job_id = f"{md.get('namespace', '')}/{md.get('name', '')}"
        with self.mutex:
            job = self.jobs.get(job_id)
            if job is None:
                self._error(f"Failed to delete podgroup {md.get('name')} from cache: can not found job {job_id}")
                return
            job.unset_pod_group()
            self._delete_job(job)

    # ==== queues and priority classes ============================================================
    def add_queue(self, queue: dict) -> None:
        with self.mutex:
            qi = QueueInfo(queue)
            self.queues[qi.uid] = qi

    def update_queue(self, old: dict | None, new: dict) -> None:
        if old is not None:
            rv_old, rv_new = _md(old).get("resourceVersion"), _md(new).get("resourceVersion")
            if rv_old is not None and rv_old == rv_new:
                return
        self.add_queue(new)

    def delete_queue(self, queue: dict) -> None:
        with self.mutex:
            self.queues.pop(_md(queue).get("name", ""), None)

    def add_priority_class(self, pc: dict) -> None:
        with self.mutex:
            if pc.get("globalDefault"):
                self.default_priority_class = pc
                self.default_priority = int(pc.get("value") or 0)
            self.priority_classes[_md(pc).get("name", "")] = pc

    def update_priority_class(self, old: dict, new: dict) -> None:
        with self.mutex:
            self.delete_priority_class(old)
            self.add_priority_class(new)

    def delete_priority_class(self, pc: dict) -> None:
        with self.mutex:
            if pc.get("globalDefault"):
                self.default_priority_class = None
                self.default_priority = 0
            self.priority_classes.pop(_md(pc).get("name", ""), None)

    # ==== snapshot ===============================================================================
    def snapshot(self, *, lend: bool = False) -> ClusterInfo:
        """Clone Ready nodes (accounting recomputed), queues, and jobs that have a PodGroup whose
        queue exists (priority from the PodGroup's priorityClassName). Pods stay shared.

        ``lend`` (a session's snapshot): the node and job clones may be given back when the
        session is done with them (``give_back(snapshot.lent_token)``) and the next snapshot
        reuses those of nodes and jobs nothing changed since (snapshot_reuse.py): the same
        clones, not cloned again (a job clone's header is copied again)."""
        with self.mutex:
            self.process_cleanup_job()
            snap = ClusterInfo()
            snap.node_list = list(self.node_list)
            node_token, snap.nodes = self.node_clones.clone(
                [ni for ni in self.nodes.values() if ni.ready()], lend=lend)
            for name, c in snap.nodes.items():
                if c.revocable_zone:
                    snap.revocable_nodes[name] = c
            for q in self.queues.values():
                snap.queues[q.uid] = q.clone()
            jobs = []
            for job in self.jobs.values():
                if job.pod_group is None or job.queue not in snap.queues:
                    continue
                job.priority = self.default_priority
                pcn = (job.pod_group.get("spec") or _EMPTY).get("priorityClassName")
                pc = self.priority_classes.get(pcn) if pcn else None
                if pc is not None:
                    job.priority = int(pc.get("value") or 0)
                jobs.append(job)
            job_token, snap.jobs = self.job_clones.clone(jobs, lend=lend)
            if node_token is not None or job_token is not None:
                snap.lent_token = (node_token, job_token)
            if self.acceleration.verify_snapshot_reuse:
                # a job clone takes the job's running sums instead of adding its tasks up again
                for uid, c in snap.jobs.items():
                    why = same_sums(c)
                    if why is not None:
                        raise SnapshotReuseMismatch(f"job {uid}: {why}")
            snap.priority_classes = {n: int(pc.get("value") or 0) for n, pc in self.priority_classes.items()}
            (snap.hyper_nodes, snap.hyper_nodes_set_by_tier, snap.real_nodes_set,
             snap.hyper_node_tier_name_map, snap.hyper_nodes_ready_to_schedule) = self.hyper_nodes_info.snapshot()
            return snap

    def give_back(self, token: tuple[int | None, int | None] | None) -> None:
        """A session is done with the snapshot lent as ``token``: its clones of nodes and jobs
        that stay unchanged may serve the next snapshot."""
        if token is None:
            return
        with self.mutex:
            node_token, job_token = token
            if node_token is not None:
                self.node_clones.give_back(node_token)
            if job_token is not None:
                self.job_clones.give_back(job_token)

    # ==== evict ==================================================================================
    def evict(self, task_info: TaskInfo, reason: str) -> None:
        """Evict: cache task → Releasing (node.update_task), then Evictor.evict; error → resync."""
        with self.mutex:
            job, task = self._find_job_and_task(task_info)
            node = self.nodes.get(task.node_name)
            if node is None:
                raise CacheError(f"failed to evict Task {task.uid} from host {task.node_name}, host does not exist")
            original = task.status
            job.update_task_status(task, RELEASING)
            try:
                self._node_update_task(node, task)
            except TaskNodeError as e:  # (cannot happen for Releasing, kept for symmetry)
                job.update_task_status(task, original)
                raise e
            pod, no_pg = task.pod, job.pod_group is None
        # the evictor's I/O without the cache lock (Volcano: a goroutine after sc.Mutex is released)
        try:
            if self.evictor is not None:
                self.evictor.evict(pod, reason)
        except Exception as e:  # noqa: BLE001 — any API error → resync, like Volcano
            with self.mutex:
                self.stats["evict_errors"] += 1
                self._error(f"Failed to evict pod {task.namespace}/{task.name}: {e}")
            self.resync_task(task)
        if no_pg:
            raise CacheError(f"the PodGroup of Job <{job.namespace}/{job.name}> is nil")

    def _node_update_task(self, node: NodeInfo, task: TaskInfo) -> None:
        try:
            node.update_task(task)
        except FatalCacheError:
            self.stats["fatal"] += 1
            raise

    # ---- S4 fix (switch unpipeline_on_replace) --------------------------------------------------
    def _release_pipelined(self, task: TaskInfo):
        """The node part of UnPipeline for a cache task held Pipelined: take it off its node
        (Pipelined -= r) and clear its node, nomination and hyper node. Returns the undo, which
        puts the reservation back (call it after the status is Pipelined again). A node that is
        gone holds no reservation: nothing to release there."""
        node_name, nnn, hyper = task.node_name, task.nominated_node_name, task.job_allocated_hyper_node
        node = self.nodes.get(node_name) if node_name else None
        stored = node.tasks.get(f"{task.namespace}/{task.name}") if node is not None else None
        held = stored is not None and stored.uid == task.uid
        if held:
            node.remove_task(task)
        task.node_name = task.nominated_node_name = task.job_allocated_hyper_node = ""

        def undo() -> None:
            task.node_name, task.nominated_node_name, task.job_allocated_hyper_node = node_name, nnn, hyper
            if held and self.nodes.get(node_name) is node:
                node.add_task(task)   # Pipelined branch of AddTask: no fit check
        return undo

    def _replace_pipelined(self, job: JobInfo, task: TaskInfo, node: NodeInfo, status: TaskStatus) -> None:
        """Put the cache task on ``node`` with ``status`` (Pipelined or Binding) through AddTask,
        never UpdateTask (whose failure is klog.Fatalf, S4). A task the cache holds Pipelined —
        on another node, or on this one — is first un-pipelined from its node, so the new
        placement is checked against what that node really has. If AddTask fails (a task placed
        elsewhere: "already on different node"; Binding that no longer fits Idle) the status and
        the old reservation are restored and the TaskNodeError raised: the caller's error path
        runs, as AddBindTask's did in v1.14.0."""
        original = task.status
        undo = self._release_pipelined(task) if original == PIPELINED else None
        try:
            job.update_task_status(task, status)
            node.add_task(task)
        except CacheError:
            job.update_task_status(task, original)
            if undo is not None:
                try:
                    undo()
                except CacheError as e:   # not expected under the lock; reconcile from the API
                    self._error(f"Task <{task.namespace}/{task.name}> will be resynchronized after "
                                f"failing to restore its reservation: {e}")
                    self.resync_task(task)
            raise

    # ==== pipeline (PR #5045 / annotation persistence / PR #5663) ================================
    def pipeline(self, task_info: TaskInfo, node_name: str) -> None:
        """Cache.Pipeline. What it does depends on the switches:

        * ``cache_pipeline`` (PR #5045): cache task → Pipelined, node.update_task, nominated node
          set on the cache task, ``status.nominatedNodeName`` written (failure → resync);
        * ``annotation_persistence`` (the annotation-persistence design): same cache change, but the
          state is written as the ``volcano.sh/pipelined-*`` annotations instead of the nomination;
        * only ``sync_nominated_node`` (PR #5663 "nomination-only"): no reservation in the cache,
          only the nomination (cache task field + status write);
        * none (v1.14.0): nothing — ``Statement.pipeline`` has an empty body.

        With ``unpipeline_on_replace`` (S4 fix) the cache change goes through
        ``_replace_pipelined``: a task already Pipelined (on another node, say) is un-pipelined
        from its old node first, and a failure is an error, not klog.Fatalf.
        """
        sw = self.switches
        persist = sw.cache_pipeline or sw.annotation_persistence
        if not persist and not sw.sync_nominated_node:
            return
        with self._locked_then_write() as later:
            job, task = self._find_job_and_task(task_info)
            node = self.nodes.get(node_name)
            if node is None:
                raise CacheError(f"failed to pipeline Task {task.uid} to host {node_name}, host does not exist")
            if persist and sw.unpipeline_on_replace:
                self._replace_pipelined(job, task, node, PIPELINED)   # S4: un-pipeline, then AddTask
            elif persist:
                original = task.status
                job.update_task_status(task, PIPELINED)
                try:
                    self._node_update_task(node, task)
                except TaskNodeError:
                    job.update_task_status(task, original)
                    raise
            if sw.sync_nominated_node or sw.cache_pipeline:
                task.nominated_node_name = node_name
                job.report_change()
            if sw.annotation_persistence:
                ann: dict[str, str | None] = {PIPELINED_STATUS_ANNOTATION: "true",
                                              PIPELINED_NODE_ANNOTATION: node_name}
                if task_info.eviction_occurred or task.eviction_occurred:
                    ann[EVICTION_OCCURRED_ANNOTATION] = "true"
                later.append(self._annotation_patch(task, ann))
            else:
                later.append(self._nomination_write(task, node_name))

    def unpipeline(self, task_info: TaskInfo) -> None:
        """Cache.UnPipeline: a persisted Pipelined task back to Pending, its node reservation freed,
        the nomination (or the persisted annotations) cleared."""
        sw = self.switches
        persist = sw.cache_pipeline or sw.annotation_persistence
        if not persist and not sw.sync_nominated_node:
            return
        with self._locked_then_write() as later:
            job, task = self._find_job_and_task(task_info)
            if not persist:  # nomination-only: just drop the nomination
                had = task.nominated_node_name or (task.pod.get("status") or _EMPTY).get("nominatedNodeName")
                task.nominated_node_name = ""
                job.report_change()
                if had:
                    later.append(self._nomination_write(task, ""))
                return
            if task.status != PIPELINED:
                return
            original, original_node = task.status, task.node_name
            original_nnn = task.nominated_node_name
            job.update_task_status(task, PENDING)
            if original_node:
                node = self.nodes.get(original_node)
                if node is None and not sw.unpipeline_on_replace:
                    job.update_task_status(task, original)
                    raise CacheError(f"failed to unpipeline Task {task.uid}, host {original_node} does not exist")
                if node is not None:   # (unpipeline_on_replace: a node that is gone reserves nothing)
                    node.remove_task(task)
            task.node_name = ""
            task.nominated_node_name = ""
            task.job_allocated_hyper_node = ""
            if sw.annotation_persistence:
                later.append(self._annotation_patch(task, {PIPELINED_STATUS_ANNOTATION: None,
                                                           PIPELINED_NODE_ANNOTATION: None,
                                                           EVICTION_OCCURRED_ANNOTATION: None}))
            elif original_nnn or (task.pod.get("status") or _EMPTY).get("nominatedNodeName"):
                later.append(self._nomination_write(task, ""))

    @contextmanager
    def _locked_then_write(self):
        """``with self._locked_then_write() as later:`` — the block runs under the cache lock and
        queues its API writes in ``later``; they run after the lock is released (Volcano writes
        nominations from goroutines), so informer handlers never wait on a slow or partitioned
        API server. On an exception nothing queued is written."""
        later: list = []
        with self.mutex:
            yield later
        for write in later:
            write()

    def _nomination_write(self, task: TaskInfo, node_name: str):
        """Prepare, under the lock, UpdatePodStatus of a copy of the pod with
        status.nominatedNodeName set; the returned call does the I/O (error → resync)."""
        pod = dict(task.pod)
        status = copy_object(task.pod.get("status") or {})
        status["nominatedNodeName"] = node_name
        pod["status"] = status

        def write() -> bool:
            if self.status_updater is None:
                return False
            try:
                self.status_updater.update_pod_status(pod)
                return True
            except Exception as e:  # noqa: BLE001
                with self.mutex:
                    self.stats["status_write_errors"] += 1
                self._error(f"Failed to update NominatedNodeName for task {task.namespace}/{task.name}: {e}")
                self.resync_task(task)
                return False
        return write

    def _annotation_patch(self, task: TaskInfo, ann: dict[str, str | None]):
        """Prepare the annotation-persistence patch; the returned call does the I/O (error → resync)."""
        namespace, name, ann = task.namespace, task.name, dict(ann)

        def write() -> None:
            if self.status_updater is None:
                return
            try:
                self.status_updater.patch_pod_annotations(namespace, name, ann)
            except Exception as e:  # noqa: BLE001
                with self.mutex:
                    self.stats["status_write_errors"] += 1
                self._error(f"Failed to patch pipeline annotations of {namespace}/{name}: {e}")
                self.resync_task(task)
        return write

    # ==== bind ===================================================================================
    def add_bind_task(self, bind_context: TaskInfo | BindContext) -> None:
        """AddBindTask: cache task → Binding and onto the node (Binding branch: must fit Idle);
        on error the status is reverted and the error raised. Under the PR's switches the
        nomination is cleared with a synchronous status write, still under the lock
        (``bind_before_nomination_clear``: written after the lock is released, the bind already
        queued). Then the bind
        is queued (and, in "sync" bind_mode, executed at once). With ``unpipeline_on_replace`` a Pipelined cache task
        is un-pipelined from its node first, then added as Binding (``_replace_pipelined``): the
        target may differ from the pipelined node, and Idle that shrank is an error, not Fatalf;
        any other task already on the node gets AddTask's "already on node" error, as in v1.14.0."""
        ctx = bind_context if isinstance(bind_context, BindContext) else BindContext(bind_context)
        sw = self.switches
        with self._locked_then_write() as later:
            job, task = self._find_job_and_task(ctx.task_info)
            node = self.nodes.get(ctx.task_info.node_name)
            if node is None:
                raise CacheError(f"failed to bind Task {task.uid} to host {ctx.task_info.node_name}, "
                                 f"host does not exist")
            original = task.status
            original_nnn = task.nominated_node_name
            # S4: a Pipelined task is un-pipelined from wherever it is, then added as Binding
            replace = sw.unpipeline_on_replace and original == PIPELINED
            if not replace:
                job.update_task_status(task, BINDING)
            clears_nomination = sw.cache_pipeline or sw.sync_nominated_node
            if clears_nomination:
                task.nominated_node_name = ""
                ctx.task_info.nominated_node_name = ""
            on_node = f"{task.namespace}/{task.name}" in node.tasks
            try:
                if replace:
                    self._replace_pipelined(job, task, node, BINDING)
                elif on_node and (sw.update_task_on_bind or sw.annotation_persistence) \
                        and not sw.unpipeline_on_replace:   # (S4 fix: never UpdateTask here)
                    self._node_update_task(node, task)
                else:
                    node.add_task(task, check_idle=not sw.planted_skip_fit)
            except TaskNodeError:
                if clears_nomination:
                    task.nominated_node_name = original_nnn
                    ctx.task_info.nominated_node_name = original_nnn
                if not replace:   # (_replace_pipelined restored status and reservation itself)
                    job.update_task_status(task, original)
                raise
            pod_nnn = (task.pod.get("status") or _EMPTY).get("nominatedNodeName") or ""
            if sw.nominate_for_expectation:
                # KEP-5278: announce the target node before binding
                if pod_nnn != node.name:
                    later.append(self._nomination_write(task, node.name))
            elif clears_nomination and (original_nnn or pod_nnn):
                if sw.bind_before_nomination_clear:
                    # the order before the PR head: written once the lock is released, after
                    # the bind is queued (the bind worker may write the bind first)
                    later.append(self._nomination_write(task, ""))
                else:
                    # PR head: the clear is a synchronous status write under the cache lock, made
                    # before the bind is queued — queued first, the bind could land first and the
                    # clear (built from the pod copy the bind just outdated) would get a 409
                    self._nomination_write(task, "")()
            if sw.annotation_persistence:
                ann = (task.pod.get("metadata") or _EMPTY).get("annotations") or _EMPTY
                if PIPELINED_STATUS_ANNOTATION in ann or PIPELINED_NODE_ANNOTATION in ann or original == PIPELINED:
                    later.append(self._annotation_patch(task, {PIPELINED_STATUS_ANNOTATION: None,
                                                               PIPELINED_NODE_ANNOTATION: None,
                                                               EVICTION_OCCURRED_ANNOTATION: None}))
            self.bind_queue.append(ctx)
        if self.bind_mode == "sync":
            self.process_bind_task()

    def process_bind_task(self) -> int:
        """Drain the bind queue into binder calls of ``batch_num`` tasks each; returns binds tried."""
        n = 0
        while True:
            with self.mutex:   # pop under the lock, bind without it (the binder does I/O)
                if not self.bind_queue:
                    return n
                batch = self.bind_queue[:self.batch_num]
                del self.bind_queue[:self.batch_num]
            self.bind(batch)
            n += len(batch)

    def bind(self, bind_contexts: list[TaskInfo | BindContext]) -> dict[str, str]:
        """Cache.Bind: call the binder; for each failed task write PodScheduled=False
        (reason SchedulerError) and resync it. Returns {uid: error}."""
        ctxs = [c if isinstance(c, BindContext) else BindContext(c) for c in bind_contexts]
        if not ctxs:
            return {}
        tasks = [c.task_info for c in ctxs]
        # no cache lock around the I/O (Volcano's Bind runs in its own goroutine without sc.Mutex):
        # informer events keep applying while a bind waits on the API server
        try:
            errs = self.binder.bind(tasks) if self.binder is not None else {}
        except Exception as e:  # noqa: BLE001 — a binder that raises fails the whole batch
            errs = {t.uid: str(e) for t in tasks}
        for c in ctxs:
            reason = errs.get(c.task_info.uid)
            if reason is None:
                continue
            msg = f"failed to bind to node {c.task_info.node_name}: {reason}"
            with self.mutex:
                self.stats["bind_errors"] += 1
                self._error(msg)
            try:
                self.task_unschedulable(c.task_info, POD_REASON_SCHEDULER_ERROR, msg, "")
            except Exception as e:  # noqa: BLE001
                with self.mutex:
                    self._error(f"Failed to update pod status when bind task error: {e}")
            self.resync_task(c.task_info)
        return dict(errs)

    # ==== resync =================================================================================
    def resync_task(self, task: TaskInfo) -> None:
        """resyncTask: queue "job/uid" for process_resync_task."""
        key = f"{task.job}/{task.uid}"
        with self.mutex:
            if key not in self.err_tasks:
                self.err_tasks[key] = 0
            self.stats["resyncs"] += 1

    def process_resync_task(self, max_items: int | None = None, *, now: float | None = None) -> int:
        """One pass over the queued tasks (Volcano's worker loop): GET the pod; gone → delete the
        task; else rebuild it and updateTask(old, new). Failed syncs stay queued. Returns the
        number of tasks synced. With ``now`` (a monotonic time: the continuous resync worker), a
        task whose last sync failed waits its turn like Volcano's rate-limited errTasks queue:
        5 ms doubling per failure, at most 1000 s (client-go's ItemExponentialFailureRateLimiter);
        without it every queued task is tried (after a session)."""
        synced = 0
        with self.mutex:
            keys = list(self.err_tasks)
            if now is not None:
                keys = [k for k in keys if self._resync_due.get(k, 0.0) <= now]
        if max_items is not None:
            keys = keys[:max_items]
        for key in keys:
            job_id, _, uid = key.rpartition("/")
            with self.mutex:
                job = self.jobs.get(job_id)
                task = job.tasks.get(uid) if job is not None else None
                if task is None:
                    self.err_tasks.pop(key, None)  # Forget: nothing left to sync
                    continue
            try:
                # Volcano's syncTask: the GET without sc.Mutex, the cache update under it
                new_pod = self._get_pod_for_sync(task)
                with self.mutex:
                    job = self.jobs.get(job_id)
                    cur = job.tasks.get(uid) if job is not None else None
                    self._apply_sync(cur if cur is not None else task, new_pod)
            except Exception as e:  # noqa: BLE001 — retry later (rate-limited in Volcano)
                if isinstance(e, FatalCacheError):
                    raise
                with self.mutex:
                    self.stats["resync_failures"] += 1
                    if key in self.err_tasks:
                        self.err_tasks[key] += 1
                        self.err_tasks.move_to_end(key)
                        if now is not None:
                            self._resync_due[key] = now + min(RESYNC_BASE_S * 2 ** (self.err_tasks[key] - 1),
                                                              RESYNC_MAX_S)
                    self._error(f"Failed to sync task {task.namespace}/{task.name}, retry it: {e}")
                continue
            with self.mutex:
                self.err_tasks.pop(key, None)
                self._resync_due.pop(key, None)
            synced += 1
        return synced

    def _get_pod_for_sync(self, old: TaskInfo) -> dict | None:
        getter = self.pod_getter
        if getter is None:
            raise CacheError(f"failed to get Pod <{old.namespace}/{old.name}>: no pod getter configured")
        return getter.get_pod(old.namespace, old.name)

    def _apply_sync(self, old: TaskInfo, new_pod: dict | None) -> None:
        if new_pod is None:
            self._delete_task(old)
            return
        new = self.new_task_info(new_pod)
        self._delete_task(old)
        self._add_task(new)

    def _sync_task(self, old: TaskInfo) -> None:
        self._apply_sync(old, self._get_pod_for_sync(old))

    # ==== session close write-back ===============================================================
    def update_job_status(self, job: JobInfo, update_pg: bool = False, update_pg_annotations: bool = False,
                          update_job_info: bool = False) -> JobInfo:
        """UpdateJobStatus: write the PodGroup when asked, then RecordJobStatusEvent."""
        write = self.job_status_write(job, update_pg, update_pg_annotations, update_job_info)
        if write is not None:
            write()
        return job

    def job_status_write(self, job: JobInfo, update_pg: bool = False, update_pg_annotations: bool = False,
                         update_job_info: bool = False) -> Callable[[], None] | None:
        """UpdateJobStatus in two steps. What needs no API call is done now: the cache's copy of
        the allocated hyper-node annotation, and the choice of the job's scheduling events (which
        pods' PodScheduled condition or nomination changes). The rest is returned as one call, in
        Volcano's order -- the PodGroup write, the job's hyper-node fields in the cache, the
        events' pod status writes -- or None when there is nothing to call. The call raises what
        the PodGroup write raises (and does nothing after it then); an event write's error is
        counted and logged. The job updater runs a session's calls through the cache's
        ``status_writer`` (serial by default; a live instance's runs them in parallel, as
        Volcano's job updater does with its workers)."""
        write_pg = (update_pg or update_pg_annotations) and self.status_updater is not None \
            and job.pod_group is not None
        if update_pg_annotations:
            with self.mutex:
                cj = self.jobs.get(job.uid)
                if cj is not None and cj.pod_group is not None and job.pod_group is not None:
                    key = JOB_ALLOCATED_HYPERNODE_ANNOTATION
                    cann = _md(cj.pod_group).get("annotations")
                    if cann is not None:
                        cann[key] = (_md(job.pod_group).get("annotations") or _EMPTY).get(key, "")
        events = self._job_status_events(job)
        if not (write_pg or update_job_info or events):
            return None

        def head() -> None:
            if write_pg:
                pg = self.status_updater.update_pod_group(job.pod_group)
                if pg is not None:
                    job.pod_group = pg
            if update_job_info:
                with self.mutex:
                    cj = self.jobs.get(job.uid)
                    if cj is not None:
                        cj.allocated_hyper_node = job.allocated_hyper_node
                        cj.sub_job_allocated_hyper_node = job.sub_job_allocated_hyper_node
        return StatusWrite(head if (write_pg or update_job_info) else None, events, self)

    def record_job_status_event(self, job: JobInfo, update_pg: bool = False) -> None:
        """For every Allocated, Pending and Pipelined task of the (session) job: PodScheduled=False
        with TaskSchedulingReason; v1.14.0 also writes the nomination of a Pipelined context whose
        eviction occurred (PR #5045 / cache_pipeline removes that)."""
        for t, new_pod in self._job_status_events(job):
            self._write_unschedulable(t, new_pod)

    def _job_status_events(self, job: JobInfo) -> list[tuple[TaskInfo, dict]]:
        """RecordJobStatusEvent's choice: (task, the pod to write) for each task whose condition or
        nomination changes."""
        out: list[tuple[TaskInfo, dict]] = []
        base = None    # job.fit_error() walks the job: only when a task needs it
        session_end_nomination = not self.switches.cache_pipeline
        idx = job.task_status_index
        for st in (ALLOCATED, PENDING, PIPELINED):
            ts = idx.get(st)
            if not ts:
                continue
            for t in list(ts.values()):
                if t.sch_gated:
                    continue
                reason, msg, nnn = job.task_scheduling_reason(t.uid)
                if not msg:
                    if base is None:
                        base = job.fit_error() or ALL_NODE_UNAVAILABLE_MSG
                    msg = base
                try:
                    new_pod = self._unschedulable_pod(t, reason, msg, nnn if session_end_nomination else "")
                except Exception as e:  # noqa: BLE001
                    self._status_write_failed(t, e)
                    continue
                if new_pod is not None:
                    out.append((t, new_pod))
        return out

    def write_unschedulable_many(self, events: list) -> None:
        """The (task, pod) condition writes of many jobs in one request to the status updater
        (``update_pod_status_many``); each failed one is counted and logged as one write's."""
        if not events:
            return
        try:
            got = self.status_updater.update_pod_status_many([p for _t, p in events])
        except Exception as e:  # noqa: BLE001 - the request failed as a whole: every write did
            got = [e] * len(events)
        for (t, _p), res in zip(events, got):
            if isinstance(res, Exception):
                self._status_write_failed(t, res)

    def _write_unschedulable(self, task: TaskInfo, new_pod: dict) -> None:
        try:
            self.status_updater.update_pod_status(new_pod)
        except Exception as e:  # noqa: BLE001
            self._status_write_failed(task, e)

    def _status_write_failed(self, task: TaskInfo, e: Exception) -> None:
        with self.mutex:   # (the status writer's threads may fail at once)
            self.stats["status_write_errors"] += 1
            self._error(f"Failed to update unschedulable task status {task.namespace}/{task.name}: {e}")

    def task_unschedulable(self, task: TaskInfo, reason: str, message: str, nominated_node_name: str = "") -> bool:
        """Write PodScheduled=False (and, if non-empty and different, the nomination) when it changed.
        The cache's own pod is not touched: the informer delivers the change. Returns True if written."""
        new_pod = self._unschedulable_pod(task, reason, message, nominated_node_name)
        if new_pod is None:
            return False
        self.status_updater.update_pod_status(new_pod)
        return True

    def _unschedulable_pod(self, task: TaskInfo, reason: str, message: str,
                           nominated_node_name: str = "") -> dict | None:
        """The pod with PodScheduled=False (and the nomination, if non-empty and different) to
        write, or None when neither changed (or nothing writes)."""
        pod = task.pod
        status = pod.get("status") or _EMPTY
        cond = {"type": "PodScheduled", "status": "False", "reason": reason, "message": message}
        old = next((c for c in status.get("conditions") or () if c.get("type") == "PodScheduled"), None)
        update_cond = old is None or any(old.get(k) != cond[k] for k in ("status", "reason", "message"))
        update_nnn = bool(nominated_node_name) and status.get("nominatedNodeName", "") != nominated_node_name
        if not (update_cond or update_nnn) or self.status_updater is None:
            return None
        new_pod = dict(pod)
        new_status = copy_object(dict(status))
        if update_cond:
            conds = [c for c in new_status.get("conditions") or () if c.get("type") != "PodScheduled"]
            conds.append(cond)
            new_status["conditions"] = conds
        if update_nnn:
            new_status["nominatedNodeName"] = nominated_node_name
        new_pod["status"] = new_status
        return new_pod

    # ==== inspection =============================================================================
    def digest(self) -> dict:
        """{"tasks": {uid: [status, node]}, "nodes": {name: {"idle", "used", "releasing", "pipelined"}}}
        Status in Volcano's spelling ("Pipelined"); resources in plain units (Resource.to_plain)."""
        # (asked every measurement tick of every task: a status's name is looked up, not
        # formatted through the enum's __str__)
        names, ts = _STATUS_NAME, TaskStatus
        with self.mutex:
            tasks: dict[str, list] = {}
            for job in self.jobs.values():
                for t in job.tasks.values():
                    st = t.status
                    tasks[t.uid] = [names[st] if type(st) is ts else str(st), t.node_name]
            nodes: dict[str, dict] = {}
            for name, ni in self.nodes.items():
                for t in ni.tasks.values():
                    if t.uid not in tasks:
                        st = t.status
                        tasks[t.uid] = [names[st] if type(st) is ts else str(st), t.node_name]
                nodes[name] = ni.to_dict()
            return {"tasks": dict(sorted(tasks.items())), "nodes": dict(sorted(nodes.items()))}

    def find_task(self, namespace: str, name: str) -> TaskInfo | None:
        """The cache's task for a pod (from its job, else from the node it is on)."""
        key = f"{namespace}/{name}"
        with self.mutex:
            for job in self.jobs.values():
                for t in job.tasks.values():
                    if t.name == name and t.namespace == namespace:
                        return t
            for ni in self.nodes.values():
                t = ni.tasks.get(key)
                if t is not None:
                    return t
        return None

    def pod_group_pending(self, job_id: str) -> bool:
        with self.mutex:
            job = self.jobs.get(job_id)
            return job is None or job.pod_group_phase in (PodGroupPhase.PENDING, "")

    def __repr__(self) -> str:
        return (f"SchedulerCache({len(self.jobs)} jobs, {len(self.nodes)} nodes, {len(self.queues)} queues, "
                f"switches={self.switches.enabled()})")
