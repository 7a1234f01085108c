"""Scheduling helpers (``pkg/scheduler/util``): the priority queue, the predicate helper, node
scoring and selection, victim validation.

The priority queue follows Go's ``container/heap`` sift rules exactly, so that items that compare
equal come out in the same order as in Volcano (Python's ``heapq`` pops differently on ties).
"""
from __future__ import annotations

import random
import re
import weakref
from typing import Any, Callable, Iterable

from ha.scheduler.framework.fit import FitErrors

__all__ = ["PriorityQueue", "PredicateHelper", "calculate_num_of_feasible_nodes_to_find",
           "prioritize_nodes", "select_best_node_and_score", "sort_nodes", "validate_victims",
           "get_pod_index_under_task", "compare_task"]


class PriorityQueue:
    """``util.PriorityQueue``: ``less(a, b)`` true means a pops before b."""

    __slots__ = ("_items", "_less")

    def __init__(self, less: Callable[[Any, Any], bool] | None = None, items: Iterable[Any] = ()):
        self._less = less
        self._items: list[Any] = []
        for it in items:
            self.push(it)

    def _lt(self, i: int, j: int) -> bool:
        if self._less is None:
            return i < j
        return self._less(self._items[i], self._items[j])

    # _up and _down compare through ``less`` directly (``_lt``'s rule, inlined: these are the
    # hottest loops of preempt's and allocate's job and task queues)
    def _up(self, j: int) -> None:
        items = self._items
        less = self._less
        if less is None:
            while True:
                i = (j - 1) // 2
                if j <= 0 or i == j or not j < i:
                    break
                items[i], items[j] = items[j], items[i]
                j = i
            return
        while True:
            i = (j - 1) // 2
            if j <= 0 or i == j or not less(items[j], items[i]):
                break
            items[i], items[j] = items[j], items[i]
            j = i

    def _down(self, i0: int, n: int) -> None:
        items = self._items
        less = self._less
        i = i0
        while True:
            j1 = 2 * i + 1
            if j1 >= n or j1 < 0:
                break
            j = j1
            j2 = j1 + 1
            if less is None:
                if j2 < n and j2 < j1:
                    j = j2
                if not j < i:
                    break
            else:
                if j2 < n and less(items[j2], items[j1]):
                    j = j2
                if not less(items[j], items[i]):
                    break
            items[i], items[j] = items[j], items[i]
            i = j

    def push(self, item: Any) -> None:
        self._items.append(item)
        self._up(len(self._items) - 1)

    def pop(self) -> Any:
        n = len(self._items) - 1
        if n < 0:
            return None
        items = self._items
        items[0], items[n] = items[n], items[0]
        self._down(0, n)
        return items.pop()

    def empty(self) -> bool:
        return not self._items

    def __len__(self) -> int:
        return len(self._items)

    def len(self) -> int:  # Volcano spelling
        return len(self._items)

    def clone(self) -> "PriorityQueue":
        q = PriorityQueue(self._less)
        q._items = list(self._items)
        return q

    def replace_with(self, other: "PriorityQueue") -> None:
        """Take ``other``'s items (the worksheets' ``ShallowCopyFrom``)."""
        self._items = list(other._items)

    def items(self) -> list[Any]:
        """The items in heap order (not sorted); for inspection only."""
        return list(self._items)


# -- predicate helper -----------------------------------------------------------------------------

MIN_NODES_TO_FIND = 100
MIN_PERCENTAGE_OF_NODES_TO_FIND = 5
PERCENTAGE_OF_NODES_TO_FIND = 0
BASELINE_PERCENTAGE_OF_NODES_TO_FIND = 50


def calculate_num_of_feasible_nodes_to_find(num_all_nodes: int) -> int:
    if num_all_nodes <= MIN_NODES_TO_FIND or PERCENTAGE_OF_NODES_TO_FIND >= 100:
        return num_all_nodes
    pct = PERCENTAGE_OF_NODES_TO_FIND
    if pct <= 0:
        pct = BASELINE_PERCENTAGE_OF_NODES_TO_FIND - num_all_nodes // 125
        if pct < MIN_PERCENTAGE_OF_NODES_TO_FIND:
            pct = MIN_PERCENTAGE_OF_NODES_TO_FIND
    n = num_all_nodes * pct // 100
    return max(n, MIN_NODES_TO_FIND)


# Go keeps ``lastProcessedNodeIndex`` as a package variable: it survives sessions. We keep one per
# scheduler cache so that independent caches (HA instances, tests) do not influence each other.
_last_index: "weakref.WeakKeyDictionary[Any, int]" = weakref.WeakKeyDictionary()
_last_index_fallback: dict[int, int] = {}


def _get_last_index(owner: Any) -> int:
    try:
        return _last_index.get(owner, 0)
    except TypeError:
        return _last_index_fallback.get(id(owner), 0)


def _set_last_index(owner: Any, v: int) -> None:
    try:
        _last_index[owner] = v
    except TypeError:
        _last_index_fallback[id(owner)] = v


class PredicateHelper:
    """``util.predicateHelper``: scans up to the feasible number of nodes starting where the last
    scan (of this cache) stopped, caching failures per (job, role) when the role is non-empty."""

    def __init__(self, owner: Any = None):
        self._owner = owner if owner is not None else self
        self.task_predicate_error_cache: dict[str, dict[str, Any]] = {}

    def predicate_nodes(self, task: Any, nodes: list[Any], fn: Callable[[Any, Any], Any],
                        enable_error_cache: bool = True) -> tuple[list[Any], FitErrors]:
        fe = FitErrors()
        role = getattr(task, "task_role", "") or ""
        if not role:
            enable_error_cache = False
        n_all = len(nodes)
        if n_all == 0:
            return [], fe
        to_find = calculate_num_of_feasible_nodes_to_find(n_all)
        found: list[Any] = []
        group = f"{task.job}/{role}"
        node_cache = self.task_predicate_error_cache.get(group)
        failed_before = node_cache is not None
        if node_cache is None:
            node_cache = {}
        start = _get_last_index(self._owner)
        processed = 0
        for idx in range(n_all):
            if len(found) >= to_find:
                break
            node = nodes[(start + idx) % n_all]
            processed += 1
            if enable_error_cache and failed_before and node.name in node_cache:
                fe.set_node_error(node.name, node_cache[node.name])
                continue
            err = fn(task, node)
            if err is not None:
                node_cache[node.name] = err
                self.task_predicate_error_cache[group] = node_cache
                fe.set_node_error(node.name, err)
                continue
            found.append(node)
        _set_last_index(self._owner, (start + processed) % n_all)
        return found, fe


# -- scoring --------------------------------------------------------------------------------------

def prioritize_nodes(task: Any, nodes: list[Any], batch_fn: Callable, map_fn: Callable,
                     reduce_fn: Callable) -> dict[float, list[Any]]:
    """``util.PrioritizeNodes``: score = reduce(map scores) + node-order score + batch score."""
    from ha.scheduler.framework.events import NodeScore
    import math

    plugin_scores: dict[str, list[NodeScore]] = {}
    order_scores: dict[str, float] = {}
    for node in nodes:
        try:
            map_scores, order_score = map_fn(task, node)
        except Exception:  # noqa: BLE001 - Volcano logs and skips the node
            continue
        for plugin, score in map_scores.items():
            plugin_scores.setdefault(plugin, []).append(NodeScore(node.name, float(math.floor(score))))
        order_scores[node.name] = order_score
    node_scores: dict[float, list[Any]] = {}
    try:
        reduce_scores = reduce_fn(task, plugin_scores)
        batch_scores = batch_fn(task, nodes)
    except Exception:  # noqa: BLE001
        return node_scores
    for node in nodes:
        score = 0.0
        score += reduce_scores.get(node.name, 0.0)
        score += order_scores.get(node.name, 0.0)
        score += batch_scores.get(node.name, 0.0)
        node_scores.setdefault(score, []).append(node)
    return node_scores


def select_best_node_and_score(node_scores: dict[float, list[Any]],
                               rng: random.Random | None = None) -> tuple[Any, float]:
    """Highest score wins; ties are broken at random (Volcano: ``rand.Intn``)."""
    best: list[Any] = []
    max_score = float("-inf")
    for score, nodes in node_scores.items():
        if score > max_score:
            max_score = score
            best = nodes
    if not best:
        return None, 0.0
    r = rng if rng is not None else random
    return best[r.randrange(len(best))], max_score


def sort_nodes(node_scores: dict[float, list[Any]]) -> list[Any]:
    """``util.SortNodes``: nodes by descending score."""
    out: list[Any] = []
    for score in sorted(node_scores, reverse=True):
        out.extend(node_scores[score])
    return out


def _future_idle_with(node: Any, victims: list[Any]) -> Any:
    future_idle = node.future_idle()  # a new Resource
    for v in victims:
        future_idle.add(v.resreq)
    return future_idle


def victims_suffice(preemptor: Any, node: Any, victims: list[Any]) -> bool:
    """:func:`validate_victims` is None: what preempt and reclaim ask of every node they try,
    without writing the message nobody reads (two resources printed per node that fails)."""
    from ha.scheduler.api import ZERO
    return preemptor.init_resreq.less_equal(_future_idle_with(node, victims), ZERO)


def validate_victims(preemptor: Any, node: Any, victims: list[Any]) -> str | None:
    """``util.ValidateVictims``: None if the preemptor fits FutureIdle plus the victims."""
    from ha.scheduler.api import ZERO
    future_idle = _future_idle_with(node, victims)
    if not preemptor.init_resreq.less_equal(future_idle, ZERO):
        return (f"not enough resources: requested <{preemptor.init_resreq}>, "
                f"but future idle <{future_idle}>")
    return None


# -- task order fallback --------------------------------------------------------------------------

def get_pod_index_under_task(name: str) -> str:
    parts = name.split("-")
    if len(parts) >= 3:
        return parts[-1]
    return ""


_INT_RE = re.compile(r"^[+-]?\d+$")


# a pod name's index as compare_task reads it (None: not an integer); the task queues compare
# the same few names over and over, each comparison parsing both names again
_NAME_INDEX: dict[str, int | None] = {}
_NAME_INDEX_MAX = 65536


def _name_index(name: str) -> int | None:
    try:
        return _NAME_INDEX[name]
    except KeyError:
        pass
    s = get_pod_index_under_task(name)
    idx = int(s) if _INT_RE.match(s) else None
    if len(_NAME_INDEX) >= _NAME_INDEX_MAX:
        _NAME_INDEX.clear()
    _NAME_INDEX[name] = idx
    return idx


def compare_task(lv: Any, rv: Any) -> bool:
    """``helpers.CompareTask``: pod-name index, then pod creation time, then UID."""
    li = _name_index(lv.name)
    ri = _name_index(rv.name)
    if li is not None and ri is not None and li != ri:
        return li < ri
    lt = _pod_creation(lv)
    rt = _pod_creation(rv)
    if lt == rt:
        return str(lv.uid) < str(rv.uid)
    return lt < rt


def _pod_creation(task: Any) -> float:
    ts = getattr(task, "creation_timestamp", None)
    if ts is None:
        pod = getattr(task, "pod", None)
        if isinstance(pod, dict):
            ts = (pod.get("metadata") or {}).get("creationTimestamp")
    return float(ts or 0.0)
