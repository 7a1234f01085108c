"""What a task may use of a node in allocate: ``FutureIdle`` (Idle + Releasing − Pipelined), and,
with the ``self_exclusion`` switch (the S1 fix of ``pr5045-fixed``), a task Pipelined on that very
node does not compete with its own reservation. The scalar scan and the fast path ask the same
function, so the two cannot disagree on it."""
from __future__ import annotations

from typing import Any

from ha.scheduler.api import TaskStatus
from ha.scheduler.profiles import switch_on

__all__ = ["future_idle_for"]


def future_idle_for(ssn: Any, task: Any, node: Any):
    """``node.future_idle()``; with ``self_exclusion`` a task Pipelined on this node does not
    compete with its own reservation."""
    fi = node.future_idle()
    if (switch_on(ssn, "self_exclusion") and task.status == TaskStatus.PIPELINED and task.node_name == node.name):
        stored = node.tasks.get(task.pod_key)
        if stored is not None and stored.status == TaskStatus.PIPELINED:
            fi.add(stored.resreq)
    return fi
