"""The session's Kubernetes-framework view of nodes (Volcano's ``ssn.NodeMap``).

Volcano builds one k8s ``NodeInfo`` per node at session open from *every* task on the node
(Pipelined and Releasing included, ``framework/util.go`` GenerateNodeMapAndSlice). The predicates
plugin's event handlers then add a pod on AllocateFunc and remove it on DeallocateFunc — so an
in-session eviction drops the victim from this view although the Volcano NodeInfo still holds it
as Releasing. nodeorder scores read the same objects. Like k8s ``NodeInfo.AddPodInfo``, adding
does not de-duplicate: a pod added twice counts twice until removed.

The view is created lazily per session and shared by the plugins of that session.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any

from apimachinery.quantity import QuantityError, parse_quantity
from ha.scheduler.snapshot_reuse import check_same, verifying

# k8s scheduler util: requests assumed for containers that do not state one (NonZeroRequested)
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024

_EMPTY: dict = {}


# parse_quantity is pure and depends on the name only through "cpu or not"; the same few
# quantity strings repeat across thousands of pods (Decimal parsing was a fifth of a session)
_Q_MEMO: dict[tuple, int] = {}


def _q(name: str, value: Any) -> int:
    key = (name == "cpu", type(value), value)
    try:
        return _Q_MEMO[key]
    except KeyError:
        pass
    except TypeError:  # unhashable: not a quantity
        key = None
    try:
        out = parse_quantity(name, value)
    except QuantityError:
        out = 0
    if key is not None and len(_Q_MEMO) < 100_000:
        _Q_MEMO[key] = out
    return out


def pod_requests(pod: dict, *, non_zero: bool) -> dict[str, int]:
    """k8s ``resourcehelper.PodRequests``: Σ containers, max'ed with each init container, plus
    overhead. With ``non_zero`` a container without a cpu/memory request counts 100m / 200Mi."""
    spec = (pod or _EMPTY).get("spec") or _EMPTY

    def container(c: dict) -> dict[str, int]:
        req = ((c.get("resources") or _EMPTY).get("requests")) or _EMPTY
        out = {k: _q(k, v) for k, v in req.items()}
        if non_zero:
            out.setdefault("cpu", DEFAULT_MILLI_CPU_REQUEST)
            out.setdefault("memory", DEFAULT_MEMORY_REQUEST)
        return out

    total: dict[str, int] = {}
    for c in spec.get("containers") or ():
        for k, v in container(c).items():
            total[k] = total.get(k, 0) + v
    for c in spec.get("initContainers") or ():
        for k, v in container(c).items():
            if v > total.get(k, 0):
                total[k] = v
    for k, v in (spec.get("overhead") or _EMPTY).items():
        total[k] = total.get(k, 0) + _q(k, v)
    return total


def cached_pod_requests(memo: dict | None, pod: dict, non_zero: bool) -> dict[str, int]:
    """``pod_requests`` memoised in a per-session ``memo`` (the pod's requests cannot change
    within a session; re-parsing them per (task, node) pair was a third of a session). The entry
    keeps the pod alive, so its ``id`` cannot be reused while the memo lives. Callers must not
    mutate the returned dict."""
    if memo is None:
        return pod_requests(pod, non_zero=non_zero)
    key = (id(pod), non_zero)
    hit = memo.get(key)
    if hit is not None and hit[0] is pod:
        return hit[1]
    out = pod_requests(pod, non_zero=non_zero)
    memo[key] = (pod, out)
    return out


def task_pod_requests(task: Any) -> tuple[dict[str, int], dict[str, int], dict, bool] | None:
    """``(pod_requests(pod), pod_requests(pod, non_zero), pod, has_pod_affinity(pod))`` of a
    TaskInfo, kept in the cell the task shares with its clones (``TaskInfo.k8s_requests``), so
    that the view of 100,000 placed pods is not re-parsed every session; recomputed when the
    task's pod is another object. None for an object without that cell. Callers must not mutate
    the dicts."""
    cell = getattr(task, "k8s_requests", None)
    if cell is None:
        return None
    got = cell[0]
    pod = task.pod
    if got is None or got[2] is not pod:
        got = (pod_requests(pod, non_zero=False), pod_requests(pod, non_zero=True), pod,
               has_pod_affinity(pod))
        cell[0] = got
    return got


def has_pod_affinity(pod: dict) -> bool:
    """k8s podWithAffinity: the pod has a podAffinity or podAntiAffinity section."""
    aff = (((pod or _EMPTY).get("spec") or _EMPTY).get("affinity"))
    return bool(aff) and (aff.get("podAffinity") is not None or aff.get("podAntiAffinity") is not None)


def has_required_anti_affinity(pod: dict) -> bool:
    aff = (((pod or _EMPTY).get("spec") or _EMPTY).get("affinity")) or _EMPTY
    return bool((aff.get("podAntiAffinity") or _EMPTY).get("requiredDuringSchedulingIgnoredDuringExecution"))


class AffinityIndex:
    """Which nodes of the view host pods with pod (anti-)affinity (k8s NodeInfo's
    PodsWithAffinity / PodsWithRequiredAntiAffinity, summed over the view), so that a pod
    without affinity terms costs nothing when no such pod exists."""

    __slots__ = ("with_affinity", "with_required_anti")

    def __init__(self) -> None:
        self.with_affinity: dict[str, int] = {}
        self.with_required_anti: dict[str, int] = {}

    def __bool__(self) -> bool:
        return bool(self.with_affinity)

    def nodes_with_affinity(self) -> list[str]:
        return sorted(self.with_affinity)

    def nodes_with_required_anti(self) -> list[str]:
        return sorted(self.with_required_anti)

    @staticmethod
    def _bump(d: dict[str, int], name: str, delta: int) -> None:
        n = d.get(name, 0) + delta
        if n > 0:
            d[name] = n
        else:
            d.pop(name, None)

    def account(self, name: str, pod: dict, delta: int) -> bool:
        """Count one copy of ``pod`` on node ``name`` in (delta=1) or out; False if the pod
        has no pod (anti-)affinity."""
        if not has_pod_affinity(pod):
            return False
        self._bump(self.with_affinity, name, delta)
        if has_required_anti_affinity(pod):
            self._bump(self.with_required_anti, name, delta)
        return True


@dataclass
class K8sNodeInfo:
    """Pods on one node as the k8s framework sees them, with running request sums."""

    name: str
    node: dict | None
    allocatable: dict[str, int] = field(default_factory=dict)
    pods: dict[str, int] = field(default_factory=dict)         # task uid -> copies
    pod_objs: dict[str, dict] = field(default_factory=dict)    # task uid -> pod dict
    requested: dict[str, int] = field(default_factory=dict)
    non_zero_requested: dict[str, int] = field(default_factory=dict)
    affinity_pods: dict[str, dict] = field(default_factory=dict)  # task uid -> pod with pod (anti-)affinity
    # per-session pod-request memo shared by the view (cached_pod_requests) and a set the
    # allocate fast path watches: every change of this node's pods adds the node name to it
    memo: dict | None = field(default=None, repr=False, compare=False)
    sink: set | None = field(default=None, repr=False, compare=False)
    affinity_index: AffinityIndex | None = field(default=None, repr=False, compare=False)
    # its pods changed since it was built: a view the session changed is not reused (node_map)
    changed: bool = field(default=False, repr=False, compare=False)

    @classmethod
    def from_node_info(cls, node_info: Any, memo: dict | None = None,
                       affinity_index: AffinityIndex | None = None) -> "K8sNodeInfo":
        node = node_info.node
        alloc = ((node or _EMPTY).get("status") or _EMPTY).get("allocatable") or _EMPTY
        ni = cls(name=node_info.name, node=node, allocatable={k: _q(k, v) for k, v in alloc.items()},
                 memo=memo, affinity_index=affinity_index)
        for t in node_info.tasks.values():
            ni.add_pod(t)
        ni.changed = False
        return ni

    def pod_count(self) -> int:
        return sum(self.pods.values())

    def add_pod(self, task: Any) -> None:
        uid, pod = task.uid, task.pod
        pods = self.pods
        pods[uid] = pods.get(uid, 0) + 1
        self.pod_objs[uid] = pod
        self.changed = True
        if self.sink is not None:
            self.sink.add(self.name)
        reqs = task_pod_requests(task)
        if reqs is None:
            self._account(pod, +1)
            with_affinity = self.affinity_index is not None and self.affinity_index.account(self.name, pod, +1)
        else:
            for target, part in ((self.requested, reqs[0]), (self.non_zero_requested, reqs[1])):
                for k, v in part.items():
                    target[k] = target.get(k, 0) + v
            # most pods have no pod (anti-)affinity: the index is not asked
            with_affinity = reqs[3] and self.affinity_index is not None and self.affinity_index.account(
                self.name, pod, +1)
        if with_affinity:
            self.affinity_pods[uid] = pod

    def remove_pod(self, task: Any) -> bool:
        """Remove one copy; False (nothing changes) when the pod is not on this node."""
        n = self.pods.get(task.uid, 0)
        if n == 0:
            return False
        self.changed = True
        pod = self.pod_objs[task.uid]
        if n == 1:
            del self.pods[task.uid]
            del self.pod_objs[task.uid]
            self.affinity_pods.pop(task.uid, None)
        else:
            self.pods[task.uid] = n - 1
        self._account(pod, -1)
        if self.affinity_index is not None:
            self.affinity_index.account(self.name, pod, -1)
        return True

    def _account(self, pod: dict, sign: int) -> None:
        self.changed = True
        if self.sink is not None:
            self.sink.add(self.name)
        for target, nz in ((self.requested, False), (self.non_zero_requested, True)):
            for k, v in cached_pod_requests(self.memo, pod, nz).items():
                target[k] = target.get(k, 0) + sign * v

    def host_ports(self) -> set[tuple[str, str, int]]:
        used = set()
        for pod in self.pod_objs.values():
            used |= pod_host_ports(pod)
        return used


def pod_host_ports(pod: dict) -> set[tuple[str, str, int]]:
    """(hostIP, protocol, hostPort) of every container port with a hostPort."""
    out = set()
    for c in ((pod or _EMPTY).get("spec") or _EMPTY).get("containers") or ():
        for p in c.get("ports") or ():
            hp = p.get("hostPort")
            if hp:
                out.add((p.get("hostIP") or "0.0.0.0", p.get("protocol") or "TCP", int(hp)))
    return out


_VIEWS: "weakref.WeakKeyDictionary[Any, dict[str, K8sNodeInfo]]" = weakref.WeakKeyDictionary()
_INDEXES: "weakref.WeakKeyDictionary[Any, AffinityIndex]" = weakref.WeakKeyDictionary()


def node_map(ssn: Any) -> dict[str, K8sNodeInfo]:
    """The session's k8s node view, built from ``ssn.nodes`` on first use. A node clone the
    snapshot reused from the last session (ha/scheduler/snapshot_reuse.py) brings the view that
    session built from it: unchanged since (the clone was not changed, nor was the view), it is
    what building it again would give, and is taken into this session's memo and index."""
    view = _VIEWS.get(ssn)
    if view is None:
        memo: dict = {}
        index = AffinityIndex()
        verify = verifying(ssn)
        view = {}
        for name, ni in ssn.nodes.items():
            v = getattr(ni, "derived", None)
            if type(v) is K8sNodeInfo and not v.changed and v.node is ni.node and v.name == name:
                v.memo, v.sink, v.affinity_index = memo, None, index
                for uid, pod in v.affinity_pods.items():
                    for _ in range(v.pods.get(uid, 0)):
                        index.account(name, pod, +1)
                if verify:
                    check_same(f"the k8s view of node {name!r}", v, K8sNodeInfo.from_node_info(ni, {}, AffinityIndex()))
            else:
                v = K8sNodeInfo.from_node_info(ni, memo, index)
                if hasattr(ni, "derived"):
                    ni.derived = v
            view[name] = v
        _VIEWS[ssn] = view
        _INDEXES[ssn] = index
    return view


def affinity_index(ssn: Any) -> AffinityIndex:
    """The session view's index of nodes hosting pods with pod (anti-)affinity."""
    node_map(ssn)
    return _INDEXES[ssn]
