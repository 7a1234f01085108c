"""Helpers shared by the plugins (Volcano ``plugins/util`` and ``api/helpers``).

Resource arithmetic itself lives on ``ha.scheduler.api.Resource``; here are only the few helpers
Volcano keeps outside the type, and the plugin-argument getters.
"""
from __future__ import annotations

from typing import Any, Mapping

from ha.scheduler.api.resource import (  # noqa: F401  (re-exported for the plugins)
    INFINITY, PODS, ZERO, Resource, exceeded_part, intersection,
)
from ha.scheduler.conf import Arguments
from ha.scheduler.framework.events import ABSTAIN, PERMIT, REJECT  # noqa: F401  (re-exported)

MAX_FLOAT = 1.7976931348623157e308  # math.MaxFloat64: an unlimited capability dimension


class Plugin:
    """The common part of ``framework.Plugin``: ``name()`` is the class's ``plugin_name``, the tier
    option's arguments are kept, and closing a session does nothing unless a plugin says so."""

    plugin_name = ""
    # the argument keys the plugin reads (scenario files may use no other; see the loader)
    argument_keys: tuple[str, ...] = ()
    argument_prefixes: tuple[str, ...] = ()

    def __init__(self, arguments: Mapping[str, Any] | None = None):
        self.arguments = dict(arguments or {})

    def name(self) -> str:
        return self.plugin_name

    def on_session_close(self, ssn: Any) -> None:
        pass


def res_max(a: Resource, b: Resource) -> Resource:
    """helpers.Max: the larger value per dimension (negative scalars dropped)."""
    out = Resource(max(a.milli_cpu, b.milli_cpu), max(a.memory, b.memory))
    if a.scalar_resources is None and b.scalar_resources is None:
        return out
    out.scalar_resources = {}
    for n, q in (a.scalar_resources or {}).items():
        if q >= 0:
            out.scalar_resources[n] = q
    for n, q in (b.scalar_resources or {}).items():
        if q >= 0:
            out.scalar_resources[n] = max(q, out.scalar_resources.get(n, 0.0))
    return out


def share(allocated: float, total: float) -> float:
    """helpers.Share: allocated/total; with total 0 it is 0 if nothing is allocated, else 1."""
    if total == 0:
        return 0.0 if allocated == 0 else 1.0
    return allocated / total


def semantic_equal(a: Resource, b: Resource) -> bool:
    """equality.Semantic.DeepEqual of two Resources: exact values, and a scalar present with 0
    differs from an absent one (Resource.__eq__ ignores zeros, so it cannot be used here)."""
    return (a.milli_cpu == b.milli_cpu and a.memory == b.memory
            and (a.scalar_resources or {}) == (b.scalar_resources or {})
            and a.max_task_num == b.max_task_num)


def intersection_without_pods(r1: Resource, r2: Resource) -> list[str]:
    """api.IntersectionWithIgnoredScalarResources."""
    return [n for n in intersection(r1, r2) if n != PODS]


def arguments(args: Mapping[str, Any] | None) -> Arguments:
    """The plugin's arguments as ``framework.Arguments`` (typed getters keeping defaults)."""
    return args if isinstance(args, Arguments) else Arguments(dict(args or {}))
