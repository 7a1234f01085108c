"""binpack: prefer fuller nodes (Volcano ``plugins/binpack/binpack.go``).

For each dimension the task requests that has a weight (``binpack.cpu``, ``binpack.memory``,
``binpack.resources.<name>`` for names listed in ``binpack.resources``; all default 1, negative → 1):
``(used + request) × weight / allocatable``; the sum is divided by the summed weights and multiplied
by ``MaxNodeScore (100) × binpack.weight`` (default 1). A dimension whose allocatable is 0 scores 0
but its weight still counts; one that would overflow the node makes the whole score 0. With
``binpack.weight`` 0 the plugin registers nothing.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from ha.scheduler.plugins.factory import register
from ha.scheduler.plugins.util import arguments

PLUGIN_NAME = "binpack"
MAX_NODE_SCORE = 100

BINPACK_WEIGHT = "binpack.weight"
BINPACK_CPU = "binpack.cpu"
BINPACK_MEMORY = "binpack.memory"
BINPACK_RESOURCES = "binpack.resources"
BINPACK_RESOURCES_PREFIX = BINPACK_RESOURCES + "."


@dataclass
class PriorityWeight:
    binpacking_weight: int = 1
    binpacking_cpu: int = 1
    binpacking_memory: int = 1
    binpacking_resources: dict[str, int] = field(default_factory=dict)


def calculate_weight(args: Mapping[str, Any] | None) -> PriorityWeight:
    a = arguments(args)
    w = PriorityWeight()
    w.binpacking_weight = a.get_int(BINPACK_WEIGHT, 1)
    w.binpacking_cpu = a.get_int(BINPACK_CPU, 1)
    if w.binpacking_cpu < 0:
        w.binpacking_cpu = 1
    w.binpacking_memory = a.get_int(BINPACK_MEMORY, 1)
    if w.binpacking_memory < 0:
        w.binpacking_memory = 1
    names = a.get(BINPACK_RESOURCES)
    for name in (names.split(",") if isinstance(names, str) else []):
        name = name.strip()
        if not name:
            continue
        rw = a.get_int(BINPACK_RESOURCES_PREFIX + name, 1)
        w.binpacking_resources[name] = 1 if rw < 0 else rw
    w.binpacking_resources["cpu"] = w.binpacking_cpu
    w.binpacking_resources["memory"] = w.binpacking_memory
    return w


class _Overflow(Exception):
    pass


def resource_binpacking_score(requested: float, capacity: float, used: float, weight: int) -> float:
    if capacity == 0 or weight == 0:
        return 0.0
    used_finally = requested + used
    if used_finally > capacity:
        raise _Overflow
    return used_finally * weight / capacity


def binpacking_score(task: Any, node: Any, weight: PriorityWeight) -> float:
    score, weight_sum = 0.0, 0
    requested, allocatable, used = task.resreq, node.allocatable, node.used
    for name in requested.resource_names():
        request = requested.get(name)
        if request == 0:
            continue
        rw = weight.binpacking_resources.get(name)
        if rw is None:
            continue
        try:
            score += resource_binpacking_score(request, allocatable.get(name), used.get(name), rw)
        except _Overflow:
            return 0.0
        weight_sum += rw
    if weight_sum > 0:
        score /= weight_sum
    return score * MAX_NODE_SCORE * weight.binpacking_weight


@register(PLUGIN_NAME)
class BinpackPlugin:
    argument_keys = (BINPACK_WEIGHT, BINPACK_CPU, BINPACK_MEMORY, BINPACK_RESOURCES)
    argument_prefixes = (BINPACK_RESOURCES_PREFIX,)

    def __init__(self, args: Mapping[str, Any] | None = None):
        self.arguments = dict(args or {})
        self.weight = calculate_weight(args)

    def name(self) -> str:
        return PLUGIN_NAME

    def on_session_open(self, ssn: Any) -> None:
        if self.weight.binpacking_weight != 0:
            ssn.add_node_order_fn(self.name(), lambda task, node: binpacking_score(task, node, self.weight))

    def on_session_close(self, ssn: Any) -> None:
        pass
