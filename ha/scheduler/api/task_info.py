"""TaskInfo and its transaction context (``api/job_info.go`` :82-320, ``api/pod_info.go``)."""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from .helpers import (GROUP_NAME_ANNOTATION, EVICTION_OCCURRED_ANNOTATION, PIPELINED_NODE_ANNOTATION,
                      PIPELINED_STATUS_ANNOTATION,
                      PREEMPTABLE_KEY, REVOCABLE_ZONE_KEY, TASK_PRIORITY_ANNOTATION, TASK_SPEC_KEY,
                      _truthy, get_task_status)
from .resource import MIN_RESOURCE, PODS, Resource
from .types import TaskStatus

__all__ = ["TransactionContext", "TaskInfo", "get_pod_resource_request", "get_pod_preemptable",
           "get_job_id", "get_task_role", "new_task_info"]

log = logging.getLogger(__name__)

_PIPELINED = TaskStatus.PIPELINED
_PENDING = TaskStatus.PENDING
_EMPTY: dict = {}


@dataclass
class TransactionContext:
    """The per-session decision of a task. In Volcano it is embedded in TaskInfo, so
    ``task.node_name`` *is* the context's field; ``TaskInfo.get_transaction_context()`` copies it.

    ``eviction_occurred`` is v1.14.0's flag; ``nominated_node_name`` is PR #5045's field. Both exist
    here so one model serves every profile."""
    node_name: str = ""
    eviction_occurred: bool = False
    nominated_node_name: str = ""
    job_allocated_hyper_node: str = ""
    status: TaskStatus = TaskStatus.PENDING

    def clone(self) -> "TransactionContext":
        return TransactionContext(self.node_name, self.eviction_occurred, self.nominated_node_name,
                                  self.job_allocated_hyper_node, self.status)


def _container_requests(c: dict) -> dict | None:
    res = c.get("resources")
    if not res:
        return None
    return res.get("requests")


# Parsed requests of pods with only (non-init) containers, keyed by each container's requests:
# pods of one job ask for the same, so a new pod's request is usually a clone away.
_REQUEST_MEMO: dict[tuple, Resource] = {}
_REQUEST_MEMO_MAX = 4096


def get_pod_resource_request(pod: dict) -> Resource:
    """GetPodResourceRequest: Σ containers (+ overhead), max'ed with init containers, + ``pods: 1``."""
    spec = pod.get("spec") or _EMPTY
    if spec.get("initContainers") or spec.get("overhead"):
        return _pod_resource_request(spec)
    key: tuple = ()
    for c in spec.get("containers") or ():   # _container_requests, inlined
        res = c.get("resources")
        req = res.get("requests") if res else None
        key += (tuple(req.items()) if req else None,)
    try:
        hit = _REQUEST_MEMO.get(key)
    except TypeError:   # an unhashable quantity: parse (and fail) as usual
        return _pod_resource_request(spec)
    if hit is not None:
        return hit.clone()
    out = _pod_resource_request(spec)
    if len(_REQUEST_MEMO) >= _REQUEST_MEMO_MAX:
        _REQUEST_MEMO.clear()
    _REQUEST_MEMO[key] = out.clone()
    return out


def _pod_resource_request(spec: dict) -> Resource:
    result = Resource()
    for c in spec.get("containers") or ():
        req = _container_requests(c)
        if req:
            result.add(Resource.from_quantities(req))
    overhead = spec.get("overhead")
    if overhead:
        result.add(Resource.from_quantities(overhead))
    init = spec.get("initContainers")
    if init:
        restartable = Resource()
        init_reqs = Resource()
        for c in init:
            creq = Resource.from_quantities(_container_requests(c))
            if c.get("restartPolicy") == "Always":  # sidecar: runs alongside the main containers
                result.add(creq)
                restartable.add(creq)
                creq = restartable
            else:
                tmp = Resource()
                tmp.add(creq)
                tmp.add(restartable)
                creq = tmp
            init_reqs.set_max_resource(creq)
        result.set_max_resource(init_reqs)
    result.add_scalar(PODS, 1.0)
    return result


def _parse_bool(value: str) -> bool | None:
    # strconv.ParseBool
    if value in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    if value in ("0", "f", "F", "FALSE", "false", "False"):
        return False
    return None


def get_pod_preemptable(pod: dict) -> bool:
    """Annotation, then label ``volcano.sh/preemptable``; default **true**; unparsable → false."""
    md = pod.get("metadata") or _EMPTY
    for src in (md.get("annotations"), md.get("labels")):
        if src and PREEMPTABLE_KEY in src:
            b = _parse_bool(str(src[PREEMPTABLE_KEY]))
            if b is None:
                log.warning("invalid %s=%s", PREEMPTABLE_KEY, src[PREEMPTABLE_KEY])
                return False
            return b
    return True


def get_pod_revocable_zone(pod: dict) -> str:
    ann = (pod.get("metadata") or _EMPTY).get("annotations") or _EMPTY
    if REVOCABLE_ZONE_KEY in ann:
        return "*" if ann[REVOCABLE_ZONE_KEY] == "*" else ""
    if PREEMPTABLE_KEY in ann and _parse_bool(str(ann[PREEMPTABLE_KEY])):
        return "*"
    return ""


def get_job_id(pod: dict) -> str:
    md = pod.get("metadata") or _EMPTY
    gn = (md.get("annotations") or _EMPTY).get(GROUP_NAME_ANNOTATION)
    if gn:
        return f"{md.get('namespace', '')}/{gn}"
    return ""


def get_task_role(pod: dict) -> str:
    md = pod.get("metadata") or _EMPTY
    ts = (md.get("annotations") or _EMPTY).get(TASK_SPEC_KEY)
    if ts:
        return ts
    ts = (md.get("labels") or _EMPTY).get(TASK_SPEC_KEY)
    return ts or ""


# The annotation and label keys a TaskInfo reads (``TaskInfo.rebuilt_equal`` compares them
# between two versions of a pod): besides the group name and task spec, which Volcano's job pods
# carry, ones that most pods have none of (checked for absence first, in one C call)
_RARE_TASK_ANNOTATIONS = (TASK_PRIORITY_ANNOTATION, PREEMPTABLE_KEY, REVOCABLE_ZONE_KEY,
                          PIPELINED_STATUS_ANNOTATION, PIPELINED_NODE_ANNOTATION, EVICTION_OCCURRED_ANNOTATION)
_RARE_TASK_ANNOTATION_SET = frozenset(_RARE_TASK_ANNOTATIONS)
_TASK_LABELS = (TASK_SPEC_KEY, PREEMPTABLE_KEY)
_TASK_LABEL_SET = frozenset(_TASK_LABELS)


def _placement(pod: dict, md: dict, spec: dict, status: dict, ann: dict,
               switches: Any) -> tuple[TaskStatus, str, str, bool]:
    """(status, node name, nominated node, eviction occurred) of a pod's TaskInfo: getTaskStatus,
    PR #5045's placement of a reconstructed Pipelined task on its nominated node, the
    annotation-persistence design's on its pipelined-node annotation."""
    node_name = spec.get("nodeName") or ""
    nominated = status.get("nominatedNodeName") or ""
    persist = switches is not None and switches.annotation_persistence
    # get_task_status's commonest case inlined: a Pending pod, not being deleted, without a
    # node, a nominated node or a pipelined-status annotation, cannot be anything but Pending
    if (not node_name and not nominated and (status.get("phase") or "Pending") == "Pending"
            and md.get("deletionTimestamp") is None
            and not (persist and ann.get(PIPELINED_STATUS_ANNOTATION))):
        return _PENDING, "", "", persist and _truthy(ann.get(EVICTION_OCCURRED_ANNOTATION))
    task_status = get_task_status(pod, switches)
    if task_status == _PIPELINED and not node_name:
        if persist and ann.get(PIPELINED_NODE_ANNOTATION):
            node_name = ann[PIPELINED_NODE_ANNOTATION]
        else:
            node_name = nominated
    return task_status, node_name, nominated, persist and _truthy(ann.get(EVICTION_OCCURRED_ANNOTATION))


def _base_priority(spec: dict, ann: dict) -> int:
    """spec.priority (1 when unset), overridden by a parseable volcano.sh/task-priority."""
    prio = spec.get("priority")
    prio = 1 if prio is None else int(prio)
    tp = ann.get(TASK_PRIORITY_ANNOTATION)
    if tp is not None:
        try:
            prio = int(str(tp).strip())
        except ValueError:
            pass
    return prio


class TaskInfo:
    """Volcano's TaskInfo built from a pod dict (docs/object-shapes.md).

    The pod dict is shared, never copied — exactly like Volcano's ``*v1.Pod`` (and as cheap)."""

    __slots__ = (
        "uid", "job", "name", "namespace", "task_role", "resreq", "init_resreq",
        # embedded TransactionContext
        "node_name", "eviction_occurred", "nominated_node_name", "job_allocated_hyper_node", "status",
        "last_transaction", "priority", "volume_ready", "preemptable", "best_effort",
        "has_restartable_init_container", "sch_gated", "revocable_zone", "numa_info", "pod",
        "custom_bind_err_handler", "custom_bind_err_handler_succeeded", "__weakref__",
        # a one-element list shared by the task and its clones: the k8s framework's requests of
        # ``pod``, filled on first use by a session's k8s node view (plugins/k8s_nodes.py) -- on
        # a snapshot's clone, and so for the cache's task and the next sessions' clones too
        "k8s_requests",
    )

    def __init__(self, pod: dict, switches: Any = None, init_req: Resource | None = None):
        # init_req: the pod's already-parsed resource request (SchedulerCache.update_pod passes
        # a clone of the previous task's when the containers did not change), else parsed here.
        # Built once per informer event: every look-up is done once, the common cases inlined.
        md = pod.get("metadata") or _EMPTY
        spec = pod.get("spec") or _EMPTY
        status = pod.get("status") or _EMPTY
        ann = md.get("annotations") or _EMPTY
        ns = md.get("namespace", "")
        name = md.get("name", "")
        if init_req is None:
            init_req = get_pod_resource_request(pod)
        self.uid = md.get("uid") or f"{ns}-{name}"  # Volcano's test helpers use "<ns>-<name>"
        gn = ann.get(GROUP_NAME_ANNOTATION)
        self.job = f"{ns}/{gn}" if gn else ""
        self.name = name
        self.namespace = ns
        labels = md.get("labels") or _EMPTY
        # get_task_role, inlined
        self.task_role = ann.get(TASK_SPEC_KEY) or labels.get(TASK_SPEC_KEY) or ""
        self.init_resreq = init_req
        self.resreq = init_req  # Volcano: the same object
        task_status, node_name, nominated, self.eviction_occurred = _placement(
            pod, md, spec, status, ann, switches)
        self.node_name = node_name
        self.nominated_node_name = nominated
        self.job_allocated_hyper_node = ""
        self.status = task_status
        self.k8s_requests = [None]
        self.last_transaction = None
        self.priority = _base_priority(spec, ann)
        self.volume_ready = False
        # get_pod_preemptable's common case (the key on neither) inlined
        self.preemptable = (get_pod_preemptable(pod) if PREEMPTABLE_KEY in ann or PREEMPTABLE_KEY in labels
                            else True)
        # is_empty(), short-circuited for the common request with cpu or memory
        self.best_effort = (init_req.milli_cpu < MIN_RESOURCE and init_req.memory < MIN_RESOURCE
                            and init_req.is_empty())
        init = spec.get("initContainers")
        self.has_restartable_init_container = bool(init) and any(
            c.get("restartPolicy") == "Always" for c in init)
        self.sch_gated = bool(spec.get("schedulingGates"))
        # get_pod_revocable_zone's common case (neither key) inlined
        self.revocable_zone = (get_pod_revocable_zone(pod) if REVOCABLE_ZONE_KEY in ann or PREEMPTABLE_KEY in ann
                               else "")
        self.numa_info = None
        self.pod = pod
        self.custom_bind_err_handler = None
        self.custom_bind_err_handler_succeeded = False

    def rebuilt_equal(self, pod: dict, switches: Any, priority: int | None = None, *,
                      md: dict | None = None, spec: dict | None = None, ann: dict | None = None) -> bool:
        """Whether ``TaskInfo(pod, switches)`` (its priority then set to ``priority`` if that is
        not None: the cache's admission emulation) would equal this task field for field, so the
        cache's updatePod may keep this object and only swap in ``pod``. Decided on the inputs:
        the whole spec, the ids, the annotation and label keys a task reads, compared with the
        pod this task was built from (fields the cache never changes after building follow from
        them); the placement (status, node, nomination), priority and transient fields, which the
        cache does change (bind, pipeline, evict, sessions' transactions), are recomputed from
        ``pod`` and compared with this task's own. ``md``, ``spec``, ``ann``: the pod's metadata,
        spec and annotations when the caller has them at hand (the informer's hot path)."""
        if (self.last_transaction is not None or self.job_allocated_hyper_node or self.volume_ready
                or self.numa_info is not None or self.custom_bind_err_handler is not None
                or self.custom_bind_err_handler_succeeded or self.resreq is not self.init_resreq):
            return False
        old = self.pod
        if spec is None:
            spec = pod.get("spec") or _EMPTY
        ospec = old.get("spec") or _EMPTY
        if spec is not ospec and spec != ospec:
            return False
        if md is None:
            md = pod.get("metadata") or _EMPTY
        omd = old.get("metadata") or _EMPTY
        if (md.get("uid") != omd.get("uid") or md.get("name", "") != self.name
                or md.get("namespace", "") != self.namespace):
            return False
        if ann is None:
            ann = md.get("annotations") or _EMPTY
        oann = omd.get("annotations") or _EMPTY
        if ann is not oann and (
                ann.get(GROUP_NAME_ANNOTATION) != oann.get(GROUP_NAME_ANNOTATION)
                or ann.get(TASK_SPEC_KEY) != oann.get(TASK_SPEC_KEY)
                or not (_RARE_TASK_ANNOTATION_SET.isdisjoint(ann) and _RARE_TASK_ANNOTATION_SET.isdisjoint(oann))
                and tuple(map(ann.get, _RARE_TASK_ANNOTATIONS)) != tuple(map(oann.get, _RARE_TASK_ANNOTATIONS))):
            return False
        labels = md.get("labels") or _EMPTY
        olabels = omd.get("labels") or _EMPTY
        if labels is not olabels and not (_TASK_LABEL_SET.isdisjoint(labels) and _TASK_LABEL_SET.isdisjoint(olabels)) \
                and tuple(map(labels.get, _TASK_LABELS)) != tuple(map(olabels.get, _TASK_LABELS)):
            return False
        # with spec.priority set (and equal) the priority follows from the inputs; without it,
        # the admission's value (the cache's PriorityClasses may have changed) is compared
        if ((spec.get("priority") is None or priority is not None)
                and self.priority != (_base_priority(spec, ann) if priority is None else priority)):
            return False
        return _placement(pod, md, spec, pod.get("status") or _EMPTY, ann, switches) == (
            self.status, self.node_name, self.nominated_node_name, self.eviction_occurred)

    # ---- transaction context ------------------------------------------------------------------
    def get_transaction_context(self) -> TransactionContext:
        return TransactionContext(self.node_name, self.eviction_occurred, self.nominated_node_name,
                                  self.job_allocated_hyper_node, self.status)

    def generate_last_tx_context(self) -> None:
        self.last_transaction = self.get_transaction_context()

    def clear_last_tx_context(self) -> None:
        self.last_transaction = None

    # ---- pod-derived conveniences (read through the shared pod) -------------------------------
    @property
    def pod_key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def node_selector(self) -> dict:
        return (self.pod.get("spec") or _EMPTY).get("nodeSelector") or {}

    @property
    def preemption_policy(self) -> str:
        """The pod's preemptionPolicy ("PreemptLowerPriority" by default, or "Never")."""
        return (self.pod.get("spec") or _EMPTY).get("preemptionPolicy") or "PreemptLowerPriority"

    @property
    def creation_timestamp(self) -> float:
        return float((self.pod.get("metadata") or _EMPTY).get("creationTimestamp") or 0.0)

    @property
    def is_deleting(self) -> bool:
        return (self.pod.get("metadata") or _EMPTY).get("deletionTimestamp") is not None

    # ---- clone --------------------------------------------------------------------------------
    def clone(self) -> "TaskInfo":
        """Volcano's Clone: a new context with only NodeName, Status (and PR's NominatedNodeName);
        ``eviction_occurred`` and ``job_allocated_hyper_node`` are dropped; the pod is shared.
        So are the two requests, which Volcano clones: nothing mutates a task's ``resreq`` or
        ``init_resreq`` in place (they are only read, or added into other resources; the
        construction already makes them one object), and a snapshot clones 200,000 tasks."""
        t = TaskInfo.__new__(TaskInfo)
        t.uid = self.uid
        t.job = self.job
        t.name = self.name
        t.namespace = self.namespace
        t.task_role = self.task_role
        t.resreq = self.resreq
        t.init_resreq = self.init_resreq
        t.node_name = self.node_name
        t.eviction_occurred = False
        t.nominated_node_name = self.nominated_node_name
        t.job_allocated_hyper_node = ""
        t.status = self.status
        lt = self.last_transaction
        t.last_transaction = lt.clone() if lt is not None else None
        t.priority = self.priority
        t.volume_ready = self.volume_ready
        t.preemptable = self.preemptable
        t.best_effort = self.best_effort
        t.has_restartable_init_container = self.has_restartable_init_container
        t.sch_gated = self.sch_gated
        t.revocable_zone = self.revocable_zone
        t.numa_info = self.numa_info
        t.pod = self.pod
        t.k8s_requests = self.k8s_requests
        t.custom_bind_err_handler = None
        t.custom_bind_err_handler_succeeded = False
        return t

    def __repr__(self) -> str:
        return (f"Task({self.uid}:{self.namespace}/{self.name}, job {self.job}, node {self.node_name!r}, "
                f"status {self.status}, pri {self.priority}, resreq <{self.resreq}>)")


def new_task_info(pod: dict, switches: Any = None) -> TaskInfo:
    return TaskInfo(pod, switches)

