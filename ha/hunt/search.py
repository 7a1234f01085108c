"""``ha-testbed hunt --profile P``: the search. Many randomized HA chaos runs on the sim engine, each
judged by the safety properties (:mod:`ha.hunt.safety`); every distinct failure shrunk in the
background (``ha.experiment.shrink``); the findings written as ``hunt.md`` and ``hunt.json``
(:mod:`ha.hunt.report`).

The folder (``--out``)::

    hunt-config.json            what the hunt is (profile, switches, seed, intensity, --when): a
                                rerun into the folder must ask for the same hunt, and resumes it
    runs/run-<i>/experiment.yaml   run i's experiment (``ha-testbed run ... --engine sim`` re-runs it)
    runs/run-<i>/run.json       its verdict: status, violations (oracle, roles, fault kinds), wall s
    runs/run-<i>/results/       its results folder, kept only when a property failed
    shrinks/<id>/               one shrink: shrunk.yaml, run/, shrink.md, shrink.json, repro.json
                                (where one applies) and task.json (which group, which source run)
    hunt.json, hunt.md          the findings

Grouping (why a failure found 40 times is reported once): failures are grouped by ``(oracle,
roles)`` (``ha.hunt.signature``). The first failure of a group is shrunk; the kinds of fault left in
its shrunk experiment are what this failure *needs*. A failure belongs to a signature when its run
applied every kind that signature needs; a failure no signature of its group covers gets a shrink
of its own (at most ``MAX_SHRINKS_PER_GROUP`` per group; beyond that it is listed as not shrunk).

Where the work runs: a local process pool (``--jobs``, forkserver, one fresh process per run or
shrink, as ``sweep`` does), or Ray tasks on a cluster (``--ray-address``), each run or shrink in a
temporary folder of its node, its folder shipped back as a gzipped tar (no shared disk). Shrinks
take at most ``jobs - 1`` workers while runs remain (one with ``--jobs 1``, taking turns).

Resumable: a run whose ``run.json`` says ``ok`` is not run again, a shrink whose ``task.json`` says
done is kept; the rest (runs that crashed, shrinks that failed or were interrupted) is redone. Ctrl-C stops: the runs and shrinks in flight finish what they can
(a shrink keeps its smallest case so far), and hunt.md / hunt.json are written for what was found.
"""
from __future__ import annotations

import concurrent.futures as cf
import hashlib
import io
import json
import os
import shutil
import tarfile
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml

from ha.errors import BadInput

__all__ = ["HuntConfig", "Hunt", "hunt_cli", "run_one", "shrink_one", "EXIT_FOUND", "EXIT_INTERRUPTED"]

EXIT_FOUND = 1
EXIT_INTERRUPTED = 130
MAX_SHRINKS_PER_GROUP = 3
CRASH_STOP = 5          # this many crashed runs and not one judged: stop starting runs
CONFIG_FILE = "hunt-config.json"


@dataclass
class HuntConfig:
    profile: str
    switches: dict[str, bool] = field(default_factory=dict)
    seed: int = 0
    intensity: str = "medium"
    when: str | None = None
    runs: int | None = None            # how many runs (None with time_s: as many as fit)
    time_s: float | None = None        # stop starting runs after this long (wall seconds)
    jobs: int = 1
    ray_address: str | None = None
    shrink_budget: int = 60            # sim runs per shrink
    shrink_time_s: float = 300.0       # wall seconds per shrink
    shrink: bool = True                # False: judge and group only (counts, no shrunk cases)

    def identity(self) -> dict[str, Any]:
        """What makes two hunts the same hunt (a resumed folder must match)."""
        return {"profile": self.profile, "switches": dict(sorted(self.switches.items())), "seed": self.seed,
                "intensity": self.intensity, "when": self.when}


# ------------------------------------------------------------------------------------- workers

def _quiet_logs():
    import logging
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    root.handlers[:] = [logging.NullHandler()]
    root.setLevel(logging.ERROR)
    return saved


def run_one(payload: dict[str, Any]) -> dict[str, Any]:
    """One hunt run (a process of its own): run the experiment on the sim engine into
    ``payload["results"]``, judge it, classify each violation; remove the results folder when
    nothing failed. Never raises: returns the run's record (``run.json``)."""
    from ha.experiment.sweep import run_cell
    from ha.hunt.safety import judge, properties
    from ha.hunt.signature import fault_kinds, group_key, roles
    t0 = time.monotonic()
    data = payload["data"]
    results = Path(payload["results"])
    rec: dict[str, Any] = {"index": payload["index"], "experiment_seed": data["seed"], "status": "ok",
                           "error": None, "violations": [], "judged": []}
    meta = run_cell({"data": data, "label": f"hunt run {payload['index']}", "name": data["name"],
                     "seed": data["seed"], "profile": data["profile"], "engine": "sim", "out": str(results),
                     "report": False})
    if meta.get("status") != "ok":
        rec.update(status=meta.get("status", "failed"), error=meta.get("error"))
        if meta.get("traceback"):
            rec["traceback"] = meta["traceback"]
    else:
        try:
            summary = json.loads((results / "metrics.json").read_text(encoding="utf-8"))["summary"]
            bad, judged = judge(summary, data, properties(payload.get("when")))
            rec["judged"] = judged
            for v in bad:
                role, at = roles(v.oracle, summary, results)
                applied, active = fault_kinds(results, at)
                rec["violations"].append({"oracle": v.oracle, "when": v.when, "value": v.value, "roles": role,
                                          "t": at, "faults_applied": applied, "faults_active": active,
                                          "group": group_key(v.oracle, role)})
        except Exception as e:  # noqa: BLE001 — recorded; the hunt goes on
            rec.update(status="failed", error=f"judging the run: {type(e).__name__}: {e}")
    if rec["status"] == "ok" and not rec["violations"] and results.exists():
        shutil.rmtree(results, ignore_errors=True)
    rec["wall_s"] = round(time.monotonic() - t0, 3)
    return rec


def shrink_one(payload: dict[str, Any]) -> dict[str, Any]:
    """Shrink one failure (a process of its own) into ``payload["out"]`` with the oracle's
    predicate; classify the shrunk run. Never raises: returns the shrink's record (``task.json``)."""
    from ha.experiment.config import parse_experiment
    from ha.experiment.shrink import Shrinker
    from ha.hunt.safety import predicate_for
    from ha.hunt.signature import fault_kinds, roles
    t0 = time.monotonic()
    out = Path(payload["out"])
    task = {k: payload[k] for k in ("id", "group", "oracle", "source_run", "when")}
    saved = _quiet_logs()
    try:
        if out.exists():
            shutil.rmtree(out)
        out.mkdir(parents=True)
        exp = parse_experiment(payload["data"], f"hunt run {payload['source_run']}")
        res = Shrinker(exp, predicate_for(payload["oracle"], payload["when"]), out, budget=payload["budget"],
                       time_budget=payload["time_budget"]).shrink()
        summary = json.loads((out / "run" / "metrics.json").read_text(encoding="utf-8"))["summary"]
        role, at = roles(payload["oracle"], summary, out / "run")
        needs = sorted({str(c.get("fault")) for c in res.experiment.get("chaos") or []})
        task.update(status="interrupted" if res.stopped == "interrupted" else "done", stopped=res.stopped,
                    runs=res.runs, original=res.original.to_json(), final=res.final.to_json(), needs=needs,
                    shrunk_roles=role, shrunk_faults=fault_kinds(out / "run", at)[0],
                    repro=res.repro if (res.repro or {}).get("written") else None)
    except KeyboardInterrupt:
        task.update(status="interrupted", error="interrupted")
    except Exception as e:  # noqa: BLE001 — recorded; the failure stays listed, unshrunk
        task.update(status="failed", error=f"{type(e).__name__}: {e}")
    finally:
        import logging
        logging.getLogger().handlers[:] = saved[0]
        logging.getLogger().setLevel(saved[1])
    task["wall_s"] = round(time.monotonic() - t0, 3)
    return task


def _tar(folder: Path) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        if folder.is_dir():
            for p in sorted(folder.rglob("*")):
                tar.add(p, arcname=str(p.relative_to(folder)), recursive=False)
    return buf.getvalue()


def _ray_run(payload: dict[str, Any]) -> tuple[dict[str, Any], bytes | None]:
    with tempfile.TemporaryDirectory(prefix="ha-hunt-run-") as tmp:
        res = Path(tmp) / "results"
        rec = run_one(dict(payload, results=str(res)))
        return rec, (_tar(res) if res.is_dir() else None)


def _ray_shrink(payload: dict[str, Any]) -> tuple[dict[str, Any], bytes | None]:
    with tempfile.TemporaryDirectory(prefix="ha-hunt-shrink-") as tmp:
        out = Path(tmp) / "shrink"
        rec = shrink_one(dict(payload, out=str(out)))
        return rec, (_tar(out) if out.is_dir() else None)


def _unpack(blob: bytes, dest: Path) -> None:
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
        tar.extractall(dest, filter="data")


# ------------------------------------------------------------------------------------- executors

class _LocalExecutor:
    """A forkserver pool, one fresh process per task (``ha.experiment.sweep``'s pool)."""

    def __init__(self, jobs: int):
        from ha.experiment.sweep import _local_pool
        self.jobs = jobs
        self._new = lambda: _local_pool(jobs)
        self.pool = self._new()
        self.running: dict[cf.Future, tuple[str, dict]] = {}

    def submit(self, kind: str, payload: dict) -> None:
        fn = run_one if kind == "run" else shrink_one
        try:
            fut = self.pool.submit(fn, payload)
        except cf.process.BrokenProcessPool:
            self.pool.shutdown(wait=False, cancel_futures=True)
            self.pool = self._new()
            fut = self.pool.submit(fn, payload)
        self.running[fut] = (kind, payload)

    def wait(self, timeout: float | None = None) -> list[tuple[str, dict, dict]]:
        done, _ = cf.wait(list(self.running), timeout=timeout, return_when=cf.FIRST_COMPLETED)
        out = []
        broken = False
        for fut in done:
            kind, payload = self.running.pop(fut)
            try:
                out.append((kind, payload, fut.result()))
            except cf.process.BrokenProcessPool as e:
                broken = True
                out.append((kind, payload, {"status": "failed", "error": f"the worker process died: {e}"}))
        if broken:
            # the others of the broken pool are lost: hand them back as failed to be redone
            for fut, (kind, payload) in list(self.running.items()):
                out.append((kind, payload, {"status": "retry"}))
            self.running.clear()
            self.pool.shutdown(wait=False, cancel_futures=True)
            self.pool = self._new()
        return out

    def busy(self) -> int:
        return len(self.running)

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


class _RayExecutor:
    """Every run and shrink a Ray task (one CPU), its folder shipped back as a tar."""

    def __init__(self, address: str, out: Path, jobs: int):
        import ray
        from ha.runtime.ray_local import start_ray
        self.owned = not ray.is_initialized()
        if self.owned:
            try:
                start_ray(address)
            except Exception as e:  # noqa: BLE001
                raise BadInput(f"--ray-address {address}: cannot connect: {e}") from None
        self.ray = ray
        self.out = out
        self.jobs = jobs
        opts = dict(num_cpus=1, max_retries=0, scheduling_strategy="SPREAD")
        self.tasks = {"run": ray.remote(**opts)(_ray_run), "shrink": ray.remote(**opts)(_ray_shrink)}
        self.running: dict[Any, tuple[str, dict]] = {}

    def submit(self, kind: str, payload: dict) -> None:
        self.running[self.tasks[kind].remote(payload)] = (kind, payload)

    def wait(self, timeout: float | None = None) -> list[tuple[str, dict, dict]]:
        ready, _ = self.ray.wait(list(self.running), num_returns=1, timeout=timeout)
        out = []
        for ref in ready:
            kind, payload = self.running.pop(ref)
            try:
                rec, blob = self.ray.get(ref)
                if blob is not None:
                    _unpack(blob, Path(payload["results"] if kind == "run" else payload["out"]))
            except Exception as e:  # noqa: BLE001 — the task or its node failed
                rec = {"status": "failed", "error": f"Ray task: {type(e).__name__}: {e}"}
            out.append((kind, payload, rec))
        return out

    def busy(self) -> int:
        return len(self.running)

    def close(self) -> None:
        for ref in list(self.running):
            self.ray.cancel(ref, force=True)
        if self.owned:
            self.ray.shutdown()


# ------------------------------------------------------------------------------------- the hunt

def _gid(group: str, k: int) -> str:
    return hashlib.sha256(group.encode()).hexdigest()[:10] + f"-{k}"


class Hunt:
    def __init__(self, cfg: HuntConfig, out: Path, *, on_progress: Callable[[dict], None] | None = None):
        self.cfg = cfg
        self.out = Path(out)
        self.on_progress = on_progress or (lambda state: None)
        self.records: dict[int, dict] = {}           # run index -> run.json
        self.shrinks: dict[str, dict] = {}           # shrink id -> task.json
        self.failed_runs: dict[int, dict] = {}       # runs that crashed (not judged), redone on resume
        self.in_flight_runs: set[int] = set()
        self.in_flight_shrinks: dict[str, dict] = {}
        self.t0 = time.monotonic()
        self.wall_runs = 0.0
        self.interrupted = False
        self.crash_stop = False

    # -- the folder ------------------------------------------------------------------------
    def run_dir(self, i: int) -> Path:
        return self.out / "runs" / f"run-{i:05d}"

    def _open_folder(self) -> None:
        out = self.out
        if out.exists() and not out.is_dir():
            raise BadInput(f"--out {out}: exists and is not a folder")
        cfgf = out / CONFIG_FILE
        if out.exists() and any(out.iterdir()) and not cfgf.exists():
            raise BadInput(f"--out {out}: exists, is not empty and holds no hunt ({CONFIG_FILE}): "
                           f"choose another folder")
        if cfgf.exists():
            try:
                old = json.loads(cfgf.read_text(encoding="utf-8"))
            except ValueError as e:
                raise BadInput(f"{cfgf}: not valid JSON: {e}") from None
            if old != self.cfg.identity():
                diff = ", ".join(f"{k}: {old.get(k)!r} there, {v!r} asked" for k, v in self.cfg.identity().items()
                                 if old.get(k) != v)
                raise BadInput(f"--out {out}: holds another hunt ({diff}); resume it with the same options "
                               f"or choose another folder")
        out.mkdir(parents=True, exist_ok=True)
        cfgf.write_text(json.dumps(self.cfg.identity(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
        for f in sorted((out / "runs").glob("run-*/run.json")):
            try:
                rec = json.loads(f.read_text(encoding="utf-8"))
            except ValueError:
                continue
            if rec.get("status") == "ok":
                self.records[int(rec["index"])] = rec
        for f in sorted((out / "shrinks").glob("*/task.json")):
            try:
                task = json.loads(f.read_text(encoding="utf-8"))
            except ValueError:
                continue
            # a failed shrink is tried again: what broke it (a crash) may be gone
            if task.get("status") == "done":
                self.shrinks[task["id"]] = task

    def _write_json(self, path: Path, doc: dict) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8")
        os.replace(tmp, path)

    # -- the experiments -------------------------------------------------------------------
    def experiment(self, i: int) -> dict[str, Any]:
        from ha.hunt.draw import draw_experiment
        return draw_experiment(self.cfg.seed, i, self.cfg.profile, self.cfg.switches, self.cfg.intensity)

    def _run_payload(self, i: int) -> dict[str, Any]:
        data = self.experiment(i)
        d = self.run_dir(i)
        if d.exists():
            shutil.rmtree(d)
        d.mkdir(parents=True)
        (d / "experiment.yaml").write_text(
            f"# hunt run {i} (seed {self.cfg.seed}, intensity {self.cfg.intensity}); re-run it alone with\n"
            f"#   ha-testbed run {d / 'experiment.yaml'} --engine sim\n"
            + yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
        return {"index": i, "data": data, "results": str(d / "results"), "when": self.cfg.when}

    # -- grouping and shrinking --------------------------------------------------------------
    def failures(self) -> list[tuple[int, dict]]:
        return [(i, v) for i in sorted(self.records) for v in self.records[i].get("violations") or []]

    def assign(self) -> tuple[dict[str, list[tuple[int, dict]]], dict[str, list[tuple[int, dict]]]]:
        """(signature id -> its failures, group -> failures no signature covers), in run order."""
        sigs: dict[str, list] = {sid: [] for sid in self.shrinks}
        by_group: dict[str, list[dict]] = {}
        for sid in sorted(self.shrinks, key=lambda s: (self.shrinks[s]["source_run"], s)):
            by_group.setdefault(self.shrinks[sid]["group"], []).append(self.shrinks[sid])
        uncovered: dict[str, list] = {}
        for i, v in self.failures():
            applied = set(v.get("faults_applied") or [])
            for task in by_group.get(v["group"], []):
                # a shrink covers the run it started from whatever its shrunk case needs: the
                # shrinker may swap a fault for a smaller kind (a redis-restart for the watch
                # expiry it causes) that the run itself never applied
                if task.get("source_run") == i or set(task.get("needs") or []) <= applied:
                    sigs[task["id"]].append((i, v))
                    break
            else:
                uncovered.setdefault(v["group"], []).append((i, v))
        return sigs, uncovered

    def _shrinks_to_start(self) -> list[dict[str, Any]]:
        if not self.cfg.shrink:
            return []
        _, uncovered = self.assign()
        busy_groups = {t["group"] for t in self.in_flight_shrinks.values()}
        out = []
        for group, fails in uncovered.items():
            if group in busy_groups:
                continue
            n = sum(1 for t in list(self.shrinks.values()) if t["group"] == group)
            if n >= MAX_SHRINKS_PER_GROUP:
                continue
            i, v = fails[0]
            sid = _gid(group, n)
            data = self.experiment(i)
            out.append({"id": sid, "group": group, "oracle": v["oracle"], "when": v["when"], "source_run": i,
                        "data": data, "out": str(self.out / "shrinks" / sid), "budget": self.cfg.shrink_budget,
                        "time_budget": self.cfg.shrink_time_s})
        return out

    # -- the loop ------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        cfg = self.cfg
        self._open_folder()
        ex = _RayExecutor(cfg.ray_address, self.out, cfg.jobs) if cfg.ray_address else _LocalExecutor(cfg.jobs)
        total = cfg.runs
        next_i = 0
        stop_runs = False
        try:
            while True:
                # which runs remain
                if not stop_runs and cfg.time_s is not None and time.monotonic() - self.t0 >= cfg.time_s:
                    stop_runs = True
                while next_i in self.records:
                    next_i += 1
                if not stop_runs and len(self.failed_runs) >= CRASH_STOP and not self.records:
                    # every run so far crashed the simulator: the tree is broken, not the profile
                    stop_runs = self.crash_stop = True
                runs_left = not stop_runs and (total is None or next_i < total)
                # shrinks first (their groups wait on them), bounded so runs keep going
                cap = max(1, cfg.jobs - 1) if runs_left else cfg.jobs
                for p in self._shrinks_to_start():
                    if len(self.in_flight_shrinks) >= cap or ex.busy() >= cfg.jobs:
                        break
                    self.in_flight_shrinks[p["id"]] = p
                    ex.submit("shrink", p)
                while runs_left and ex.busy() < cfg.jobs:
                    self.in_flight_runs.add(next_i)
                    ex.submit("run", self._run_payload(next_i))
                    next_i += 1
                    while next_i in self.records:
                        next_i += 1
                    runs_left = total is None or next_i < total
                if not ex.busy():
                    break
                self.on_progress(self.state())
                for kind, payload, rec in ex.wait(timeout=1.0):
                    self._done(kind, payload, rec)
                self.on_progress(self.state())
        except KeyboardInterrupt:
            self.interrupted = True
            # the workers got the signal too: collect what they finish (a shrink keeps its best)
            deadline = time.monotonic() + 30.0
            try:
                while ex.busy() and time.monotonic() < deadline:
                    for kind, payload, rec in ex.wait(timeout=1.0):
                        self._done(kind, payload, rec)
            except KeyboardInterrupt:
                pass
        finally:
            try:
                ex.close()
            except KeyboardInterrupt:
                pass
        from ha.hunt.report import write_report
        return write_report(self)

    def _done(self, kind: str, payload: dict, rec: dict) -> None:
        if kind == "run":
            i = payload["index"]
            self.in_flight_runs.discard(i)
            if rec.get("status") == "retry":
                return
            rec.setdefault("index", i)
            self._write_json(self.run_dir(i) / "run.json", rec)
            if rec.get("status") == "ok":
                self.records[i] = rec
                self.wall_runs += float(rec.get("wall_s") or 0.0)
            else:
                self.failed_runs[i] = rec
        else:
            sid = payload["id"]
            self.in_flight_shrinks.pop(sid, None)
            if rec.get("status") == "retry":
                return
            rec = {k: payload[k] for k in ("id", "group", "oracle", "source_run", "when")} | rec
            if rec.get("status") == "failed" and "needs" not in rec:
                # unshrunk: the source run's applied kinds are what it is known to need
                src = self.records.get(payload["source_run"], {})
                rec["needs"] = sorted({k for v in src.get("violations") or [] if v["group"] == payload["group"]
                                       for k in v.get("faults_applied") or []})
            self._write_json(Path(payload["out"]) / "task.json", rec)
            if rec.get("status") in ("done", "failed"):
                self.shrinks[sid] = rec

    def state(self) -> dict[str, Any]:
        sigs, uncovered = self.assign()
        return {"runs": len(self.records), "failing_runs": sum(1 for r in self.records.values() if r.get("violations")),
                "signatures": len([s for s in sigs if sigs[s]]) + len(uncovered),
                "shrinks_running": len(self.in_flight_shrinks), "shrinks_done": len(self.shrinks),
                "crashed": len(self.failed_runs), "elapsed_s": time.monotonic() - self.t0}


# ------------------------------------------------------------------------------------- the CLI

def parse_switches(items: list[str]) -> dict[str, bool]:
    from ha.scheduler.profiles import Switches
    out: dict[str, bool] = {}
    for raw in items:
        name, sep, val = raw.partition("=")
        name = name.strip()
        if sep and val.strip().lower() not in ("true", "false"):
            raise BadInput(f"--switch {raw}: expected NAME or NAME=true|false")
        out[name] = (not sep) or val.strip().lower() == "true"
    try:
        Switches().with_(**out)
    except BadInput as e:
        raise BadInput(f"--switch: {e}") from None
    return out


def hunt_cli(*, profile: str, runs: int | None = None, time_budget: str | None = None, seed: int = 0,
             intensity: str = "medium", jobs: int | None = None, ray_address: str | None = None,
             out: str | Path | None = None, when: str | None = None, switches: list[str] | None = None,
             shrink_budget: int = 60, shrink_time: str = "5m", shrink: bool = True, as_json: bool = False,
             echo=print, progress: bool = True) -> int:
    """The ``hunt`` command: 0 nothing found, 1 a property failed or a run crashed the simulator, 130
    interrupted; BadInput -> 2."""
    from apimachinery.units import parse_duration
    from ha.hunt.draw import INTENSITIES
    from ha.hunt.safety import properties
    from ha.scheduler.profiles import PROFILES
    if profile not in PROFILES:
        raise BadInput(f"--profile: unknown profile {profile!r} (known: {', '.join(sorted(PROFILES))})")
    if intensity not in INTENSITIES:
        raise BadInput(f"--intensity: must be one of {', '.join(INTENSITIES)}, got {intensity!r}")
    if runs is None and not time_budget:
        raise BadInput("hunt: give --runs N or --time D (how long to search)")
    if runs is not None and runs < 1:
        raise BadInput(f"--runs: must be >= 1, got {runs}")
    tb = None
    if time_budget:
        try:
            tb = parse_duration(time_budget)
        except ValueError as e:
            raise BadInput(f"--time: {e}") from None
        if tb <= 0:
            raise BadInput("--time: must be > 0")
    try:
        st = parse_duration(shrink_time)
    except ValueError as e:
        raise BadInput(f"--shrink-time: {e}") from None
    if shrink_budget < 1:
        raise BadInput(f"--shrink-budget: must be >= 1, got {shrink_budget}")
    if seed < 0:
        raise BadInput(f"--seed: must be >= 0, got {seed}")
    jobs = (os.cpu_count() or 1) if jobs is None else jobs
    if jobs < 1:
        raise BadInput(f"--jobs: must be >= 1, got {jobs}")
    properties(when)     # a bad --when is exit 2 before anything runs
    cfg = HuntConfig(profile=profile, switches=parse_switches(list(switches or [])), seed=seed, intensity=intensity,
                     when=when, runs=runs, time_s=tb, jobs=jobs, ray_address=ray_address,
                     shrink_budget=shrink_budget, shrink_time_s=st, shrink=shrink)
    if out is None:
        out = Path("results") / f"hunt-{profile}-{time.strftime('%Y%m%d-%H%M%S')}"
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
    console = Console(stderr=True)
    done_col = TextColumn("{task.completed}/{task.total} runs" if runs is not None else "{task.completed} runs")
    with Progress(TextColumn("[bold]hunt"), BarColumn(), done_col,
                  TimeElapsedColumn(), TextColumn("{task.fields[info]}"), console=console,
                  disable=not progress or as_json, transient=False) as bar:
        task = bar.add_task("hunt", total=runs, info="")

        def on_progress(s: dict) -> None:
            bar.update(task, completed=s["runs"],
                       info=f"{s['failing_runs']} failing, {s['signatures']} signatures, shrinks "
                            f"{s['shrinks_done']} done / {s['shrinks_running']} running")

        hunt = Hunt(cfg, Path(out), on_progress=on_progress)
        doc = hunt.run()
    if as_json:
        echo(json.dumps(doc, indent=2, default=str))
    else:
        from ha.hunt.report import print_findings
        print_findings(doc, echo=echo)
    if doc.get("interrupted"):
        return EXIT_INTERRUPTED
    return EXIT_FOUND if doc["signatures"] or doc["crashed"] else 0
