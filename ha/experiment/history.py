"""The recorded history of a run (``<out>/history/``): its format, the writer and the reader.

A run only *records* (Jepsen's split): the driver hands what it observes to a
:class:`HistoryWriter`; every metric is a checker (:mod:`ha.experiment.checkers`) that reads the
history back through :class:`History` alone, so ``ha-testbed analyze`` can recompute every metric
of any results folder. docs/results-format.md documents every file and field; in short::

    history/run.json         the header (experiment, seed, profile, switches, engine, ...)
    history/ticks.jsonl      one line per measurement tick; each instance's digest as a DELTA
                             against that instance's previous recorded digest ("full" on the
                             first record of a generation)
    history/events.msgpack   the truth: every API-server watch event in RV order (msgpack stream)
    history/decisions.jsonl  every decision of every instance (+ instance, generation)
    history/staleness.jsonl  raw staleness samples (ms) per instance since its previous line
    history/faults.jsonl     every nemesis action
    history/leases.jsonl     the Lease whenever it changes
    history/lives.jsonl      instance lives: start / kill / crash / pause / resume / restart / stop
    history/scrapes.jsonl    /metrics scrapes of external (real vc-scheduler) instances, if any
    history/final.json       written at the end: final counters, cluster stats, final API state

Time base: every ``t`` is run seconds (since the run's start, monotonic), except
``run.json``'s ``started_at`` (wall clock, informational only). Files are append-only and flushed
at every tick, so a crashed run leaves a readable history; the reader skips (and counts) a
truncated last line.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

import msgpack

from ha.errors import BadInput

__all__ = ["HISTORY_DIR", "COUNTERS", "HistoryWriter", "History", "fold_delta", "api_state"]

HISTORY_DIR = "history"

# per-instance counters recorded at every tick (cumulative within one generation)
COUNTERS = ("binds", "bind_conflicts", "bind_errors", "evictions", "evict_errors", "status_writes",
            "status_errors", "errors", "session_errors", "elections_lost", "fatal_cache_errors",
            "panics", "restarts", "leader_transitions", "sessions")

_LINE_FILES = ("ticks", "decisions", "staleness", "faults", "leases", "lives")


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), default=_jsonable, allow_nan=False)


def _jsonable(o: Any) -> Any:
    if isinstance(o, (set, frozenset)):
        return sorted(o)
    if isinstance(o, tuple):
        return list(o)
    name = getattr(o, "name", None)      # enums (a TaskStatus that slipped through)
    if isinstance(name, str):
        return name
    return str(o)


def _delta(prev: Mapping[str, Any], cur: Mapping[str, Any]) -> dict[str, Any]:
    """{key: new value} for keys added or changed, {key: None} for keys removed; sorted keys."""
    changed = {k: v for k, v in cur.items() if prev.get(k) != v}
    for k in prev.keys() - cur.keys():
        changed[k] = None
    return dict(sorted(changed.items()))


def fold_delta(prev: Mapping[str, Any], delta: Mapping[str, Any]) -> dict[str, Any]:
    """A new dict: ``prev`` with ``delta`` applied (None removes the key)."""
    out = dict(prev)
    for k, v in delta.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = v
    return out


class HistoryWriter:
    """Appends a run's history under ``<out_dir>/history/``.

    ``tick`` takes each sampled instance's FULL state (the actor's ``digest()`` dict, optionally
    with ``"stats"`` = its ``stats()`` dict or ``"counters"``, and ``"generation"``) and writes the
    delta itself; an instance given as ``None`` (or ``{"alive": 0}``) was not sampled this tick."""

    def __init__(self, out_dir: str | os.PathLike, header: Mapping[str, Any]):
        self.dir = Path(out_dir) / HISTORY_DIR
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "run.json").write_text(json.dumps(dict(header), indent=2, default=_jsonable) + "\n",
                                           encoding="utf-8")
        self._files = {n: open(self.dir / f"{n}.jsonl", "a", encoding="utf-8") for n in _LINE_FILES}
        self._events = open(self.dir / "events.msgpack", "ab")
        self._packer = msgpack.Packer(use_bin_type=True)
        self._prev: dict[str, tuple[int, dict, dict]] = {}   # instance -> (generation, tasks, nodes)
        self.ticks = 0
        self.closed = False

    # -- per tick ------------------------------------------------------------------------------
    def tick(self, t: float, rv_before: int | None, rv_after: int | None,
             instances: Mapping[str, Mapping[str, Any] | None]) -> None:
        rec_instances: dict[str, Any] = {}
        for name in sorted(instances):
            s = instances[name]
            if not s or not s.get("alive", 1):
                rec_instances[name] = {"alive": 0}
                continue
            rec_instances[name] = self._instance(name, s)
        line = {"tick": self.ticks, "t": round(float(t), 6), "rv_before": rv_before, "rv_after": rv_after,
                "instances": rec_instances}
        self._files["ticks"].write(_dumps(line) + "\n")
        self.ticks += 1
        self.flush()

    def _instance(self, name: str, s: Mapping[str, Any]) -> dict[str, Any]:
        gen = int(s.get("generation") or 0)
        stats = s.get("stats") or {}
        counters = s.get("counters")
        if counters is None:
            counters = {k: int(stats[k]) for k in COUNTERS if isinstance(stats.get(k), (int, float))
                        and not isinstance(stats.get(k), bool)}
        tasks = dict(s.get("tasks") or {})
        nodes = dict(s.get("nodes") or {})
        rec: dict[str, Any] = {"alive": 1, "synced": int(bool(s.get("synced", True))),
                               "is_leader": int(bool(s.get("is_leader"))), "generation": gen,
                               "rvs": dict(sorted((s.get("rvs") or {}).items())),
                               "sessions": s.get("sessions", stats.get("sessions")),
                               "counters": dict(sorted(counters.items()))}
        for k in ("incarnation", "log_seq"):
            if s.get(k) is not None:
                rec[k] = s[k]
        if s.get("unobserved"):
            # what could not be observed of this instance this tick, and why (an external process)
            rec["unobserved"] = dict(sorted(s["unobserved"].items()))
        prev = self._prev.get(name)
        if prev is None or prev[0] != gen:
            rec["full"] = True
            rec["tasks"] = dict(sorted(tasks.items()))
            rec["nodes"] = dict(sorted(nodes.items()))
        else:
            rec["tasks"] = _delta(prev[1], tasks)
            rec["nodes"] = _delta(prev[2], nodes)
        self._prev[name] = (gen, tasks, nodes)
        return rec

    # -- streams -------------------------------------------------------------------------------
    def events(self, events: Iterable[Mapping[str, Any]]) -> None:
        """API-server watch events, in RV order: ``{"rv", "type", "kind", "object"}``."""
        w = self._events.write
        for e in events:
            w(self._packer.pack({"rv": int(e["rv"]), "type": e["type"], "kind": e["kind"],
                                 "object": e["object"]}))

    def decisions(self, decisions: Iterable[Mapping[str, Any]], *, t0_wall: float | None = None) -> None:
        """Decision records carrying ``instance`` and ``generation``; ``t`` in run seconds — or,
        with ``t0_wall`` (the run's start, Unix seconds), converted from the instance's wall time."""
        f = self._files["decisions"]
        for d in decisions:
            if t0_wall is not None and d.get("t") is not None:
                d = {**d, "t": round(float(d["t"]) - t0_wall, 6)}
            f.write(_dumps(d) + "\n")

    def staleness(self, t: float, instance: str, generation: int, samples: Iterable[float]) -> None:
        ms = [round(float(x), 3) for x in samples]
        if ms:
            self._files["staleness"].write(_dumps({"t": round(float(t), 6), "instance": instance,
                                                   "generation": int(generation), "ms": ms}) + "\n")

    def scrape(self, t: float, instance: str, generation: int, rec: Mapping[str, Any]) -> None:
        """One /metrics scrape of an external instance (``scrapes.jsonl``, created on first use so
        histories without one are unchanged)."""
        f = self._files.get("scrapes")
        if f is None:
            f = self._files["scrapes"] = open(self.dir / "scrapes.jsonl", "a", encoding="utf-8")
        f.write(_dumps({"t": round(float(t), 6), "instance": instance, "generation": int(generation),
                        **rec}) + "\n")

    def fault(self, rec: Mapping[str, Any]) -> None:
        self._line("faults", dict(rec))

    def lease(self, t: float, rec: Mapping[str, Any]) -> None:
        self._line("leases", {"t": round(float(t), 6), **rec})

    def life(self, t: float, instance: str, event: str, generation: int, **info: Any) -> None:
        self._line("lives", {"t": round(float(t), 6), "instance": instance, "generation": int(generation),
                             "event": event, **{k: v for k, v in info.items() if v is not None}})

    def _line(self, name: str, rec: Mapping[str, Any]) -> None:
        f = self._files[name]
        f.write(_dumps(rec) + "\n")
        f.flush()

    def final(self, rec: Mapping[str, Any]) -> None:
        self.flush()
        p = self.dir / "final.json"
        tmp = p.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(dict(rec), indent=1, default=_jsonable) + "\n", encoding="utf-8")
        os.replace(tmp, p)

    def flush(self) -> None:
        if self.closed:
            return
        for f in self._files.values():
            f.flush()
        self._events.flush()

    def close(self) -> None:
        if self.closed:
            return
        self.flush()
        for f in self._files.values():
            f.close()
        self._events.close()
        self.closed = True

    def __enter__(self) -> "HistoryWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def api_state(lists: Mapping[str, Iterable[Mapping[str, Any]]], rv: int, **extra: Any) -> dict[str, Any]:
    """final.json's ``api_state`` from a list per kind taken at ``rv``: ``{"rv", "kinds": {kind:
    {"ns/name" or name: resourceVersion}}}`` (the API-consistency check's input)."""
    from ha.experiment.oracles import object_key
    kinds: dict[str, dict[str, int]] = {}
    for kind in sorted(lists):
        per: dict[str, int] = {}
        for o in lists[kind]:
            per[object_key(o)] = int((o.get("metadata") or {}).get("resourceVersion") or 0)
        kinds[kind] = dict(sorted(per.items()))
    return {"rv": int(rv), "kinds": kinds, **extra}


# ------------------------------------------------------------------------------------- reader


class History:
    """A recorded history, read lazily and cached per file. ``skipped`` counts the lines (or
    trailing msgpack bytes) that could not be read — a truncated last line of a crashed run —
    per file; ``warnings`` says so in words."""

    def __init__(self, out_dir: str | os.PathLike):
        p = Path(out_dir)
        self.out = p
        self.dir = p / HISTORY_DIR
        if not p.is_dir():
            raise BadInput(f"{p}: not a results folder (no such folder)")
        if not (self.dir / "run.json").is_file():
            raise BadInput(f"{p}: no recorded history ({HISTORY_DIR}/run.json missing); "
                           "only runs that recorded a history can be analyzed")
        try:
            self.header: dict[str, Any] = json.loads((self.dir / "run.json").read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as e:
            raise BadInput(f"{self.dir / 'run.json'}: not valid JSON: {e}") from None
        if not isinstance(self.header, dict):
            raise BadInput(f"{self.dir / 'run.json'}: expected a JSON object")
        self.skipped: dict[str, int] = {}
        self.warnings: list[str] = []
        self._cache: dict[str, Any] = {}
        self.memo: dict[str, Any] = {}     # checkers' shared derived data (e.g. the reference)

    # -- raw files -----------------------------------------------------------------------------
    def _lines(self, name: str) -> list[dict[str, Any]]:
        if name in self._cache:
            return self._cache[name]
        path = self.dir / f"{name}.jsonl"
        out: list[dict[str, Any]] = []
        bad = 0
        if path.exists():
            with open(path, "rb") as f:
                data = f.read()
            lines = data.split(b"\n")
            for i, raw in enumerate(lines):
                if not raw.strip():
                    continue
                try:
                    out.append(json.loads(raw))
                except ValueError:
                    if i < len(lines) - 1 and any(x.strip() for x in lines[i + 1:]):
                        raise BadInput(f"{path}: line {i + 1} is not valid JSON") from None
                    bad += 1    # the last line, cut short by a crash
        if bad:
            self.skipped[f"{name}.jsonl"] = bad
            self.warnings.append(f"{path}: skipped a truncated last line")
        self._cache[name] = out
        return out

    def ticks(self) -> list[dict[str, Any]]:
        """The tick records as written (instance digests as deltas)."""
        if "ticks_checked" not in self._cache:
            for i, tk in enumerate(self._lines("ticks")):
                if not isinstance(tk, dict) or not isinstance(tk.get("t"), (int, float)) \
                        or not isinstance(tk.get("instances"), dict):
                    raise BadInput(f"{self.dir / 'ticks.jsonl'}: tick record {i + 1}: expected an object "
                                   "with a number 't' and an object 'instances'")
            self._cache["ticks_checked"] = True
        return self._lines("ticks")

    def decisions(self) -> list[dict[str, Any]]:
        return self._lines("decisions")

    def staleness(self) -> list[dict[str, Any]]:
        return self._lines("staleness")

    def faults(self) -> list[dict[str, Any]]:
        return self._lines("faults")

    def scrapes(self) -> list[dict[str, Any]]:
        """/metrics scrapes of external instances (empty for model runs)."""
        return self._lines("scrapes")

    def leases(self) -> list[dict[str, Any]]:
        return self._lines("leases")

    def lives(self) -> list[dict[str, Any]]:
        return self._lines("lives")

    def events(self) -> list[dict[str, Any]]:
        """The API server's watch events in RV order."""
        if "events" in self._cache:
            return self._cache["events"]
        path = self.dir / "events.msgpack"
        out: list[dict[str, Any]] = []
        if path.exists():
            data = path.read_bytes()
            up = msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=max(len(data), 1))
            up.feed(data)
            end = 0
            try:
                for e in up:
                    if not isinstance(e, dict) or not isinstance(e.get("rv"), int) or "kind" not in e \
                            or e.get("type") not in ("ADDED", "MODIFIED", "DELETED"):
                        raise BadInput(f"{path}: event {len(out) + 1}: expected a map with an integer 'rv', "
                                       "'type' ADDED/MODIFIED/DELETED and 'kind'")
                    out.append(e)
                    end = up.tell()
            except (msgpack.exceptions.ExtraData, msgpack.exceptions.FormatError, ValueError) as e:
                raise BadInput(f"{path}: corrupt msgpack after {len(out)} events: {e}") from None
            left = len(data) - end
            if left > 0:
                self.skipped["events.msgpack"] = left
                self.warnings.append(f"{path}: skipped {left} trailing bytes (a truncated last event)")
        self._cache["events"] = out
        return out

    @property
    def final(self) -> dict[str, Any] | None:
        if "final" not in self._cache:
            p = self.dir / "final.json"
            v = None
            if p.exists():
                try:
                    v = json.loads(p.read_text(encoding="utf-8"))
                except ValueError:
                    self.warnings.append(f"{p}: not valid JSON (ignored)")
            self._cache["final"] = v
        return self._cache["final"]

    # -- derived -------------------------------------------------------------------------------
    def instances(self) -> list[str]:
        """Instance names: the header's list, else every name seen in a tick; sorted."""
        names = set(self.header.get("instances") or [])
        for tk in self.ticks():
            names.update(tk["instances"])
        return sorted(names)

    def digests(self) -> Iterator[tuple[dict[str, Any], dict[str, dict[str, Any]]]]:
        """Per tick: (the tick record, {instance: its state with FULL ``tasks``/``nodes``}). An
        instance not sampled in the tick appears as ``{"alive": 0}``. ``changed_tasks``: the uids
        whose entry changed since the instance's previous record (None after a full record).
        Every yielded dict is new (the fold copies), so a caller may keep it across ticks."""
        state: dict[str, tuple[int, dict, dict]] = {}
        for tk in self.ticks():
            out: dict[str, dict[str, Any]] = {}
            for name, rec in tk["instances"].items():
                if not rec.get("alive"):
                    out[name] = {"alive": 0}
                    continue
                gen = rec.get("generation", 0)
                prev = state.get(name)
                if rec.get("full") or prev is None or prev[0] != gen:
                    tasks, nodes = dict(rec.get("tasks") or {}), dict(rec.get("nodes") or {})
                    changed = None
                else:
                    tasks = fold_delta(prev[1], rec.get("tasks") or {})
                    nodes = fold_delta(prev[2], rec.get("nodes") or {})
                    changed = frozenset(rec.get("tasks") or ())
                state[name] = (gen, tasks, nodes)
                out[name] = {**rec, "tasks": tasks, "nodes": nodes, "changed_tasks": changed}
                out[name].pop("full", None)
            yield tk, out

    def duration(self) -> float:
        """Elapsed run seconds: final.json's ``elapsed_s``, else the last tick's ``t``."""
        fin = self.final or {}
        if fin.get("elapsed_s") is not None:
            return float(fin["elapsed_s"])
        ts = self.ticks()
        return float(ts[-1]["t"]) if ts else 0.0
