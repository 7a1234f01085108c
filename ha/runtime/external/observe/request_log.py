"""A real scheduler's decisions, read from its endpoint's request log (``requests.jsonl`` of the
Kubernetes API front, docs/kube-api.md), in the vocabulary of the model's decision records
(``ha/runtime/apiio.py``: ``t, session, instance, leader, dry_run, op, pod, uid, node, ok, error,
seq``).

Every request on an instance's endpoint is that instance's (one endpoint per instance), so
attribution is by file. The write path logs, for a successful write of a Pod, the object's
``uid``, ``rv``, ``nodeName``, ``nominatedNodeName`` and ``conditions`` ({type: "status/reason"}).
The rules (Volcano v1.14's writes, ``pkg/scheduler/cache/cache.go``):

=========  ===========================================================================================
op         request
=========  ===========================================================================================
bind       ``POST pods/{n}/binding`` (or the ``bindings`` collection): ``ok`` when 201, else the
           code and reason as ``error``; ``node`` the Binding's target
pipeline   a pod ``/status`` write that leaves ``status.nominatedNodeName`` set to a node other than
           the one this instance's previous write of the pod left (Volcano writes the nomination of
           a Pipelined task so, ``taskUnschedulable``); ``new`` is True (the request log shows only
           changes: an unchanged nomination is not written again). A *refused* status write (409,
           ...) that asks for such a nomination (the front logs ``sentNominatedNodeName``) is the
           session's pipeline decision all the same, as the model records one whether its write
           lands or not: a ``pipeline`` record (``ok`` True, ``write_error`` the refusal; ``new``
           False when the last refused write of the pod asked for the same node) followed by the
           failed ``status`` record
status     every other successful pod ``/status`` write that is not the first half of an eviction
           (PodScheduled=False, ...); ``node`` the nomination it carries, if any; a refused one with
           ``ok`` False and ``node`` None
evict      ``DELETE pods/{n}`` after this instance's status write that set the
           ``DisruptionTarget`` condition True (Volcano's evictor: the condition, then the delete);
           ``reason`` the condition's reason. A failed delete is ``ok`` False; a status write with
           the condition whose delete never comes is not an eviction
podgroup   a failed PodGroup write (``PUT podgroups/{n}`` -- Volcano's CRD has no status subresource --
           or ``/status``); a successful one counts in ``pod_group_writes`` only, as the model
           records them (ha/runtime/apiio.py), so split_brain_writes compares alike
queue      a failed Queue write (``/status``, or ``PUT queues/root``); successes count in
           ``queue_writes``
=========  ===========================================================================================

Reads, events, leases and the startup queue creations are not decisions. A 409 on a bind counts
as ``bind_conflicts`` (the model's counter); other failures as ``bind_errors`` / ``evict_errors`` /
``status_errors``.

Sessions: the request log does not name vc-scheduler's sessions. With the session start times
from vc-scheduler's own log (``session_log.py``; ``add_session_starts``) a write belongs to the last
session that started at or before it, and ``session_inferred`` is False. Without them the
session is inferred: writes closer than ``session_gap_s`` (default half the schedule period) to
the previous scheduling write belong to the same session, and ``session_inferred`` is True.
``leader`` is True: only a leading vc-scheduler runs sessions.

* :class:`RequestLogTail` reads the complete lines added since the last call (a half-written last
  line waits for the next call; a malformed complete line is skipped and counted).
* :class:`DecisionExtractor` turns records into decisions (``feed``) and keeps the counters.
"""
from __future__ import annotations

import bisect
import json
import os
from dataclasses import dataclass, field
from typing import Any, Iterable

from ha.runtime.external.observe.tail import complete_lines

__all__ = ["RequestLogTail", "DecisionExtractor", "DECISION_OPS"]

DECISION_OPS = ("bind", "pipeline", "status", "evict", "podgroup", "queue")
_SCHEDULING_OPS = ("bind", "pipeline", "status", "evict")


class RequestLogTail:
    """Follows one ``requests.jsonl`` from byte ``offset``."""

    def __init__(self, path: str | os.PathLike, offset: int = 0):
        self.path = str(path)
        self.offset = offset
        self.malformed = 0
        self.lines = 0

    def read_new(self, max_bytes: int = 64 << 20) -> list[dict[str, Any]]:
        lines, self.offset = complete_lines(self.path, self.offset, max_bytes)
        out = []
        for raw in lines:
            if not raw.strip():
                continue
            try:
                rec = json.loads(raw)
            except ValueError:
                self.malformed += 1
                continue
            if isinstance(rec, dict):
                out.append(rec)
                self.lines += 1
            else:
                self.malformed += 1
        return out


def _pod_key(rec: dict) -> str:
    return f"{rec.get('namespace') or ''}/{rec.get('name') or ''}"


def _error(rec: dict) -> str:
    code = rec.get("code")
    reason = rec.get("reason")
    return f"{code} {reason}" if reason else str(code)


def _condition(rec: dict, ctype: str) -> tuple[str, str] | None:
    c = (rec.get("conditions") or {}).get(ctype)
    if not isinstance(c, str):
        return None
    status, _, reason = c.partition("/")
    return status, reason


@dataclass
class DecisionExtractor:
    """Decisions of one instance from its endpoint's request records, oldest first."""
    instance: str
    session_gap_s: float = 0.5
    seq: int = 0
    session: int = 0
    counters: dict[str, int] = field(default_factory=lambda: {
        "binds": 0, "bind_conflicts": 0, "bind_errors": 0, "evictions": 0, "evict_errors": 0,
        "status_writes": 0, "status_errors": 0, "pod_group_writes": 0, "pod_group_errors": 0,
        "queue_writes": 0, "queue_errors": 0, "pipelines": 0})
    _last_t: float | None = None
    # session start times (wall clock) from vc-scheduler's log (session_log.py); None: not logged,
    # sessions are inferred from gaps between writes
    session_starts: list[float] | None = None
    _nominated: dict[str, str] = field(default_factory=dict)         # pod -> node its last write left
    _attempted: dict[str, str] = field(default_factory=dict)         # pod -> nomination of refused writes since
    _disrupting: dict[str, tuple[float, str | None, str]] = field(default_factory=dict)  # pod -> (t, uid, reason)

    def add_session_starts(self, starts: Iterable[float]) -> None:
        """Session start times read from the log since the last call (all before the requests fed
        next: read the request log first, then the log)."""
        if self.session_starts is None:
            self.session_starts = []
        self.session_starts.extend(starts)
        self.session_starts.sort()

    def _session_of(self, t: float) -> int:
        if self.session_starts is not None:
            # the last session that started at or before t (0: before the first)
            self.session = max(self.session, bisect.bisect_right(self.session_starts, t))
            return self.session
        if self._last_t is None or t - self._last_t > self.session_gap_s:
            self.session += 1
        self._last_t = t
        return self.session

    def _rec(self, rec: dict, op: str, *, pod: str, uid: str | None, node: str | None, ok: bool,
             error: str | None, **extra: Any) -> dict[str, Any]:
        t = float(rec.get("t") or 0.0)
        session = self._session_of(t) if op in _SCHEDULING_OPS else self.session
        self.seq += 1
        return {"t": t, "session": session, "session_inferred": self.session_starts is None,
                "instance": self.instance,
                "leader": True, "dry_run": False, "op": op, "pod": pod, "uid": uid, "node": node, "ok": ok,
                "error": error, **extra, "seq": self.seq}

    def feed(self, records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for rec in records:
            d = self._one(rec)
            if isinstance(d, list):
                out.extend(d)
            elif d is not None:
                out.append(d)
        return out

    def _one(self, rec: dict[str, Any]) -> dict[str, Any] | list[dict[str, Any]] | None:
        verb, res, sub = rec.get("verb"), rec.get("resource"), rec.get("subresource")
        group = rec.get("group") or ""
        code = int(rec.get("code") or 0)
        ok = 200 <= code < 300
        c = self.counters
        if group == "" and verb == "create" and ((res == "pods" and sub == "binding") or res == "bindings"):
            if ok:
                c["binds"] += 1
            elif code == 409:
                c["bind_conflicts"] += 1
            else:
                c["bind_errors"] += 1
            return self._rec(rec, "bind", pod=_pod_key(rec), uid=rec.get("uid"), node=rec.get("node"), ok=ok,
                             error=None if ok else _error(rec))
        if group == "" and res == "pods" and sub == "status" and verb in ("update", "patch"):
            key = _pod_key(rec)
            if not ok:
                c["status_errors"] += 1
                failed = self._rec(rec, "status", pod=key, uid=rec.get("uid"), node=None, ok=False,
                                   error=_error(rec))
                sent = rec.get("sentNominatedNodeName") or ""
                if not sent or sent == self._nominated.get(key, ""):
                    return failed
                # the session nominated the pod (pipelined it) and the write was refused: the
                # decision stands, as the model records it
                new = sent != self._attempted.get(key)
                self._attempted[key] = sent
                return [self._rec(rec, "pipeline", pod=key, uid=rec.get("uid"), node=sent, ok=True, error=None,
                                  new=new, write_error=_error(rec)), failed]
            dt = _condition(rec, "DisruptionTarget")
            if dt is not None and dt[0] == "True" and key not in self._disrupting:
                # the first half of an eviction: decided when its DELETE comes
                self._disrupting[key] = (float(rec.get("t") or 0.0), rec.get("uid"), dt[1])
                return None
            nnn = rec.get("nominatedNodeName") or ""
            before = self._nominated.get(key, "")
            if nnn:
                self._nominated[key] = nnn
            else:
                self._nominated.pop(key, None)
            self._attempted.pop(key, None)
            c["status_writes"] += 1
            if nnn and nnn != before:
                c["pipelines"] += 1
                return self._rec(rec, "pipeline", pod=key, uid=rec.get("uid"), node=nnn, ok=True, error=None,
                                 new=True)
            return self._rec(rec, "status", pod=key, uid=rec.get("uid"), node=nnn or None, ok=True, error=None)
        if group == "" and res == "pods" and verb == "delete" and sub is None:
            key = _pod_key(rec)
            pending = self._disrupting.pop(key, None)
            if pending is None:
                return None          # not the evictor's delete (Volcano deletes pods only so)
            self._nominated.pop(key, None)
            if ok:
                c["evictions"] += 1
            else:
                c["evict_errors"] += 1
            return self._rec(rec, "evict", pod=key, uid=rec.get("uid") or pending[1],
                             node=rec.get("nodeName") or None, ok=ok, error=None if ok else _error(rec),
                             reason=pending[2] or None)
        if group == "scheduling.volcano.sh" and verb in ("update", "patch") and res in ("podgroups", "queues"):
            counter = "pod_group" if res == "podgroups" else "queue"
            if ok:
                c[f"{counter}_writes"] += 1
                return None          # as the model records them: counted, a decision only when failed
            c[f"{counter}_errors"] += 1
            return self._rec(rec, "podgroup" if res == "podgroups" else "queue",
                             pod=_pod_key(rec) if res == "podgroups" else (rec.get("name") or ""),
                             uid=None, node=None, ok=False, error=_error(rec))
        return None
