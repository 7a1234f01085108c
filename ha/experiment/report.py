"""``report.md`` and its plots from a results folder (``ha-testbed report DIR``): a renderer only.

Every number comes from metrics.json (written by the checkers: ``ha-testbed analyze``) and the
timeseries view; the chaos windows come from ``history/faults.jsonl`` (older folders without a
history: from metrics.json's chaos records), and whether a fault is a window or a point is chaos'
own knowledge (checkers._run.is_windowed). Nothing here computes a metric.

Plots (matplotlib, Agg backend — no display needed):

* ``drift.png`` — cache_divergence per instance over time (pairwise drift dashed), chaos windows
  shaded, point faults (kill, redis-restart …) as vertical lines;
* ``binds_evictions.png`` — binds and evictions per second over time (all instances);
* ``staleness.png`` — staleness distribution (write → applied, ms) per instance, from the
  delivery logs when they carry write stamps, else the instances' p50/p99/max.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ha.experiment.checkers import headline, metric_names
from ha.experiment.results import Results, read_results

__all__ = ["write_report", "report_cli", "chaos_windows", "verdicts"]

def chaos_windows(metrics: dict[str, Any], path: str | Path | None = None
                  ) -> list[tuple[str, float, float | None]]:
    """(label, start_s, end_s or None for a point fault): from the history's fault records when
    the folder has them, else from metrics.json's experiment chaos entries and their records."""
    from ha.experiment.checkers._run import fault_windows, is_windowed
    from apimachinery.units import parse_duration
    if path is not None and (Path(path) / "history" / "run.json").is_file():
        from ha.experiment.history import History
        return [(w["label"], w["start"], w["end"]) for w in fault_windows(History(path))]
    out = []
    applied = {c.get("index"): c for c in (metrics.get("chaos") or []) if isinstance(c, dict)}
    for i, c in enumerate((metrics.get("experiment") or {}).get("chaos") or []):
        try:
            at = parse_duration(c.get("at", 0))
            dur = parse_duration(c["for"]) if c.get("for") is not None else None
        except Exception:  # noqa: BLE001 — a report never fails on one odd entry
            continue
        rec = applied.get(i) or {}
        if rec.get("status") in ("skipped", "not-reached", "failed"):
            continue
        start = rec.get("applied_at_s") if rec.get("applied_at_s") is not None else at
        label = f"{c.get('fault')}→{c.get('target', '')}"
        if dur is None or not is_windowed(str(c.get("fault"))):
            out.append((label, float(start), None))
        else:
            end = rec.get("ended_at_s") if rec.get("ended_at_s") is not None else start + dur
            out.append((label, float(start), float(end)))
    return out


def _series(res: Results, col: str) -> dict[str, tuple[list[float], list[float]]]:
    out: dict[str, tuple[list[float], list[float]]] = {}
    for r in res.timeseries:
        v = r.get(col)
        if v is None or r.get("t") is None:
            continue
        xs, ys = out.setdefault(r["instance"], ([], []))
        xs.append(float(r["t"]))
        ys.append(float(v))
    return out


def _shade(ax, windows) -> None:
    for i, (label, a, b) in enumerate(windows):
        if b is None:
            ax.axvline(a, color="red", linestyle=":", linewidth=1.2)
            ax.annotate(label, (a, 1), xycoords=("data", "axes fraction"), fontsize=7, color="red",
                        rotation=90, va="top", ha="right")
        else:
            ax.axvspan(a, b, color="orange", alpha=0.15)
            ax.annotate(label, (a, 1 - 0.08 * (i % 4)), xycoords=("data", "axes fraction"), fontsize=7,
                        color="darkorange", va="top")


def _plot_drift(res: Results, windows, path: Path) -> bool:
    import matplotlib.pyplot as plt
    div = _series(res, "cache_divergence")
    pw = _series(res, "pairwise_drift_max")
    if not div and not pw:
        return False
    fig, ax = plt.subplots(figsize=(9, 4))
    for name, (xs, ys) in sorted(div.items()):
        ax.plot(xs, ys, label=f"{name} vs reference", linewidth=1.4)
    for name, (xs, ys) in sorted(pw.items()):
        ax.plot(xs, ys, linestyle="--", linewidth=0.8, alpha=0.6, label=f"{name} pairwise (max)")
    _shade(ax, windows)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("tasks with different (status, node)")
    ax.set_title("Cache divergence per instance (chaos windows shaded)")
    ax.legend(fontsize=7, loc="upper left")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def _rate(res: Results, col: str) -> tuple[list[float], list[float]]:
    """Per-second rate of a cumulative per-instance counter, summed over instances."""
    per = _series(res, col)
    events: list[tuple[float, float]] = []
    for xs, ys in per.values():
        for i in range(1, len(xs)):
            dt = xs[i] - xs[i - 1]
            d = ys[i] - ys[i - 1]
            if dt > 0 and d >= 0:
                events.append((xs[i], d))
    if not events:
        return [], []
    end = max(t for t, _ in events)
    buckets = [0.0] * (int(end) + 1)
    for t, d in events:
        buckets[min(int(t), len(buckets) - 1)] += d
    return [i + 0.5 for i in range(len(buckets))], buckets


def _plot_binds(res: Results, windows, path: Path) -> bool:
    import matplotlib.pyplot as plt
    bx, by = _rate(res, "binds")
    ex, ey = _rate(res, "evictions")
    if not bx and not ex:
        return False
    fig, ax = plt.subplots(figsize=(9, 3.5))
    if bx:
        ax.bar(bx, by, width=0.9, alpha=0.6, label="binds/s")
    if ex:
        ax.bar(ex, ey, width=0.5, color="crimson", alpha=0.8, label="evictions/s")
    _shade(ax, windows)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("per second")
    ax.set_title("Binds and evictions over time (all instances)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def staleness_samples(res: Results, cap: int = 200_000) -> dict[str, list[float]]:
    """Staleness (ms) per instance from its delivery log: applied wall time − the write-time stamp,
    counted once per stamp (the first delivery that carries it), as the instance counts it."""
    from cluster_state.delivery import read_delivery_log, write_time_of
    out: dict[str, list[float]] = {}
    for name, path in res.delivery_logs.items():
        if "." in name:          # an earlier incarnation's log (<name>.1.log): same instance
            name = name.split(".", 1)[0]
        try:
            _, records = read_delivery_log(path)
        except Exception:  # noqa: BLE001 — a truncated log still yields the rest of the report
            continue
        seen: dict[str, float] = {}
        xs = out.setdefault(name, [])
        for r in records:
            if r.get("type") in ("LIST",) or r.get("initial"):
                continue
            wt = write_time_of(r.get("object"))
            applied = r.get("wall")   # unix time at apply ("delivered" is monotonic)
            uid = r.get("uid")
            if wt is None or applied is None or uid is None or seen.get(uid) == wt:
                continue
            seen[uid] = wt
            xs.append(max(0.0, (float(applied) - wt) * 1000.0))
            if len(xs) >= cap:
                break
    return {k: v for k, v in out.items() if v}


def _history_staleness(res: Results) -> dict[str, list[float]]:
    from ha.experiment.history import History
    if not (res.path / "history" / "run.json").is_file():
        return {}
    out: dict[str, list[float]] = {}
    for line in History(res.path).staleness():
        out.setdefault(str(line["instance"]), []).extend(line.get("ms") or [])
    return {k: v for k, v in sorted(out.items()) if v}


def _plot_staleness(res: Results, path: Path) -> str | None:
    import matplotlib.pyplot as plt
    samples = _history_staleness(res)
    source = "history"
    if not samples:
        samples, source = staleness_samples(res), "delivery logs"
    fig, ax = plt.subplots(figsize=(9, 3.5))
    if samples:
        hi = max(max(v) for v in samples.values())
        lo = max(0.01, min(min(v) for v in samples.values()))
        bins = [10 ** (math.log10(lo) + i * (math.log10(max(hi, lo * 10)) - math.log10(lo)) / 40)
                for i in range(41)]
        for name, xs in sorted(samples.items()):
            ax.hist(xs, bins=bins, histtype="step", linewidth=1.4, label=f"{name} (n={len(xs)})")
        ax.set_xscale("log")
        ax.set_xlabel("staleness (ms, write → applied to the cache)")
        ax.set_ylabel("events")
    else:
        st = res.summary.get("staleness_ms")
        per = (st.get("instances") if isinstance(st, dict) and "instances" in st else st) or {}
        per = {k: v for k, v in per.items() if isinstance(v, dict) and v.get("p50") is not None}
        if not per:
            plt.close(fig)
            return None
        names = sorted(per)
        for j, q in enumerate(("p50", "p99", "max")):
            ax.bar([i + j * 0.27 for i in range(len(names))], [per[n][q] or 0 for n in names], width=0.27, label=q)
        ax.set_xticks([i + 0.27 for i in range(len(names))], names)
        ax.set_ylabel("staleness (ms)")
        source = "instance stats"
    ax.set_title(f"Staleness distribution per instance ({source})")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return source


def _fmt(v: Any) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def verdicts(res: Results) -> list[str]:
    """Short sentences a reader can act on."""
    s = res.summary
    out = []
    cd = s.get("cache_divergence")
    if isinstance(cd, dict):
        fin = {k: v.get("final") for k, v in (cd.get("instances") or {}).items()}
        bad = {k: v for k, v in fin.items() if v}
        if bad:
            out.append(f"**Caches did not converge**: at the end {', '.join(f'{k}={v}' for k, v in sorted(bad.items()))} "
                       f"task(s) still differ from the reference (max during the run {cd.get('max')}).")
        else:
            out.append(f"Every instance's cache ended equal to the reference (max divergence during the run "
                       f"{cd.get('max')}, mean {cd.get('mean')}).")
    for name, what in (("overcommit_violations", "node-ticks overcommitted in the API server's truth"),
                       ("cyclic_evictions", "cyclic evictions (a re-created pod evicted again)"),
                       ("wasted_evictions", "wasted evictions (preemptor did not end on the freed node)"),
                       ("allocation_drift", "pods bound away from their nomination"),
                       ("partial_gang_binds", "partial gang binds (binds before minMember placed)")):
        v = headline(name, s.get(name))
        if v:
            out.append(f"**{v} {what}** — see `{name}` in metrics.json for examples.")
    cons = s.get("api_consistency")
    if cons is None and isinstance(res.metrics.get("oracles"), dict):
        cons = res.metrics["oracles"].get("api_consistency")
    if isinstance(cons, dict) and cons.get("ok") is not None:
        out.append("API server state equals the replay of its event stream (no lost writes)." if cons.get("ok")
                   else f"**API server and its event stream disagree**: lost {cons.get('lost_writes')}, "
                        f"phantoms {cons.get('phantoms')}.")
    fr = s.get("failover_recovery_s")
    if "failover_recovery_s" in s:
        out.append(f"Failover recovered in {fr} s." if fr is not None else "**A leader loss never recovered in the run.**")
    return out


def placements(res: Results) -> list[str]:
    """"Where the instances ran": one row per instance from its recorded lives (the Ray node and
    host of each life, how each began and ended); nothing when no life names a node."""
    from ha.experiment.history import History
    if not (res.path / "history" / "run.json").is_file():
        return []
    lives: dict[str, list[dict[str, Any]]] = {}
    for r in sorted(History(res.path).lives(), key=lambda r: (str(r.get("instance")), float(r.get("t") or 0))):
        lives.setdefault(str(r.get("instance")), []).append(r)
    if not any(r.get("node_id") or r.get("host") for rs in lives.values() for r in rs):
        return []
    lines = ["", "## Where the instances ran", "", "| instance | node(s) | host(s) | lives |", "|---|---|---|---|"]
    for name, rs in lives.items():
        nodes, hosts = [], []
        for r in rs:
            if r.get("node_id") and str(r["node_id"])[:12] not in nodes:
                nodes.append(str(r["node_id"])[:12])
            if r.get("host") and r["host"] not in hosts:
                hosts.append(str(r["host"]))
        events = []
        for r in rs:
            why = [w for w in ("leader" if r.get("was_leader") else "", r.get("cause") or "") if w]
            events.append(f"{r.get('event')} {float(r.get('t') or 0):.1f} s" + (f" ({', '.join(why)})" if why else ""))
        lines.append(f"| {name} | {' → '.join(nodes) or '—'} | {', '.join(hosts) or '—'} | {'; '.join(events)} |")
    return lines


def write_report(path: str | Path) -> Path:
    """(Re)write ``report.md`` and its PNGs in a results folder; returns the report's path."""
    import matplotlib
    matplotlib.use("Agg")
    res = read_results(path)
    out = Path(path)
    windows = chaos_windows(res.metrics, out)
    exp = res.experiment
    conv = res.summary.get("convergence") if isinstance(res.summary.get("convergence"), dict) \
        else res.metrics.get("convergence") if isinstance(res.metrics.get("convergence"), dict) else None
    plots = []
    if _plot_drift(res, windows, out / "drift.png"):
        plots.append(("Cache divergence over time", "drift.png"))
    if _plot_binds(res, windows, out / "binds_evictions.png"):
        plots.append(("Binds and evictions over time", "binds_evictions.png"))
    if _plot_staleness(res, out / "staleness.png"):
        plots.append(("Staleness distribution", "staleness.png"))
    hist = res.metrics.get("history") if isinstance(res.metrics.get("history"), dict) else {}
    run = {"elapsed_s": hist.get("elapsed_s"), "ticks": hist.get("ticks"),
           "interrupted": (res.metrics.get("run") or {}).get("interrupted")} | (res.metrics.get("run") or {})
    oracles = res.metrics.get("oracles") if isinstance(res.metrics.get("oracles"), dict) else {}
    absent = res.metrics.get("absent") or (oracles or {}).get("absent") or {}
    lines = [f"# {exp.get('name', out.name)} — profile `{exp.get('profile')}`, seed {exp.get('seed')}", ""]
    sched = exp.get("schedulers") or {}
    lines.append(f"{sched.get('instances', '?')} instance(s), mode {sched.get('mode', '?')}, "
                 f"duration {exp.get('duration')}, measured every {(exp.get('measure') or {}).get('every')}; "
                 f"elapsed {run.get('elapsed_s')} s, {run.get('ticks')} ticks"
                 + (" — **interrupted**" if run.get("interrupted") else "")
                 + (f" — **error: {run.get('error')}**" if run.get("error") else "") + ".")
    lines += ["", "## Summary", ""]
    lines += [f"- {v}" for v in verdicts(res)] or ["- (no oracle metrics in this run)"]
    lines += ["", "| metric | value | detail |", "|---|---:|---|"]
    contract = metric_names(contract_only=True)
    for name in contract:
        if name in res.summary:
            v = res.summary[name]
            detail = ""
            if isinstance(v, dict):
                detail = ", ".join(f"{k} {_fmt(x)}" for k, x in v.items()
                                   if not isinstance(x, (dict, list)) and k != HEADLINE_KEY_SKIP)
            lines.append(f"| `{name}` | {_fmt(headline(name, v))} | {detail} |")
        else:
            lines.append(f"| `{name}` | — | not measured: {absent.get(name, 'not computed by this run')} |")
    extensions = [k for k in res.summary if k not in contract and k != "convergence"]
    for name in extensions:
        v = res.summary[name]
        detail = ""
        if isinstance(v, dict):
            detail = ", ".join(f"{k} {_fmt(x)}" for k, x in v.items() if not isinstance(x, (dict, list)))
        lines.append(f"| `{name}` (extension) | {_fmt(headline(name, v))} | {detail} |")
    if conv is not None:
        lines += ["", "## Convergence after the last fault", "",
                  f"Last fault ended at {_fmt(conv.get('last_fault_s'))} s; verdict: "
                  f"**{'ok' if conv.get('ok') else 'NOT ok' if conv.get('ok') is False else 'n/a'}** "
                  f"(every live instance's {conv.get('column') or 'cache_divergence'} back to 0 for good within {_fmt(conv.get('within_s'))} s, "
                  f"then 0 for at least {_fmt(conv.get('min_quiet_s'))} s"
                  + (f", API server = replay of its event stream: {conv.get('api_consistency_ok')}"
                     if "api_consistency_ok" in conv else "") + ").", "",
                  "| instance | first 0 (s) | settled (s) | quiet tail (s) | max after | final | reason |",
                  "|---|---:|---:|---:|---:|---:|---|"]
        for n, v in (conv.get("instances") or {}).items():
            lines.append(f"| {n} | {_fmt(v.get('seconds'))} | {_fmt(v.get('settled_s'))} | "
                         f"{_fmt(v.get('quiet_s'))} | {_fmt(v.get('max_after'))} | {_fmt(v.get('final'))} | {v.get('reason', '')} |")
    lines += _divergence_kinds(out)
    lines += placements(res)
    if windows:
        lines += ["", "## Chaos", ""]
        for label, a, b in windows:
            lines.append(f"- {label}: {a:.1f} s" + (f" → {b:.1f} s" if b is not None else " (point fault)"))
    for title, png in plots:
        lines += ["", f"## {title}", "", f"![{title}]({png})"]
    lines += ["", "---", f"Rebuild: `ha-testbed report {out}`; compare runs: `ha-testbed compare DIR...`", ""]
    p = out / "report.md"
    p.write_text("\n".join(lines), encoding="utf-8")
    return p


HEADLINE_KEY_SKIP = "examples"


def divergence_kinds(path: Path) -> list[dict[str, Any]]:
    """divergence.jsonl grouped by how the instance differed from the reference (its status and
    the reference's, and whether the node differs): task-ticks, instances, the first and last time,
    an example pod; most frequent first. Unreadable lines are skipped."""
    import json
    groups: dict[tuple, dict[str, Any]] = {}
    try:
        fh = open(path, encoding="utf-8")
    except OSError:
        return []
    with fh:
        for line in fh:
            try:
                d = json.loads(line)
                mine, ref = d.get("instance_state"), d.get("reference")
                if not d.get("instance") or (mine is None and ref is None):
                    continue
                ms = (mine or ["(absent)"])[0]
                rs = (ref or ["(absent)"])[0]
                same_node = bool(mine and ref and len(mine) > 1 and len(ref) > 1 and mine[1] == ref[1])
                key = (ms, rs, "—" if not (mine and ref) else "same node" if same_node else "other node")
                g = groups.setdefault(key, {"instance_status": ms, "reference_status": rs, "node": key[2],
                                            "task_ticks": 0, "instances": set(), "first_t": d["t"],
                                            "last_t": d["t"], "example": d.get("pod")})
                g["task_ticks"] += 1
                g["instances"].add(d.get("instance"))
                g["first_t"], g["last_t"] = min(g["first_t"], d["t"]), max(g["last_t"], d["t"])
            except (ValueError, KeyError, TypeError, IndexError):
                continue
    out = sorted(groups.values(), key=lambda g: -g["task_ticks"])
    for g in out:
        g["instances"] = sorted(x for x in g["instances"] if x)
    return out


def _divergence_kinds(out: Path, top: int = 8) -> list[str]:
    kinds = divergence_kinds(out / "divergence.jsonl")
    if not kinds:
        return []
    lines = ["", "## What diverged", "",
             "From `divergence.jsonl` (each diverged task per instance and tick, up to 25 per tick): "
             "how the instance's cache differed from the up-to-date reference.", "",
             "| instance holds | reference holds | node | task-ticks | instances | first (s) | last (s) | e.g. |",
             "|---|---|---|---:|---|---:|---:|---|"]
    for g in kinds[:top]:
        lines.append(f"| {g['instance_status']} | {g['reference_status']} | {g['node']} | {g['task_ticks']} | "
                     f"{', '.join(g['instances'])} | {_fmt(g['first_t'])} | {_fmt(g['last_t'])} | `{g['example']}` |")
    if len(kinds) > top:
        lines.append(f"| … {len(kinds) - top} more kinds | | | | | | | |")
    return lines


def report_cli(path, echo=print) -> int:
    p = write_report(path)
    echo(f"wrote {p}")
    return 0
