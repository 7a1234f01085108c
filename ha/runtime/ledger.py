"""The process ledger: every process a run starts, recorded so that what a killed run left behind
can be stopped later — by PID, never by name.

Why: ``kill -9`` of a driver stops what dies with its parent (our redis-server has
``PR_SET_PDEATHSIG``; Ray's GCS and raylet watch the driver) but Ray's ``ray::DashboardAgent`` and
``ray::RuntimeEnvAgent`` live on with parent 1. No handler runs on SIGKILL, so the only remedy is a
record written *before* the kill and read by someone else afterwards: the next run (``begin``
reaps first) or ``ha-testbed cleanup``.

Contract:

* one JSON file per run, ``<runs dir>/<run_id>.json``: ``{"run_id", "driver": {"pid",
  "create_time"}, "started_at", "processes": [{"pid", "create_time", "what"}]}``, rewritten
  atomically (temp file + rename) on every :func:`add`. The runs dir is ``$HA_TESTBED_RUNS_DIR``,
  else ``$XDG_CACHE_HOME/ha-testbed/runs``, else ``~/.cache/ha-testbed/runs``.
* a process is identified by (PID, start time): a recycled PID whose start time differs is never
  touched. A run is *dead* when its driver (PID + start time) no longer runs; only dead runs are
  reaped, a living run's processes never.
* reaping stops each recorded process still running (and the descendants it has now, e.g. Ray
  workers a surviving raylet forked later): SIGTERM, then SIGKILL after ``grace_s``; then the
  file goes.
* the ledger of the running driver is module state (``begin`` … ``end``): the parts that start
  processes (``cluster_state.embedded``, ``ha.runtime.ray_local``) call :func:`add`, which does
  nothing when no ledger is open (tests, benchmarks, notebooks).
"""
from __future__ import annotations

import json
import os
import signal
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

__all__ = ["RUNS_DIR_ENV", "runs_dir", "ProcessRecord", "Ledger", "ReapReport", "begin", "add",
           "end", "current", "reap", "stop_processes", "process_record"]

RUNS_DIR_ENV = "HA_TESTBED_RUNS_DIR"
# psutil's create_time comes from /proc in clock ticks (1/100 s) plus the boot time: allow a little
_CTIME_TOLERANCE_S = 0.05


def runs_dir() -> Path:
    env = os.environ.get(RUNS_DIR_ENV)
    if env:
        return Path(env)
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    return Path(cache) / "ha-testbed" / "runs"


@dataclass(frozen=True)
class ProcessRecord:
    pid: int
    create_time: float
    what: str = ""

    def process(self):
        """The ``psutil.Process`` this record names, or None if it is gone (or its PID now
        belongs to another process, or to a zombie)."""
        import psutil
        try:
            p = psutil.Process(self.pid)
            if abs(p.create_time() - self.create_time) > _CTIME_TOLERANCE_S:
                return None
            if p.status() == psutil.STATUS_ZOMBIE:
                return None
            return p
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            return None

    def alive(self) -> bool:
        return self.process() is not None


def process_record(pid: int, what: str = "") -> ProcessRecord | None:
    """The record of a running PID (None if it is already gone)."""
    import psutil
    try:
        return ProcessRecord(pid=pid, create_time=psutil.Process(pid).create_time(), what=what)
    except psutil.NoSuchProcess:
        return None


@dataclass
class Ledger:
    run_id: str
    path: Path
    driver: ProcessRecord
    started_at: float = field(default_factory=time.time)
    processes: list[ProcessRecord] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, pid: int, what: str = "") -> None:
        rec = process_record(pid, what)
        if rec is None:
            return
        with self._lock:
            if any(r.pid == rec.pid and r.create_time == rec.create_time for r in self.processes):
                return
            self.processes.append(rec)
            self._save()

    def to_json(self) -> dict:
        return {"run_id": self.run_id, "driver": asdict(self.driver), "started_at": self.started_at,
                "processes": [asdict(r) for r in self.processes]}

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{self.run_id}.", dir=self.path.parent)
        with os.fdopen(fd, "w") as f:
            json.dump(self.to_json(), f)
        os.replace(tmp, self.path)

    @classmethod
    def load(cls, path: Path) -> "Ledger":
        d = json.loads(Path(path).read_text())
        return cls(run_id=str(d["run_id"]), path=Path(path), driver=ProcessRecord(**d["driver"]),
                   started_at=float(d.get("started_at") or 0.0),
                   processes=[ProcessRecord(**r) for r in d.get("processes") or []])

    def remove(self) -> None:
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass


@dataclass
class ReapReport:
    run_id: str
    path: str
    driver_pid: int
    stopped: list[ProcessRecord] = field(default_factory=list)   # were running, now gone
    survived: list[ProcessRecord] = field(default_factory=list)  # would not die (not ours to force)


_current: Ledger | None = None
_current_lock = threading.Lock()


def current() -> Ledger | None:
    return _current


def begin(run_id: str, *, reap_dead: bool = True, directory: Path | None = None) -> Ledger:
    """Open this driver's ledger for run ``run_id`` (after reaping what dead runs left, unless
    ``reap_dead`` is False). Processes started from now on are recorded by :func:`add`. One
    ledger per driver at a time: a ledger still open is replaced (its file stays, for reaping)."""
    global _current
    import psutil
    d = Path(directory) if directory is not None else runs_dir()
    if reap_dead:
        reap(d)
    me = psutil.Process()
    led = Ledger(run_id=run_id, path=d / f"{run_id}.json",
                 driver=ProcessRecord(pid=me.pid, create_time=me.create_time(), what="driver"))
    led._save()
    with _current_lock:
        _current = led
    return led


def add(pid: int | None, what: str = "") -> None:
    """Record ``pid`` in the open ledger (no-op without one, or for None)."""
    led = _current
    if led is not None and pid is not None:
        led.add(pid, what)


def end(*, stop_leftovers: bool = True, grace_s: float = 5.0) -> list[ProcessRecord]:
    """Close this driver's ledger at the end of its run: stop what is recorded and still running
    (the normal teardown should have stopped everything; returns what it had not), then remove
    the file."""
    global _current
    with _current_lock:
        led, _current = _current, None
    if led is None:
        return []
    left: list[ProcessRecord] = []
    if stop_leftovers:
        left, _ = stop_processes(led.processes, grace_s=grace_s)
    led.remove()
    return left


def _driver_alive(led: Ledger) -> bool:
    return led.driver.alive()


def reap(directory: Path | None = None, *, grace_s: float = 5.0) -> list[ReapReport]:
    """Stop the processes of every dead run in ``directory`` (default :func:`runs_dir`) and remove
    their ledgers. Runs whose driver still runs are left alone. Unreadable ledgers are skipped
    (and kept: a half-written file of a living run must not be lost)."""
    d = Path(directory) if directory is not None else runs_dir()
    out: list[ReapReport] = []
    if not d.is_dir():
        return out
    for path in sorted(d.glob("*.json")):
        try:
            led = Ledger.load(path)
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if _driver_alive(led):
            continue
        stopped, survived = stop_processes(led.processes, grace_s=grace_s)
        out.append(ReapReport(run_id=led.run_id, path=str(path), driver_pid=led.driver.pid,
                              stopped=stopped, survived=survived))
        if not survived:
            led.remove()
    return out


def stop_processes(records: list[ProcessRecord], *, grace_s: float = 5.0
                   ) -> tuple[list[ProcessRecord], list[ProcessRecord]]:
    """SIGTERM every recorded process that still runs (PID and start time match) and its current
    descendants, SIGKILL those alive after ``grace_s``. Returns (stopped, survived) among the
    records and the descendants found."""
    import psutil
    targets: dict[tuple[int, float], tuple[ProcessRecord, psutil.Process]] = {}
    for rec in records:
        p = rec.process()
        if p is None:
            continue
        targets[(rec.pid, rec.create_time)] = (rec, p)
        try:
            kids = p.children(recursive=True)
        except psutil.NoSuchProcess:
            kids = []
        for k in kids:
            try:
                krec = ProcessRecord(pid=k.pid, create_time=k.create_time(), what=f"child of {rec.pid}")
            except psutil.NoSuchProcess:
                continue
            targets.setdefault((krec.pid, krec.create_time), (krec, k))
    if not targets:
        return [], []
    procs = []
    for rec, p in targets.values():
        try:
            p.send_signal(signal.SIGTERM)
            procs.append(p)
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(procs, timeout=grace_s)
    for p in alive:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(alive, timeout=grace_s)
    stopped, survived = [], []
    for rec, _ in targets.values():
        (survived if rec.alive() else stopped).append(rec)
    key = lambda r: (r.pid, r.create_time)  # noqa: E731
    return sorted(stopped, key=key), sorted(survived, key=key)
