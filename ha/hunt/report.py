"""What a hunt found: ``hunt.json`` (for tools) and ``hunt.md`` (for people), and the lines the
command prints.

Per signature (``ha.hunt.search`` explains the grouping): the oracle, the roles, the fault kinds
the shrunk case needs, how many runs showed it and that count per 1,000 runs with its 95% Wilson
score interval, the first runs, the shrunk experiment (its size before and after, the command that
re-runs it, the scenario file when one was written). Groups whose failures no shrink covers (the
per-group shrink cap was reached, or a shrink is still to do after Ctrl-C) are listed as not
shrunk, with the command that re-runs their first run. Runs that crashed the simulator are listed
with their error: they are findings too, though no oracle judged them.

``hunt.json``::

    {"version": 1, "config": {...}, "runs": n judged, "crashed": [...], "failing_runs": n,
     "wall_s", "runs_per_min", "interrupted", "oracles": {oracle: runs},
     "signatures": [{"id", "oracle", "roles", "needs", "count", "per_1000": [mid, lo, hi],
                     "runs": [first indexes], "faults_active": {kind: n}, "shrunk": {...} | null,
                     "reproduce": "ha-testbed run ... --engine sim", "source_run"}]}
"""
from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any, Callable

__all__ = ["write_report", "print_findings", "wilson", "render_markdown"]


def wilson(k: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """The 95% Wilson score interval of a proportion k/n."""
    if n <= 0:
        return 0.0, 1.0
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return max(0.0, c - h), min(1.0, c + h)


def _per_1000(k: int, n: int) -> list[float]:
    lo, hi = wilson(k, n)
    return [round(1000 * k / n, 1) if n else 0.0, round(1000 * lo, 1), round(1000 * hi, 1)]


def _rel(p: Path, base: Path) -> str:
    try:
        return str(p.relative_to(base))
    except ValueError:
        return str(p)


def build(h) -> dict[str, Any]:
    out = h.out
    n = len(h.records)
    sigs, uncovered = h.assign()
    rows: list[dict[str, Any]] = []
    for sid, fails in sigs.items():
        if not fails:
            continue
        task = h.shrinks[sid]
        runs = sorted({i for i, _ in fails})
        active: dict[str, int] = {}
        for _, v in fails:
            for k in v.get("faults_active") or []:
                active[k] = active.get(k, 0) + 1
        folder = out / "shrinks" / sid
        shrunk = None
        if task.get("status") == "done":
            shrunk = {"folder": str(folder), "experiment": str(folder / "shrunk.yaml"),
                      "original": task.get("original"), "final": task.get("final"), "runs": task.get("runs"),
                      "stopped": task.get("stopped"), "roles": task.get("shrunk_roles"),
                      "repro": task.get("repro")}
        src = h.run_dir(task["source_run"])
        rows.append({"id": sid, "oracle": task["oracle"], "roles": fails[0][1]["roles"], "when": task["when"],
                     "needs": task.get("needs") or [], "count": len(runs), "per_1000": _per_1000(len(runs), n),
                     "runs": runs[:20], "faults_active": dict(sorted(active.items())), "source_run": task["source_run"],
                     "shrunk": shrunk, "shrink_error": task.get("error"),
                     "reproduce": (f"ha-testbed run {folder / 'shrunk.yaml'} --engine sim" if shrunk else
                                   f"ha-testbed run {src / 'experiment.yaml'} --engine sim")})
    for group, fails in uncovered.items():
        runs = sorted({i for i, _ in fails})
        active = {}
        for _, v in fails:
            for k in v.get("faults_active") or []:
                active[k] = active.get(k, 0) + 1
        v0 = fails[0][1]
        rows.append({"id": None, "oracle": v0["oracle"], "roles": v0["roles"], "when": v0["when"], "needs": None,
                     "count": len(runs), "per_1000": _per_1000(len(runs), n), "runs": runs[:20],
                     "faults_active": dict(sorted(active.items())), "source_run": fails[0][0], "shrunk": None,
                     "shrink_error": "not shrunk" + (" (interrupted)" if h.interrupted else ""),
                     "reproduce": f"ha-testbed run {h.run_dir(fails[0][0]) / 'experiment.yaml'} --engine sim"})
    rows.sort(key=lambda r: (-r["count"], r["oracle"], r["roles"], r["source_run"]))
    oracles: dict[str, int] = {}
    for rec in h.records.values():
        for o in sorted({v["oracle"] for v in rec.get("violations") or []}):
            oracles[o] = oracles.get(o, 0) + 1
    judged: dict[str, int] = {}
    for rec in h.records.values():
        for o in rec.get("judged") or []:
            judged[o] = judged.get(o, 0) + 1
    wall = time.monotonic() - h.t0
    crashed = [{"run": i, "error": r.get("error"),
                "reproduce": f"ha-testbed run {h.run_dir(i) / 'experiment.yaml'} --engine sim"}
               for i, r in sorted(h.failed_runs.items()) if r.get("status") == "failed"]
    return {"version": 1, "out": str(out), "config": h.cfg.identity() | {"runs": h.cfg.runs, "time_s": h.cfg.time_s,
                                                                       "jobs": h.cfg.jobs,
                                                                       "ray_address": h.cfg.ray_address},
            "runs": n, "failing_runs": sum(1 for r in h.records.values() if r.get("violations")),
            "crashed": crashed, "wall_s": round(wall, 1),
            "run_wall_s_mean": round(sum(float(r.get("wall_s") or 0) for r in h.records.values()) / n, 2) if n else None,
            "interrupted": h.interrupted, "stopped_on_crashes": h.crash_stop, "oracles": dict(sorted(oracles.items())),
            "judged": dict(sorted(judged.items())), "signatures": rows}


def _needs(row: dict) -> str:
    """A signature's needed fault kinds in words (known only once it is shrunk)."""
    if row["needs"] is None:
        return "not known: not shrunk"
    return ", ".join(row["needs"]) or "no fault"


def _size(s: dict | None) -> str:
    if not s:
        return "?"
    return f"{s['nodes']} nodes, {s['jobs']} jobs, {s['pods']} pods, {s['faults']} faults, {s['seconds']:g} s"


def render_markdown(doc: dict[str, Any]) -> str:
    c = doc["config"]
    n = doc["runs"]
    sw = ", ".join(f"{k}={'on' if v else 'off'}" for k, v in (c.get("switches") or {}).items())
    lines = [f"# Hunt: profile `{c['profile']}`" + (f" + switches {sw}" if sw else ""), "",
             f"Seed {c['seed']}, intensity `{c['intensity']}`" + (f", `--when {c['when']}`" if c.get("when") else "")
             + f". {n} runs judged ({doc['failing_runs']} failing"
             + (f", {len(doc['crashed'])} crashed the simulator" if doc["crashed"] else "")
             + f") in {doc['wall_s']:g} s wall" + (" — interrupted (Ctrl-C): what was found so far" if doc["interrupted"] else "")
             + ".", ""]
    if not doc["signatures"]:
        lines += ["No safety property failed.", ""]
    else:
        lines += [f"{len(doc['signatures'])} distinct failures (signatures). Per 1,000 runs: the count of "
                  "runs showing it, with its 95% Wilson interval.", "",
                  "| # | oracle | roles | needs (fault kinds) | runs | per 1,000 runs | smallest experiment | size |",
                  "|---|---|---|---|---|---|---|---|"]
        for k, r in enumerate(doc["signatures"], 1):
            mid, lo, hi = r["per_1000"]
            needs = _needs(r)
            sh = r["shrunk"]
            where = f"`{sh['experiment']}`" if sh else f"not shrunk: run {r['source_run']}"
            size = (f"{_size(sh['original'])} → **{_size(sh['final'])}**" if sh else "")
            lines.append(f"| {k} | {r['oracle']} | {r['roles']} | {needs} | {r['count']} | {mid:g} [{lo:g}, {hi:g}] "
                         f"| {where} | {size} |")
        lines.append("")
        for k, r in enumerate(doc["signatures"], 1):
            lines += [f"## {k}. {r['oracle']}: {r['roles']}", "",
                      f"* predicate: `{r['when']}`; runs: {', '.join(map(str, r['runs']))}"
                      + (" …" if r["count"] > len(r["runs"]) else ""),
                      "* fault kinds active at the violation (runs): "
                      + (", ".join(f"{a} ({b})" for a, b in r["faults_active"].items()) or "none"),
                      f"* reproduce: `{r['reproduce']}`"]
            sh = r["shrunk"]
            if sh:
                lines.append(f"* shrunk in {sh['runs']} sim runs ({sh['stopped']}): {_size(sh['original'])} → "
                             f"{_size(sh['final'])}; `{sh['folder']}/shrink.md` has the steps")
                if sh.get("roles") and sh["roles"] != r["roles"]:
                    lines.append(f"* the shrunk run shows it as: {sh['roles']}")
                rp = sh.get("repro")
                if rp:
                    cmd = str(rp.get("command") or "").replace(rp.get("file") or "repro.json",
                                                                str(Path(sh["folder"]) / (rp.get("file") or "repro.json")), 1)
                    lines.append(f"* scenario file (the session that broke it, in milliseconds): `{cmd}`")
            elif r.get("shrink_error"):
                lines.append(f"* {r['shrink_error']}")
            lines.append("")
    if doc.get("stopped_on_crashes"):
        lines += ["**Stopped: every run so far crashed the simulator** (below): the code under test is broken "
                  "before any property can be judged.", ""]
    if doc["crashed"]:
        lines += ["## Runs that crashed the simulator", ""]
        for c2 in doc["crashed"][:20]:
            lines.append(f"* run {c2['run']}: {c2['error']} — `{c2['reproduce']}`")
        lines.append("")
    lines += ["## Oracles", "", "| oracle | runs judged | runs failing |", "|---|---|---|"]
    for o, j in doc["judged"].items():
        lines.append(f"| {o} | {j} | {doc['oracles'].get(o, 0)} |")
    lines += ["", "Every run's experiment is `runs/run-<i>/experiment.yaml` (`ha-testbed run FILE --engine sim` "
              "re-runs it alone); a failing run keeps its results folder (`runs/run-<i>/results/`)."]
    return "\n".join(lines) + "\n"


def write_report(h) -> dict[str, Any]:
    doc = build(h)
    (h.out / "hunt.json").write_text(json.dumps(doc, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8")
    (h.out / "hunt.md").write_text(render_markdown(doc), encoding="utf-8")
    return doc


def print_findings(doc: dict[str, Any], echo: Callable[[str], None] = print) -> None:
    n = doc["runs"]
    echo(f"hunt: {n} runs, {doc['failing_runs']} failing, {len(doc['signatures'])} distinct failures"
         + (f", {len(doc['crashed'])} crashed" if doc["crashed"] else "") + (" (interrupted)" if doc["interrupted"] else ""))
    if doc.get("stopped_on_crashes"):
        echo(f"stopped: every run so far crashed the simulator, e.g. run {doc['crashed'][0]['run']}: "
             f"{doc['crashed'][0]['error']}")
    for k, r in enumerate(doc["signatures"], 1):
        mid, lo, hi = r["per_1000"]
        needs = _needs(r)
        echo(f"{k}. {r['oracle']}: {r['roles']} | needs: {needs} | {r['count']} runs, {mid:g} [{lo:g}, {hi:g}] per 1,000")
        sh = r["shrunk"]
        if sh:
            echo(f"   shrunk: {_size(sh['original'])} -> {_size(sh['final'])}")
        echo(f"   reproduce: {r['reproduce']}")
    echo(f"wrote {Path(doc['out']) / 'hunt.md'}, {Path(doc['out']) / 'hunt.json'}")
