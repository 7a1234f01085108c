"""``ha-testbed run EXPERIMENT.yaml``: start the parts, drive the run, record its history, then
let the checkers compute the summary.

Three rooms (Jepsen's split): the engine's parts and their lives (``ha.experiment.engine``: the
engine named by ``--engine``, from ``registry.ENGINES``; live: Redis, Ray, actors, chaos plumbing,
cleanup; sim: the same in one process under a virtual clock), the tick loop (``driver.Driver``) feeding the
``recorder.Recorder`` that writes ``history/``, and the console (``console``). No metric is computed
while the run goes: at the end ``ha.experiment.analyze.analyze`` runs every checker over the
history and writes the summary, ``timeseries.csv`` and ``report.md`` — exactly what
``ha-testbed analyze`` does on the folder later.
"""
from __future__ import annotations

import functools
import logging
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ha.errors import BadInput
from ha.scheduler.acceleration import Acceleration
from ha.experiment.config import Experiment, load_experiment
from ha.experiment.results import ResultsWriter
from ha.runtime import ledger

__all__ = ["run_cli", "ExperimentRunner", "RunOutcome", "default_out", "code_version"]

log = logging.getLogger(__name__)

EXIT_INTERRUPTED = 130


class Interrupted(BaseException):
    """SIGINT/SIGTERM: stop the run, clean up, write what was measured."""

    def __init__(self, signum: int):
        self.signum = signum
        super().__init__(signal.Signals(signum).name)


def default_out(exp: Experiment) -> Path:
    return Path("results") / f"{exp.name}-{time.strftime('%Y%m%d-%H%M%S')}"


@functools.lru_cache(maxsize=1)
def code_version() -> dict[str, Any]:
    """The package version and, in a git checkout, the commit and whether the tree was dirty:
    with the experiment and the seed, what a run is reproduced from."""
    from importlib.metadata import PackageNotFoundError, version
    try:
        v = version("ha-testbed")
    except PackageNotFoundError:
        v = None
    out: dict[str, Any] = {"package": v, "commit": None, "dirty": None}
    root = Path(__file__).resolve().parents[2]
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                             timeout=5)
        if sha.returncode == 0:
            out["commit"] = sha.stdout.strip()
            st = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                                capture_output=True, text=True, timeout=5)
            out["dirty"] = bool(st.stdout.strip()) if st.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        pass
    return out


def run_cli(path, out=None, seed=None, profile=None, redis_url=None, ray_address=None,
            duration=None, *, engine: str = "live", console=None, progress: bool = True,
            implementation: str | None = None, volcano: str | None = None,
            volcano_source: str | None = None) -> int:
    """The ``ha-testbed run`` command. Returns the exit code (0 ok, 130 interrupted); bad input
    raises :class:`BadInput` (exit 2)."""
    exp = load_experiment(path).with_overrides(seed=seed, profile=profile, duration=duration,
                                               implementation=implementation, volcano=volcano,
                                               volcano_source=volcano_source)
    out_dir = Path(out) if out is not None else default_out(exp)
    runner = ExperimentRunner(exp, out_dir, redis_url=redis_url, ray_address=ray_address,
                              source=str(path), console=console, progress=progress, engine=engine)
    outcome = runner.run()
    return EXIT_INTERRUPTED if outcome.interrupted else 0


@dataclass
class RunOutcome:
    out: Path
    summary: dict[str, Any]
    interrupted: bool = False


class ExperimentRunner:
    def __init__(self, exp: Experiment, out: Path, *, redis_url: str | None = None,
                 ray_address: str | None = None, source: str = "<experiment>", console=None,
                 progress: bool = True, instance_options: dict[str, Any] | None = None,
                 engine: str = "live", report: bool = True):
        from ha.experiment.engine.registry import engine_class
        engine_cls = engine_class(engine)
        self.exp = exp
        self.out = Path(out).absolute()
        self.source = source
        # the acceleration switches this run's caches are built with (ha/scheduler/acceleration.py),
        # read once here and recorded in metrics.json: they change no result, but every figure
        self.acceleration = Acceleration.from_environ()
        self.progress_enabled = progress
        self.report = report          # False: no report.md and plots (`ha-testbed report` writes them later)
        if console is None:
            from rich.console import Console
            console = Console(stderr=False)
        self.console = console
        self.life = engine_cls(exp, self.out, source=source, instance_options=instance_options,
                               redis_url=redis_url, ray_address=ray_address)
        self.writer = None
        self.recorder = None
        self.driver = None
        self._code_version: dict[str, Any] | None = None
        # the sim's start is its virtual epoch: nothing of the host's clock in its history
        self.started_at = getattr(self.life, "started_at", None) or time.time()

    @property
    def run_id(self) -> str:
        return self.life.run_id

    # -- public ------------------------------------------------------------------------------

    def run(self) -> RunOutcome:
        interrupted = False
        error: str | None = None
        old = _install_signals()
        try:
            ResultsWriter.check_out(self.out)    # bad --out before anything starts
            # stops what dead runs left (by their recorded PIDs), then records what we start
            ledger.begin(self.run_id)
            self.life.start_redis()
            self._open_history()
            self.life.create_cluster_objects()
            self.life.start_ray()
            _install_signals()   # ray.init replaces the SIGTERM handler with sys.exit
            self._drive()
        except Interrupted as e:
            interrupted = True
            self.console.print(f"[yellow]interrupted ({e}); stopping and writing what was measured[/]")
        except KeyboardInterrupt:
            interrupted = True
            self.console.print("[yellow]interrupted; stopping and writing what was measured[/]")
        except BadInput:
            _ignore_signals()
            self._close_history(error=None, interrupted=False)
            self.life.cleanup()
            raise
        except Exception as e:  # noqa: BLE001 - clean up, record, re-raise
            error = f"{type(e).__name__}: {e}"
            _ignore_signals()
            self._finish(interrupted=False, error=error)
            raise
        finally:
            _restore_signals(old)
        # normal end or interrupted: take the final numbers, then tear down (no second Ctrl-C
        # may abort the teardown half-way)
        old = _ignore_signals()
        try:
            summary = self._finish(interrupted=interrupted, error=None)
        finally:
            _restore_signals(old)
        self._print_summary(summary, interrupted)
        return RunOutcome(out=self.out, summary=summary, interrupted=interrupted)

    # -- the run -----------------------------------------------------------------------------

    def _open_history(self) -> None:
        from ha.experiment.history import HistoryWriter
        from ha.experiment.recorder import Recorder
        self.out.mkdir(parents=True, exist_ok=True)
        self.writer = HistoryWriter(self.out, self._header())
        s = self.exp.schedulers
        lease = None if s.mode == "active-active" else ("volcano", "volcano-system")
        self.recorder = Recorder(self.writer, self.life.api, t0_wall=0.0, lease=lease)

    def _code(self) -> dict[str, Any]:
        """code_version(), asked of git once a run (the history's header and metrics.json name the
        same code; each ask is two git processes, which a hunt's short runs felt)."""
        if self._code_version is None:
            self._code_version = code_version()
        return self._code_version

    def _header(self) -> dict[str, Any]:
        return {"engine": self.life.engine, "seed": self.exp.seed, "profile": self.exp.profile,
                "experiment": self.exp.resolved(), "switches": self._switches(),
                "instances": self.exp.instance_names(), "measure_every_s": self.exp.measure.every,
                "duration_s": self.exp.duration, "code": self._code(), "source": self.source,
                "api_server": self.life.api_server.to_dict(),
                "run_id": self.life.run_id, "started_at": self.started_at}

    def _drive(self) -> None:
        from ha.experiment.console import Progress
        from ha.experiment.driver import Driver
        self.life.start_parts(self.recorder)
        with Progress(self.console, self.exp.name, self.exp.duration, self.progress_enabled) as bar:
            self.driver = Driver(self.life, self.recorder, duration=self.exp.duration,
                                 every=self.exp.measure.every, on_tick=bar.update)
            self.driver.run()

    # -- end ---------------------------------------------------------------------------------

    def _finish(self, *, interrupted: bool, error: str | None) -> dict[str, Any]:
        final = self.life.final_stats()
        self.life.collect_delivery_logs()
        api_state = self.life.final_api_state() if self.writer is not None else None
        if self.recorder is not None:
            self.recorder.export_truth()     # at least up to the listing's RV
            self.recorder.record_lease(self.life.now())
        self.life.cleanup()
        self._close_history(error=error, interrupted=interrupted, final=final, api_state=api_state)
        return self._analyze()

    def _close_history(self, *, error: str | None, interrupted: bool, final: dict | None = None,
                       api_state: dict | None = None) -> None:
        if self.writer is None:
            return
        life = self.life
        final = final or {}
        elapsed = self.driver.elapsed_s if self.driver is not None else 0.0
        self.writer.final({
            "elapsed_s": round(elapsed, 3), "interrupted": interrupted, "error": error,
            "instances": final.get("instances") or {}, "cluster": final.get("cluster"),
            "api_state": api_state,
            "lease": self.recorder.last_lease if self.recorder else None,
            "truth": {"rv": self.recorder.truth_rv if self.recorder else None,
                      "gaps": self.recorder.truth_gaps if self.recorder else []}})
        self.writer.close()
        fired = life.nemesis.to_json() if life.nemesis is not None else []
        from ha.experiment.console import chaos_entries
        conf = None
        try:
            conf = self.exp.scheduler_conf_resolved().to_dict()
        except Exception:  # noqa: BLE001
            pass
        insts = final.get("instances") or {}
        doc = {
            "summary": {},
            "engine": life.engine,
            "seed": self.exp.seed,
            "code": self._code(),
            "experiment": self.exp.resolved(),
            "scheduler_conf": conf,
            "switches": self._switches(),
            "acceleration": self.acceleration.as_record(),
            "api_server": life.api_server.to_dict(),
            "run": {"source": self.source, "run_id": life.run_id, "prefix": life.prefix,
                    "started_at": self.started_at,
                    "finished_at": (self.started_at + elapsed) if life.engine == "sim" else time.time(),
                    "elapsed_s": round(elapsed, 3), "ticks": self.driver.ticks if self.driver else 0,
                    "redis": "embedded" if life.redis_embedded else life.redis_url,
                    "ray": life.ray_address or "local",
                    "interrupted": interrupted, "error": error,
                    "objects_created": life.object_counts},
            "totals": {k: sum(s.total(k) for s in life.slots.values()) for k in _counters()},
            "chaos": chaos_entries(self.exp, fired, life.redis_embedded),
            "chaos_schedule": life.schedule.to_json() if life.schedule is not None else None,
            "chaos_fired": fired,
            "instances": insts,
            "cluster": final.get("cluster"),
        }
        if getattr(life, "volcano", None) is not None:
            doc["scheduler"] = life.volcano.record()
        _write_json(self.out / "metrics.json", doc)

    def _analyze(self) -> dict[str, Any]:
        from ha.experiment.analyze import analyze
        try:
            return analyze(self.out, report=self.report)
        except Exception as e:  # noqa: BLE001 — the history stands; `ha-testbed analyze` can retry
            log.exception("analyze")
            self.console.print(f"[red]analysis failed ({type(e).__name__}: {e}); the history is "
                               f"kept: run `ha-testbed analyze {self.out}`[/]")
            return {}

    def _switches(self) -> dict[str, bool] | None:
        try:
            return self.exp.switches_resolved().to_dict()
        except Exception:  # noqa: BLE001
            return None

    def _print_summary(self, summary: dict[str, Any], interrupted: bool) -> None:
        from ha.experiment.console import chaos_entries, print_summary
        life = self.life
        fired = life.nemesis.to_json() if life.nemesis is not None else []
        insts = {n: {"is_leader": s.last_stats.get("is_leader"), "ended_alive": s.ended_alive,
                     "placement": getattr(s, "placement", None) or {},
                     "totals": {k: s.total(k) for k in _counters()}} for n, s in life.slots.items()}
        print_summary(self.console,
                      title=f"{self.exp.name} ({self.exp.profile}, seed {self.exp.seed})"
                            + (" — interrupted" if interrupted else ""),
                      summary=summary, instances=insts,
                      chaos=chaos_entries(self.exp, fired, life.redis_embedded), out=self.out)


def _write_json(path: Path, doc: dict[str, Any]) -> None:
    """Atomically (a reader never sees half a file); NaN/inf as null."""
    import json
    import os
    from ha.experiment.results import _clean
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(_clean(doc), indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _counters():
    from ha.experiment.engine.base import COUNTERS
    return COUNTERS


# -- signals ---------------------------------------------------------------------------------

def _install_signals():
    def handler(signum, frame):
        raise Interrupted(signum)
    old = {}
    try:
        for s in (signal.SIGINT, signal.SIGTERM):
            old[s] = signal.signal(s, handler)
    except ValueError:  # not the main thread: leave signals alone
        pass
    return old


def _ignore_signals():
    old = {}
    try:
        for s in (signal.SIGINT, signal.SIGTERM):
            old[s] = signal.signal(s, signal.SIG_IGN)
    except ValueError:
        pass
    return old


def _restore_signals(old) -> None:
    for s, h in old.items():
        try:
            signal.signal(s, h)
        except (ValueError, TypeError):
            pass
