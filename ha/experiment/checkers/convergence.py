"""convergence (extension): after the last fault ends, every live instance's cache_divergence
(its persistent part) back to 0 for good within ``measure.converge_within`` and quiet long enough;
plus the API server = replay of its event stream (the verdict: ``convergence()``)."""
from __future__ import annotations

from typing import Any, Iterable, Mapping

from ha.experiment.checkers import Absent, api_consistency
from ha.experiment.checkers._fold import reference_pass
from ha.experiment.checkers._run import experiment, last_fault_end, seconds

CONVERGENCE_WITHIN_S = 5.0      # "back to 0 within a few seconds of the last fault"
CONVERGENCE_MIN_QUIET_S = 5.0   # a settled verdict needs this much all-zero tail to stand on


def convergence(rows: Iterable[Mapping[str, Any]], last_fault_s: float | None, *,
                within_s: float = CONVERGENCE_WITHIN_S, min_quiet_s: float = CONVERGENCE_MIN_QUIET_S,
                api_consistency: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Issue 7 item 5's verdict, from the timeseries rows (t, instance, alive, and
    cache_divergence_persistent when recorded, else cache_divergence) and the time the last fault ended. For every instance alive at the end of the run: the seconds
    from ``last_fault_s`` to its first cache_divergence sample of 0 (``seconds``) and to the start
    of the final all-zero stretch (``settled_s``; None if the last sample is not 0). An instance is
    ok when it settled for good within ``within_s`` and that stretch lasts ``min_quiet_s`` or more
    (a zero in the last sample alone proves nothing). ``ok``: every live instance is ok and (when
    given) the API server equals the replay of its own event stream. Absent parts say why."""
    out: dict[str, Any] = {"within_s": within_s, "min_quiet_s": min_quiet_s,
                           "last_fault_s": last_fault_s, "instances": {}}
    if api_consistency is not None:
        out["api_consistency_ok"] = api_consistency.get("ok")
    by_inst: dict[str, list[tuple[float, int | None, bool]]] = {}
    rows = list(rows)
    # judge on the persistent part when the run recorded it: a task whose state was in flight at
    # one sample is not a cache that failed to converge (cache_divergence_persistent)
    column = ("cache_divergence_persistent"
              if any(r.get("cache_divergence_persistent") not in (None, "") for r in rows) else "cache_divergence")
    out["column"] = column
    for r in rows:
        if r.get("t") is None or not r.get("instance"):
            continue
        d = r.get(column)
        by_inst.setdefault(str(r["instance"]), []).append(
            (float(r["t"]), None if d in (None, "") else int(d), bool(int(r.get("alive", 1) or 0))))
    if not by_inst:
        out.update(ok=None, reason="no timeseries rows")
        return out
    end_t = max(s[-1][0] for s in by_inst.values())
    if last_fault_s is None:
        last_fault_s = 0.0
        out["last_fault_s"] = 0.0
        out["note"] = "no fault in the run: measured from t=0"
    oks: list[bool] = []
    unmeasured = 0
    for name, series in sorted(by_inst.items()):
        series.sort(key=lambda x: x[0])
        if not series[-1][2]:
            out["instances"][name] = {"alive": False, "reason": "not alive at the end of the run"}
            continue
        after = [(t, d) for t, d, alive in series if t >= last_fault_s and alive and d is not None]
        if not after:
            out["instances"][name] = {"alive": True, "seconds": None,
                                      "reason": "no synced sample after the last fault "
                                                f"({last_fault_s:.1f} s; run ended at {end_t:.1f} s)"}
            unmeasured += 1
            continue
        first0 = next((t for t, d in after if d == 0), None)
        settled = None
        if after[-1][1] == 0:
            settled = after[-1][0]
            for t, d in reversed(after):
                if d != 0:
                    break
                settled = t
        sec = None if first0 is None else round(first0 - last_fault_s, 3)
        settled_s = None if settled is None else round(settled - last_fault_s, 3)
        quiet = None if settled is None else round(after[-1][0] - settled, 3)
        reason = None
        if first0 is None:
            reason = f"{column} never 0 after the last fault"
        elif settled is None:
            reason = f"{column} not 0 at the end of the run (final {after[-1][1]})"
        elif settled_s > within_s:
            reason = f"settled for good only {settled_s:g} s after the last fault (allowed {within_s:g} s)"
        elif quiet < min_quiet_s:
            reason = (f"only {quiet:g} s of zero divergence before the run ended "
                      f"(need {min_quiet_s:g} s to call it settled): lengthen the quiet tail")
        ok = reason is None
        oks.append(ok)
        out["instances"][name] = {
            "alive": True, "seconds": sec, "settled_s": settled_s, "quiet_s": quiet,
            "max_after": max(d for _, d in after), "final": after[-1][1],
            "samples_after": len(after), "ok": ok, **({"reason": reason} if reason else {})}
    settled_all = [v["settled_s"] for v in out["instances"].values() if v.get("settled_s") is not None]
    measured = bool(oks) and not unmeasured
    out["value"] = max(settled_all) if measured and all(oks) else None   # the headline: slowest instance
    ok = measured and all(oks)
    if api_consistency is not None and api_consistency.get("ok") is not None:
        ok = ok and bool(api_consistency.get("ok"))
    out["ok"] = ok if measured else None
    if unmeasured:
        out["reason"] = (f"{unmeasured} live instance(s) without a synced sample after the last fault "
                         "(it lasted until the end of the run)")
    elif not oks:
        out["reason"] = "no instance alive at the end of the run"
    return out


NAME = "convergence"
HEADLINE = "value"
CONTRACT = False


def rows(h):
    """The timeseries rows convergence judges: t, instance, alive and the divergence columns."""
    rp = reference_pass(h)
    out = []
    for tk, per in zip(h.ticks(), rp.per_tick):
        for name, rec in tk["instances"].items():
            r = {"t": float(tk["t"]), "instance": name, "alive": int(bool(rec.get("alive")))}
            if name in per:
                r["cache_divergence"] = per[name]["cache_divergence"]
                r["cache_divergence_persistent"] = per[name]["cache_divergence_persistent"]
            out.append(r)
    return out


def check(h):
    rp = reference_pass(h)
    if rp.absent:
        return Absent(rp.absent)
    within = seconds((experiment(h).get("measure") or {}).get("converge_within"), CONVERGENCE_WITHIN_S)
    cons = api_consistency.check(h)
    return convergence(rows(h), last_fault_end(h), within_s=within,
                       api_consistency=None if isinstance(cons, Absent) else cons)
