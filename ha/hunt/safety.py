"""The safety properties every hunt run is judged by: oracles that must hold for any profile, each a
``--when`` predicate over the run's summary (``metrics.json``), the same language and the same
metric names ``ha-testbed shrink --when`` uses (``ha.experiment.shrink.predicate``), so a failure's
predicate is also what shrinks it.

| oracle | violated when | applies to |
|---|---|---|
| ``api_consistency`` | ``api_consistency.ok==false``: the API server's state is not the replay of its own stream | every run |
| ``overcommit`` | ``overcommit_violations>0``: bound pods' requests exceed a node's allocatable | not active-active (there the API server's conflicts decide, by design) |
| ``split_brain`` | ``split_brain_writes>0``: a write by an instance the Lease said did not lead | runs with fencing on (``schedulers.fencing``) |
| ``fatal_cache_error`` | ``fatal_cache_errors>0``: a modelled ``klog.Fatalf`` | every run |
| ``partial_gang_bind`` | ``partial_gang_binds>0``: binds of a gang while fewer than minMember were placed | not active-active |
| ``topology`` | ``topology_violations>0``: a hard-topology gang split across domains | runs with hard-topology gangs (else the metric is absent) whose configuration has the network-topology-aware plugin (without it nothing promises the placement) |
| ``convergence`` | ``convergence.ok==false``: some live cache did not settle after the last fault (:class:`SettledConvergence`: with a tail long enough to judge) | every run |
| ``when`` | the user's ``--when EXPR`` | every run |

A property whose metric is absent from the summary is not judged (a missing metric is never a
zero, nor a violation); the run records which were.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from ha.experiment.shrink.predicate import Predicate, Verdict, parse_predicate

__all__ = ["SafetyProperty", "PROPERTIES", "properties", "judge", "Violation", "predicate_for",
           "SettledConvergence"]

CONVERGENCE_WHEN = "convergence.ok==false"


class SettledConvergence(Predicate):
    """``convergence.ok==false`` where the run left time to judge: an instance counts only when
    the run went on for ``converge_within`` + the quiet stretch after the last fault (its samples
    after it, at ``MEASURE_EVERY_S``), or the API server was inconsistent. Without this a run cut
    short (the shrinker shortens runs) fails the verdict for want of a tail, not of convergence."""

    def evaluate(self, summary: Mapping[str, Any]) -> Verdict:
        from ha.hunt.draw import MEASURE_EVERY_S
        v = super().evaluate(summary)
        if not v.ok:
            return v
        conv = summary.get("convergence") or {}
        need = float(conv.get("within_s") or 0) + float(conv.get("min_quiet_s") or 0)
        real = [n for n, r in sorted((conv.get("instances") or {}).items())
                if isinstance(r, Mapping) and r.get("alive") and r.get("ok") is False
                and (r.get("samples_after") or 0) * MEASURE_EVERY_S >= need]
        if conv.get("api_consistency_ok") is False:
            real.append("api_consistency")
        if not real:
            v.ok = False
            v.notes.append(f"convergence: no instance failed with {need:g} s after the last fault to judge by "
                           f"(the run's tail is too short)")
        else:
            v.values["convergence.failed"] = ",".join(real)
        return v


def predicate_for(oracle: str, when: str) -> Predicate:
    """The predicate a failure of ``oracle`` is judged and shrunk by."""
    if oracle == "convergence":
        return SettledConvergence(when, parse_predicate(when).tree)
    return parse_predicate(when)


@dataclass(frozen=True)
class SafetyProperty:
    name: str                          # the oracle's short name (signatures, hunt.md)
    when: str                          # violated when this predicate holds
    metric: str                        # the summary metric it reads (absent: not judged)
    doc: str
    applies: Callable[[Mapping[str, Any]], bool] = lambda exp: True

    @property
    def predicate(self) -> Predicate:
        return predicate_for(self.name, self.when)


def _mode(exp: Mapping[str, Any]) -> str:
    return str((exp.get("schedulers") or {}).get("mode") or "leader-elected")


def _not_active_active(exp: Mapping[str, Any]) -> bool:
    return _mode(exp) != "active-active"


def _topology_aware(exp: Mapping[str, Any]) -> bool:
    conf = exp.get("scheduler_conf") or {}
    return any(p.get("name") == "network-topology-aware" for tier in conf.get("tiers") or [] for p in tier)


def _fenced(exp: Mapping[str, Any]) -> bool:
    return bool((exp.get("schedulers") or {}).get("fencing")) and _not_active_active(exp)


PROPERTIES: tuple[SafetyProperty, ...] = (
    SafetyProperty("api_consistency", "api_consistency.ok==false", "api_consistency",
                   "the API server's state equals the replay of its own event stream"),
    SafetyProperty("overcommit", "overcommit_violations>0", "overcommit_violations",
                   "no node holds more than its allocatable", _not_active_active),
    SafetyProperty("split_brain", "split_brain_writes>0", "split_brain_writes",
                   "no write by a deposed leader under fencing", _fenced),
    SafetyProperty("fatal_cache_error", "fatal_cache_errors>0", "fatal_cache_errors",
                   "no fatal cache error (klog.Fatalf)"),
    SafetyProperty("partial_gang_bind", "partial_gang_binds>0", "partial_gang_binds",
                   "no gang bound below its minMember", _not_active_active),
    SafetyProperty("topology", "topology_violations>0", "topology_violations",
                   "hard-topology gangs stay inside one allowed domain", _topology_aware),
    SafetyProperty("convergence", CONVERGENCE_WHEN, "convergence",
                   "every live cache converges after the last fault"),
)


def properties(when: str | None = None) -> list[SafetyProperty]:
    """The built-in properties, plus the user's ``--when`` (validated: BadInput on a bad one)."""
    out = list(PROPERTIES)
    if when:
        parse_predicate(when)
        out.append(SafetyProperty("when", when, "", "the user's --when predicate"))
    return out


@dataclass(frozen=True)
class Violation:
    oracle: str
    when: str
    value: str          # the predicate's values as read (Verdict.describe)


def judge(summary: Mapping[str, Any], exp: Mapping[str, Any],
          props: list[SafetyProperty]) -> tuple[list[Violation], list[str]]:
    """(the violated properties, the names of those judged) for one run's summary."""
    bad: list[Violation] = []
    judged: list[str] = []
    for p in props:
        if not p.applies(exp):
            continue
        if p.metric and p.metric not in summary:
            continue
        judged.append(p.name)
        v = p.predicate.evaluate(summary)
        if v.ok:
            bad.append(Violation(p.name, p.when, v.describe()))
    return bad, judged
