"""Oracles: each DESIGN.md metric's rule as a small class over observations (pure: no Redis, no
Ray). The checkers (:mod:`ha.experiment.checkers`, one module per metric) feed them from the
recorded history; this module holds the rules, the checkers decide what to feed them.

Observations:

* instance digests (``{"tasks": {uid: [status, node]}, "nodes": {name: {idle, used, releasing,
  pipelined}}}``) and the reference digest (an up-to-date cache under the same profile: the replay
  of the API server's own event stream);
* the API server's truth: pods, nodes and pod groups, and the pod events (nominations, binds,
  deletions) in order;
* the instances' decision records (op bind/evict/pipeline/status, with session, pod, node, ok,
  dry_run).

Each oracle's ``summary()`` is the value written under its DESIGN.md name in metrics.json, or None
when it could not be computed (then the metric is absent, with a reason; never a zero).
:class:`Oracles` drives them all from a live run's samples (the runner's in-process path until it
records a history; then it goes).

Definitions used (DESIGN.md "Metrics", made precise here):

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
    "overcommitted_nodes", "NodeUsage", "slot_of_name", "InstanceSeries", "CacheDivergence", "PairwiseDrift",
    "ResourceDrift", "OvercommitViolations", "AllocationDrift", "WastedEvictions",
    "CyclicEvictions", "PartialGangBinds", "PodEvent", "Truth", "headline", "HEADLINE_KEYS",
    "GROUP_ANNOTATION", "Oracles", "ORACLE_COLUMNS", "pod_events_of", "object_key",
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


def _entry(x: Any) -> tuple[str, str]:
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
        if y is not None and _entry(x) == _entry(y):
            continue          # the same state spelled differently
        if b_before is not None:
            z = b_before.get(uid)
            if z is not None and _entry(x) == _entry(z):
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
    if x == y or (y is not None and _entry(x) == _entry(y)):
        return False
    if b_before is not None:
        z = b_before.get(uid)
        if z is not None and _entry(x) == _entry(z):
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
    xs, xn = _entry(x)
    ys, yn = _entry(y)
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
        for k, v in _allocatable(node).items():
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


def _allocatable(node: Mapping[str, Any]) -> dict[str, float]:
    alloc = ((node.get("status") or {}).get("allocatable")) or {}
    return {k: _q(k, v) for k, v in alloc.items()}


def _holds_node(pod: Mapping[str, Any]) -> bool:
    """Bound and not terminated (a terminating pod still holds its node until it is gone)."""
    return bool((pod.get("spec") or {}).get("nodeName")) and \
        (pod.get("status") or {}).get("phase", "") not in ("Succeeded", "Failed")


def _terminating(pod: Mapping[str, Any]) -> bool:
    return (pod.get("metadata") or {}).get("deletionTimestamp") is not None


def overcommitted_nodes(pods: Iterable[Mapping[str, Any]], nodes: Mapping[str, Mapping[str, Any]],
                        requests=pod_requests, allocatable=None) -> dict[str, list[str]]:
    """{node: [resources over allocatable]} for nodes whose bound, non-terminated pods request
    more than the node's allocatable (API server truth). ``requests`` / ``allocatable``: the
    functions that read a pod's requests and a node's allocatable (a caller may memoize them)."""
    allocatable = allocatable or _allocatable
    used: dict[str, dict[str, float]] = {}
    for p in pods:
        if not _holds_node(p):
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
        self.requests, self.allocatable = requests, allocatable or _allocatable
        self.used: dict[str, dict[str, float]] = {}
        self.over: dict[str, list[str]] = {}
        self._touched: set[str] = set()

    def pod_changed(self, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> None:
        for p, sign in ((old, -1.0), (new, 1.0)):
            if p is not None and _holds_node(p):
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
        held = {u: _entry(tasks[u]) if u in tasks else None for u in counted}
        before = self._held.get(instance, {})
        self._held[instance] = held
        self.last_persistent[instance] = sum(1 for u, e in held.items() if u in before and before[u] == e)
        v = len(counted)
        self.add(instance, v)
        return v


class PairwiseDrift:
    """pairwise_drift: per pair of instances, tasks whose (status, node) differ."""

    def __init__(self) -> None:
        self.pairs: dict[str, list[int]] = {}
        self._calls = 0
        self._diff: dict[tuple[str, str], tuple[int, set[str]]] = {}

    def observe(self, digests: Mapping[str, Mapping[str, Any]],
                changed: Mapping[str, Any] | None = None) -> dict[tuple[str, str], int]:
        """Drift of every pair (names sorted). ``changed`` (optional): per instance, the uids whose
        entry changed since its digest in the previous call (None: not known) — a pair observed
        in the previous call is then updated from those uids alone, with the same result."""
        out = {}
        for a, b in combinations(sorted(digests), 2):
            prev = self._diff.get((a, b))
            ca = changed.get(a) if changed is not None else None
            cb = changed.get(b) if changed is not None else None
            if prev is not None and prev[0] == self._calls - 1 and ca is not None and cb is not None:
                d = set(prev[1])
                ta, tb = digests[a], digests[b]
                for uid in ca | cb:
                    x, y = ta.get(uid), tb.get(uid)
                    if (x is None and y is None) or (x is not None and y is not None
                                                     and (x == y or _entry(x) == _entry(y))):
                        d.discard(uid)
                    else:
                        d.add(uid)
            else:
                d = diff_tasks(digests[a], digests[b])
            self._diff[(a, b)] = (self._calls, d)
            out[(a, b)] = len(d)
            self.pairs.setdefault(f"{a}|{b}", []).append(len(d))
        self._calls += 1
        return out

    def summary(self) -> dict[str, Any] | None:
        if not self.pairs:
            return None
        allv = [v for vs in self.pairs.values() for v in vs]
        return {"max": max(allv), "mean": round(sum(allv) / len(allv), 3),
                "pairs": {k: {"max": max(vs), "mean": round(sum(vs) / len(vs), 3), "samples": len(vs)}
                          for k, vs in sorted(self.pairs.items())}}


class ResourceDrift(InstanceSeries):
    """resource_drift: per instance, Σ|Δ| of Idle/Pipelined/Releasing vs the reference, as a
    fraction of cluster capacity (the worse of cpu and memory)."""

    def observe(self, instance: str, nodes: Mapping[str, Mapping], reference_nodes: Mapping[str, Mapping],
                capacity: Mapping[str, float], reference_before: Mapping[str, Mapping] | None = None) -> float | None:
        v = resource_drift_fraction(nodes, reference_nodes, capacity, ref_before=reference_before)
        self.add(instance, v)
        return v


class OvercommitViolations:
    """overcommit_violations: node-ticks where bound, non-terminated pods' requests exceed the
    node's allocatable in the API server's truth.

    A terminating pod (deletionTimestamp set, not yet gone) still holds its node — the kubelet
    admits against it and the kube-scheduler counts it — so it counts here; ``terminating_only``
    counts the node-ticks that would *not* be over without the terminating pods (a pod bound onto
    resources still being released). ``episodes``: a node going from not over to over;
    ``examples``: the first few episodes with the tick time, the node's pods (phase, terminating,
    requests of the over resources) and who bound each (``[instance, generation, session]`` from
    the bind decisions; None when no decision was seen, e.g. an initial pod)."""

    MAX_EXAMPLES = 5

    def __init__(self) -> None:
        self.count = 0
        self.ticks = 0
        self.nodes: dict[str, int] = {}
        self.resources: dict[str, int] = {}
        self.terminating_only = 0
        self.episodes = 0
        self.examples: list[dict[str, Any]] = []
        self._over_before: set[str] = set()
        self._bound_by: dict[str, list[Any]] = {}
        self._requests: dict[Any, dict[str, float]] = {}
        self._alloc: dict[Any, dict[str, float]] = {}

    def _req(self, p: Mapping[str, Any]) -> dict[str, float]:
        """pod_requests, memoized per pod and resourceVersion (a pod's spec does not change)."""
        md = p.get("metadata") or {}
        k = (md.get("uid") or md.get("name"), md.get("resourceVersion"))
        if k[1] is None:
            return pod_requests(p)
        r = self._requests.get(k)
        if r is None:
            if len(self._requests) > 200_000:
                self._requests.clear()
            r = self._requests[k] = pod_requests(p)
        return r

    def _allocatable(self, node: Mapping[str, Any]) -> dict[str, float]:
        md = node.get("metadata") or {}
        k = (md.get("name"), md.get("resourceVersion"))
        if k[1] is None:
            return _allocatable(node)
        a = self._alloc.get(k)
        if a is None:
            a = self._alloc[k] = _allocatable(node)
        return a

    def observe_decisions(self, decisions: Iterable[Mapping[str, Any]]) -> None:
        for d in decisions:
            if d.get("op") == "bind" and d.get("ok") and not d.get("dry_run") and d.get("pod"):
                self._bound_by[str(d["pod"])] = [d.get("instance"), d.get("generation", 0), d.get("session")]

    def observe(self, pods: Iterable[Mapping[str, Any]], nodes: Mapping[str, Mapping[str, Any]],
                t: float | None = None, over: Mapping[str, list[str]] | None = None) -> int:
        """One tick of the truth; ``over`` (optional): :func:`overcommitted_nodes` of it, already
        known (a :class:`NodeUsage` kept up to date)."""
        pods = list(pods)
        if over is None:
            over = overcommitted_nodes(pods, nodes, self._req, self._allocatable)
        self.ticks += 1
        self.count += len(over)
        for n, rs in over.items():
            self.nodes[n] = self.nodes.get(n, 0) + 1
            for r in rs:
                self.resources[r] = self.resources.get(r, 0) + 1
        if over:
            live = overcommitted_nodes([p for p in pods if not _terminating(p)], nodes, self._req,
                                       self._allocatable)
            self.terminating_only += sum(1 for n in over if n not in live)
            for n in over:
                if n in self._over_before:
                    continue
                self.episodes += 1
                if len(self.examples) < self.MAX_EXAMPLES:
                    self.examples.append(self._example(t, n, over[n], pods, nodes))
        self._over_before = set(over)
        return len(over)

    def _example(self, t: float | None, n: str, resources: list[str], pods: list[Mapping[str, Any]],
                 nodes: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
        alloc = _allocatable(nodes[n])
        on = []
        for p in pods:
            if not _holds_node(p) or p["spec"]["nodeName"] != n:
                continue
            md = p.get("metadata") or {}
            key = f"{md.get('namespace', '')}/{md.get('name', '')}"
            req = pod_requests(p)
            on.append({"pod": key, "phase": (p.get("status") or {}).get("phase", ""),
                       "terminating": _terminating(p), "requests": {r: req.get(r, 0.0) for r in resources},
                       "bound_by": self._bound_by.get(key)})
        on.sort(key=lambda x: x["pod"])
        return {"t": None if t is None else round(float(t), 3), "node": n,
                "requested": {r: sum(x["requests"][r] for x in on) for r in resources},
                "allocatable": {r: alloc.get(r) for r in resources}, "pods": on}

    def summary(self) -> dict[str, Any] | None:
        if self.ticks == 0:
            return None
        return {"count": self.count, "ticks": self.ticks, "nodes": dict(sorted(self.nodes.items())),
                "resources": self.resources, "terminating_only": self.terminating_only,
                "episodes": self.episodes, "examples": list(self.examples)}


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


def _session_key(d: Mapping[str, Any], generation: int = 0) -> tuple:
    return (d.get("instance"), d.get("generation", generation), d.get("session"))


def _committed(d: Mapping[str, Any]) -> bool:
    return bool(d.get("ok")) and not d.get("dry_run")


class AllocationDrift:
    """allocation_drift (seed 000): pods bound to a node other than the one they were last
    nominated/pipelined to. ``count``; ``rate`` = count / nominated pods that got bound."""

    def __init__(self) -> None:
        self.nominated: dict[str, str] = {}       # pod -> last nominated node (until bound)
        self.ever_nominated: set[str] = set()
        self.renominations = 0
        self.bound: dict[str, str] = {}
        self.count = 0
        self.nominated_bound = 0
        self.events: list[dict[str, Any]] = []    # the drifts, for the report

    def nominate(self, pod: str, node: str | None, t: float = 0.0) -> None:
        if not node or pod in self.bound:
            return
        prev = self.nominated.get(pod)
        if prev is not None and prev != node:
            self.renominations += 1
        self.nominated[pod] = node
        self.ever_nominated.add(pod)

    def bind(self, pod: str, node: str, t: float = 0.0) -> None:
        if pod in self.bound:
            return
        self.bound[pod] = node
        nom = self.nominated.pop(pod, None)
        if nom is None:
            return
        self.nominated_bound += 1
        if nom != node:
            self.count += 1
            self.events.append({"t": t, "pod": pod, "nominated": nom, "bound": node})

    def observe_decisions(self, decisions: Iterable[Mapping[str, Any]]) -> None:
        for d in decisions:
            if _committed(d) and d.get("op") in ("pipeline", "status") and d.get("node"):
                self.nominate(d["pod"], d["node"], d.get("t", 0.0))

    def observe_events(self, events: Iterable[PodEvent]) -> None:
        for e in events:
            if e.type == "nominated":
                self.nominate(e.pod, e.node, e.t)
            elif e.type == "bound":
                self.bind(e.pod, e.node, e.t)

    def summary(self) -> dict[str, Any]:
        return {"count": self.count, "nominated_pods": len(self.ever_nominated),
                "nominated_then_bound": self.nominated_bound,
                "rate": round(self.count / self.nominated_bound, 4) if self.nominated_bound else None,
                "renominations": self.renominations, "examples": self.events[:20]}


@dataclass
class _EvictionGroup:
    session: tuple
    node: str
    t: float
    victims: list[str]
    preemptors: set[str]


class WastedEvictions:
    """wasted_evictions: evictions whose preemptor did not end on the freed node. The preemptor of
    an eviction on node N in session S is a pod pipelined/nominated onto N in the same session S by
    the same instance. Per eviction group (S, N):

    * a preemptor bound on N → not wasted;
    * every preemptor bound elsewhere or deleted unbound → wasted;
    * otherwise, at the end of the run: a preemptor still unbound while another pod was bound on N
      after the eviction → wasted (the freed node went to a competitor, BR1); else unresolved.

    ``count`` counts victims (evicted pods) of wasted groups."""

    def __init__(self) -> None:
        self._evictions: dict[tuple, dict[str, list]] = {}   # session -> node -> [(victim, t)]
        self._nominations: dict[tuple, dict[str, set[str]]] = {}  # session -> node -> pods
        self.bound: dict[str, tuple[str, float]] = {}
        self.deleted: set[str] = set()
        self.node_binds: dict[str, list[tuple[float, str]]] = {}
        self.evicted_pods: set[str] = set()

    def observe_decisions(self, decisions: Iterable[Mapping[str, Any]], generation: int = 0) -> None:
        for d in decisions:
            if not _committed(d):
                continue
            key = _session_key(d, generation)
            op = d.get("op")
            if op == "evict" and d.get("node"):
                if d["pod"] in self.evicted_pods:
                    continue   # a second instance evicting the same pod: one eviction
                self.evicted_pods.add(d["pod"])
                self._evictions.setdefault(key, {}).setdefault(d["node"], []).append((d["pod"], d.get("t", 0.0)))
            elif op in ("pipeline", "status") and d.get("node"):
                self._nominations.setdefault(key, {}).setdefault(d["node"], set()).add(d["pod"])

    def observe_events(self, events: Iterable[PodEvent]) -> None:
        for e in events:
            if e.type == "bound" and e.pod not in self.bound:
                self.bound[e.pod] = (e.node, e.t)
                self.node_binds.setdefault(e.node, []).append((e.t, e.pod))
            elif e.type == "deleted":
                self.deleted.add(e.pod)

    def groups(self) -> list[_EvictionGroup]:
        out = []
        for s, by_node in self._evictions.items():
            for node, vs in by_node.items():
                pre = set(self._nominations.get(s, {}).get(node, set()))
                out.append(_EvictionGroup(s, node, min(t for _, t in vs), [v for v, _ in vs], pre))
        return out

    def classify(self, g: _EvictionGroup, final: bool) -> str:
        if not g.preemptors:
            return "no_preemptor"
        places = [self.bound.get(p) for p in g.preemptors]
        if any(pl is not None and pl[0] == g.node for pl in places):
            return "used"
        unresolved = [p for p, pl in zip(g.preemptors, places) if pl is None and p not in self.deleted]
        if not unresolved:
            return "wasted"
        if final:
            taken = [p for t, p in self.node_binds.get(g.node, []) if t >= g.t and p not in g.preemptors]
            if taken:
                return "wasted"
        return "unresolved"

    def summary(self, final: bool = True) -> dict[str, Any]:
        counts = {"used": 0, "wasted": 0, "unresolved": 0, "no_preemptor": 0}
        examples = []
        for g in self.groups():
            c = self.classify(g, final)
            counts[c] += len(g.victims)
            if c == "wasted" and len(examples) < 20:
                examples.append({"node": g.node, "victims": g.victims, "preemptors": sorted(g.preemptors),
                                 "preemptors_bound": {p: (self.bound.get(p) or (None,))[0]
                                                      for p in sorted(g.preemptors)}})
        total = sum(counts.values())
        return {"count": counts["wasted"], "evictions": total, "with_preemptor": total - counts["no_preemptor"],
                "used": counts["used"], "unresolved": counts["unresolved"],
                "no_preemptor": counts["no_preemptor"], "examples": examples}


class CyclicEvictions:
    """cyclic_evictions: evictions of a pod that is a re-creation (``<base>-r<n>``) of a pod evicted
    before in the run (one slot evicted, re-created, evicted again). ``count`` = such evictions;
    ``slots`` and ``jobs`` = how many distinct slots / jobs cycled."""

    def __init__(self) -> None:
        self.evicted: dict[str, list[int]] = {}    # slot -> attempts evicted, in order
        self.seen_pods: set[str] = set()
        self.count = 0
        self.cycling_slots: set[str] = set()
        self.cycling_jobs: set[str] = set()

    def evict(self, pod: str, job: str | None = None, annotations: Mapping[str, str] | None = None) -> bool:
        if pod in self.seen_pods:
            return False
        self.seen_pods.add(pod)
        ns, _, name = pod.rpartition("/")
        base, attempt = slot_of_name(name, annotations)
        slot = f"{ns}/{base}"
        prev = self.evicted.setdefault(slot, [])
        cyclic = any(a < attempt for a in prev)
        prev.append(attempt)
        if cyclic:
            self.count += 1
            self.cycling_slots.add(slot)
            if job:
                self.cycling_jobs.add(job)
        return cyclic

    def observe_decisions(self, decisions: Iterable[Mapping[str, Any]], truth: Truth | None = None) -> None:
        for d in decisions:
            if _committed(d) and d.get("op") == "evict":
                job, ann = None, None
                if truth is not None:
                    job = truth.job_of(d["pod"])
                    p = truth.pods.get(d["pod"])
                    ann = ((p or {}).get("metadata") or {}).get("annotations")
                self.evict(d["pod"], job, ann)

    def summary(self) -> dict[str, Any]:
        return {"count": self.count, "slots": len(self.cycling_slots), "jobs": len(self.cycling_jobs),
                "evicted_pods": len(self.seen_pods),
                "max_attempt_evicted": max((max(v) for v in self.evicted.values()), default=None)}


class PartialGangBinds:
    """partial_gang_binds: binds committed for a job in one session while fewer than minMember of
    its tasks were placed: (pods of the job already bound in the truth, other than these) + (these
    binds) < minMember. Counted per (session, job) group; ``binds`` counts the pods bound so.
    A group whose job is not yet known to the truth waits (up to ``patience`` ticks)."""

    def __init__(self, patience: int = 20) -> None:
        self.patience = patience
        self._pending: list[tuple[tuple, list[str], int]] = []
        self._bound_by_decision: dict[str, set[str]] = {}
        self.groups = 0
        self.count = 0
        self.binds = 0
        self.unknown_job = 0
        self.examples: list[dict[str, Any]] = []

    def observe(self, decisions: Iterable[Mapping[str, Any]], truth: Truth, generation: int = 0) -> int:
        by: dict[tuple, list[str]] = {}
        for d in decisions:
            if _committed(d) and d.get("op") == "bind":
                by.setdefault(_session_key(d, generation), []).append(d["pod"])
        work = self._pending + [(k, pods, 0) for k, pods in by.items()]
        self._pending = []
        new = 0
        for key, pods, age in work:
            jobs: dict[str, list[str]] = {}
            missing = []
            for p in pods:
                j = truth.job_of(p)
                if j is None or truth.min_member(j) is None:
                    missing.append(p)
                else:
                    jobs.setdefault(j, []).append(p)
            if missing:
                if age < self.patience:
                    self._pending.append((key, missing, age + 1))
                else:
                    self.unknown_job += len(missing)
            for j, ps in jobs.items():
                self.groups += 1
                mine = set(ps)
                alive_prev = {q for q in self._bound_by_decision.get(j, set()) if q in truth.pods}
                prior = (truth.occupying(j) | alive_prev) - mine
                mm = truth.min_member(j) or 0
                self._bound_by_decision.setdefault(j, set()).update(mine)
                if len(prior) + len(mine) < mm:
                    self.count += 1
                    self.binds += len(mine)
                    new += 1
                    if len(self.examples) < 20:
                        self.examples.append({"session": list(key), "job": j, "bound": sorted(mine),
                                              "already_placed": len(prior), "min_member": mm})
        return new

    def summary(self) -> dict[str, Any]:
        return {"count": self.count, "binds": self.binds, "groups": self.groups,
                "unknown_job": self.unknown_job, "examples": self.examples}


# ------------------------------------------------------------------------------------ headline

# the scalar a table shows for each metric (compare, report)
HEADLINE_KEYS = {"cache_divergence": "max", "pairwise_drift": "max", "resource_drift": "max",
                 "staleness_ms": "p99", "allocation_drift": "count", "wasted_evictions": "count",
                 "cyclic_evictions": "count", "overcommit_violations": "count",
                 "partial_gang_binds": "count", "api_consistency": "ok", "convergence": "value"}


def headline(metric: str, value: Any) -> Any:
    """The one number a table shows for a metric's summary value (None if absent)."""
    if isinstance(value, Mapping):
        k = HEADLINE_KEYS.get(metric)
        if k is not None and k not in value:
            # per-instance shape ({instance: {p50, p99, ...}}): the worst instance
            vs = [x.get(k) for x in value.values() if isinstance(x, Mapping) and x.get(k) is not None]
            return max(vs) if vs else None
        if k is None:
            for k in ("max", "count", "p99", "value"):
                if k in value:
                    break
        v = value.get(k)
        return None if isinstance(v, float) and not math.isfinite(v) else v
    return value


# ----------------------------------------------------------------------------------- the set


ORACLE_COLUMNS = ["cache_divergence", "resource_drift", "overcommit_nodes",
                  "allocation_drift", "wasted_evictions", "cyclic_evictions", "partial_gang_binds",
                  "cache_divergence_persistent"]


class Oracles:
    """Every metric the reference makes computable, fed once per measurement tick. Pure: the
    runner passes in what it sampled (instance digests/stats/decisions, the reference's digest,
    truth and pod events)."""

    def __init__(self) -> None:
        self.divergence = CacheDivergence()
        self.resource = ResourceDrift()
        self.overcommit = OvercommitViolations()
        self.allocation = AllocationDrift()
        self.wasted = WastedEvictions()
        self.cyclic = CyclicEvictions()
        self.gangs = PartialGangBinds()
        self.ticks = 0
        self.last_divergence: dict[str, int] = {}
        self.divergence_t: list[tuple[float, int]] = []   # (t, max over instances) per tick

    def tick(self, t: float, digests: Mapping[str, Mapping[str, Any]], stats: Mapping[str, Mapping],
             reference: Mapping[str, Any], truth: Truth, events: list[PodEvent],
             decisions: list[Mapping[str, Any]],
             reference_before: Mapping[str, Any] | None = None) -> dict[str, dict[str, Any]]:
        """Feed one tick; returns extra timeseries columns per instance (ORACLE_COLUMNS).
        ``reference`` is taken after the instances answered, ``reference_before`` (optional) before
        they were asked: divergence is judged against the truth anywhere in that window."""
        self.ticks += 1
        # decisions first (a nomination precedes the bind the events report), then the truth
        self.allocation.observe_decisions(decisions)
        self.allocation.observe_events(events)
        self.wasted.observe_decisions(decisions)
        self.wasted.observe_events(events)
        self.cyclic.observe_decisions(decisions, truth)
        self.gangs.observe(decisions, truth)
        self.overcommit.observe_decisions(decisions)
        over = self.overcommit.observe(truth.pods.values(), truth.nodes, t)
        capacity = cluster_capacity(truth.nodes.values())
        ref_tasks, ref_nodes = reference.get("tasks") or {}, reference.get("nodes") or {}
        before_tasks = before_nodes = None
        if reference_before is not None:
            before_tasks, before_nodes = reference_before.get("tasks") or {}, reference_before.get("nodes") or {}
        rows: dict[str, dict[str, Any]] = {}
        worst = None
        for name, d in digests.items():
            row: dict[str, Any] = {}
            if d.get("synced", True):
                row["cache_divergence"] = self.divergence.observe(name, d.get("tasks") or {}, ref_tasks,
                                                                  before_tasks)
                row["resource_drift"] = self.resource.observe(name, d.get("nodes") or {}, ref_nodes, capacity,
                                                              before_nodes)
                row["cache_divergence_persistent"] = self.divergence.last_persistent.get(name, 0)
                self.last_divergence[name] = row["cache_divergence"]
                worst = row["cache_divergence"] if worst is None else max(worst, row["cache_divergence"])
            row.update({"overcommit_nodes": over, "allocation_drift": self.allocation.count,
                        "wasted_evictions": self.wasted.summary(final=False)["count"],
                        "cyclic_evictions": self.cyclic.count, "partial_gang_binds": self.gangs.count})
            rows[name] = row
        if worst is not None:
            self.divergence_t.append((t, worst))
        return rows

    def summary(self) -> tuple[dict[str, Any], dict[str, str]]:
        """(metrics, absent) — ``absent[name]`` says why a metric could not be computed."""
        out: dict[str, Any] = {}
        absent: dict[str, str] = {}
        if self.ticks == 0:
            for n in ("cache_divergence", "resource_drift", "allocation_drift",
                      "wasted_evictions", "cyclic_evictions", "overcommit_violations", "partial_gang_binds"):
                absent[n] = "no measurement tick with the reference cache"
            return out, absent
        for name, v, why in (
                ("cache_divergence", self.divergence.summary(), "no instance with a synced cache was sampled"),
                ("resource_drift", self.resource.summary(), "no cluster capacity (no nodes) or no synced instance"),
                ("overcommit_violations", self.overcommit.summary(), "no tick"),
                ("allocation_drift", self.allocation.summary(), ""),
                ("wasted_evictions", self.wasted.summary(final=True), ""),
                ("cyclic_evictions", self.cyclic.summary(), ""),
                ("partial_gang_binds", self.gangs.summary(), "")):
            if v is None:
                absent[name] = why
            else:
                out[name] = v
        return out, absent


# ----------------------------------------------------------------------------------- convergence

CONVERGENCE_WITHIN_S = 5.0      # "back to 0 within a few seconds of the last fault"
CONVERGENCE_MIN_QUIET_S = 5.0   # a settled verdict needs this much all-zero tail to stand on


def convergence(rows: Iterable[Mapping[str, Any]], last_fault_s: float | None, *,
                within_s: float = CONVERGENCE_WITHIN_S, min_quiet_s: float = CONVERGENCE_MIN_QUIET_S,
                api_consistency: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Issue 7 item 5's verdict, from the timeseries rows (t, instance, alive, and
    cache_divergence_persistent when recorded, else cache_divergence) and the time the last fault ended. For every instance alive at the end of the run: the seconds
    from ``last_fault_s`` to its first cache_divergence sample of 0 (``seconds``) and to the start
    of the final all-zero stretch (``settled_s``; None if the last sample is not 0). An instance is
    ok when it settled for good within ``within_s`` and that stretch lasts ``min_quiet_s`` or more
    (a zero in the last sample alone proves nothing). ``ok``: every live instance is ok and (when
    given) the API server equals the replay of its own event stream. Absent parts say why."""
    out: dict[str, Any] = {"within_s": within_s, "min_quiet_s": min_quiet_s,
                           "last_fault_s": last_fault_s, "instances": {}}
    if api_consistency is not None:
        out["api_consistency_ok"] = api_consistency.get("ok")
    by_inst: dict[str, list[tuple[float, int | None, bool]]] = {}
    rows = list(rows)
    # judge on the persistent part when the run recorded it: a task whose state was in flight at
    # one sample is not a cache that failed to converge (cache_divergence_persistent)
    column = ("cache_divergence_persistent"
              if any(r.get("cache_divergence_persistent") not in (None, "") for r in rows) else "cache_divergence")
    out["column"] = column
    for r in rows:
        if r.get("t") is None or not r.get("instance"):
            continue
        d = r.get(column)
        by_inst.setdefault(str(r["instance"]), []).append(
            (float(r["t"]), None if d in (None, "") else int(d), bool(int(r.get("alive", 1) or 0))))
    if not by_inst:
        out.update(ok=None, reason="no timeseries rows")
        return out
    end_t = max(s[-1][0] for s in by_inst.values())
    if last_fault_s is None:
        last_fault_s = 0.0
        out["last_fault_s"] = 0.0
        out["note"] = "no fault in the run: measured from t=0"
    oks: list[bool] = []
    unmeasured = 0
    for name, series in sorted(by_inst.items()):
        series.sort(key=lambda x: x[0])
        if not series[-1][2]:
            out["instances"][name] = {"alive": False, "reason": "not alive at the end of the run"}
            continue
        after = [(t, d) for t, d, alive in series if t >= last_fault_s and alive and d is not None]
        if not after:
            out["instances"][name] = {"alive": True, "seconds": None,
                                      "reason": "no synced sample after the last fault "
                                                f"({last_fault_s:.1f} s; run ended at {end_t:.1f} s)"}
            unmeasured += 1
            continue
        first0 = next((t for t, d in after if d == 0), None)
        settled = None
        if after[-1][1] == 0:
            settled = after[-1][0]
            for t, d in reversed(after):
                if d != 0:
                    break
                settled = t
        sec = None if first0 is None else round(first0 - last_fault_s, 3)
        settled_s = None if settled is None else round(settled - last_fault_s, 3)
        quiet = None if settled is None else round(after[-1][0] - settled, 3)
        reason = None
        if first0 is None:
            reason = f"{column} never 0 after the last fault"
        elif settled is None:
            reason = f"{column} not 0 at the end of the run (final {after[-1][1]})"
        elif settled_s > within_s:
            reason = f"settled for good only {settled_s:g} s after the last fault (allowed {within_s:g} s)"
        elif quiet < min_quiet_s:
            reason = (f"only {quiet:g} s of zero divergence before the run ended "
                      f"(need {min_quiet_s:g} s to call it settled): lengthen the quiet tail")
        ok = reason is None
        oks.append(ok)
        out["instances"][name] = {
            "alive": True, "seconds": sec, "settled_s": settled_s, "quiet_s": quiet,
            "max_after": max(d for _, d in after), "final": after[-1][1],
            "samples_after": len(after), "ok": ok, **({"reason": reason} if reason else {})}
    settled_all = [v["settled_s"] for v in out["instances"].values() if v.get("settled_s") is not None]
    measured = bool(oks) and not unmeasured
    out["value"] = max(settled_all) if measured and all(oks) else None   # the headline: slowest instance
    ok = measured and all(oks)
    if api_consistency is not None and api_consistency.get("ok") is not None:
        ok = ok and bool(api_consistency.get("ok"))
    out["ok"] = ok if measured else None
    if unmeasured:
        out["reason"] = (f"{unmeasured} live instance(s) without a synced sample after the last fault "
                         "(it lasted until the end of the run)")
    elif not oks:
        out["reason"] = "no instance alive at the end of the run"
    return out
