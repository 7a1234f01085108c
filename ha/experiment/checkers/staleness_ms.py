"""staleness_ms: per instance, time (ms) from an API write to its cache applying it, over every
recorded sample of every life: ``{instance: {"p50", "p99", "max", "n"}}`` (the shape metrics.json
has always had; a table's headline is the worst instance's p99)."""
from ha.experiment.checkers import Absent

NAME = "staleness_ms"
HEADLINE = "p99"
CONTRACT = True


def _percentiles(xs):
    from ha.runtime.instance import percentiles
    return percentiles(xs)


def check(h):
    per: dict[str, list[float]] = {}
    for line in h.staleness():
        per.setdefault(str(line["instance"]), []).extend(line.get("ms") or [])
    stats = {n: _percentiles(xs) for n, xs in sorted(per.items()) if xs}
    from ha.experiment.checkers._unobserved import absent_reason, unobserved
    if not stats:
        return Absent(absent_reason(h, "staleness_ms", "no informer staleness samples (no write-time stamps)"))
    u = {n: e for n, e in unobserved(h, "staleness_ms").items() if n not in stats}
    # the shape stays {instance: percentiles}; an instance measured by no sample says why instead
    return {**stats, **{n: {"unobserved": e["reason"], "ticks": e["ticks"]} for n, e in u.items()}}


def columns(h):
    """staleness_p50/p99/max_ms per tick: the samples recorded since the previous tick."""
    ticks = h.ticks()
    lines = sorted(h.staleness(), key=lambda x: float(x["t"]))
    out = {"staleness_p50_ms": [], "staleness_p99_ms": [], "staleness_max_ms": []}
    j = 0
    for i, tk in enumerate(ticks):
        t = float(tk["t"])
        fresh: dict[str, list[float]] = {}
        while j < len(lines) and (float(lines[j]["t"]) <= t or i == len(ticks) - 1):
            fresh.setdefault(str(lines[j]["instance"]), []).extend(lines[j].get("ms") or [])
            j += 1
        ps = {n: _percentiles(xs) for n, xs in fresh.items() if xs}
        for q, col in (("p50", "staleness_p50_ms"), ("p99", "staleness_p99_ms"), ("max", "staleness_max_ms")):
            out[col].append({n: p[q] for n, p in ps.items()})
    return out
