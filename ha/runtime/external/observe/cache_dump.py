"""vc-scheduler's cache dumper, read: SIGUSR1, the ``snapshot-<unix>.json`` it writes, and the
digest the model's instances record, made from it.

Volcano (``pkg/scheduler/cache/dumper.go``, v1.14) answers SIGUSR1 -- once its informers have
synced: the signal handler is installed after ``cache.Run`` -- by writing ``cache.Snapshot()``
into ``--cache-dump-dir`` as ``snapshot-<unix seconds>.json``, opened with ``O_TRUNC`` (a second
dump in the same second overwrites the first). The file is not one JSON document but six, each
``json.Encoder.Encode``'d on its own line, in this order: ``Nodes`` ({name: NodeInfo}),
``HyperNodesSetByTier``, ``HyperNodeTierNameMap``, ``RealNodesSet``, ``HyperNodes``, ``Jobs``
({job id: JobInfo}). A NodeInfo carries ``Idle``/``Used``/``Releasing``/``Pipelined`` as Volcano
``Resource`` structs (``MilliCPU``, ``Memory``, ``ScalarResources`` -- pods as a count, other
scalars in milli-units) and its ``Tasks``; a JobInfo its ``Tasks`` ({uid: TaskInfo}) with
``Status`` as the TaskStatus bit number (api/types.go) and ``NodeName``; every TaskInfo, NodeInfo
and JobInfo carries its API object (``Pod``, ``Node``, ``PodGroup``) with its resourceVersion.

* :class:`CacheDumper` -- one process's dumper: :meth:`~CacheDumper.sample` signals, waits for a
  snapshot file that is new (every file it read is removed, so a dump that lands in the same second
  as the previous one is a new file, never the old one mistaken for it) and complete (all six
  values parse: a half-written file is waited for), and returns the parsed dump. A process that
  does not answer within the timeout (a standby, which installs no handler until it leads, or a
  leader still listing) raises :class:`CacheDumpUnavailable` with the reason. A process that does
  not catch SIGUSR1 yet (the first instants after exec, before Go's runtime installs its
  handlers: the signal's default action would end it) is not signalled at all.
* :func:`parse_dump` -- the file's text -> :class:`VolcanoCacheDump` (:class:`CacheDumpError`
  naming the file and the value on bad input).
* :func:`dump_digest` -- a dump -> ``{"tasks": {uid: [status, node]}, "nodes": {name: {idle, used,
  releasing, pipelined}}, "rvs": {kind: max resourceVersion}}``, the vocabulary of the model's
  ``SchedulerCache.digest()`` (ha/scheduler/cache.py): status in Volcano's spelling ("Pipelined"),
  resources in plain units (cpu in millicores, memory in bytes, pods a count, other scalars whole
  units, zero values left out). Tasks come from the jobs, then from the nodes (a task only a node
  holds), as the model's digest takes them.

What the dump cannot show, compared with the model's digest: a Snapshot leaves out jobs without a
PodGroup and nodes that are not Ready (the model's digest lists every job and node of its cache),
and ``rvs`` are the highest resourceVersion among the objects the cache holds, not the informers'
delivered RV (a delete leaves no object behind). ``t`` is when the signal was sent; ``dumped_at``
the file's modification time.
"""
from __future__ import annotations

import json
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

__all__ = ["TASK_STATUS_NAMES", "DUMP_SECTIONS", "CacheDumpError", "CacheDumpUnavailable", "VolcanoCacheDump",
           "CacheDumper", "catches_sigusr1", "process_state", "parse_dump", "dump_digest", "plain_resource", "task_status_name"]

# Volcano's TaskStatus bit values and String() names (pkg/scheduler/api/types.go)
TASK_STATUS_NAMES: dict[int, str] = {1: "Pending", 2: "Allocated", 4: "Pipelined", 8: "Binding", 16: "Bound",
                                     32: "Running", 64: "Releasing", 128: "Succeeded", 256: "Failed",
                                     512: "Unknown"}
DUMP_SECTIONS = ("Nodes", "HyperNodesSetByTier", "HyperNodeTierNameMap", "RealNodesSet", "HyperNodes", "Jobs")
_RESOURCE_FIELDS = (("idle", "Idle"), ("used", "Used"), ("releasing", "Releasing"), ("pipelined", "Pipelined"))


class CacheDumpError(ValueError):
    """A snapshot file that is not what vc-scheduler writes; the message names the file and part."""


class CacheDumpUnavailable(RuntimeError):
    """No dump could be taken; ``reason`` says why (the metric is then absent, never zero)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass
class VolcanoCacheDump:
    source: str                                   # the file it was read from
    nodes: dict[str, dict[str, Any]]
    jobs: dict[str, dict[str, Any]]
    hypernodes: dict[str, Any] = field(default_factory=dict)
    t: float | None = None                        # when it was asked for (wall clock)
    dumped_at: float | None = None                # the file's mtime
    size: int = 0


def task_status_name(status: Any, where: str = "Status") -> str:
    """Volcano's TaskStatus number (or name) -> its name ("Pipelined")."""
    if isinstance(status, bool):
        raise CacheDumpError(f"{where}: expected a TaskStatus number, got {status!r}")
    if isinstance(status, int):
        name = TASK_STATUS_NAMES.get(status)
        if name is None:
            raise CacheDumpError(f"{where}: {status} is not a TaskStatus of Volcano "
                                 f"(known: {', '.join(f'{k}={v}' for k, v in TASK_STATUS_NAMES.items())})")
        return name
    if isinstance(status, str):
        for name in TASK_STATUS_NAMES.values():
            if name.lower() == status.lower():
                return name
    raise CacheDumpError(f"{where}: expected a TaskStatus number, got {status!r:.60}")


def _num(v: float) -> float | int:
    return int(v) if float(v).is_integer() else v


def plain_resource(r: Any, where: str = "Resource") -> dict[str, float | int]:
    """A Volcano ``Resource`` struct -> the digest's plain units (zero values left out)."""
    if r is None:
        return {}
    if not isinstance(r, dict):
        raise CacheDumpError(f"{where}: expected a Resource object, got {type(r).__name__}")
    out: dict[str, float | int] = {}
    try:
        cpu, mem = float(r.get("MilliCPU") or 0), float(r.get("Memory") or 0)
        if cpu:
            out["cpu"] = _num(cpu)
        if mem:
            out["memory"] = _num(mem)
        for k, v in sorted((r.get("ScalarResources") or {}).items()):
            v = float(v or 0)
            if v:
                out[k] = _num(v if k == "pods" else v / 1000.0)   # pods a count, the rest milli
    except (TypeError, ValueError, AttributeError) as e:
        raise CacheDumpError(f"{where}: not a Resource ({e})") from None
    return out


def _fast_sections(data: bytes) -> list[Any] | None:
    """The six sections when the file is what json.Encoder.Encode writes (one compact value per
    line, each ending in a newline), decoded with orjson; None to take the careful path."""
    try:
        import orjson
    except ImportError:      # pragma: no cover - orjson is a dependency of the front
        return None
    lines = data.split(b"\n")
    if len(lines) != len(DUMP_SECTIONS) + 1 or lines[-1].strip():
        return None
    try:
        return [orjson.loads(ln) for ln in lines[:-1]]
    except orjson.JSONDecodeError:
        return None


def parse_dump(text: str | bytes, source: str = "<dump>") -> VolcanoCacheDump:
    """The six JSON values of a snapshot file; CacheDumpError names what is missing or malformed."""
    fast = _fast_sections(text if isinstance(text, bytes) else text.encode("utf-8"))
    if fast is not None:
        nodes, jobs = fast[0] or {}, fast[5] or {}
        if isinstance(nodes, dict) and isinstance(jobs, dict):
            return VolcanoCacheDump(source=source, nodes=nodes, jobs=jobs, hypernodes=fast[4] or {}, size=len(text))
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as e:
            raise CacheDumpError(f"{source}: not UTF-8 ({e})") from None
    dec = json.JSONDecoder()
    vals: list[Any] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i] in " \t\r\n":
            i += 1
        if i >= n:
            break
        if len(vals) == len(DUMP_SECTIONS):
            raise CacheDumpError(f"{source}: unexpected data after the {len(DUMP_SECTIONS)} sections at byte {i}")
        try:
            v, i = dec.raw_decode(text, i)
        except ValueError as e:
            raise CacheDumpError(f"{source}: section {len(vals) + 1} ({DUMP_SECTIONS[len(vals)]}) is not "
                                 f"complete JSON: {e}") from None
        vals.append(v)
    if len(vals) < len(DUMP_SECTIONS):
        raise CacheDumpError(f"{source}: {len(vals)} of {len(DUMP_SECTIONS)} sections "
                             f"(missing {', '.join(DUMP_SECTIONS[len(vals):])}): a dump cut short")
    nodes, jobs = vals[0] or {}, vals[5] or {}
    for name, v in (("Nodes", nodes), ("Jobs", jobs)):
        if not isinstance(v, dict):
            raise CacheDumpError(f"{source}: section {name} must be an object, got {type(v).__name__}")
    return VolcanoCacheDump(source=source, nodes=nodes, jobs=jobs, hypernodes=vals[4] or {}, size=n)


def _rv(obj: Any) -> int | None:
    try:
        rv = ((obj or {}).get("metadata") or {}).get("resourceVersion")
        return int(rv) if rv not in (None, "") else None
    except (TypeError, ValueError, AttributeError):
        return None


def dump_digest(dump: VolcanoCacheDump) -> dict[str, Any]:
    """The digest (the model's vocabulary, see the module docstring) of one dump."""
    tasks: dict[str, list] = {}
    rvs: dict[str, int] = {}

    def seen(kind: str, obj: Any) -> None:
        rv = _rv(obj)
        if rv is not None and rv > rvs.get(kind, 0):
            rvs[kind] = rv

    def entry(t: Any, where: str) -> tuple[str, list]:
        if not isinstance(t, dict) or not t.get("UID"):
            raise CacheDumpError(f"{dump.source}: {where}: expected a TaskInfo with a UID")
        seen("Pod", t.get("Pod"))
        return str(t["UID"]), [task_status_name(t.get("Status"), f"{dump.source}: {where}.Status"),
                               t.get("NodeName") or ""]

    for jid, job in sorted(dump.jobs.items()):
        if not isinstance(job, dict):
            raise CacheDumpError(f"{dump.source}: Jobs[{jid}]: expected a JobInfo object")
        seen("PodGroup", job.get("PodGroup"))
        for tid, t in (job.get("Tasks") or {}).items():
            uid, e = entry(t, f"Jobs[{jid}].Tasks[{tid}]")
            tasks[uid] = e
    nodes: dict[str, dict] = {}
    for name, ni in sorted(dump.nodes.items()):
        if not isinstance(ni, dict):
            raise CacheDumpError(f"{dump.source}: Nodes[{name}]: expected a NodeInfo object")
        seen("Node", ni.get("Node"))
        for key, t in (ni.get("Tasks") or {}).items():
            uid, e = entry(t, f"Nodes[{name}].Tasks[{key}]")
            tasks.setdefault(uid, e)
        nodes[name] = {ours: plain_resource(ni.get(theirs), f"{dump.source}: Nodes[{name}].{theirs}")
                       for ours, theirs in _RESOURCE_FIELDS}
    out: dict[str, Any] = {"tasks": dict(sorted(tasks.items())), "nodes": nodes, "rvs": dict(sorted(rvs.items()))}
    if dump.t is not None:
        out["t"] = dump.t
    return out


def _snapshots(d: Path) -> dict[str, os.stat_result]:
    out = {}
    try:
        with os.scandir(d) as it:
            for e in it:
                if e.name.startswith("snapshot-") and e.name.endswith(".json"):
                    try:
                        out[e.name] = e.stat()
                    except FileNotFoundError:
                        pass
    except FileNotFoundError:
        pass
    return out


def catches_sigusr1(pid: int) -> bool | None:
    """Whether the process has a handler for SIGUSR1 (Linux: ``SigCgt`` of /proc/PID/status);
    None when that cannot be read (another system, or the process is gone)."""
    try:
        with open(f"/proc/{int(pid)}/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("SigCgt:"):
                    return bool(int(line.split()[1], 16) >> (signal.SIGUSR1 - 1) & 1)
    except (OSError, ValueError, IndexError):
        return None
    return None


def process_state(pid: int) -> str | None:
    """The process's state letter from /proc/PID/stat ("R", "S", "T" stopped, "Z" zombie, ...);
    None when it cannot be read (gone, or not Linux)."""
    try:
        with open(f"/proc/{int(pid)}/stat", "rb") as f:
            data = f.read()
        return data[data.rindex(b")") + 2:].split(b" ", 1)[0].decode()
    except (OSError, ValueError, IndexError):
        return None


class CacheDumper:
    """SIGUSR1 to one vc-scheduler process, and its snapshot read back (see the module docstring)."""

    def __init__(self, pid: int, dump_dir: str | os.PathLike, *, keep_last: bool = False,
                 clock: Callable[[], float] = time.time, poll_s: float = 0.01):
        self.pid = int(pid)
        self.dir = Path(dump_dir)
        self.keep_last = keep_last          # keep the last file read as last-snapshot.json
        self.clock = clock
        self.poll_s = poll_s
        self.samples = 0

    def _clear(self) -> None:
        for name in _snapshots(self.dir):
            try:
                (self.dir / name).unlink()
            except FileNotFoundError:
                pass

    def sample(self, timeout: float = 5.0) -> VolcanoCacheDump:
        if not self.dir.is_dir():
            raise CacheDumpUnavailable(f"the cache-dump directory {self.dir} does not exist")
        state = process_state(self.pid)
        if state in ("T", "t"):
            raise CacheDumpUnavailable(f"vc-scheduler (pid {self.pid}) is stopped (SIGSTOP): it cannot dump")
        if state in ("Z", "X"):
            raise CacheDumpUnavailable(f"vc-scheduler (pid {self.pid}) exited")
        if catches_sigusr1(self.pid) is False:
            # SIGUSR1's default action ends a process: a Go program catches every signal once its
            # runtime has started, but not in the first instants after exec
            raise CacheDumpUnavailable(f"vc-scheduler (pid {self.pid}) does not catch SIGUSR1 yet "
                                       "(just started): not signalled")
        self._clear()          # a stale or late file of an earlier request is never taken for this one
        t = self.clock()
        try:
            os.kill(self.pid, signal.SIGUSR1)
        except ProcessLookupError:
            raise CacheDumpUnavailable(f"vc-scheduler (pid {self.pid}) is not running") from None
        deadline = time.monotonic() + timeout
        last_err: str | None = None
        while True:
            for name, st in sorted(_snapshots(self.dir).items()):
                path = self.dir / name
                try:
                    data = path.read_bytes()
                except FileNotFoundError:
                    continue
                try:
                    dump = parse_dump(data, str(path))
                except CacheDumpError as e:
                    last_err = str(e)          # being written: wait for the rest
                    continue
                dump.t, dump.dumped_at = t, st.st_mtime
                self._consume(path)
                self.samples += 1
                return dump
            if time.monotonic() >= deadline:
                break
            time.sleep(self.poll_s)
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            raise CacheDumpUnavailable(f"vc-scheduler (pid {self.pid}) exited before dumping its cache") from None
        if process_state(self.pid) in ("T", "t"):
            raise CacheDumpUnavailable(f"vc-scheduler (pid {self.pid}) was stopped (SIGSTOP) before it dumped")
        if last_err:
            raise CacheDumpUnavailable(f"no complete cache dump within {timeout:g}s ({last_err})")
        raise CacheDumpUnavailable(
            f"no cache dump within {timeout:g}s of SIGUSR1: vc-scheduler installs its dump handler only "
            "once it leads and its informers have synced (a standby holds no cache)")

    def _consume(self, path: Path) -> None:
        try:
            if self.keep_last:
                os.replace(path, self.dir / "last-snapshot.json")
            else:
                path.unlink()
        except FileNotFoundError:
            pass


def digest_of(dumper: CacheDumper, timeout: float = 5.0) -> Mapping[str, Any]:
    """One sample's digest (CacheDumpUnavailable propagates)."""
    return dump_digest(dumper.sample(timeout))
