"""What the checkers share (pure: no Redis, no Ray): the vocabulary of the observations -- a task's
status name and entry, digest differences, a pod's requests, a node's allocatable and usage, the
API server's truth and its pod events, a decision's session key -- and the reference comparison's
two readings, :class:`CacheDivergence` and :class:`ResourceDrift` (one pass over the history
feeds both: ``checkers/_fold.reference_pass``). Every other metric's rule lives in its checker
(``ha/experiment/checkers/<metric>.py``).

Observations:

* instance digests (``{"tasks": {uid: [status, node]}, "nodes": {name: {idle, used, releasing,
  pipelined}}}``) and the reference digest (an up-to-date cache under the same profile: the replay
  of the API server's own event stream);
* the API server's truth: pods, nodes and pod groups, and the pod events (nominations, binds,
  deletions) in order;
* the instances' decision records (op bind/evict/pipeline/status, with session, pod, node, ok,
  dry_run).

A rule's ``summary()`` is the value written under its metric's name in metrics.json, or None
when it could not be computed (then the metric is absent, with a reason; never a zero).

Definitions used (docs/design.md "Metrics", made precise here):

* session key: ``(instance, generation, session)`` — a decision's session number within one life
  of an instance (the runner's ``generation`` bumps when a killed instance is started again).
* nomination of a pod: a committed ``pipeline`` decision (not dry-run) or a ``status`` write with
  a nominatedNodeName, or a pod update on the API server carrying ``status.nominatedNodeName``.
* preemptor of an eviction on node N in session S: a pod pipelined or nominated onto N in S.
* the gang rule: a job's binds in one session are partial when (the job's pods already holding
  resources in the API server's truth, other than these) + (these binds) < minMember.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any, Iterable, Mapping

__all__ = [
    "status_name", "task_diff", "resource_drift_fraction", "cluster_capacity", "pod_requests",
    "overcommitted_nodes", "NodeUsage", "slot_of_name", "InstanceSeries", "CacheDivergence",
    "ResourceDrift", "PodEvent", "Truth", "diff_tasks", "task_entry", "node_allocatable", "holds_node",
    "terminating", "session_key", "committed",
    "GROUP_ANNOTATION", "pod_events_of", "object_key",
]

GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
SLOT_ANNOTATION = "ha-testbed/slot"
ATTEMPT_ANNOTATION = "ha-testbed/attempt"
_RETRY = re.compile(r"^(?P<base>.+)-r(?P<n>\d+)$")


_RESOURCE_FIELDS = ("idle", "pipelined", "releasing")


# ------------------------------------------------------------------------------------ helpers


def status_name(s: Any) -> str:
    name = str(getattr(s, "name", s) or "UNKNOWN").upper()
    return name.removeprefix("TASKSTATUS.")


def task_entry(x: Any) -> tuple[str, str]:
    if isinstance(x, (list, tuple)):
        return status_name(x[0]), (x[1] if len(x) > 1 else "") or ""
    return status_name(x), ""


def diff_tasks(a: Mapping[str, Any], b: Mapping[str, Any], b_before: Mapping[str, Any] | None = None) -> set[str]:
    """Uids of the tasks whose (status, node) differ between two digests' ``tasks``; a task that
    only one of them holds differs too. With ``b_before`` (the reference taken just before the
    instances' digests were requested, ``b`` just after), a task counts only if it differs from
    both: the truth moved during the sampling window, and an instance that holds either state was
    up to date at the moment it answered — that is sampling skew, not divergence."""
    out: set[str] = set()
    for uid, x in a.items():
        y = b.get(uid)
        if x == y:            # the common case, at C speed: the very same entry
            continue
        if y is not None and task_entry(x) == task_entry(y):
            continue          # the same state spelled differently
        if b_before is not None:
            z = b_before.get(uid)
            if z is not None and task_entry(x) == task_entry(z):
                continue      # the instance holds the state the truth had at the window's start
        out.add(uid)
    for uid in b.keys() - a.keys():
        if b_before is not None and uid not in b_before:
            continue          # created during the window: the instance could not have seen it yet
        out.add(uid)
    return out


def _differs(uid: str, x: Any, y: Any, b_before: Mapping[str, Any] | None) -> bool:
    """:func:`diff_tasks`' rule for one task (x: the instance's entry, y: the reference's)."""
    if x is None:
        return y is not None and not (b_before is not None and b_before.get(uid) is None)
    if x == y or (y is not None and task_entry(x) == task_entry(y)):
        return False
    if b_before is not None:
        z = b_before.get(uid)
        if z is not None and task_entry(x) == task_entry(z):
            return False
    return True


def task_diff(a: Mapping[str, Any], b: Mapping[str, Any], b_before: Mapping[str, Any] | None = None) -> int:
    """How many tasks :func:`diff_tasks` finds."""
    return len(diff_tasks(a, b, b_before))


_DECIDED = frozenset({"ALLOCATED", "PIPELINED", "BINDING"})


def _ahead(x: Any, y: Any) -> bool:
    """The instance holds its own scheduling decision (allocated / pipelined / binding on a node)
    that it has not seen confirmed yet: the task is pending in the API server, or only nominated to
    the same node while the instance is already binding it, or bound there while the instance's
    informer has not delivered that bind back to it (Binding until then, as in Volcano)."""
    if x is None or y is None:
        return False
    xs, xn = task_entry(x)
    ys, yn = task_entry(y)
    if xs not in _DECIDED or not xn:
        return False
    return (not yn or (yn == xn and ((ys == "PIPELINED" and xs != "PIPELINED")
                                     or (xs == "BINDING" and ys in ("BOUND", "RUNNING")))))


def _q(resource: str, v: Any) -> float:
    """A quantity in the digest's plain units (cpu in millicores, the rest in base units)."""
    from cluster_state.quantity import parse_quantity
    return float(parse_quantity(resource, v))


def cluster_capacity(nodes: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """Σ allocatable over API server Node objects, in the digest's plain units."""
    cap: dict[str, float] = {}
    for node in nodes:
        for k, v in node_allocatable(node).items():
            cap[k] = cap.get(k, 0.0) + v
    return cap


def _node_delta(a: Mapping, b: Mapping, dim: str) -> float:
    return sum(abs(float((a.get(f) or {}).get(dim, 0) or 0) - float((b.get(f) or {}).get(dim, 0) or 0))
               for f in _RESOURCE_FIELDS)


def resource_drift_fraction(inst_nodes: Mapping[str, Mapping], ref_nodes: Mapping[str, Mapping],
                            capacity: Mapping[str, float],
                            dims: tuple[str, ...] = ("cpu", "memory"),
                            ref_before: Mapping[str, Mapping] | None = None) -> float | None:
    """Σ over nodes and over Idle/Pipelined/Releasing of |instance − reference|, as a fraction of
    the cluster's capacity; per resource dimension, the largest of the dimensions is returned.
    A node only one side knows counts with the other side as zero. None without capacity. With
    ``ref_before`` (see :func:`task_diff`) a node counts the smaller of its two deltas."""
    # the nodes whose entries differ at all (sorted: a float sum's order must not depend on hashing)
    differing = [n for n in sorted(inst_nodes.keys() | ref_nodes.keys())
                 if (inst_nodes.get(n) or {}) != (ref_nodes.get(n) or {})]
    worst: float | None = None
    for dim in dims:
        cap = capacity.get(dim) or 0.0
        if cap <= 0:
            continue
        total = 0.0
        for name in differing:
            a = inst_nodes.get(name) or {}
            d = _node_delta(a, ref_nodes.get(name) or {}, dim)
            if d and ref_before is not None:
                d = min(d, _node_delta(a, ref_before.get(name) or {}, dim))
            total += d
        frac = total / cap
        worst = frac if worst is None else max(worst, frac)
    return None if worst is None else round(worst, 6)


def pod_requests(pod: Mapping[str, Any]) -> dict[str, float]:
    """A pod's effective requests (Σ containers, max with each init container), plain units, plus
    ``pods: 1``."""
    spec = pod.get("spec") or {}
    total: dict[str, float] = {}
    for c in spec.get("containers") or []:
        for k, v in (((c.get("resources") or {}).get("requests")) or {}).items():
            total[k] = total.get(k, 0.0) + _q(k, v)
    for c in spec.get("initContainers") or []:
        for k, v in (((c.get("resources") or {}).get("requests")) or {}).items():
            total[k] = max(total.get(k, 0.0), _q(k, v))
    total["pods"] = total.get("pods", 0.0) + 1.0
    return total


def node_allocatable(node: Mapping[str, Any]) -> dict[str, float]:
    alloc = ((node.get("status") or {}).get("allocatable")) or {}
    return {k: _q(k, v) for k, v in alloc.items()}


def holds_node(pod: Mapping[str, Any]) -> bool:
    """Bound and not terminated (a terminating pod still holds its node until it is gone)."""
    return bool((pod.get("spec") or {}).get("nodeName")) and \
        (pod.get("status") or {}).get("phase", "") not in ("Succeeded", "Failed")


def terminating(pod: Mapping[str, Any]) -> bool:
    return (pod.get("metadata") or {}).get("deletionTimestamp") is not None


def overcommitted_nodes(pods: Iterable[Mapping[str, Any]], nodes: Mapping[str, Mapping[str, Any]],
                        requests=pod_requests, allocatable=None) -> dict[str, list[str]]:
    """{node: [resources over allocatable]} for nodes whose bound, non-terminated pods request
    more than the node's allocatable (API server truth). ``requests`` / ``allocatable``: the
    functions that read a pod's requests and a node's allocatable (a caller may memoize them)."""
    allocatable = allocatable or node_allocatable
    used: dict[str, dict[str, float]] = {}
    for p in pods:
        if not holds_node(p):
            continue
        n = p["spec"]["nodeName"]
        u = used.setdefault(n, {})
        for k, v in requests(p).items():
            u[k] = u.get(k, 0.0) + v
    out: dict[str, list[str]] = {}
    for n in sorted(used):
        node = nodes.get(n)
        if node is None:
            continue
        over = _over(used[n], allocatable(node))
        if over:
            out[n] = over
    return out


def _over(used: Mapping[str, float], alloc: Mapping[str, float]) -> list[str]:
    return [k for k, v in sorted(used.items()) if k in alloc and v > alloc[k] + 1e-9]


class NodeUsage:
    """:func:`overcommitted_nodes` kept up to date from pod changes: Σ requests of the pods holding
    each node, re-judging only the nodes a change touched (any Node change re-judges all)."""

    def __init__(self, requests=pod_requests, allocatable=None) -> None:
        self.requests, self.allocatable = requests, allocatable or node_allocatable
        self.used: dict[str, dict[str, float]] = {}
        self.over: dict[str, list[str]] = {}
        self._touched: set[str] = set()

    def pod_changed(self, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> None:
        for p, sign in ((old, -1.0), (new, 1.0)):
            if p is not None and holds_node(p):
                n = p["spec"]["nodeName"]
                u = self.used.setdefault(n, {})
                for k, v in self.requests(p).items():
                    u[k] = u.get(k, 0.0) + sign * v
                self._touched.add(n)

    def nodes_changed(self) -> None:
        self._touched.update(self.used)

    def current(self, nodes: Mapping[str, Mapping[str, Any]]) -> dict[str, list[str]]:
        for n in self._touched:
            node = nodes.get(n)
            over = _over(self.used.get(n) or {}, self.allocatable(node)) if node is not None else []
            if over:
                self.over[n] = over
            else:
                self.over.pop(n, None)
        self._touched = set()
        return dict(sorted(self.over.items()))


def slot_of_name(name: str, annotations: Mapping[str, str] | None = None) -> tuple[str, int]:
    """(slot base, attempt) of a pod: the job controller names re-created pods ``<base>-r<n>``."""
    ann = annotations or {}
    m = _RETRY.match(name)
    base = ann.get(SLOT_ANNOTATION) or (m.group("base") if m else name)
    try:
        n = int(ann[ATTEMPT_ANNOTATION]) if ATTEMPT_ANNOTATION in ann else (int(m.group("n")) if m else 0)
    except ValueError:
        n = 0
    return base, n


def _stats(vs: list[float]) -> dict[str, Any]:
    return {"max": max(vs), "mean": round(sum(vs) / len(vs), 3), "final": vs[-1], "samples": len(vs)}


# ---------------------------------------------------------------------------- per-tick series


class InstanceSeries:
    """A per-instance numeric series; summary: overall max/mean, each instance's max/mean/final."""

    def __init__(self) -> None:
        self.values: dict[str, list[float]] = {}

    def add(self, instance: str, v: float | None) -> None:
        if v is not None:
            self.values.setdefault(instance, []).append(v)

    def summary(self) -> dict[str, Any] | None:
        if not self.values:
            return None
        allv = [v for vs in self.values.values() for v in vs]
        return {"max": max(allv), "mean": round(sum(allv) / len(allv), 6),
                "final_max": max(vs[-1] for vs in self.values.values()),
                "instances": {k: _stats(vs) for k, vs in sorted(self.values.items())}}


class CacheDivergence(InstanceSeries):
    """cache_divergence: per instance, tasks whose (status, node) differ from the reference.

    A scheduling instance is briefly *ahead* of the API server: its session decided (allocated,
    pipelined, binding) and the write is in flight. Such a task counts from the second
    consecutive tick it is seen ahead — a decision whose write never lands (or, under a profile that
    does not persist it, stays invisible to everyone else) keeps counting; one still in flight does
    not. Behind-the-truth differences (a delayed or lost watch event) count at once."""

    def __init__(self) -> None:
        super().__init__()
        self._ahead: dict[str, set[str]] = {}
        self.last_counted: dict[str, set[str]] = {}   # the uids behind the last value (divergence.jsonl)
        self.last_persistent: dict[str, int] = {}
        self._held: dict[str, dict[str, tuple | None]] = {}
        self._diff: dict[str, set[str]] = {}

    def observe(self, instance: str, tasks: Mapping[str, Any], reference_tasks: Mapping[str, Any],
                reference_before: Mapping[str, Any] | None = None, changed: Iterable[str] | None = None) -> int:
        """``changed`` (optional): the uids whose instance, reference or reference-before entry may
        have changed since this instance's previous observation (None: not known) — then only
        those are re-judged, with the same result as a full :func:`diff_tasks`."""
        prev_diff = self._diff.get(instance)
        if changed is not None and prev_diff is not None:
            diff = set(prev_diff)
            for uid in changed:
                if _differs(uid, tasks.get(uid), reference_tasks.get(uid), reference_before):
                    diff.add(uid)
                else:
                    diff.discard(uid)
        else:
            diff = diff_tasks(tasks, reference_tasks, reference_before)
        self._diff[instance] = diff
        ahead = {u for u in diff if _ahead(tasks.get(u), reference_tasks.get(u))}
        prev = self._ahead.get(instance, set())
        self._ahead[instance] = ahead
        self.last_counted[instance] = counted = diff - (ahead - prev)
        # persistent: the instance held the same wrong state at the previous tick too, i.e. for a
        # whole measurement period — not an event in flight when the sample was taken
        held = {u: task_entry(tasks[u]) if u in tasks else None for u in counted}
        before = self._held.get(instance, {})
        self._held[instance] = held
        self.last_persistent[instance] = sum(1 for u, e in held.items() if u in before and before[u] == e)
        v = len(counted)
        self.add(instance, v)
        return v


class ResourceDrift(InstanceSeries):
    """resource_drift: per instance, Σ|Δ| of Idle/Pipelined/Releasing vs the reference, as a
    fraction of cluster capacity (the worse of cpu and memory)."""

    def observe(self, instance: str, nodes: Mapping[str, Mapping], reference_nodes: Mapping[str, Mapping],
                capacity: Mapping[str, float], reference_before: Mapping[str, Mapping] | None = None) -> float | None:
        v = resource_drift_fraction(nodes, reference_nodes, capacity, ref_before=reference_before)
        self.add(instance, v)
        return v


# ------------------------------------------------------------------- event- and decision-driven


@dataclass
class PodEvent:
    """What the reference informer saw happen to a pod, in API server order."""
    t: float
    type: str                  # nominated | bound | deleted
    pod: str                   # "ns/name"
    uid: str | None = None
    node: str | None = None    # nominated or bound node


def object_key(obj: Mapping[str, Any]) -> str:
    """``namespace/name`` of a namespaced object, ``name`` of a cluster-scoped one."""
    md = obj.get("metadata") or {}
    ns = md.get("namespace")
    return f"{ns}/{md.get('name')}" if ns else str(md.get("name"))


def pod_events_of(old: Mapping[str, Any] | None, new: Mapping[str, Any], t: float) -> list[PodEvent]:
    """The PodEvents one pod update makes: ``nominated`` (a new status.nominatedNodeName on an
    unbound pod) and ``bound`` (spec.nodeName set)."""
    out: list[PodEvent] = []
    key, uid = object_key(new), (new.get("metadata") or {}).get("uid")
    o_nnn = ((old or {}).get("status") or {}).get("nominatedNodeName") or ""
    n_nnn = (new.get("status") or {}).get("nominatedNodeName") or ""
    o_node = ((old or {}).get("spec") or {}).get("nodeName") or ""
    n_node = (new.get("spec") or {}).get("nodeName") or ""
    if n_nnn and n_nnn != o_nnn and not n_node:
        out.append(PodEvent(t, "nominated", key, uid, n_nnn))
    if n_node and not o_node:
        out.append(PodEvent(t, "bound", key, uid, n_node))
    return out


@dataclass
class Truth:
    """The API server's state as the reference informers hold it, at one tick."""
    pods: dict[str, dict] = field(default_factory=dict)        # "ns/name" -> Pod
    nodes: dict[str, dict] = field(default_factory=dict)       # name -> Node
    pod_groups: dict[str, dict] = field(default_factory=dict)  # "ns/name" -> PodGroup

    def job_of(self, pod_key: str) -> str | None:
        p = self.pods.get(pod_key)
        if p is None:
            return None
        md = p.get("metadata") or {}
        g = (md.get("annotations") or {}).get(GROUP_ANNOTATION) or (md.get("labels") or {}).get(GROUP_ANNOTATION)
        return f"{md.get('namespace', '')}/{g}" if g else None

    def min_member(self, job: str) -> int | None:
        pg = self.pod_groups.get(job)
        if pg is None:
            return None
        return int((pg.get("spec") or {}).get("minMember") or 0)

    def occupying(self, job: str) -> set[str]:
        """Pods of the job bound to a node (Bound/Running/Succeeded: Volcano's ready count)."""
        out = set()
        for k, p in self.pods.items():
            if self.job_of(k) == job and (p.get("spec") or {}).get("nodeName") \
                    and (p.get("status") or {}).get("phase", "") != "Failed":
                out.add(k)
        return out


def session_key(d: Mapping[str, Any], generation: int = 0) -> tuple:
    return (d.get("instance"), d.get("generation", generation), d.get("session"))


def committed(d: Mapping[str, Any]) -> bool:
    return bool(d.get("ok")) and not d.get("dry_run")


# ----------------------------------------------------------------------------------- convergence


