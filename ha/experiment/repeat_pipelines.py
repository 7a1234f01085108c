"""Repeat pipelines: how often an instance records a pipeline decision for a (pod, node) it has
already pipelined (PR #5045's description: "duplicate pipelines are skipped once a task is
Pipelined on its node", measured).

Input: decision records as the instances write them (``decisions.jsonl`` in a results folder;
``ha/runtime/instance.py`` ``run_session`` records one ``{"op": "pipeline", "instance", "pod",
"node", "session", ...}`` per session task Pipelined at the end of a session). Other ops (bind,
evict, status, podgroup, annotate) are ignored, as are pipeline records with ``ok`` false or
without a pod or node.

Output: ``{instance: pipeline records / distinct (pod, node)}`` for every instance with at least
one pipeline record (an instance that never pipelined has no ratio, rather than a made-up 0).
1.0 means every (pod, node) was recorded once; 3.0 means on average three sessions recorded the
same placement. Records of ``res.pipelined`` (what the runtime writes) repeat a reservation the
cache keeps for every session it is kept; records of ``SessionResult.new_pipelines`` (the
session's own decisions) repeat only a real second Pipeline. Pure: no I/O, no clock; the result does not depend on the records' order.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["repeat_pipelines", "pipeline_counts"]


def pipeline_counts(decisions: Iterable[Mapping[str, Any]]) -> dict[str, dict[tuple[str, str], int]]:
    """``{instance: {(pod, node): number of pipeline records}}``, instances and keys sorted."""
    counts: dict[str, dict[tuple[str, str], int]] = {}
    for rec in decisions:
        if rec.get("op") != "pipeline" or rec.get("ok") is False:
            continue
        pod, node = rec.get("pod"), rec.get("node")
        if not pod or not node:
            continue
        per = counts.setdefault(str(rec.get("instance") or ""), {})
        key = (str(pod), str(node))
        per[key] = per.get(key, 0) + 1
    return {inst: dict(sorted(per.items())) for inst, per in sorted(counts.items())}


def repeat_pipelines(decisions: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """``{instance: pipeline records / distinct (pod, node)}`` (see the module docstring)."""
    return {inst: sum(per.values()) / len(per) for inst, per in pipeline_counts(decisions).items()}
