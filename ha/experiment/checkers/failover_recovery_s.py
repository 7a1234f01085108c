"""failover_recovery_s: leader loss → first successful bind by the new leader (seconds); the
slowest failover of the run, null if a leader loss never recovered in the run.

Leader losses come from lives.jsonl (``kill`` / ``pause`` of an instance with ``was_leader``).
Takeovers come from leases.jsonl (the Lease's holder changing to another instance's identity,
``<instance>_<suffix>``), timed by the Lease's ``acquireTime`` when the record has it (the
measuring tick that read the Lease can come after the new leader's first binds: a vc-scheduler
runs its first session the moment it wins), else from the ticks (an instance's ``is_leader``
rising). A takeover
matches a loss when it comes at or after it — for a pause, only within the pause's window (its
resume + lease duration + retry period): past that window with no takeover, the paused leader kept
its lease and there is no failover to time. The recovery ends at the new leader's first committed
bind decision at or after it took over."""
from __future__ import annotations

import statistics
from datetime import datetime
from typing import Any

from ha.experiment.checkers import Absent
from ha.experiment.checkers._run import experiment, seconds

NAME = "failover_recovery_s"
HEADLINE = None
CONTRACT = True


def _instance_of(holder: str | None) -> str | None:
    if not holder:
        return None
    return holder.rsplit("_", 1)[0] if "_" in holder else holder


def _epoch(v: Any) -> float | None:
    """A Lease's acquireTime as Unix seconds (a number, or RFC 3339 as the API writes it)."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    if isinstance(v, str) and v:
        try:
            return datetime.fromisoformat(v.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None


def _t0_wall(h) -> float | None:
    """The engine's clock at run time 0, from the decisions that carry both times."""
    offs = [float(d["wall"]) - float(d["t"]) for d in h.decisions()
            if isinstance(d.get("wall"), (int, float)) and isinstance(d.get("t"), (int, float))]
    return statistics.median(offs) if offs else None


def takeovers(h) -> list[tuple[float, str]]:
    """(t, instance) each time an instance became leader, in time order."""
    out: list[tuple[float, str]] = []
    prev = None
    t0 = None
    for rec in sorted(h.leases(), key=lambda r: float(r["t"])):
        holder = rec.get("holder") or None
        if holder and holder != prev:
            t = float(rec["t"])
            at = _epoch(rec.get("acquire_time"))
            if at is not None:
                t0 = _t0_wall(h) if t0 is None else t0
                if t0 is not None:
                    t = min(t, at - t0)
            out.append((t, _instance_of(holder)))
        prev = holder
    if out or h.leases():
        return out
    leading: set[str] = set()
    for tk in h.ticks():
        now = {n for n, r in tk["instances"].items() if r.get("alive") and r.get("is_leader")}
        out.extend((float(tk["t"]), n) for n in sorted(now - leading))
        leading = now
    return out


def failovers(h) -> list[dict[str, Any]]:
    lease = (experiment(h).get("schedulers") or {}).get("lease") or {}
    grace = (seconds(lease.get("duration"), 15.0) or 0.0) + (seconds(lease.get("retry"), 2.0) or 0.0)
    lives = sorted(h.lives(), key=lambda r: float(r["t"]))
    binds: dict[str, list[float]] = {}
    for d in h.decisions():
        if d.get("op") == "bind" and d.get("ok") and not d.get("dry_run"):
            binds.setdefault(str(d.get("instance")), []).append(float(d.get("t") or 0.0))
    for v in binds.values():
        v.sort()
    tos = takeovers(h)
    out = []
    for i, life in enumerate(lives):
        if life.get("event") not in ("kill", "pause") or not life.get("was_leader"):
            continue
        name, at = str(life["instance"]), float(life["t"])
        ev: dict[str, Any] = {"cause": life["event"], "instance": name, "at_s": round(at, 3),
                              "new_leader": None, "recovery_s": None, "no_takeover": False}
        window_end = None
        if life["event"] == "pause":
            resumed = next((float(r["t"]) for r in lives[i + 1:]
                            if r.get("instance") == name and r.get("event") in ("resume", "kill", "stop")), None)
            if resumed is not None:
                window_end = resumed + grace
        took_over = False
        for t, who in tos:
            if t < at - 1e-3 or (window_end is not None and t > window_end):
                continue
            if who == name and life["event"] == "kill":
                continue
            took_over = True
            first = next((b for b in binds.get(who, []) if b >= t and b >= at), None)
            if first is not None:
                ev["new_leader"], ev["recovery_s"] = who, round(first - at, 3)
                break
        if window_end is not None and not took_over:
            ev["no_takeover"] = True
        out.append(ev)
    return out


def check(h):
    # a killed leader is a leader loss; a paused one only if another instance took over
    losses = [f for f in failovers(h) if f["cause"] == "kill" or f["recovery_s"] is not None]
    if not losses:
        return Absent("no leader loss in the run")
    rec = [f["recovery_s"] for f in losses if f["recovery_s"] is not None]
    return max(rec) if len(rec) == len(losses) else None
