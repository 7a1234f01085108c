"""What an instance could not be observed for, as its ticks recorded it (not a checker).

An external instance (a real vc-scheduler, ``ha/runtime/external/observe``) records in a tick
``unobserved: {what: reason}`` for what could not be sampled then -- ``cache`` (a cold standby
holds none, a dump did not come), ``staleness_ms`` (not measurable from outside the process). The
checkers of those metrics leave such a tick out and, rather than a zero, say why: per instance
the reason and the number of ticks. Histories without the field (every model run) give {} and
their metrics are unchanged.
"""
from __future__ import annotations

from typing import Any

__all__ = ["unobserved", "with_unobserved", "absent_reason"]


def unobserved(h, what: str) -> dict[str, dict[str, Any]]:
    """{instance: {"reason": the last recorded reason, "ticks": how many ticks}} for ``what``."""
    memo = h.memo.setdefault("unobserved", {})
    if what in memo:
        return memo[what]
    out: dict[str, dict[str, Any]] = {}
    for tk in h.ticks():
        for name, rec in tk["instances"].items():
            why = (rec.get("unobserved") or {}).get(what) if rec.get("alive") else None
            if why:
                e = out.setdefault(name, {"reason": why, "ticks": 0})
                e["reason"] = why
                e["ticks"] += 1
    memo[what] = dict(sorted(out.items()))
    return memo[what]


def with_unobserved(h, what: str, summary: Any) -> Any:
    """``summary`` plus ``unobserved`` when some instance recorded ticks it could not be observed."""
    u = unobserved(h, what)
    if not u or not isinstance(summary, dict):
        return summary
    return {**summary, "unobserved": u}


def absent_reason(h, what: str, default: str) -> str:
    """``default``, followed by the instances' recorded reasons when there are any."""
    u = unobserved(h, what)
    if not u:
        return default
    return default + "; " + "; ".join(f"{n}: {e['reason']} ({e['ticks']} ticks)" for n, e in u.items())
