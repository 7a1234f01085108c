"""Observing a real vc-scheduler process from outside, in the vocabulary the model's instances
record (docs/results-format.md), so the checkers measure both alike.

The supervisor of an external instance (``ha/runtime/external/supervisor.py``) calls
:func:`observe` at every measurement tick, in a thread, with the life's
``ha.runtime.external.process.ProcessHandle``; it returns a dict with any of:

* ``"digest"`` -- merged into the supervisor's digest: ``tasks``, ``nodes``, ``rvs`` from a cache
  dump (:mod:`.cache_dump`: SIGUSR1, the snapshot file, the model's digest shape) and ``synced``
  True; or, when no dump could be taken, ``synced`` False, no ``tasks``/``nodes``, and
  ``unobserved`` = {"cache": reason} (a cold standby, a leader still listing, a dump that did
  not come) -- the checkers then leave the instance out of that tick and say why, never count an
  empty cache as its state;
* ``"decisions"`` -- the instance's decisions (:mod:`.request_log`; their sessions from the
  session starts in vc-scheduler's log, :mod:`.session_log`) with ``seq`` >
  ``decisions_since``; seq counts over the endpoint's request log, which all lives share, from 1
  per observer (one per supervisor process);
* ``"stats"`` -- the model's counters (``binds``, ``bind_conflicts``, ``bind_errors``,
  ``evictions``, ``evict_errors``, ``status_writes``, ``status_errors``, ``pod_group_writes``),
  ``sessions`` (from /metrics, summed over the process lives of this supervisor, as the model
  counts within a generation) and ``observe`` (what was and was not observed this tick);
* ``"scrape"`` -- the /metrics record (:mod:`.metrics`: session and per-action latency
  histograms, preemption victims and attempts), or ``{"unobserved": reason}``; the recorder
  writes it to ``history/scrapes.jsonl``;
* ``"staleness_ms"`` -- [] always: what the model measures (write -> applied to the cache) needs
  the scheduler's inside; the endpoint's delivery log times only the hand-over to the client.
  ``unobserved`` says so (staleness_ms is then absent for the instance, with that reason).

Observers are kept per (instance, request log) in this process: the request log's offset, the
decision extractor's state and the counters outlive a life of the process (a restart's new pid
and dump dir are taken from the next handle). A new supervisor of the instance (a handle of life 0
with another start time: the instance was killed and started again, a new generation) gets a new
observer that skips the requests made before its first life started: the endpoint's request log
is shared by every generation, and the earlier ones' decisions are theirs.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from ha.runtime.external.observe.cache_dump import (CacheDumper, CacheDumpError, CacheDumpUnavailable,
                                                    dump_digest, parse_dump, process_state)
from ha.runtime.external.observe.metrics import MetricsScraper, MetricsUnavailable, parse_prometheus, volcano_figures
from ha.runtime.external.observe.request_log import DecisionExtractor, RequestLogTail
from ha.runtime.external.observe.session_log import VMODULE_FLAG, SessionLog

__all__ = ["observe", "InstanceObserver", "STALENESS_UNOBSERVED", "COLD_STANDBY",
           "CacheDumper", "CacheDumpError", "CacheDumpUnavailable", "dump_digest", "parse_dump",
           "MetricsScraper", "MetricsUnavailable", "parse_prometheus", "volcano_figures",
           "DecisionExtractor", "RequestLogTail"]

STALENESS_UNOBSERVED = ("not measurable from outside vc-scheduler: staleness is write -> applied to the "
                        "cache, and its informers apply events inside the process")
COLD_STANDBY = ("cold standby: vc-scheduler starts its informers (and its cache dumper) only once it "
                "leads, so a standby holds no cache to sample")
_KEEP_DECISIONS = 200_000


@dataclass
class InstanceObserver:
    instance: str
    request_log: str
    since_t: float = 0.0              # requests before this (wall clock) are an earlier supervisor's
    session_gap_s: float = 0.5
    dump_timeout_s: float = 2.0
    tail: RequestLogTail = field(init=False)
    extractor: DecisionExtractor = field(init=False)
    decisions: list[dict[str, Any]] = field(default_factory=list)
    log_path: str | None = None       # vc-scheduler's log, when it logs its session starts
    sessions: SessionLog | None = field(init=False, default=None)
    _dumper: CacheDumper | None = None
    _dump_missed: bool = False
    _sessions: dict[int, int] = field(default_factory=dict)     # life -> sessions its /metrics counted
    _dumper_key: tuple | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.tail = RequestLogTail(self.request_log)
        self.extractor = DecisionExtractor(self.instance, session_gap_s=self.session_gap_s)
        if self.log_path:
            self.sessions = SessionLog(self.log_path)
            self.extractor.session_starts = []     # sessions from the log, never inferred

    def dumper(self, handle: Any) -> CacheDumper | None:
        if handle.pid is None or not handle.dump_dir:
            return None
        key = (handle.pid, handle.dump_dir)
        if self._dumper_key != key:
            self._dumper, self._dumper_key = CacheDumper(handle.pid, handle.dump_dir), key
            self._dump_missed = False
        return self._dumper

    def observe(self, handle: Any, decisions_since: int = 0) -> dict[str, Any]:
        with self.lock:
            return self._observe(handle, decisions_since)

    def _observe(self, handle: Any, decisions_since: int) -> dict[str, Any]:
        unobserved: dict[str, str] = {"staleness_ms": STALENESS_UNOBSERVED}
        digest: dict[str, Any]
        leading = _may_lead(handle)
        dumper = self.dumper(handle)
        if not leading:
            digest, unobserved["cache"] = {"synced": False}, COLD_STANDBY
        elif dumper is None:
            digest, unobserved["cache"] = {"synced": False}, "no running vc-scheduler process to signal"
        else:
            # after a dump that did not come (a new leader still listing) the next ticks wait less,
            # so that the whole tick is not stretched until the cache has synced
            timeout = self.dump_timeout_s if not self._dump_missed else min(self.dump_timeout_s, 0.5)
            try:
                digest = dump_digest(dumper.sample(timeout))
                digest["synced"] = True
                self._dump_missed = False
            except CacheDumpUnavailable as e:
                digest, unobserved["cache"] = {"synced": False}, e.reason
                self._dump_missed = True
            except CacheDumpError as e:
                digest, unobserved["cache"] = {"synced": False}, f"unreadable cache dump: {e}"
        # decisions
        records = [r for r in self.tail.read_new() if float(r.get("t") or 0.0) >= self.since_t]
        if self.sessions is not None:
            # after the requests: a session starts before its first write, so every session the
            # requests just read belong to is in the log by now
            self.extractor.add_session_starts(self.sessions.read_new())
        new = self.extractor.feed(records)
        if new:
            self.decisions.extend(new)
            del self.decisions[:-_KEEP_DECISIONS]
        ds = self.decisions       # consecutive seqs: the ones after decisions_since are a tail
        decisions = ds[max(0, decisions_since - ds[0]["seq"] + 1):] if ds else []
        # /metrics
        scrape: dict[str, Any]
        if handle.pid is not None and process_state(handle.pid) in ("T", "t"):
            scrape = {"unobserved": f"vc-scheduler (pid {handle.pid}) is stopped (SIGSTOP)"}
        elif handle.metrics_url:
            try:
                scrape = MetricsScraper(handle.metrics_url).scrape()
            except MetricsUnavailable as e:
                scrape = {"unobserved": e.reason}
        else:
            scrape = {"unobserved": "no metrics URL (--enable-metrics off)"}
        scrape["life"] = handle.life
        stats: dict[str, Any] = {k: v for k, v in self.extractor.counters.items()}
        if "sessions" in scrape:
            # each life's counters start at zero; the model's count runs over the generation
            self._sessions[handle.life] = scrape["sessions"]
            stats["sessions"] = digest["sessions"] = sum(self._sessions.values())
        stats["observe"] = {"unobserved": dict(unobserved), "request_log_lines": self.tail.lines,
                            "request_log_malformed": self.tail.malformed,
                            "dumps": dumper.samples if dumper is not None else 0}
        digest["unobserved"] = unobserved
        return {"digest": digest, "decisions": decisions, "stats": stats, "scrape": scrape,
                "staleness_ms": []}


def _may_lead(handle: Any) -> bool:
    """Whether this life can hold a cache: it won the Lease (``identity``), or runs without
    leader election."""
    if getattr(handle, "identity", None):
        return True
    return any(a in ("--leader-elect=false", "--leader-elect=False") for a in (handle.argv or ()))


_OBSERVERS: dict[tuple[str, str], InstanceObserver] = {}
_OBSERVERS_LOCK = threading.Lock()


def observe(handle: Any, decisions_since: int = 0) -> dict[str, Any]:
    """One tick of an external instance (see the module docstring)."""
    key = (handle.instance, handle.request_log)
    with _OBSERVERS_LOCK:
        ob = _OBSERVERS.get(key)
        if ob is not None and handle.life == 0 and handle.started_at != ob.since_t:
            ob = None         # a new supervisor of the instance (its first life): a new generation
        if ob is None:
            gap = 0.5
            for a in handle.argv or ():
                if a.startswith("--schedule-period="):
                    gap = max(0.05, _go_seconds(a.split("=", 1)[1]) / 2)
            # the request log is the endpoint's, shared with the instance's earlier supervisors:
            # their requests are their generations' decisions, recorded by them already
            # klog takes the last --vmodule: one of the user's (volcano.args) replaces the testbed's
            argv = list(handle.argv or ())
            vmodules = [a for a in argv if a.lstrip("-").startswith("vmodule")]
            logs_sessions = bool(vmodules) and vmodules[-1] == VMODULE_FLAG and bool(handle.log_path)
            ob = _OBSERVERS[key] = InstanceObserver(handle.instance, handle.request_log,
                                                    since_t=float(handle.started_at or 0.0), session_gap_s=gap,
                                                    log_path=handle.log_path if logs_sessions else None)
    return ob.observe(handle, decisions_since)


def _go_seconds(v: str) -> float:
    """A Go duration flag as the testbed writes it ("1s", "500ms") in seconds (1.0 if unknown)."""
    try:
        if v.endswith("ms"):
            return float(v[:-2]) / 1000
        if v.endswith("s"):
            return float(v[:-1])
    except ValueError:
        pass
    return 1.0
