"""What a run prints: the progress bar's line and the closing tables (summary, instances, chaos).
Presentation only: every number comes from the summary the checkers computed or the parts' final
stats."""
from __future__ import annotations

from typing import Any, Mapping

from apimachinery.units import format_duration

__all__ = ["Progress", "print_summary", "where"]


class Progress:
    """A rich progress bar over run time; ``update(t, recorded)`` after every tick."""

    def __init__(self, console, name: str, duration: float, enabled: bool):
        from rich.progress import BarColumn, Progress as RichProgress, TextColumn, TimeElapsedColumn
        self.duration = duration
        columns = (TextColumn("[bold]{task.description}"), BarColumn(),
                   TextColumn("{task.fields[secs]}"), TimeElapsedColumn(), TextColumn("{task.fields[info]}"))
        self._p = RichProgress(*columns, console=console, disable=not enabled, transient=False)
        self._task = None
        self._name = name

    def __enter__(self) -> "Progress":
        self._p.__enter__()
        self._task = self._p.add_task(self._name, total=self.duration, secs="", info="starting")
        return self

    def __exit__(self, *exc) -> None:
        self._p.__exit__(*exc)

    def update(self, t: float, recorded: Mapping[str, Mapping[str, Any]]) -> None:
        leaders = sorted(n for n, r in recorded.items() if r.get("is_leader"))
        binds = sum(int((r.get("stats") or {}).get("binds") or 0) for r in recorded.values())
        info = f"leader {','.join(leaders) or '-'}  binds {binds} (this life)"
        self._p.update(self._task, completed=min(t, self.duration),
                       secs=f"{min(t, self.duration):5.1f}/{self.duration:g}s", info=info)


def print_summary(console, *, title: str, summary: Mapping[str, Any], instances: Mapping[str, Any],
                  chaos: list[Mapping[str, Any]], out) -> None:
    from rich.table import Table
    from ha.experiment.checkers import headline
    t = Table(title=title)
    t.add_column("metric")
    t.add_column("value", justify="right")
    for k, v in summary.items():
        if isinstance(v, dict) and "max" in v and "mean" in v:
            v = f"max {v['max']}  mean {v['mean']}"
        elif isinstance(v, dict):
            v = headline(k, v)
        t.add_row(k, "n/a" if v is None else str(v))
    console.print(t)
    it = Table(title="instances")
    for col in ("instance", "node", "leader", "alive", "sessions", "binds", "bind_conflicts", "evictions"):
        it.add_column(col, justify="left" if col in ("instance", "node") else "right")
    for n, s in instances.items():
        tot = s.get("totals") or {}
        it.add_row(n, where(s.get("placement") or {}), "yes" if s.get("is_leader") else "",
                   "yes" if s.get("ended_alive") else "no",
                   str(tot.get("sessions", 0)), str(tot.get("binds", 0)), str(tot.get("bind_conflicts", 0)),
                   str(tot.get("evictions", 0)))
    console.print(it)
    for c in chaos:
        console.print(f"chaos[{c['index']}] {c['fault']} at {c['at']}: {c['status']}"
                      + (f" — {c['detail']}" if c.get("detail") else ""))
    console.print(f"results: {out}")


def where(placement: Mapping[str, Any]) -> str:
    """An instance's last life's place: ``host/<Ray node id, 8 hex>`` ("-" when unknown)."""
    node, host = placement.get("node_id"), placement.get("host")
    if not node and not host:
        return "-"
    return f"{host or '?'}/{str(node)[:8]}" if node else str(host)


def chaos_entries(exp, records: list[Mapping[str, Any]], redis_embedded: bool) -> list[dict[str, Any]]:
    """metrics.json's ``chaos`` list: each schedule entry with what the nemesis did with it."""
    by_index: dict[int, list] = {}
    for r in records:
        by_index.setdefault(r["index"], []).append(r)
    out = []
    for i, c in enumerate(exp.chaos):
        rec = {"index": i, "fault": c.fault, "at": format_duration(c.at), "status": "pending",
               "detail": "", "target": None, "applied_at_s": None, "ended_at_s": None,
               "entry": c.model_dump(mode="json", by_alias=True, exclude_none=True)}
        if c.at >= exp.duration:
            rec["status"], rec["detail"] = "not-reached", "after the end of this (shortened) run"
        rs = by_index.get(i) or []
        first = next((r for r in rs if r["action"] in ("start", "fire")), None)
        if first is not None:
            rec["status"] = first["status"]
            rec["target"] = ",".join(first["targets"]) or None
            rec["applied_at_s"] = round(first["t"], 3)
            rec["detail"] = "; ".join(f"{r['action']}: {r['detail']}" for r in rs if r.get("detail"))
            if first["status"] == "skipped" and c.fault == "redis-restart" and not redis_embedded:
                rec["detail"] = "--redis-url: an external Redis is not restarted by the testbed"
            ends = [r for r in rs if r["action"] in ("end", "restart")]
            if ends:
                rec["ended_at_s"] = round(ends[-1]["t"], 3)
        out.append(rec)
    return out
