"""stale_nominations (extension): pods that carry a ``status.nominatedNodeName`` in the API server
while no live scheduler instance holds them Pipelined on that node, for longer than a grace —
a reservation everybody has forgotten but the pod still advertises (Volcano #5131: a Discarded
statement leaves its nomination behind; PR #5045's HA cache coherence: a new leader that does not
rebuild Pipelined from the nomination).

Per tick: the truth at the tick's ``rv_after`` (the event fold), every alive synced instance's
digest. A pod is stale at a tick when it is nominated, not bound, not being deleted, and no such
instance holds (its uid, that node) as Pipelined; consecutive stale ticks with the same node are
one episode. ``count``: distinct pods with an episode longer than ``grace_s``; ``pod_seconds``:
their stale time in total; ``episodes`` and the longest ones as ``examples``. Ticks without a
resourceVersion or without a live synced instance are not judged."""
from __future__ import annotations

from typing import Any

from ha.experiment.checkers import Absent
from ha.experiment.checkers._fold import EventFold, _events_sorted
from ha.experiment.oracles import status_name

NAME = "stale_nominations"
HEADLINE = None
CONTRACT = False
GRACE_S = 5.0


def _held(states: dict[str, dict[str, Any]]) -> set[tuple[str, str]] | None:
    held: set[tuple[str, str]] = set()
    judged = False
    for st in states.values():
        if not st.get("alive") or not st.get("synced", 1):
            continue
        judged = True
        for uid, ent in (st.get("tasks") or {}).items():
            if isinstance(ent, (list, tuple)) and len(ent) > 1 and status_name(ent[0]) == "PIPELINED":
                held.add((uid, ent[1]))
    return held if judged else None


def check(h, grace_s: float = GRACE_S):
    if not h.ticks():
        return Absent("no measurement tick in the history")
    events = _events_sorted(h)
    if not events:
        return Absent("no API-server events in the history")
    fold = EventFold(events)
    open_: dict[str, tuple[float, str]] = {}          # pod -> (first stale t, node)
    last_t: dict[str, float] = {}
    episodes: list[dict[str, Any]] = []
    judged = 0

    def close(pod: str) -> None:
        start, node = open_.pop(pod)
        episodes.append({"pod": pod, "node": node, "from_s": round(start, 3),
                         "seconds": round(last_t[pod] - start, 3)})

    for tk, states in h.digests():
        rv = tk.get("rv_after") if tk.get("rv_after") is not None else tk.get("rv_before")
        held = _held(states)
        if rv is None or held is None:
            continue
        judged += 1
        t = float(tk["t"])
        fold.advance(int(rv), t)
        now: dict[str, str] = {}
        for key, p in fold.truth.pods.items():
            md, spec, status = p.get("metadata") or {}, p.get("spec") or {}, p.get("status") or {}
            nnn = status.get("nominatedNodeName")
            if not nnn or spec.get("nodeName") or md.get("deletionTimestamp"):
                continue
            if (md.get("uid"), nnn) not in held:
                now[key] = nnn
        for pod in sorted(open_):
            if now.get(pod) != open_[pod][1]:
                close(pod)
        for pod, node in now.items():
            open_.setdefault(pod, (t, node))
            last_t[pod] = t
    for pod in sorted(open_):
        close(pod)
    if not judged:
        return Absent("no tick with a resourceVersion and a live synced instance")
    long = sorted((e for e in episodes if e["seconds"] > grace_s), key=lambda e: (-e["seconds"], e["pod"]))
    return {"count": len({e["pod"] for e in long}), "pod_seconds": round(sum(e["seconds"] for e in long), 3),
            "episodes": len(long), "grace_s": grace_s, "examples": long[:10]}
