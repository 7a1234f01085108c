"""A vectorised allocate path with exactly Volcano's (the scalar model's) results.

The scalar allocate path examines up to ``calculate_num_of_feasible_nodes_to_find`` nodes per task
(500 of 5,000) through a per-node Python call chain: resource fit on FutureIdle, the predicates
plugin, then per-node nodeorder / binpack scores plus nodeorder's batch (taint) score. This module
does the same work over numpy arrays:

* **node arrays** (FutureIdle and Idle per dimension, the k8s view's pod counts and requests,
  binpack's Used/Allocatable) are built once per session and kept current through *sinks*: every
  ``NodeInfo.add_task/remove_task`` and ``K8sNodeInfo`` pod change adds the node's name to a set,
  and the rows named there are re-read from the objects before the next task — the arrays hold the
  objects' own float values, so no arithmetic is re-implemented for accounting;
* **predicates**: resource fit ``InitResreq ≤ FutureIdle`` (Volcano's epsilon rule: ``l − r < 0.1``
  is the same test as ``l < r or |l − r| < 0.1``) and, for a task without node selector /
  required affinity and host ports, the predicates plugin's verdict (pod count, unschedulable,
  NoSchedule/NoExecute taints — for a task with tolerations, per distinct taint set of the
  nodes, checked once per distinct toleration list) as masks; other tasks — and every task whose
  InterPodAffinity PreFilter state is not a skip (it has required pod (anti-)affinity, or pods
  with required anti-affinity are placed) — run the plugin predicate per node, only on
  resource-fitting nodes, in scan order. The scan keeps the predicate helper's
  rotating start index and stop rule (``numFeasibleNodes``) exactly. A task with a role and
  allocate's predicate error cache on (every vcjob pod, by default) keeps that cache as the scalar
  scan does: the nodes its (job, role) failed on before are passed over, and each node the scan
  passes that fails is cached with its error (resource misfits from the arrays, the rest from
  the per-node predicate);
* **scores**: nodeorder's least/most-allocated and balanced-allocation formulas in int64 / float64
  with the same operation order and integer truncation as the scalar functions, binpack in
  float64 in the same order, the batch taint score normalised over the scored group, the batch
  inter-pod affinity score by the plugin's own function over the scored group (only when the task
  has pod (anti-)affinity or pods with it are placed); ties are broken with the session RNG
  exactly as ``select_best_node_and_score``.

Whatever it does not cover falls back to the scalar code: per session (plugins with predicate /
node-order / map / reduce / best-node functions other than ``predicates``, ``nodeorder``,
``binpack``; a node without a Node object; values beyond 2**53), per task (preferred node affinity
or GPU requests for scoring, …) and per call
(no feasible node: the FitErrors are built from the arrays — ``fit_errors`` — with the scalar
predicate only on the nodes whose resources fit; the scalar scan reruns if that disagrees).

The session's ``acceleration.allocate_fastpath`` (``ha.scheduler.acceleration``; the environment's
``HA_ALLOCATE_FASTPATH=0`` turns it off, read when the cache is built) decides whether it is used.
"""
from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

import numpy as np

from ha.scheduler.acceleration import acceleration_of
from ha.scheduler.actions.allocate.future_idle import future_idle_for
from ha.scheduler.snapshot_reuse import SnapshotReuseMismatch, verifying

from ha.scheduler.api import TaskStatus, ZERO, exact_fields
from ha.scheduler.api.types import FitError

__all__ = ["AllocateFastPath", "ScanErrors", "for_session", "unsupported_reason"]


_EXACT = float(2 ** 53)  # ints beyond this do not survive float64 (balanced: int / int)
_EPS = 0.1               # Volcano's minResource
_MISSING = object()
_EMPTY: dict = {}
_NONE = np.zeros(0, dtype=np.intp)


def for_session(ssn: Any) -> "AllocateFastPath | None":
    """The session's fast path, built on first use; None when disabled or not applicable."""
    if not acceleration_of(ssn).allocate_fastpath:
        return None
    fp = getattr(ssn, "_allocate_fastpath", _MISSING)
    if fp is _MISSING:
        reason = unsupported_reason(ssn)
        fp = AllocateFastPath(ssn) if reason is None else None
        if fp is not None and not fp.ok:
            reason, fp = fp.reason, None
        ssn._allocate_fastpath = fp
        ssn.fastpath_reason = reason
    return fp


class ScanErrors(MutableMapping):
    """A (job, role)'s predicate error cache as a scan that found no node leaves it: every node of
    the scan in scan order, each with the FitError the scalar scan would have cached, built when
    first read -- the scan's shared "Insufficient <dimension>" statuses by code, the others given
    (``own``, code -1). The scalar helper reads and adds to it as to the dict it would have built."""

    __slots__ = ("_ns", "_task", "_codes", "_statuses", "_errors")

    def __init__(self, task_namespace: str, task_name: str, names: list[str], codes: list[int],
                 statuses: list[Any], own: dict[str, Any]):
        self._ns, self._task = task_namespace, task_name
        self._codes = dict(zip(names, codes))
        self._statuses = list(statuses)
        self._errors = {name: own[name] for name, code in self._codes.items() if code < 0}

    def __getitem__(self, name: str) -> Any:
        err = self._errors.get(name)
        if err is None:
            code = self._codes[name]          # KeyError: not cached
            err = self._errors[name] = FitError(self._ns, self._task, name, [self._statuses[code]])
        return err

    def __setitem__(self, name: str, err: Any) -> None:
        if name not in self._codes:
            self._codes[name] = -1
        self._errors[name] = err

    def __delitem__(self, name: str) -> None:
        del self._codes[name]
        self._errors.pop(name, None)

    def __contains__(self, name: object) -> bool:
        return name in self._codes

    def __iter__(self):
        return iter(self._codes)

    def __len__(self) -> int:
        return len(self._codes)

    def built(self) -> int:
        """How many of the errors exist as objects (a measure for tests)."""
        return len(self._errors)


# ------------------------------------------------------------------------------------- applicability

def _names(ssn: Any, flag: str, fns: dict) -> list[str]:
    return [opt.name for _, opt, _ in ssn._enabled(flag, fns)]


def _qualname(fn: Any) -> str:
    return getattr(getattr(fn, "__func__", fn), "__qualname__", "")


def unsupported_reason(ssn: Any) -> str | None:
    """Why this session's configuration is not covered (None: covered)."""
    from ha.scheduler.plugins.binpack import BinpackPlugin
    from ha.scheduler.plugins.nodeorder import NodeOrderPlugin
    from ha.scheduler.plugins.predicates import PredicatesPlugin

    pred = _names(ssn, "enabled_predicate", ssn.predicate_fns)
    if pred:
        if pred != ["predicates"] or type(ssn.plugins.get("predicates")) is not PredicatesPlugin:
            return f"predicate functions {pred}"
        if not _qualname(ssn.predicate_fns["predicates"]).startswith("PredicatesPlugin.on_session_open"):
            return "foreign predicates function"
    order = _names(ssn, "enabled_node_order", ssn.node_order_fns)
    if len(set(order)) != len(order) or not set(order) <= {"nodeorder", "binpack"}:
        return f"node-order functions {order}"
    if "nodeorder" in order and (type(ssn.plugins.get("nodeorder")) is not NodeOrderPlugin or not _qualname(
            ssn.node_order_fns["nodeorder"]).startswith("NodeOrderPlugin.on_session_open")):
        return "foreign nodeorder function"
    if "binpack" in order and (type(ssn.plugins.get("binpack")) is not BinpackPlugin or not _qualname(
            ssn.node_order_fns["binpack"]).startswith("BinpackPlugin.on_session_open")):
        return "foreign binpack function"
    batch = _names(ssn, "enabled_node_order", ssn.batch_node_order_fns)
    if batch:
        if batch != ["nodeorder"] or type(ssn.plugins.get("nodeorder")) is not NodeOrderPlugin:
            return f"batch node-order functions {batch}"
        if getattr(ssn.batch_node_order_fns["nodeorder"], "__func__", None) is not NodeOrderPlugin.batch_scores:
            return "foreign nodeorder batch function"
    for flag, fns, what in (("enabled_node_order", ssn.node_map_fns, "node map"),
                            ("enabled_node_order", ssn.node_reduce_fns, "node reduce"),
                            ("enabled_best_node", ssn.best_node_fns, "best node")):
        got = _names(ssn, flag, fns)
        if got:
            return f"{what} functions {got}"
    nodes = ssn.node_list
    if not nodes:
        return "no nodes"
    seen = set()
    for n in nodes:
        if n.node is None:
            return f"node {n.name} has no Node object"
        if n.name in seen or ssn.nodes.get(n.name) is not n:
            return f"node {n.name} listed twice or not in ssn.nodes"
        seen.add(n.name)
    return None


# ------------------------------------------------------------------------------------- per-task facts

class _TaskFacts:
    __slots__ = ("rows", "all_rows", "req", "simple", "nz_cpu", "nz_mem", "pl_cpu", "pl_mem", "pl_zero",
                 "vector_nodeorder", "affinity", "tolerations", "binpack_dims", "tol_block")


def _spec(pod: dict) -> dict:
    return (pod or _EMPTY).get("spec") or _EMPTY


# ------------------------------------------------------------------------------------- the fast path

class AllocateFastPath:
    """Per-session node arrays and the vectorised predicate / prioritise steps of allocate."""

    def __init__(self, ssn: Any):
        from ha.scheduler.plugins.k8s_nodes import node_map, pod_host_ports
        from ha.scheduler.plugins import nodeorder as _no
        from ha.scheduler.plugins import predicates as _pr
        self._no, self._pr, self._host_ports = _no, _pr, pod_host_ports
        self.ssn = ssn
        self.ok, self.reason = True, None
        self.node_list = ssn.node_list
        self.n = len(self.node_list)
        self.index = {n.name: i for i, n in enumerate(self.node_list)}
        self._names = list(self.index)          # the node names in node_list's order
        self._misfit_memo: dict[tuple[bytes, bytes], np.ndarray] = {}   # _misfit_codes
        self.view = node_map(ssn)
        self.views = [self.view.get(n.name) for n in self.node_list]
        if any(v is None for v in self.views):
            self.ok, self.reason = False, "node missing from the k8s view"
            return
        self.self_exclusion = bool(getattr(ssn.switches, "self_exclusion", False))
        from ha.scheduler.framework.util import calculate_num_of_feasible_nodes_to_find
        self.to_find = calculate_num_of_feasible_nodes_to_find(self.n)
        self.chunk = max(2 * self.to_find, 512)
        self.tasks: dict[Any, _TaskFacts] = {}
        # "error_cache": scans of a task with a role and the predicate error cache on;
        # "cache_passed": nodes such scans passed over because its (job, role) failed there before
        # "fits_nowhere": scans answered at once, the task asking more than any node has
        # "rows_kept": node rows the build took from the last session's (_load_rows)
        self.stats = {"fast": 0, "scalar_predicate": 0, "scalar_rerun": 0, "scalar_score": 0,
                      "vector_fit_errors": 0, "error_cache": 0, "cache_passed": 0, "fits_nowhere": 0,
                      "rows_kept": 0}

        # plugins
        pred = ssn.plugins.get("predicates") if _names(ssn, "enabled_predicate", ssn.predicate_fns) else None
        self.pred = pred
        self.order = _names(ssn, "enabled_node_order", ssn.node_order_fns)
        self.nodeorder = ssn.plugins.get("nodeorder") if "nodeorder" in self.order else None
        self.binpack = ssn.plugins.get("binpack") if "binpack" in self.order else None
        batch = _names(ssn, "enabled_node_order", ssn.batch_node_order_fns)
        self.batch_taint_w = ssn.plugins["nodeorder"].taint_toleration_weight if batch else None
        self.batch_affinity_w = ssn.plugins["nodeorder"].pod_affinity_weight if batch else 0
        from ha.scheduler.plugins.k8s_nodes import affinity_index, has_pod_affinity
        self.aff_index, self._has_pod_affinity = affinity_index(ssn), has_pod_affinity
        self.built = False  # the arrays are built at the first scan (many sessions have no work)

    def _build(self) -> None:
        self.built = True
        n = self.n
        # static node facts (Node objects do not change within a session)
        unsched = np.zeros(n, dtype=bool)
        ns_taint = np.zeros(n, dtype=bool)
        self.pns_count = np.zeros(n, dtype=np.int64)   # PreferNoSchedule taints (no tolerations)
        # nodes by their set of NoSchedule/NoExecute taints (few distinct sets): a task with
        # tolerations is checked once per set, not once per node
        self.taint_sets: list[list[dict]] = []
        set_ids: dict[tuple, int] = {}
        self.taint_set_of = np.zeros(n, dtype=np.intp)
        self.tol_blocks: dict[str, np.ndarray] = {}
        for i, node in enumerate(self.node_list):
            k8s = node.node
            spec = k8s.get("spec") or _EMPTY
            unsched[i] = bool(spec.get("unschedulable"))
            hard = []
            for t in spec.get("taints") or ():
                eff = t.get("effect")
                if eff in ("NoSchedule", "NoExecute"):
                    ns_taint[i] = True
                    hard.append(t)
                elif eff == "PreferNoSchedule":
                    self.pns_count[i] += 1
            key = tuple((t.get("key"), t.get("value"), t.get("effect")) for t in hard)
            sid = set_ids.get(key)
            if sid is None:
                sid = set_ids[key] = len(self.taint_sets)
                self.taint_sets.append(hard)
            self.taint_set_of[i] = sid
        self.unsched = unsched
        self.has_pns = bool(self.pns_count.any())
        pred = self.pred
        if pred is not None:
            self.static_block = unsched | (ns_taint if pred.taint_toleration_enable else False)
        else:
            self.static_block = np.zeros(n, dtype=bool)

        # dynamic arrays; dims: cpu, memory, then scalars as tasks ask for them
        self.dims: list[str] = ["cpu", "memory"]
        self.dim_row: dict[str, int] = {"cpu": 0, "memory": 1}
        # binpack: Volcano Used / Allocatable per resource name
        self.bp_used: dict[str, np.ndarray] = {}
        self.bp_alloc: dict[str, np.ndarray] = {}
        self.regular = True   # every node has cpu and memory in the k8s allocatable
        self.dirty: set = set()
        self._fi_max: np.ndarray | None = None   # per dimension, the most any node has (_fits_nowhere)
        self._load_rows()
        if not self.ok:
            return
        self.regular = bool((self.k[0:2] != 0).all())
        for node, v in zip(self.node_list, self.views):
            node._sink = self.dirty
            v.sink = self.dirty

    # -- rows -----------------------------------------------------------------------------------
    @staticmethod
    def _row_values(node: Any, v: Any) -> tuple:
        """(FutureIdle, its cpu, memory, idle cpu, memory, max pods, pod count, the k8s view's
        six quantities) of a node: what ``_load_row`` writes for the two first dimensions."""
        fi = node.future_idle()
        idle = node.idle
        al, nzr, rq = v.allocatable, v.non_zero_requested, v.requested
        return (fi, fi.milli_cpu, fi.memory, idle.milli_cpu, idle.memory, node.allocatable.max_task_num,
                v.pod_count(), (al.get("cpu", 0), al.get("memory", 0), nzr.get("cpu", 0),
                                nzr.get("memory", 0), rq.get("cpu", 0), rq.get("memory", 0)))

    def _load_rows(self) -> None:
        """Every node's row (what ``_load_row`` writes, for the two first dimensions), gathered in
        lists and made arrays at once: element writes into arrays cost more than the values.

        A node whose clone and k8s view are the objects the last build read (the snapshot
        reused them: nothing changed the node since, ha/scheduler/snapshot_reuse.py) takes that
        build's values (``cache.fast_path_rows``); with ``verify_snapshot_reuse`` on they are
        worked out again and compared."""
        cache = self.ssn.cache
        kept = getattr(cache, "fast_path_rows", None) or _EMPTY
        verify = verifying(self.ssn)
        rows: dict[str, tuple] = {}
        fc, fm, ic, im, pmax, pcount, kv = [], [], [], [], [], [], []
        bad = None
        fi_of = self._fi_of = []
        for node, v in zip(self.node_list, self.views):
            rec = kept.get(node.name)
            if rec is not None and rec[0] is node and rec[1] is v:
                vals = rec[2]
                self.stats["rows_kept"] += 1
                if verify:
                    fresh = self._row_values(node, v)
                    if fresh[1:] != vals[1:] or exact_fields(fresh[0]) != exact_fields(vals[0]):
                        raise SnapshotReuseMismatch(f"fast path: the row of node {node.name!r} kept from "
                                                    f"the last session {vals[1:]} differs from {fresh[1:]}")
            else:
                vals = self._row_values(node, v)
            rows[node.name] = (node, v, vals)
            fi_of.append(vals[0])
            fc.append(vals[1])
            fm.append(vals[2])
            ic.append(vals[3])
            im.append(vals[4])
            pmax.append(vals[5])
            pcount.append(vals[6])
            k = vals[7]
            if max(k) * 101 >= _EXACT or min(k) < 0:
                bad = node.name
            kv.append(k)
        if hasattr(cache, "fast_path_rows"):
            cache.fast_path_rows = rows
        if bad is not None:
            self.ok, self.reason = False, f"k8s quantities of node {bad} out of range"
            return
        n = self.n
        self.fi = np.array((fc, fm), dtype=float).reshape(2, n)
        self.idle = np.array((ic, im), dtype=float).reshape(2, n)
        self.pods_max = np.array(pmax, dtype=np.int64).reshape(n)
        self.pod_count = np.array(pcount, dtype=np.int64).reshape(n)
        self.pods_ok = self.pods_max > self.pod_count
        self.plugin_ok = (self.pods_ok & ~self.static_block) if self.pred is not None else np.ones(n, dtype=bool)
        # k8s view (ints), rows: allocatable cpu, memory; non-zero requested cpu, memory;
        # requested cpu, memory
        self.k = np.array(kv, dtype=np.int64).reshape(n, 6).T.copy()

    def _load_row(self, i: int) -> None:
        """Node ``i``'s row again (the session changed the node): ``_row_values`` written into
        the arrays, and the dimensions added since the build (``_add_dim``)."""
        node = self.node_list[i]
        fi, fcpu, fmem, icpu, imem, pm, pc, vals = self._row_values(node, self.views[i])
        self._fi_of[i] = fi
        fa, ia = self.fi, self.idle
        fa[0, i], fa[1, i] = fcpu, fmem
        ia[0, i], ia[1, i] = icpu, imem
        if len(self.dims) > 2:
            idle = node.idle
            for d in self.dims[2:]:
                r = self.dim_row[d]
                fa[r, i] = fi.get(d)
                ia[r, i] = idle.get(d)
        self.pods_max[i] = pm
        self.pod_count[i] = pc
        ok = pm > pc
        self.pods_ok[i] = ok
        self.plugin_ok[i] = (ok and not self.static_block[i]) if self.pred is not None else True
        if max(vals) * 101 >= _EXACT or min(vals) < 0:
            self.ok, self.reason = False, f"k8s quantities of node {node.name} out of range"
        self.k[:, i] = vals
        for d, arr in self.bp_used.items():
            arr[i] = node.used.get(d)
            self.bp_alloc[d][i] = node.allocatable.get(d)

    def _sync(self) -> None:
        d = self.dirty
        if d:
            self._fi_max = None
            self._misfit_memo = {}
            idx = self.index
            for name in list(d):
                i = idx.get(name)
                if i is not None:
                    self._load_row(i)
            d.clear()

    def _add_dim(self, name: str) -> None:
        row = len(self.dims)
        self.dims.append(name)
        self.dim_row[name] = row
        fi = np.zeros(self.n)
        idle = np.zeros(self.n)
        # each node's FutureIdle as its row was last loaded (rows load when their node changes)
        fi = np.array([r.get(name) for r in self._fi_of], dtype=float).reshape(self.n)
        idle = np.array([node.idle.get(name) for node in self.node_list], dtype=float).reshape(self.n)
        self.fi = np.vstack([self.fi, fi])
        self._fi_max = None
        self._misfit_memo = {}
        self.idle = np.vstack([self.idle, idle])

    def _add_bp_dim(self, name: str) -> None:
        self.bp_used[name] = np.array([n.used.get(name) for n in self.node_list], dtype=float)
        self.bp_alloc[name] = np.array([n.allocatable.get(name) for n in self.node_list], dtype=float)

    # -- per-task facts -------------------------------------------------------------------------
    def _facts(self, task: Any) -> _TaskFacts:
        f = self.tasks.get(task.uid)
        if f is not None:
            return f
        f = _TaskFacts()
        r = task.init_resreq
        dims = ["cpu", "memory"] + list(r.scalar_resources or ())
        for d in dims:
            if d not in self.dim_row:
                self._add_dim(d)
        f.rows = np.array([self.dim_row[d] for d in dims], dtype=np.intp)
        f.all_rows = f.rows.tolist() == list(range(len(self.dims)))
        f.req = np.array([r.get(d) for d in dims], dtype=float)[:, None]
        pod = task.pod
        spec = _spec(pod)
        pred = self.pred
        f.tolerations = bool(spec.get("tolerations"))
        simple = True
        if pred is not None and pred.node_affinity_enable:
            required = (((spec.get("affinity") or _EMPTY).get("nodeAffinity") or _EMPTY)
                        .get("requiredDuringSchedulingIgnoredDuringExecution")) or None
            if spec.get("nodeSelector") or required is not None:
                simple = False
        if pred is not None and pred.node_ports_enable and self._host_ports(pod):
            simple = False
        f.tol_block = None
        if simple and f.tolerations and pred is not None:
            f.tol_block = self._toleration_block(spec.get("tolerations"))
        f.simple = (simple and not f.tolerations) or pred is None
        # nodeorder inputs
        from ha.scheduler.plugins.k8s_nodes import cached_pod_requests
        memo = self.views[0].memo
        nz = cached_pod_requests(memo, pod, True)
        pl = cached_pod_requests(memo, pod, False)
        f.nz_cpu, f.nz_mem = nz.get("cpu", 0), nz.get("memory", 0)
        f.pl_cpu, f.pl_mem = pl.get("cpu", 0), pl.get("memory", 0)
        gpu = pl.get("nvidia.com/gpu", 0)
        f.pl_zero = f.pl_cpu == 0 and f.pl_mem == 0 and gpu == 0
        big = max(abs(f.nz_cpu), abs(f.nz_mem), abs(f.pl_cpu), abs(f.pl_mem)) * 101 >= _EXACT
        f.vector_nodeorder = self.regular and gpu == 0 and not big
        preferred = (((spec.get("affinity") or _EMPTY).get("nodeAffinity") or _EMPTY)
                     .get("preferredDuringSchedulingIgnoredDuringExecution")) or []
        f.affinity = bool(preferred)
        # binpack: (name, request, weight) in resource_names() order, as binpacking_score walks it
        f.binpack_dims = []
        if self.binpack is not None:
            w = self.binpack.weight
            for d in task.resreq.resource_names():
                q = task.resreq.get(d)
                if q == 0:
                    continue
                rw = w.binpacking_resources.get(d)
                if rw is None:
                    continue
                if d not in self.bp_used:
                    self._add_bp_dim(d)
                f.binpack_dims.append((d, q, rw))
        self.tasks[task.uid] = f
        return f

    # -- predicate ------------------------------------------------------------------------------
    def _fits_nowhere(self, f: _TaskFacts) -> bool:
        """Whether the task asks in some dimension for more than any node's future idle has by
        the scan's own test (``req - fi >= minResource``): then every node fails it, and a
        pending gang that fits nowhere (scanned by every session) costs one comparison per
        dimension instead of a pass over every node."""
        if not self.n:
            return False
        mx = self._fi_max
        if mx is None:
            mx = self._fi_max = self.fi.max(axis=1)
        return bool(((f.req[:, 0] - mx[f.rows]) >= _EPS).any())

    def _windows(self, start: int):
        """Index ranges [a, b) in scan order (start .. n-1, then 0 .. start-1), in chunks: most
        scans stop after numFeasibleNodes fits, long before the end of the list."""
        n, chunk = self.n, self.chunk
        for lo, hi in ((start, n), (0, start)):
            for a in range(lo, hi, chunk):
                yield a, min(a + chunk, hi)

    def predicate_nodes(self, task: Any, ph: Any, enable_error_cache: bool,
                        predicate: Any = None) -> np.ndarray | None:
        """Indices (into ``ssn.node_list``, in scan order) of the nodes the scalar
        ``PredicateHelper.predicate_nodes`` would return, advancing its start index the same way;
        an empty array (start index untouched) when no node is feasible, so that the caller runs
        the scalar scan for the exact FitErrors; None when this task needs the scalar path.

        A task with a role and the error cache on (Volcano's default for every vcjob pod): nodes
        its (job, role) failed on before in this helper are passed over, and every node the scan
        passes that fails gets its error in the cache, as the scalar scan leaves it -- the
        resource misfits built from the arrays, the others from ``predicate`` (the action's
        per-node predicate; without it such a task takes the scalar path)."""
        from ha.scheduler.framework.util import _get_last_index, _set_last_index
        ssn = self.ssn
        if not self.ok or ssn.node_list is not self.node_list or len(self.node_list) != self.n:
            return None
        role = getattr(task, "task_role", "") or ""
        group = None
        if role and enable_error_cache:
            if predicate is None:
                self.stats["scalar_predicate"] += 1
                return None
            group = f"{task.job}/{role}"
        pred = self.pred
        if pred is not None and pred.state_reader is not None and task.uid not in pred.pre_filtered:
            # no PrePredicate in this session: the plugin answers Volcano's cycle-state Error
            self.stats["scalar_predicate"] += 1
            return None
        if not self.built:
            self._build()
        self._sync()
        if not self.ok:
            return None
        f = self._facts(task)
        n, to_find = self.n, self.to_find
        start = _get_last_index(ph._owner) % n
        # failed before (the scalar scan's ``failedBefore``): the cached nodes are passed over
        skip = self._cached_nodes(ph.task_predicate_error_cache.get(group)) if group is not None else None
        errs: dict[int, Any] = {}     # the plugin predicate's errors met on the way (cache on)
        # PR fix S1: a task Pipelined on a node does not compete with its own reservation there
        j0, ok0 = self._own_node(task), False
        if j0 >= 0:
            ok0 = task.init_resreq.less_equal(future_idle_for(ssn, task, self.node_list[j0]), ZERO)
        affinity_work = self._affinity_filter(task)
        simple = f.simple and not affinity_work
        if f.tol_block is not None and not affinity_work:
            simple, gate = True, self.pods_ok & ~f.tol_block
        else:
            gate = self.plugin_ok if simple else self.pods_ok
        if not (j0 >= 0 and ok0 and gate[j0]) and self._fits_nowhere(f):
            # the scan below would pass no node: the one that could (its own reservation) did not
            self.stats["scalar_rerun"] += 1
            self.stats["fits_nowhere"] += 1
            return _NONE
        # dims only grow: a task's rows stay a prefix, but later tasks may have added rows
        fi_all = self.fi if f.all_rows and len(f.rows) == self.fi.shape[0] else None
        req = f.req
        parts: list[np.ndarray] = []
        got = 0
        found: list[int] = []
        pfn = ssn.predicate_for_allocate_action
        nl = self.node_list
        for a, b in self._windows(start):
            fi = fi_all[:, a:b] if fi_all is not None else self.fi[f.rows, a:b]
            m = ((req - fi) < _EPS).all(axis=0)
            m &= gate[a:b]
            if a <= j0 < b:
                m[j0 - a] = ok0 and gate[j0]
            if skip is not None:
                m &= ~skip[a:b]
            idx = np.flatnonzero(m)
            if not len(idx):
                continue
            idx += a
            if simple:
                parts.append(idx)
                got += len(idx)
                if got >= to_find:
                    break
            else:
                for j in idx.tolist():
                    err = pfn(task, nl[j])
                    if err is None:
                        found.append(j)
                        if len(found) >= to_find:
                            break
                    elif group is not None:
                        errs[j] = err
                if len(found) >= to_find:
                    break
        if simple:
            sel = (np.concatenate(parts) if len(parts) > 1 else parts[0])[:to_find] if parts else _NONE
            full = got >= to_find
        else:
            self.stats["scalar_predicate"] += 1
            sel = np.array(found, dtype=np.intp)
            full = len(found) >= to_find
        if len(sel) == 0:
            self.stats["scalar_rerun"] += 1
            return sel
        processed = (int(sel[-1]) - start) % n + 1 if full else n
        if group is not None:
            # the nodes the scan passed that failed (not found, not passed over as cached)
            pos = np.arange(start, start + processed) % n
            passed = np.ones(processed, dtype=bool)
            passed[(sel - start) % n] = False
            if skip is not None:
                on_cache = skip[pos]
                self.stats["cache_passed"] += int(on_cache.sum())
                passed &= ~on_cache
            new = self._errors(task, f, pos[passed], errs, predicate)
            if new is None:          # the arrays and the predicate disagree: the scalar scan
                self.stats["scalar_predicate"] += 1
                return None
            self._cache_errors(ph, group, new)
            self.stats["error_cache"] += 1
        _set_last_index(ph._owner, (start + processed) % n)
        self.stats["fast"] += 1
        return sel

    # -- the per-(job, role) predicate error cache ------------------------------------------------
    def _cached_nodes(self, node_cache: dict | None) -> np.ndarray | None:
        """The nodes named in a (job, role)'s error cache as a mask; None when there is none."""
        if node_cache is None:
            return None
        idx = self.index
        mask = np.zeros(self.n, dtype=bool)
        rows = [idx[name] for name in node_cache if name in idx]
        if rows:
            mask[rows] = True
        return mask

    def _errors(self, task: Any, f: _TaskFacts, failing: np.ndarray, known: dict[int, Any],
                predicate: Any) -> list[tuple[str, Any]] | None:
        """Each failing node's error as the scalar predicate gives it, in scan order: a node whose
        FutureIdle does not hold the request fails the first check with "Insufficient <first
        such dimension>"; any other (and a Pipelined task's own node, whose FutureIdle differs
        with self-exclusion) is asked of ``predicate``. None if ``predicate`` accepts a node the
        arrays rejected."""
        if not len(failing):
            return []
        first, statuses = self._misfits(f, failing)
        j0 = self._own_node(task)
        ns, name, nl = task.namespace, task.name, self.node_list
        out: list[tuple[str, Any]] = []
        for j, code in zip(failing.tolist(), first.tolist()):
            node = nl[j]
            err = known.get(j)
            if err is None:
                if code < 0 or j == j0:
                    err = predicate(task, node)
                    if err is None:
                        return None
                else:
                    err = FitError(ns, name, node.name, [statuses[code]])
            out.append((node.name, err))
        return out

    def _misfit_codes(self, f: _TaskFacts) -> tuple[np.ndarray, list[Any]]:
        """``_misfits`` of every node in node order, kept until a row changes: the tasks a scan
        finds no node for (a pending gang's first task, every session) mostly ask the same."""
        key = (f.req.tobytes(), f.rows.tobytes())
        hit = self._misfit_memo.get(key)
        if hit is None:
            short = (f.req - self.fi[f.rows]) >= _EPS      # dims x nodes: does not fit
            hit = self._misfit_memo[key] = np.where(short.any(axis=0), short.argmax(axis=0), -1)
        return hit, self._insufficient(f)

    def _insufficient(self, f: _TaskFacts) -> list[Any]:
        """Per dimension of ``f.rows``, the status the scalar predicate fails a node short of it
        with ("Insufficient <dimension>", in ``less_equal_with_resources_name``'s order)."""
        from ha.scheduler.api.types import Status, StatusCode, wrap_insufficient_resource_reason
        return [Status(StatusCode.UNSCHEDULABLE, wrap_insufficient_resource_reason([self.dims[r]]))
                for r in f.rows.tolist()]

    def _misfits(self, f: _TaskFacts, cols: np.ndarray) -> tuple[np.ndarray, list[Any]]:
        """For the nodes ``cols`` (in that order): the position in ``f.rows`` of the first
        dimension whose FutureIdle does not hold the request (-1: it fits), and per dimension the
        status the scalar predicate fails such a node with ("Insufficient <dimension>", in
        ``less_equal_with_resources_name``'s order)."""
        short = (f.req - self.fi[f.rows][:, cols]) >= _EPS      # dims x nodes: does not fit
        first = np.where(short.any(axis=0), short.argmax(axis=0), -1)
        return first, self._insufficient(f)

    def _own_node(self, task: Any) -> int:
        """The node of a task Pipelined there when self-exclusion is on (its FutureIdle for the
        task is not the arrays'); -1 otherwise."""
        if self.self_exclusion and task.status == TaskStatus.PIPELINED:
            return self.index.get(task.node_name, -1)
        return -1

    @staticmethod
    def _cache_errors(ph: Any, group: str, errors: list[tuple[str, Any]]) -> None:
        """Into the helper's cache as the scalar scan puts them (the group appears with its first
        error; a group seen before gets its entries added)."""
        if not errors:
            return
        cache = ph.task_predicate_error_cache
        node_cache = cache.get(group)
        if node_cache is None:
            node_cache = cache[group] = {}
        for name, err in errors:
            node_cache[name] = err

    def fit_errors(self, task: Any, ph: Any, predicate: Any, enable_error_cache: bool = False) -> Any:
        """The FitErrors of the scalar scan for a task ``predicate_nodes`` found no node for (call
        it right after that empty answer: the start index is where that scan began), without
        calling ``predicate`` on every node: a node whose FutureIdle does not hold the request
        fails the scalar predicate's first check, with "Insufficient <first such dimension>" in
        ``less_equal_with_resources_name``'s order; only the other nodes (and a Pipelined task's
        own node, whose FutureIdle differs with self-exclusion) go through ``predicate``. None
        when the scalar scan must run (a node the arrays call infeasible that ``predicate``
        accepts, or a switch that changes the predicate)."""
        from ha.scheduler.framework.util import _get_last_index, _set_last_index
        from ha.scheduler.api.types import FitErrors
        ssn = self.ssn
        if getattr(ssn.switches, "planted_skip_fit", False) or not self.built or self.dirty:
            return None
        f = self.tasks.get(task.uid)
        if f is None:
            return None
        n = self.n
        role = getattr(task, "task_role", "") or ""
        group = f"{task.job}/{role}" if role and enable_error_cache else None
        cached = ph.task_predicate_error_cache.get(group) if group is not None else None
        skip = self._cached_nodes(cached)
        start = _get_last_index(ph._owner) % n
        # scan position k is node (start + k) % n
        by_node, statuses = self._misfit_codes(f)
        first = np.concatenate((by_node[start:], by_node[:start]))
        j0 = self._own_node(task)
        nl = self.node_list
        codes = first.tolist()
        own: dict[str, Any] = {}
        asked = first < 0
        if j0 >= 0:
            asked[(j0 - start) % n] = True
        if skip is not None:
            # failed before: the scan takes a cached node's error and asks nothing of it
            passed = np.concatenate((skip[start:], skip[:start]))
            asked &= ~passed
            self.stats["cache_passed"] += int(passed.sum())
            for k in np.flatnonzero(passed).tolist():
                name = nl[(start + k) % n].name
                own[name] = cached[name]
                codes[k] = -1
        for k in np.flatnonzero(asked).tolist():
            node = nl[(start + k) % n]
            err = predicate(task, node)
            if err is None:
                return None
            own[node.name] = err
            codes[k] = -1
        names = self._names[start:] + self._names[:start]   # the node names in the scan's order
        for name, err in own.items():
            err.node_name = name
        if group is not None:
            # every node the cache did not name fails now and is cached with its error
            if cached is None:
                # a first failure everywhere (a gang's first task, most often: the job is given
                # up next and nothing reads the cache again): the errors are built when read
                ph.task_predicate_error_cache[group] = ScanErrors(task.namespace, task.name, names, codes,
                                                                  statuses, own)
            else:
                new = []
                for name, code in zip(names, codes):
                    if code >= 0:
                        new.append((name, FitError(task.namespace, task.name, name, [statuses[code]])))
                    elif name not in cached:
                        new.append((name, own[name]))
                self._cache_errors(ph, group, new)
            self.stats["error_cache"] += 1
        # how many nodes each status names, for the summary: the codes the arrays gave, but
        # the nodes asked or passed (code -1 now) -- counted in C instead of a Counter of 5,000
        counted = first >= 0
        if skip is not None:
            counted &= ~passed
        if j0 >= 0:
            counted[(j0 - start) % n] = False
        counts = np.bincount(first[counted], minlength=len(statuses)).tolist()
        fe = FitErrors()
        fe.set_scan(task.namespace, task.name, names, codes, statuses, own, counts)
        # the scalar scan passed every node: it leaves the start index where it began, modulo n
        _set_last_index(ph._owner, start)
        self.stats["vector_fit_errors"] += 1
        return fe

    def _toleration_block(self, tolerations: list) -> np.ndarray:
        """Nodes the predicates plugin rejects for a pod with these tolerations because of
        spec.unschedulable or a NoSchedule/NoExecute taint (cached per toleration list)."""
        import json
        key = json.dumps(tolerations, sort_keys=True, default=str)
        block = self.tol_blocks.get(key)
        if block is None:
            pr = self._pr
            unsched_taint = {"key": pr.TAINT_NODE_UNSCHEDULABLE, "effect": "NoSchedule"}
            block = self.unsched & (not pr.tolerates(tolerations, unsched_taint))
            if self.pred.taint_toleration_enable:
                per_set = np.array([any(not pr.tolerates(tolerations, t) for t in ts) for ts in self.taint_sets],
                                   dtype=bool)
                block = block | per_set[self.taint_set_of]
            self.tol_blocks[key] = block
        return block

    def _affinity_filter(self, task: Any) -> bool:
        """Whether the predicates plugin's InterPodAffinity filter has work for this task (its
        PreFilter state, computed at PrePredicate, is not a skip)."""
        pred = self.pred
        if pred is None or not pred.pod_affinity_enable:
            return False
        return pred.affinity_states.get(task.uid, _MISSING) is not None

    # -- prioritise -----------------------------------------------------------------------------
    def prioritize_nodes(self, task: Any, sel: np.ndarray) -> Any:
        """``AllocateAction.prioritize_nodes`` over the nodes ``sel``: the Idle-fit group first,
        else the FutureIdle-fit group; best score, ties broken with the session RNG."""
        f = self._facts(task)
        idle = self.idle[:, sel] if f.all_rows and len(f.rows) == self.idle.shape[0] else self.idle[f.rows][:, sel]
        idle_fit = ((f.req - idle) < _EPS).all(axis=0)
        n_idle = int(idle_fit.sum())
        group = sel[idle_fit] if n_idle else sel
        if len(group) == 1:
            return self.node_list[int(group[0])]
        scores = self.scores(task, f, group)
        if scores is None:
            return None
        m = scores.max()
        ties = group[scores == m]
        return self.node_list[int(ties[self.ssn.rng.randrange(len(ties))])]

    def scores(self, task: Any, f: _TaskFacts, g: np.ndarray) -> np.ndarray | None:
        """``prioritize_nodes``' per-node total: Σ node-order scores (tier order) + batch score."""
        prio = np.zeros(len(g))
        for name in self.order:
            if name == "nodeorder":
                prio = prio + self._nodeorder(task, f, g)
            else:
                prio = prio + self._binpack(task, f, g)
        if self.batch_taint_w is not None:
            prio = prio + self._taint(task, f, g)
        if self.batch_affinity_w:
            prio = prio + self._pod_affinity(task, g)
        return prio

    def _pod_affinity(self, task: Any, g: np.ndarray) -> np.ndarray:
        if not self.aff_index and not self._has_pod_affinity(task.pod):
            return np.zeros(len(g))  # PreScore skips: no placed pod and no term to walk
        from ha.scheduler.plugins.interpod_affinity import affinity_scores
        nl = self.node_list
        nodes = [nl[j] for j in g.tolist()]
        got = affinity_scores(task.pod, self.view, self.aff_index, nodes) or {}
        return np.array([float(got.get(n.name, 0) * self.batch_affinity_w) for n in nodes])

    def _nodeorder(self, task: Any, f: _TaskFacts, g: np.ndarray) -> np.ndarray:
        p = self.nodeorder
        if not f.vector_nodeorder:
            self.stats["scalar_score"] += 1
            nl, views = self.node_list, self.views
            return np.array([p.node_score(views[j], task) for j in g.tolist()], dtype=float)
        total = np.zeros(len(g), dtype=np.int64)
        k = self.k[:, g]
        a_c, a_m = k[0], k[1]
        if p.least_req_weight or p.most_req_weight:
            r_c = k[2] + f.nz_cpu
            r_m = k[3] + f.nz_mem
            if p.least_req_weight:
                s_c = (a_c - r_c) * 100 // a_c
                s_c[r_c > a_c] = 0
                s_m = (a_m - r_m) * 100 // a_m
                s_m[r_m > a_m] = 0
                total += ((s_c * 50 + s_m * 50) // 100) * p.least_req_weight
            if p.most_req_weight:
                s_c = np.minimum(r_c, a_c) * 100 // a_c
                s_m = np.minimum(r_m, a_m) * 100 // a_m
                total += ((s_c + s_m) // 2) * p.most_req_weight
        if p.balanced_resource_weight and not f.pl_zero:
            f_c = np.minimum((k[4] + f.pl_cpu) / a_c, 1.0)
            f_m = np.minimum((k[5] + f.pl_mem) / a_m, 1.0)
            std = np.abs((f_c - f_m) / 2)
            total += ((1 - std) * 100).astype(np.int64) * p.balanced_resource_weight
        if p.node_affinity_weight and f.affinity:
            pod, nl = task.pod, self.node_list
            aff = np.array([self._no.node_affinity_score(pod, nl[j].node) for j in g.tolist()], dtype=np.int64)
            total += aff * p.node_affinity_weight
        return total.astype(float)

    def _binpack(self, task: Any, f: _TaskFacts, g: np.ndarray) -> np.ndarray:
        w = self.binpack.weight
        score = np.zeros(len(g))
        over = np.zeros(len(g), dtype=bool)
        weight_sum = 0
        for d, q, rw in f.binpack_dims:
            if rw != 0:
                cap = self.bp_alloc[d][g]
                used_finally = q + self.bp_used[d][g]
                nonzero = cap != 0
                over |= nonzero & (used_finally > cap)
                part = np.zeros(len(g))
                np.divide(used_finally * rw, cap, out=part, where=nonzero)
                score = score + part
            weight_sum += rw
        if weight_sum > 0:
            score = score / weight_sum
        out = score * 100 * w.binpacking_weight
        out[over] = 0.0
        return out

    def _taint(self, task: Any, f: _TaskFacts, g: np.ndarray) -> np.ndarray:
        w = self.batch_taint_w
        if not w:
            return np.zeros(len(g))
        if not self.has_pns:
            return np.full(len(g), float(100 * w))
        if f.tolerations:
            raw = np.zeros(len(g), dtype=np.int64)
            pod, nl = task.pod, self.node_list
            cnt = self.pns_count[g]
            for pos in np.flatnonzero(cnt).tolist():
                raw[pos] = self._no.intolerable_prefer_no_schedule(pod, nl[int(g[pos])].node)
        else:
            raw = self.pns_count[g]
        top = int(raw.max()) if len(raw) else 0
        if top == 0:
            return np.full(len(g), float(100 * w))
        return ((100 - 100 * raw // top) * w).astype(float)
