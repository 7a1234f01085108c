"""A failure's signature: which oracle, which roles the objects involved played, which fault kinds
were active — so that one bug found 40 times is reported once.

* **roles** (:func:`roles`) come from the oracle's own evidence in the summary (its ``examples``)
  and, for the fatal cache error, the restart records of ``history/lives.jsonl``; names of pods,
  nodes, jobs and instances are replaced by their role (``<pod>``, ``<node>``, the binder "one
  session" or "two instances"), so two runs that break the same way read the same:

  - overcommit: who bound the pods on the over-full node (one session / one instance's several
    sessions / several lives of one instance / several instances) and whether a terminating pod
    held the node;
  - fatal cache error: the error's message with names taken out;
  - partial gang bind: whether the session bound a gang none of whose members were placed, or
    topped up a gang some were, and whether the binder pipelined for that job before;
  - convergence: why each unconverged instance failed (never settled / settled late) and whether
    it was a restarted life;
  - api consistency: lost writes or phantoms, per kind; topology: the tier limit broken;
  - ``--when``: the predicate itself;
* **fault kinds** (:func:`fault_kinds`): the kinds the nemesis applied during the run, and those
  active at the violation's first known time (a window covering it, or a point fault up to
  ``RECENT_S`` before it).

The search (``ha.hunt.search``) groups failures first by ``(oracle, roles)``; the shrunk case of a
group says which fault kinds the failure *needs* (those left in ``shrunk.yaml``), and a failure
joins a signature when the run applied every kind that signature needs. So the key a user reads is
``oracle · roles · needs: kinds``.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Mapping

__all__ = ["roles", "fault_kinds", "violation_time", "normalise_message", "group_key", "RECENT_S"]

RECENT_S = 5.0

_NAME_PATTERNS = (
    (re.compile(r"<[^<>]*,[^<>]*>"), "<pod>"),
    (re.compile(r"\b[a-z0-9-]+/job-[0-9]+-[0-9]+(-r[0-9]+)?\b"), "<pod>"),
    (re.compile(r"\bjob-[0-9]+(-[0-9]+)?(-r[0-9]+)?\b"), "<job>"),
    (re.compile(r"\bnode-[0-9]+\b"), "<node>"),
    (re.compile(r"\bscheduler-[0-9]+(_[0-9a-f]+)?\b"), "<instance>"),
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f-]{27}\b"), "<uid>"),
    (re.compile(r"\b\d+(\.\d+)?\b"), "<n>"),
)


def normalise_message(msg: str) -> str:
    """An error message with the names of objects replaced by their kind."""
    out = str(msg)
    for pat, rep in _NAME_PATTERNS:
        out = pat.sub(rep, out)
    out = re.sub(r"<<(pod|node|job)>>", r"<\1>", out)
    return re.sub(r"\s+", " ", out).strip()[:200]


def _jsonl(path: Path) -> list[dict[str, Any]]:
    out = []
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return out
    for line in text.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict):
            out.append(rec)
    return out


def _binders(pods: list[Mapping[str, Any]]) -> str:
    by = [tuple(p["bound_by"]) for p in pods if p.get("bound_by")]
    if not by:
        return "pods bound by no recorded decision"
    instances = {b[0] for b in by}
    lives = {(b[0], b[1]) for b in by}
    sessions = {b for b in by}
    if len(instances) > 1:
        return "binds by two or more instances"
    if len(lives) > 1:
        return "binds by two lives of one instance"
    if len(sessions) > 1:
        return "binds by several sessions of one instance"
    return "binds by one session"


def _overcommit_roles(v: Mapping[str, Any]) -> str:
    ex = (v.get("examples") or [{}])[0]
    pods = list(ex.get("pods") or [])
    who = _binders(pods)
    term = any(p.get("terminating") for p in pods)
    res = "+".join(sorted((ex.get("requested") or {}).keys())) or "?"
    return f"{who}; over {res}" + ("; a terminating pod holds the node" if term else "")


def _fatal_roles(run_dir: Path) -> tuple[str, float | None]:
    lives = _jsonl(run_dir / "history" / "lives.jsonl")
    for rec in lives:
        reason = str(rec.get("reason") or "")
        if rec.get("event") == "restart" and reason.startswith("fatal"):
            return normalise_message(reason), rec.get("t")
    return "fatal error (message not recorded)", None


def _partial_roles(v: Mapping[str, Any], run_dir: Path) -> tuple[str, float | None]:
    ex = (v.get("examples") or [{}])[0]
    placed = int(ex.get("already_placed") or 0)
    part = "no member placed before" if placed == 0 else "topping up a gang some members held"
    sess = list(ex.get("session") or [])
    job = str(ex.get("job") or "")
    pipelined = False
    t = None
    if sess and job:
        inst = sess[0]
        bound = set(ex.get("bound") or [])
        ns = job.split("/", 1)[0]
        base = job.split("/", 1)[-1]
        for d in _jsonl(run_dir / "history" / "decisions.jsonl"):
            if d.get("instance") != inst:
                continue
            pod = str(d.get("pod") or "")
            mine = pod.startswith(f"{ns}/{base}-")
            if d.get("op") == "pipeline" and mine:
                pipelined = True
            if d.get("op") == "bind" and pod in bound and t is None:
                t = d.get("t")
                break
    return (f"{part}; " + ("the binder had pipelined the job" if pipelined else "no pipeline of the job")), t


def _convergence_roles(v: Mapping[str, Any], run_dir: Path) -> str:
    restarted = {r.get("instance") for r in _jsonl(run_dir / "history" / "lives.jsonl")
                 if r.get("event") == "restart"}
    parts = set()
    for name, rec in sorted((v.get("instances") or {}).items()):
        if not isinstance(rec, Mapping) or rec.get("ok") is not False:
            continue
        why = "never settled" if rec.get("settled_s") is None else "settled late"
        parts.add(f"{why}{' (restarted life)' if name in restarted else ''}")
    if v.get("api_consistency_ok") is False:
        parts.add("API server inconsistent")
    return "; ".join(sorted(parts)) or "not ok"


def _api_roles(v: Mapping[str, Any]) -> str:
    parts = []
    for kind, k in sorted((v.get("kinds") or {}).items()):
        if k.get("lost_n"):
            parts.append(f"lost {kind} writes")
        if k.get("phantoms_n"):
            parts.append(f"phantom {kind}s")
        if k.get("caught_up") is False and not parts:
            parts.append("recorder not caught up")
    return "; ".join(parts) or "not ok"


def roles(oracle: str, summary: Mapping[str, Any], run_dir: Path) -> tuple[str, float | None]:
    """(the roles, the violation's first known run time or None)."""
    v = summary.get({"overcommit": "overcommit_violations", "fatal_cache_error": "fatal_cache_errors",
                     "partial_gang_bind": "partial_gang_binds", "convergence": "convergence",
                     "api_consistency": "api_consistency", "topology": "topology_violations",
                     "split_brain": "split_brain_writes"}.get(oracle, ""), {})
    v = v if isinstance(v, Mapping) else {}
    if oracle == "overcommit":
        ex = (v.get("examples") or [{}])[0]
        return _overcommit_roles(v), ex.get("t")
    if oracle == "fatal_cache_error":
        return _fatal_roles(run_dir)
    if oracle == "partial_gang_bind":
        return _partial_roles(v, run_dir)
    if oracle == "convergence":
        return _convergence_roles(v, run_dir), v.get("last_fault_s")
    if oracle == "api_consistency":
        return _api_roles(v), None
    if oracle == "topology":
        ex = (v.get("examples") or [{}])[0]
        return f"hard gang split beyond tier {ex.get('highest_tier_allowed')}", ex.get("t")
    if oracle == "split_brain":
        ex = (v.get("examples") or [{}])[0]
        return f"{ex.get('op', 'write')} by a deposed leader", ex.get("t")
    return "the --when predicate holds", None


def violation_time(oracle: str, summary: Mapping[str, Any], run_dir: Path) -> float | None:
    return roles(oracle, summary, run_dir)[1]


def fault_kinds(run_dir: Path, at: float | None = None) -> tuple[list[str], list[str]]:
    """(kinds the nemesis applied in the run, kinds active at run time ``at``), each sorted."""
    recs = _jsonl(run_dir / "history" / "faults.jsonl")
    from chaos.faults import FAULTS
    applied: set[str] = set()
    spans: dict[int, list[float]] = {}
    for r in recs:
        if r.get("status") != "applied":
            continue
        kind = str(r.get("fault"))
        applied.add(kind)
        t = float(r.get("t") or 0.0)
        s = spans.setdefault(int(r.get("index", -1)), [t, t])
        s[0], s[1] = min(s[0], t), max(s[1], t)
        spans[int(r.get("index", -1))] = s
    active: set[str] = set()
    if at is not None:
        kinds = {int(r.get("index", -1)): str(r.get("fault")) for r in recs}
        for idx, (a, b) in spans.items():
            kind = kinds.get(idx, "")
            pkg = FAULTS.get(kind)
            windowed = bool(pkg and pkg.windowed)
            if (windowed and a <= at <= b + 0.5) or (not windowed and a <= at <= b + RECENT_S):
                active.add(kind)
    return sorted(applied), sorted(active)


def group_key(oracle: str, role: str) -> str:
    return f"{oracle} · {role}"
