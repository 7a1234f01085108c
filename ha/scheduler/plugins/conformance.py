"""conformance: never evict critical pods (Volcano ``plugins/conformance/conformance.go``).

Victims exclude pods in ``kube-system`` and pods whose priority class is
``system-cluster-critical`` or ``system-node-critical``; registered for both preempt and reclaim.
"""
from __future__ import annotations

from typing import Any

from ha.scheduler.plugins.factory import register
from ha.scheduler.plugins.util import PERMIT, Plugin

PLUGIN_NAME = "conformance"

SYSTEM_CLUSTER_CRITICAL = "system-cluster-critical"
SYSTEM_NODE_CRITICAL = "system-node-critical"
NAMESPACE_SYSTEM = "kube-system"


def _priority_class_name(task: Any) -> str:
    pod = getattr(task, "pod", None) or {}
    return (pod.get("spec") or {}).get("priorityClassName") or ""


def is_critical(task: Any) -> bool:
    return (_priority_class_name(task) in (SYSTEM_CLUSTER_CRITICAL, SYSTEM_NODE_CRITICAL)
            or task.namespace == NAMESPACE_SYSTEM)


def evictable(evictor: Any, evictees: list[Any]) -> tuple[list[Any], int]:
    return [t for t in evictees if not is_critical(t)], PERMIT


@register(PLUGIN_NAME)
class ConformancePlugin(Plugin):
    plugin_name = PLUGIN_NAME

    def on_session_open(self, ssn: Any) -> None:
        ssn.add_preemptable_fn(self.name(), evictable)
        ssn.add_reclaimable_fn(self.name(), evictable)
