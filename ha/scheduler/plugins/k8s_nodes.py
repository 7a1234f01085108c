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
    # per-session pod-request memo shared by the view (cached_pod_requests) and a set the
    # allocate fast path watches: every change of this node's pods adds the node name to it
    memo: dict | None = field(default=None, repr=False, compare=False)
    sink: set | None = field(default=None, repr=False, compare=False)

    @classmethod
    def from_node_info(cls, node_info: Any, memo: dict | None = None) -> "K8sNodeInfo":
        node = node_info.node
        alloc = ((node or _EMPTY).get("status") or _EMPTY).get("allocatable") or _EMPTY
        ni = cls(name=node_info.name, node=node, allocatable={k: _q(k, v) for k, v in alloc.items()},
                 memo=memo)
        for t in node_info.tasks.values():
            ni.add_pod(t)
        return ni

    def pod_count(self) -> int:
        return sum(self.pods.values())

    def add_pod(self, task: Any) -> None:
        self.pods[task.uid] = self.pods.get(task.uid, 0) + 1
        self.pod_objs[task.uid] = task.pod
        self._account(task.pod, +1)

    def remove_pod(self, task: Any) -> bool:
        """Remove one copy; False (nothing changes) when the pod is not on this node."""
        n = self.pods.get(task.uid, 0)
        if n == 0:
            return False
        pod = self.pod_objs[task.uid]
        if n == 1:
            del self.pods[task.uid]
            del self.pod_objs[task.uid]
        else:
            self.pods[task.uid] = n - 1
        self._account(pod, -1)
        return True

    def _account(self, pod: dict, sign: int) -> None:
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


def node_map(ssn: Any) -> dict[str, K8sNodeInfo]:
    """The session's k8s node view, built from ``ssn.nodes`` on first use."""
    view = _VIEWS.get(ssn)
    if view is None:
        memo: dict = {}
        view = {name: K8sNodeInfo.from_node_info(ni, memo) for name, ni in ssn.nodes.items()}
        _VIEWS[ssn] = view
    return view
