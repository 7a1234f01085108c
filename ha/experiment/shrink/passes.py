"""The reductions the shrinker tries: each pass maps an experiment (its compact dict, the shape of an
experiment file) to smaller candidates, coarsest first, in a fixed order.

A pass never checks validity or runs anything: the shrinker validates each candidate
(``parse_experiment``) and runs it on the sim engine. Every candidate is strictly smaller than its
input in one dimension (faults, fault window, duration, nodes, instances, gangs, queues, objects,
plugins, actions) or simpler (a fixed delay instead of a random one), so the greedy loop ends.
Candidates are ``(description, dict)``; the description is what ``shrink.md`` prints for a step.
"""
from __future__ import annotations

import copy
import math
from typing import Any, Callable, Iterator

from apimachinery.units import format_duration, parse_duration

__all__ = ["PASSES", "Candidate"]

Candidate = tuple[str, dict[str, Any]]
MIN_WINDOW_S = 0.5       # fault windows and durations are not shortened below this
MIN_DURATION_S = 2.0


def _d(v: Any) -> float:
    return parse_duration(v)


def _fmt(s: float) -> str:
    return format_duration(round(s, 3))


def _with(d: dict[str, Any], fn: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    c = copy.deepcopy(d)
    fn(c)
    return c


def _fault_label(c: dict[str, Any]) -> str:
    tgt = c.get("target")
    return f"{c.get('fault')}" + (f" on {tgt}" if tgt else "") + f" at {c.get('at', '0s')}"


# -- chaos ----------------------------------------------------------------------------------------

def drop_faults(d: dict[str, Any]) -> Iterator[Candidate]:
    chaos = d.get("chaos") or []
    if len(chaos) > 1:
        # halves first (delta debugging's coarse step), then one at a time
        half = len(chaos) // 2
        yield (f"drop chaos[{half}:] ({len(chaos) - half} faults)",
               _with(d, lambda c: c.__setitem__("chaos", c["chaos"][:half])))
        yield (f"drop chaos[:{half}] ({half} faults)",
               _with(d, lambda c: c.__setitem__("chaos", c["chaos"][half:])))
    for i, entry in enumerate(chaos):
        yield (f"drop chaos[{i}] ({_fault_label(entry)})",
               _with(d, lambda c, i=i: c["chaos"].pop(i)))


def shorten_faults(d: dict[str, Any]) -> Iterator[Candidate]:
    for i, entry in enumerate(d.get("chaos") or []):
        if "for" not in entry:
            continue
        w = _d(entry["for"])
        if w / 2 >= MIN_WINDOW_S:
            yield (f"chaos[{i}] ({entry.get('fault')}): window {_fmt(w)} -> {_fmt(w / 2)}",
                   _with(d, lambda c, i=i, w=w: c["chaos"][i].__setitem__("for", _fmt(w / 2))))
        at = _d(entry.get("at", 0))
        if at > 0:
            # start earlier: a fault that fires at once is easier to read
            yield (f"chaos[{i}] ({entry.get('fault')}): at {_fmt(at)} -> 0s",
                   _with(d, lambda c, i=i: c["chaos"][i].__setitem__("at", "0s")))


def fixed_delays(d: dict[str, Any]) -> Iterator[Candidate]:
    for i, entry in enumerate(d.get("chaos") or []):
        for key, val in sorted(entry.items()):
            if not isinstance(val, dict) or "dist" not in val or val["dist"] == "fixed":
                continue
            if val["dist"] == "exponential":
                typical = _d(val["mean"])
            elif val["dist"] == "uniform":
                typical = (_d(val["min"]) + _d(val["max"])) / 2
            else:   # pareto: its median, scale * 2^(1/alpha)
                typical = _d(val["scale"]) * 2 ** (1 / float(val["alpha"]))
                if "max" in val:
                    typical = min(typical, _d(val["max"]))
            yield (f"chaos[{i}].{key}: {val['dist']} -> fixed {_fmt(typical)}",
                   _with(d, lambda c, i=i, key=key, t=typical:
                         c["chaos"][i].__setitem__(key, {"dist": "fixed", "value": _fmt(t)})))


# -- time ----------------------------------------------------------------------------------------

def _cut(c: dict[str, Any], new: float) -> None:
    """Set the duration; clip what must end before it (chaos entries starting after the end are
    dropped, windows end with the run, the workload stops arriving)."""
    c["duration"] = _fmt(new)
    kept = []
    for e in c.get("chaos") or []:
        at = _d(e.get("at", 0))
        if at >= new:
            continue
        if "for" in e and at + _d(e["for"]) > new:
            e["for"] = _fmt(max(new - at, 0.001))
        kept.append(e)
    if "chaos" in c:
        c["chaos"] = kept
    wl = c.get("workload")
    if isinstance(wl, dict) and wl.get("until") is not None and _d(wl["until"]) > new:
        wl["until"] = _fmt(new)


def shorten_duration(d: dict[str, Any]) -> Iterator[Candidate]:
    dur = _d(d.get("duration", "60s"))
    for factor in (0.5, 0.75):
        new = math.floor(dur * factor)
        if new >= MIN_DURATION_S and new < dur:
            yield f"duration {_fmt(dur)} -> {_fmt(new)}", _with(d, lambda c, n=new: _cut(c, n))
    wl = d.get("workload")
    if isinstance(wl, dict):
        until = _d(wl["until"]) if wl.get("until") is not None else dur
        new = math.floor(until / 2)
        if new >= 1:
            yield (f"workload.until {_fmt(until)} -> {_fmt(new)}",
                   _with(d, lambda c, n=new: c["workload"].__setitem__("until", _fmt(n))))


# -- cluster -------------------------------------------------------------------------------------

def fewer_nodes(d: dict[str, Any]) -> Iterator[Candidate]:
    n = int((d.get("cluster") or {}).get("nodes", 4))
    for new in dict.fromkeys((n // 2, n - 1)):
        if 0 <= new < n:
            yield (f"cluster.nodes {n} -> {new}",
                   _with(d, lambda c, k=new: c.setdefault("cluster", {}).__setitem__("nodes", k)))
    init = d.get("initial") or {}
    for i, node in enumerate(init.get("nodes") or []):
        name = node["name"]

        def drop(c: dict[str, Any], i: int = i, name: str = name) -> None:
            ini = c["initial"]
            ini["nodes"].pop(i)
            ini["pods"] = [p for p in ini.get("pods") or [] if p.get("nodeName") != name]
            for p in ini["pods"]:
                if p.get("nominatedNodeName") == name:
                    p.pop("nominatedNodeName")
        yield f"drop initial node {name} (and the pods bound to it)", _with(d, drop)


def fewer_instances(d: dict[str, Any]) -> Iterator[Candidate]:
    s = d.get("schedulers") or {}
    n = int(s.get("instances", 1))
    for new in dict.fromkeys((1, n - 1)):
        if 1 <= new < n:
            def cut(c: dict[str, Any], k: int = new) -> None:
                c.setdefault("schedulers", {})["instances"] = k
                keep = []
                for e in c.get("chaos") or []:
                    t = e.get("target") or ""
                    if t.startswith("scheduler-") and t[10:].isdigit() and int(t[10:]) > k:
                        continue
                    keep.append(e)
                if "chaos" in c:
                    c["chaos"] = keep
            yield f"schedulers.instances {n} -> {new}", _with(d, cut)


# -- workload ------------------------------------------------------------------------------------

def _pair(v: Any) -> tuple[Any, Any]:
    return (v[0], v[1]) if isinstance(v, (list, tuple)) else (v, v)


def smaller_workload(d: dict[str, Any], gangs: int | None = None) -> Iterator[Candidate]:
    wl = d.get("workload")
    if not isinstance(wl, dict):
        return
    if (d.get("initial") or {}).get("pods"):
        yield "drop the workload (only the initial objects remain)", _with(d, lambda c: c.pop("workload"))
    cur = wl.get("max_gangs")
    if gangs is not None:
        top = gangs if cur is None else min(int(cur), gangs)
        for new in dict.fromkeys((top // 2, top - 1)):
            if 1 <= new < top:
                yield (f"workload.max_gangs {cur if cur is not None else 'unlimited'} -> {new}",
                       _with(d, lambda c, k=new: c["workload"].__setitem__("max_gangs", k)))
    lo, hi = _pair(wl.get("gang_size", 1))
    lo, hi = int(lo), int(hi)
    if hi > lo:
        mid = max(lo, (lo + hi) // 2)
        for new_hi in dict.fromkeys((mid, hi - 1)):
            if lo <= new_hi < hi:
                yield (f"workload.gang_size [{lo}, {hi}] -> [{lo}, {new_hi}]",
                       _with(d, lambda c, h=new_hi: c["workload"].__setitem__("gang_size", [lo, h])))
    if lo > 1:
        for new_lo in dict.fromkeys((max(1, lo // 2), lo - 1)):
            if 1 <= new_lo < lo:
                yield (f"workload.gang_size [{lo}, {hi}] -> [{new_lo}, {new_lo if hi == lo else hi}]",
                       _with(d, lambda c, nl=new_lo: c["workload"].__setitem__(
                           "gang_size", [nl, nl if hi == lo else hi])))
    from apimachinery.units import format_rate, parse_rate
    rate = parse_rate(wl.get("rate", "1/s"))
    if rate / 2 >= 0.01:
        yield (f"workload.rate {format_rate(rate)} -> {format_rate(rate / 2)}",
               _with(d, lambda c: c["workload"].__setitem__("rate", format_rate(rate / 2))))
    rlo, rhi = _pair(wl.get("runtime", "10s"))
    if _d(rlo) != _d(rhi):
        yield (f"workload.runtime [{rlo}, {rhi}] -> {rhi} (fixed)",
               _with(d, lambda c: c["workload"].__setitem__("runtime", rhi)))
    for i, q in enumerate(wl.get("queues") or []):
        if len(wl["queues"]) > 1:
            yield (f"workload.queues: drop {q}",
                   _with(d, lambda c, i=i: c["workload"]["queues"].pop(i)))
    for name in sorted(wl.get("priority_classes") or {}):
        yield (f"workload.priority_classes: drop {name}",
               _with(d, lambda c, n=name: c["workload"]["priority_classes"].pop(n)))


def fewer_queues(d: dict[str, Any]) -> Iterator[Candidate]:
    for i, q in enumerate(d.get("queues") or []):
        name = q["name"]
        wl = d.get("workload")
        if isinstance(wl, dict) and wl.get("queues") == [name]:
            continue     # its only queue: dropping it would make the workload use every queue

        def drop(c: dict[str, Any], i: int = i, name: str = name) -> None:
            c["queues"].pop(i)
            w = c.get("workload")
            if isinstance(w, dict) and name in (w.get("queues") or []):
                w["queues"].remove(name)
            _drop_groups(c, lambda pg: pg.get("queue", "default") == name)
        yield f"drop queue {name} (and its initial podgroups)", _with(d, drop)
    for i, q in enumerate((d.get("initial") or {}).get("queues") or []):
        name = q["name"]

        def drop_init(c: dict[str, Any], i: int = i, name: str = name) -> None:
            c["initial"]["queues"].pop(i)
            w = c.get("workload")
            if isinstance(w, dict) and name in (w.get("queues") or []):
                w["queues"].remove(name)
            _drop_groups(c, lambda pg: pg.get("queue", "default") == name)
        yield f"drop initial queue {name} (and its podgroups)", _with(d, drop_init)


def _drop_groups(c: dict[str, Any], which: Callable[[dict[str, Any]], bool]) -> None:
    ini = c.get("initial") or {}
    gone = {(pg.get("namespace", "default"), pg["name"]) for pg in ini.get("podgroups") or [] if which(pg)}
    if not gone:
        return
    ini["podgroups"] = [pg for pg in ini["podgroups"] if (pg.get("namespace", "default"), pg["name"]) not in gone]
    ini["pods"] = [p for p in ini.get("pods") or [] if (p.get("namespace", "default"), p["podgroup"]) not in gone]


def fewer_objects(d: dict[str, Any]) -> Iterator[Candidate]:
    ini = d.get("initial") or {}
    for pg in ini.get("podgroups") or []:
        key = (pg.get("namespace", "default"), pg["name"])
        yield (f"drop initial podgroup {key[0]}/{key[1]} (and its pods)",
               _with(d, lambda c, key=key: _drop_groups(
                   c, lambda g: (g.get("namespace", "default"), g["name"]) == key)))
    pods = ini.get("pods") or []
    for i, p in enumerate(pods):
        mates = [q for q in pods if q.get("namespace", "default") == p.get("namespace", "default")
                 and q["podgroup"] == p["podgroup"]]
        if len(mates) > 1:
            yield (f"drop initial pod {p.get('namespace', 'default')}/{p['name']}",
                   _with(d, lambda c, i=i: c["initial"]["pods"].pop(i)))
    used = {pg.get("priorityClassName") for pg in ini.get("podgroups") or []} | \
           {p.get("priorityClassName") for p in pods}
    for i, pc in enumerate(ini.get("priority_classes") or []):
        if pc["name"] not in used:
            yield (f"drop priority class {pc['name']}",
                   _with(d, lambda c, i=i: c["initial"]["priority_classes"].pop(i)))


# -- scheduler configuration ---------------------------------------------------------------------

DEFAULT_CONF = None


def _default_conf() -> dict[str, Any]:
    """Volcano's default configuration as an explicit ``scheduler_conf`` (names only: experiments
    turn every unset enabled* flag on, so this is the same configuration)."""
    from ha.scheduler.conf import default_conf
    c = default_conf().to_dict()
    return {"actions": list(c["actions"]),
            "tiers": [[{"name": p["name"]} for p in tier] for tier in c["tiers"]]}


def simpler_conf(d: dict[str, Any]) -> Iterator[Candidate]:
    conf = d.get("scheduler_conf")
    if conf is None:
        conf = _default_conf()
        base = _with(d, lambda c: c.__setitem__("scheduler_conf", conf))
        prefix = "scheduler_conf (default, made explicit): "
    else:
        base = d
        prefix = "scheduler_conf: "
    actions = conf.get("actions") or []
    for i, a in enumerate(actions):
        if len(actions) > 1:
            def drop_action(c: dict[str, Any], i: int = i, a: str = a) -> None:
                c["scheduler_conf"]["actions"].pop(i)
                (c["scheduler_conf"].get("action_arguments") or {}).pop(a, None)
            yield f"{prefix}drop action {a}", _with(base, drop_action)
    tiers = conf.get("tiers") or []
    total = sum(len(t) for t in tiers)
    for ti, tier in enumerate(tiers):
        for pi, p in enumerate(tier):
            if total <= 1:
                continue

            def drop_plugin(c: dict[str, Any], ti: int = ti, pi: int = pi) -> None:
                ts = c["scheduler_conf"]["tiers"]
                ts[ti].pop(pi)
                c["scheduler_conf"]["tiers"] = [t for t in ts if t]
            yield f"{prefix}drop plugin {p['name']}", _with(base, drop_plugin)


# The order: what removes most first (faults, time, size), then what simplifies.
PASSES: list[tuple[str, Callable[..., Iterator[Candidate]]]] = [
    ("faults", drop_faults),
    ("duration", shorten_duration),
    ("instances", fewer_instances),
    ("nodes", fewer_nodes),
    ("workload", smaller_workload),
    ("queues", fewer_queues),
    ("objects", fewer_objects),
    ("scheduler_conf", simpler_conf),
    ("fault windows", shorten_faults),
    ("delays", fixed_delays),
]
