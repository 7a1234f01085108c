"""``ha-testbed sweep EXPERIMENT.yaml --seeds A-B --profiles P,Q [--set KEY=V1,V2]...``: the grid of
runs (:mod:`ha.experiment.sweep_grid`), each cell an ordinary results folder under
``<out>/cells/<profile>/<set-values>/seed-<n>/``, then the statistics over them
(:mod:`ha.experiment.sweep_report`: ``sweep.json``, ``summary.md``, ``plots/``).

Where the cells run:

* locally (default): a process pool of ``--jobs`` workers, each cell in a fresh process of its own
  (``max_tasks_per_child=1``; a live cell starts its own embedded Redis and local Ray, so the live
  engine defaults to one job at a time: two live cells on a small machine starve each other's
  actors and lease timing);
* on a Ray cluster (``--ray-address``): every cell is a Ray task (one CPU, spread over the nodes).
  No shared disk is assumed: the task runs its cell in a temporary folder on its node and returns
  the folder as a gzipped tar, which the driver unpacks into the sweep folder; the node's id goes
  into ``cell.json`` and ``sweep.json``. Only the sim engine runs over Ray: a live cell needs an
  API server (Redis) and a Ray cluster of its own, which a Ray task cannot start cleanly inside
  another cluster (refused, exit 2). The package must be importable on every node (the docker
  image installs it).

A cell is an ordinary results folder (history/, metrics.json, timeseries.csv, delivery/); its
report.md and plots only with ``--cell-reports`` (they cost about a third of a sim cell;
``ha-testbed report CELL`` writes them later).

Resumable: a cell whose folder holds a ``metrics.json`` with a non-empty summary (and whose
``cell.json`` does not say it failed) is skipped; any other existing cell folder (half-written,
failed, interrupted) is removed and the cell redone. A failed cell is recorded with its error in
``cell.json`` and ``sweep.json`` and the sweep goes on; the exit code is 1 when a cell failed.
"""
from __future__ import annotations

import concurrent.futures as cf
import io
import json
import logging
import multiprocessing
import os
import shutil
import socket
import sys
import tarfile
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any, Callable

import yaml

from ha.errors import BadInput
from ha.experiment.sweep_grid import Cell, Grid, build_grid, parse_profiles, parse_seeds, parse_set

__all__ = ["sweep_cli", "run_sweep", "run_cell", "cell_done", "CELL_FILE", "SWEEP_FILE", "EXIT_CELL_FAILED"]

log = logging.getLogger(__name__)

CELL_FILE = "cell.json"
SWEEP_FILE = "sweep.json"
EXIT_CELL_FAILED = 1
EXIT_INTERRUPTED = 130


# ------------------------------------------------------------------------------------- one cell

def cell_done(folder: Path) -> bool:
    """A finished cell: metrics.json with a non-empty summary, not marked failed/interrupted."""
    try:
        doc = json.loads((folder / "metrics.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return False
    if not isinstance(doc, dict) or not isinstance(doc.get("summary"), dict) or not doc["summary"]:
        return False
    meta = read_cell_meta(folder)
    return meta.get("status", "ok") == "ok"


def read_cell_meta(folder: Path) -> dict[str, Any]:
    try:
        meta = json.loads((folder / CELL_FILE).read_text(encoding="utf-8"))
        return meta if isinstance(meta, dict) else {}
    except (OSError, ValueError, UnicodeDecodeError):
        return {}


def _where() -> dict[str, Any]:
    out: dict[str, Any] = {"host": socket.gethostname(), "pid": os.getpid(), "node_id": None}
    # Ray is initialized only where it was imported: a pool process need not import it to know
    # (importing it costs a hunt or sweep run about a second)
    ray = sys.modules.get("ray")
    if ray is None:
        return out
    try:
        if ray.is_initialized():
            out["node_id"] = ray.get_runtime_context().get_node_id()
    except Exception:  # noqa: BLE001 — not inside Ray
        pass
    return out


def run_cell(payload: dict[str, Any]) -> dict[str, Any]:
    """Run one cell into ``payload["out"]`` (a process of its own: the pool's or a Ray task's).
    Never raises: returns ``{"status": "ok"|"failed"|"interrupted", "error", "wall_s", ...}``."""
    from rich.console import Console

    from ha.experiment.config import parse_experiment
    from ha.experiment.runner import ExperimentRunner
    t0 = time.monotonic()
    meta: dict[str, Any] = {"status": "ok", "error": None}
    # the cell's log goes to <cell>/cell.log, not to the sweep's terminal
    logbuf = io.StringIO()
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    handler = logging.StreamHandler(logbuf)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)
    try:
        exp = parse_experiment(payload["data"], payload["label"], default_name=payload["name"])
        exp = exp.with_overrides(seed=payload["seed"], profile=payload["profile"])
        out = Path(payload["out"])
        if out.exists():
            shutil.rmtree(out)
        runner = ExperimentRunner(exp, out, source=payload["label"], engine=payload["engine"], progress=False,
                                  console=Console(file=io.StringIO(), width=120),
                                  report=bool(payload.get("report")))
        outcome = runner.run()
        if outcome.interrupted:
            meta.update(status="interrupted", error="interrupted")
        else:
            doc = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
            if not doc.get("summary"):
                meta.update(status="failed", error="the run wrote no summary (its checkers failed: "
                                                   "see the cell's metrics.json)")
    except BaseException as e:  # noqa: BLE001 — a failed cell is recorded, the sweep goes on
        if isinstance(e, KeyboardInterrupt):
            meta.update(status="interrupted", error="interrupted")
        else:
            meta.update(status="failed", error=f"{type(e).__name__}: {e}",
                        traceback=traceback.format_exc(limit=20))
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
    meta["wall_s"] = round(time.monotonic() - t0, 3)
    meta.update(_where())
    out = Path(payload["out"])
    if out.is_dir():
        (out / "cell.log").write_text(logbuf.getvalue(), encoding="utf-8")
    return meta


def _ray_cell(payload: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
    """A Ray task: the cell in a temporary folder of its node, shipped back as a gzipped tar."""
    with tempfile.TemporaryDirectory(prefix="ha-sweep-cell-") as tmp:
        out = Path(tmp) / "cell"
        meta = run_cell(dict(payload, out=str(out)))
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tar:
            if out.is_dir():
                for p in sorted(out.rglob("*")):
                    tar.add(p, arcname=str(p.relative_to(out)), recursive=False)
        return meta, buf.getvalue()


def _unpack(blob: bytes, dest: Path) -> None:
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
        tar.extractall(dest, filter="data")


# ------------------------------------------------------------------------------------- the grid

def _payload(grid: Grid, cell: Cell, engine: str, out: Path, report: bool = False) -> dict[str, Any]:
    label = grid.source + (f" (--set {', '.join(f'{k}={v}' for k, v in cell.assign)})" if cell.assign else "")
    return {"data": grid.experiment_data(cell), "label": label, "name": Path(grid.source).stem,
            "seed": cell.seed, "profile": cell.profile, "engine": engine, "out": str(out / cell.rel),
            "report": report}


def _record(out: Path, cell: Cell, meta: dict[str, Any]) -> dict[str, Any]:
    folder = out / cell.rel
    folder.mkdir(parents=True, exist_ok=True)
    rec = cell.to_dict() | {k: v for k, v in meta.items() if k != "path"}
    tmp = folder / (CELL_FILE + ".tmp")
    tmp.write_text(json.dumps(rec, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, folder / CELL_FILE)
    return rec


# what a cell imports, imported once in the fork server rather than once per cell (~2 s each)
PRELOAD = ("ha.experiment.sweep", "ha.experiment.runner", "ha.experiment.engine.registry",
           "ha.experiment.analyze", "ha.experiment.report", "ha.experiment.checkers._fold",
           "ha.runtime.instance", "ha.runtime.cluster", "ha.scheduler.scheduler", "ha.scheduler.wiring",
           "ha.scheduler.actions", "ha.scheduler.plugins", "chaos.nemesis", "ha.experiment.replay",
           "matplotlib.pyplot",
           # imported inside functions on a run's way: once in the server, not once per run
           "ha.scheduler.cache", "ha.scheduler.framework.job_updater", "ha.runtime.external.observe",
           "cluster_state.informer", "cluster_state.reflector", "chaos.injectors.watch",
           "chaos.injectors.api", "rich.console", "rich.progress", "psutil", "numpy.random",
           "importlib.metadata",
           # a hunt's run is judged and classified in its process
           "ha.hunt.search", "ha.hunt.safety", "ha.hunt.signature", "ha.hunt.draw",
           "ha.experiment.shrink.predicate")


def _preload() -> list[str]:
    import pkgutil

    import ha.experiment.checkers as checkers
    return list(PRELOAD) + [f"ha.experiment.checkers.{m.name}" for m in pkgutil.iter_modules(checkers.__path__)
                            if not m.name.startswith("_")]


def _local_pool(jobs: int) -> cf.ProcessPoolExecutor:
    # forkserver: a clean process per cell (no threads of the driver's inherited), the package
    # imported once in the server
    os.environ.setdefault("MPLBACKEND", "Agg")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(_preload())
    return cf.ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, max_tasks_per_child=1)


def _run_local(todo: list[tuple[Cell, dict]], jobs: int, on_done: Callable[[Cell, dict], None]) -> None:
    pending = list(todo)
    pool = _local_pool(jobs)
    running: dict[cf.Future, tuple[Cell, dict]] = {}
    try:
        while pending or running:
            while pending and len(running) < jobs:
                cell, payload = pending.pop(0)
                try:
                    running[pool.submit(run_cell, payload)] = (cell, payload)
                except cf.process.BrokenProcessPool:
                    pending.insert(0, (cell, payload))
                    pool.shutdown(wait=False, cancel_futures=True)
                    pool = _local_pool(jobs)
                    break
            done, _ = cf.wait(list(running), return_when=cf.FIRST_COMPLETED)
            for fut in done:
                cell, _ = running.pop(fut)
                try:
                    meta = fut.result()
                except cf.process.BrokenProcessPool as e:
                    # the cell's process died (killed, out of memory): recorded, a fresh pool goes on
                    meta = {"status": "failed", "error": f"the cell's process died: {e}"}
                    pool.shutdown(wait=False, cancel_futures=True)
                    # the others of the broken pool run again in the new one
                    pending[:0] = [running.pop(f2) for f2 in list(running) if f2 not in done]
                    pool = _local_pool(jobs)
                on_done(cell, meta)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _run_ray(todo: list[tuple[Cell, dict]], address: str, out: Path,
             on_done: Callable[[Cell, dict], None]) -> None:
    import ray
    from ha.runtime.ray_local import start_ray
    owned = not ray.is_initialized()
    if owned:
        try:
            start_ray(address)
        except Exception as e:  # noqa: BLE001
            raise BadInput(f"--ray-address {address}: cannot connect: {e}") from None
    try:
        task = ray.remote(num_cpus=1, max_retries=0, scheduling_strategy="SPREAD")(_ray_cell)
        refs = {task.remote(p): c for c, p in todo}
        while refs:
            ready, _ = ray.wait(list(refs), num_returns=1)
            for ref in ready:
                cell = refs.pop(ref)
                try:
                    meta, blob = ray.get(ref)
                    _unpack(blob, out / cell.rel)
                except Exception as e:  # noqa: BLE001 — the task or its node failed
                    meta = {"status": "failed", "error": f"Ray task: {type(e).__name__}: {e}"}
                on_done(cell, meta)
    finally:
        if owned:
            ray.shutdown()


def default_jobs(engine: str) -> int:
    return 1 if engine == "live" else max(1, os.cpu_count() or 1)


def run_sweep(grid: Grid, out: Path, *, engine: str = "sim", jobs: int | None = None,
              ray_address: str | None = None, console=None, progress: bool = True,
              bootstrap_seed: int = 0, resamples: int | None = None, cell_reports: bool = False) -> dict[str, Any]:
    """Run every cell not done yet, then write sweep.json, summary.md and the plots. Returns the
    sweep document (``sweep.json``). ``cell_reports``: each cell also writes its report.md and
    plots (about a third of a sim cell's cost; ``ha-testbed report CELL`` writes one later)."""
    from ha.experiment import sweep_report
    if engine not in ("sim", "live"):
        raise BadInput(f"--engine: must be sim or live, got {engine!r}")
    if ray_address and engine == "live":
        raise BadInput("--ray-address with --engine live: a live cell needs its own Redis and Ray cluster, "
                       "which a Ray task cannot start inside another cluster; run live sweeps locally "
                       "(--jobs) or use --engine sim over Ray")
    jobs = default_jobs(engine) if jobs is None else jobs
    if jobs < 1:
        raise BadInput(f"--jobs: must be >= 1, got {jobs}")
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise BadInput(f"--out {out}: exists and is not a folder")
    if (out / "metrics.json").exists():
        raise BadInput(f"--out {out}: holds a single run's results (metrics.json), not a sweep")
    out.mkdir(parents=True, exist_ok=True)
    sweep_report.write_grid(out, grid, engine)
    records: dict[Cell, dict] = {}
    todo: list[tuple[Cell, dict]] = []
    for cell in grid.cells:
        folder = out / cell.rel
        if cell_done(folder):
            records[cell] = cell.to_dict() | read_cell_meta(folder) | {"status": "ok", "skipped": True}
        else:
            if folder.exists():
                shutil.rmtree(folder)        # half-written, failed or interrupted: redo
            todo.append((cell, _payload(grid, cell, engine, out, cell_reports)))

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    console = console or Console()
    counts = {"ok": 0, "failed": 0}
    skipped = len(records)
    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   console=console, disable=not progress, transient=False)

    def desc() -> str:
        return f"sweep ({engine}): {counts['ok']} ok, {counts['failed']} failed, {skipped} done before"

    interrupted = False
    with bar:
        task = bar.add_task(desc(), total=len(grid.cells), completed=skipped)

        def on_done(cell: Cell, meta: dict) -> None:
            rec = _record(out, cell, meta)
            records[cell] = rec
            counts["ok" if rec["status"] == "ok" else "failed"] += 1
            if rec["status"] != "ok":
                console.print(f"[red]cell {cell.rel} {rec['status']}: {rec.get('error')}[/]")
            bar.update(task, advance=1, description=desc())

        try:
            if todo:
                if ray_address:
                    _run_ray(todo, ray_address, out, on_done)
                else:
                    _run_local(todo, jobs, on_done)
        except KeyboardInterrupt:
            interrupted = True
            console.print("[yellow]interrupted: the statistics cover the cells done so far; "
                          "rerun the same command to resume[/]")
    cells = [records.get(c) or (c.to_dict() | {"status": "not run"}) for c in grid.cells]
    doc = sweep_report.write_sweep(out, grid.to_dict() | {"engine": engine}, cells,
                                   bootstrap_seed=bootstrap_seed, resamples=resamples)
    doc["interrupted"] = interrupted
    return doc


# ------------------------------------------------------------------------------------- the CLI

def load_grid(path: str | Path, seeds: str, profiles: str, sets: list[str]) -> Grid:
    from ha.experiment.config import load_experiment
    load_experiment(path)                       # the file as it is: valid (errors name the file)
    data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    return build_grid(str(path), data, parse_seeds(seeds), parse_profiles(profiles),
                      [parse_set(s) for s in sets])


def sweep_cli(path, *, seeds: str, profiles: str, sets: list[str] | None = None, engine: str = "sim",
              jobs: int | None = None, ray_address: str | None = None, out: str | Path | None = None,
              as_json: bool = False, echo=print, console=None, progress: bool = True,
              cell_reports: bool = False) -> int:
    """The ``sweep`` command: 0 all cells ok, 1 a cell failed, 130 interrupted; BadInput → 2."""
    grid = load_grid(path, seeds, profiles, list(sets or []))
    if out is None:
        out = Path("results") / f"sweep-{Path(str(path)).stem}-{time.strftime('%Y%m%d-%H%M%S')}"
    doc = run_sweep(grid, Path(out), engine=engine, jobs=jobs, ray_address=ray_address, console=console,
                    progress=progress and not as_json, cell_reports=cell_reports)
    from ha.experiment import sweep_report
    if as_json:
        echo(json.dumps(doc, sort_keys=True, default=str))
    else:
        sweep_report.print_ci_tables(doc, console=console)
        echo(f"sweep: {out} (sweep.json, summary.md, plots/)")
    if doc.get("interrupted"):
        return EXIT_INTERRUPTED
    return EXIT_CELL_FAILED if any(c.get("status") != "ok" for c in doc["cells"]) else 0
