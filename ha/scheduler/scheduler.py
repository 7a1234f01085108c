"""One scheduling cycle (``pkg/scheduler/scheduler.go`` ``runOnce``): open a session, run the
configured actions in order on that session, close the session.

``Scheduler(cache, conf).run_once() -> SessionResult``. A ``FatalCacheError`` (where Volcano calls
``klog.Fatalf`` and the process exits) is caught here, recorded in the result (``fatal``) and the
session is *not* closed — the real scheduler would have died mid-session.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from ha.scheduler.api import TaskStatus
from ha.scheduler.api.resource import ResourceUnderflow
from ha.scheduler.api.types import FatalCacheError
from ha.scheduler.actions import get_action
from ha.scheduler.conf import SchedulerConf, default_conf
from ha.scheduler.framework.session import Session, close_session, open_session, record_phase

__all__ = ["Scheduler", "SessionResult", "run_session"]


@dataclass
class SessionResult:
    session_uid: str = ""
    actions: list[str] = field(default_factory=list)
    binds: dict[str, str] = field(default_factory=dict)           # "ns/pod" -> node (AddBindTask accepted)
    evictions: list[str] = field(default_factory=list)            # "ns/pod", in order (cache.evict accepted)
    eviction_reasons: dict[str, str] = field(default_factory=dict)
    pipelined: dict[str, str] = field(default_factory=dict)       # session tasks Pipelined at the end
    committed_pipelines: dict[str, str] = field(default_factory=dict)  # Pipeline ops that were committed
    # the session's pipeline decisions: Pipelined at the end but not already Pipelined on that node
    # when the session opened (a reservation kept from an earlier session is no decision), plus
    # every committed Pipeline (one un-pipelined and pipelined again in the session is one)
    new_pipelines: dict[str, str] = field(default_factory=dict)
    held_pipelines: frozenset = frozenset()                       # (pod, node) Pipelined at open
    errors: list[str] = field(default_factory=list)
    fatal: str | None = None                                      # FatalCacheError message (Volcano would exit)
    panic: str | None = None                                      # ResourceUnderflow (Volcano's assert panics)
    duration_s: float = 0.0
    # measurements beside duration_s: the CPU the session's own thread used, and the whole
    # process's (the informers and the bind worker share the interpreter); wall minus thread
    # CPU is time spent waiting for the interpreter or a core
    cpu_s: float = 0.0
    process_cpu_s: float = 0.0
    # phase -> [wall ms, session thread CPU ms], in the order run: "snapshot" (the cache's lock and
    # clones), "open" (the plugins' on_session_open and the rest of OpenSession), each action by
    # its name, "close" (CloseSession: the job updater's status writes, the plugins' close)
    phases_ms: dict[str, list[float]] = field(default_factory=dict)
    jobs: int = 0
    nodes: int = 0

    @property
    def bind_count(self) -> int:
        return len(self.binds)

    @property
    def evict_count(self) -> int:
        return len(self.evictions)

    @property
    def ok(self) -> bool:
        return self.fatal is None and self.panic is None

    def to_dict(self) -> dict[str, Any]:
        return {"session": self.session_uid, "actions": list(self.actions), "binds": dict(self.binds),
                "evicted": list(self.evictions), "pipelined": dict(self.pipelined),
                "committed_pipelines": dict(self.committed_pipelines),
                "new_pipelines": dict(self.new_pipelines),
                "bind_count": self.bind_count, "evict_count": self.evict_count,
                "errors": list(self.errors), "fatal": self.fatal, "panic": self.panic,
                "duration_s": self.duration_s, "cpu_s": self.cpu_s, "process_cpu_s": self.process_cpu_s,
                "phases_ms": {k: list(v) for k, v in self.phases_ms.items()}}


def _collect(ssn: Session, res: SessionResult) -> None:
    for key, node in ssn.bind_log:
        res.binds[key] = node
    for key, reason in ssn.evict_log:
        res.evictions.append(key)
        res.eviction_reasons[key] = reason
    for key, node in ssn.pipeline_log:
        res.committed_pipelines[key] = node
    for job in (ssn.jobs or {}).values():
        for t in (job.task_status_index.get(TaskStatus.PIPELINED) or {}).values():
            res.pipelined[t.pod_key] = t.node_name
    res.new_pipelines = {k: n for k, n in res.pipelined.items() if (k, n) not in res.held_pipelines}
    res.new_pipelines.update(res.committed_pipelines)
    res.errors = list(ssn.errors)


def _held_pipelines(ssn: Session) -> frozenset:
    return frozenset((t.pod_key, t.node_name) for job in (ssn.jobs or {}).values()
                     for t in (job.task_status_index.get(TaskStatus.PIPELINED) or {}).values())


def run_session(cache: Any, conf: SchedulerConf, *, seed: int | None = None,
                session_hook: Any = None, clock: Any = None) -> SessionResult:
    """Open a session, run ``conf.actions`` in order, close it; see :class:`Scheduler`.
    ``session_hook(ssn)`` (optional) is called after the actions and before close; what it keeps of
    ``ssn.nodes`` may be handed to the next session (snapshot reuse), so it copies what it keeps. ``clock``: the
    session's time (default: the cache's). ``duration_s`` is a measurement (perf_counter), never
    an input of the model."""
    t0, c0, p0 = time.perf_counter(), time.thread_time(), time.process_time()
    res = SessionResult(actions=list(conf.actions))
    ssn = open_session(cache, conf, seed=seed, clock=clock)
    res.session_uid = ssn.uid
    res.jobs, res.nodes = len(ssn.jobs), len(ssn.nodes)
    res.held_pipelines = _held_pipelines(ssn)
    phases = res.phases_ms = ssn.phase_times    # snapshot and open so far; the rest below
    try:
        for name in conf.actions:
            t, c = time.perf_counter(), time.thread_time()
            action = get_action(name)
            action.initialize()
            action.execute(ssn)
            action.uninitialize()
            record_phase(phases, name, t, c)
        if session_hook is not None:
            session_hook(ssn)
        _collect(ssn, res)
        t, c = time.perf_counter(), time.thread_time()
        close_session(ssn)
        record_phase(phases, "close", t, c)
        res.errors = list(ssn.errors)
    except FatalCacheError as e:
        _collect(ssn, res)
        res.fatal = str(e)
    except ResourceUnderflow as e:
        _collect(ssn, res)
        res.panic = str(e)
    res.duration_s = time.perf_counter() - t0
    res.cpu_s, res.process_cpu_s = time.thread_time() - c0, time.process_time() - p0
    ssn.release()
    return res


class Scheduler:
    """``Scheduler(cache, conf).run_once()``; ``conf`` defaults to :func:`default_conf`."""

    def __init__(self, cache: Any, conf: SchedulerConf | None = None, *, seed: int | None = None,
                 clock: Any = None):
        self.cache = cache
        self.conf = conf if conf is not None else default_conf()
        self.seed = seed
        self.clock = clock
        self.sessions = 0

    def run_once(self, *, session_hook: Any = None) -> SessionResult:
        seed = None if self.seed is None else self.seed + self.sessions
        self.sessions += 1
        return run_session(self.cache, self.conf, seed=seed, session_hook=session_hook,
                           clock=self.clock)
