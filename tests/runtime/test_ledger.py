"""The process ledger (ha.runtime.ledger) and ``ha-testbed cleanup``: what a SIGKILLed driver left
running is stopped by PID (and start time), a living run's processes and recycled PIDs are not."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from ha.runtime import ledger

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable
CLI = [sys.executable, "-m", "ha.cli"]   # this tree's CLI, whatever is installed


def _env(runs: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT), **{ledger.RUNS_DIR_ENV: str(runs)})
    return env


def _sleeper() -> subprocess.Popen:
    return subprocess.Popen([PY, "-c", "import time; time.sleep(120)"])


def _write(runs: Path, run_id: str, driver: ledger.ProcessRecord, procs: list) -> Path:
    led = ledger.Ledger(run_id=run_id, path=runs / f"{run_id}.json", driver=driver, processes=procs)
    led._save()
    return led.path


def _dead_driver() -> ledger.ProcessRecord:
    p = subprocess.Popen([PY, "-c", "pass"])
    rec = ledger.process_record(p.pid, "driver")
    p.wait()
    return rec


def test_reap_stops_a_dead_runs_processes_and_removes_its_ledger(tmp_path):
    victim = _sleeper()
    try:
        path = _write(tmp_path, "deadrun", _dead_driver(), [ledger.process_record(victim.pid, "x")])
        reports = ledger.reap(tmp_path, grace_s=5)
        assert [r.run_id for r in reports] == ["deadrun"]
        assert [r.pid for r in reports[0].stopped] == [victim.pid] and reports[0].survived == []
        assert victim.wait(timeout=5) is not None
        assert not path.exists()
    finally:
        if victim.poll() is None:
            victim.kill()
            victim.wait()


def test_reap_leaves_living_runs_and_recycled_pids_alone(tmp_path):
    living_driver, victim, other = _sleeper(), _sleeper(), _sleeper()
    try:
        rec = ledger.process_record(victim.pid, "x")
        live = _write(tmp_path, "living", ledger.process_record(living_driver.pid, "driver"), [rec])
        # a dead run that names a PID now running with another start time: a recycled PID
        recycled = ledger.ProcessRecord(pid=other.pid, create_time=rec.create_time - 1000.0, what="y")
        dead = _write(tmp_path, "recycled", _dead_driver(), [recycled])
        reports = ledger.reap(tmp_path, grace_s=1)
        assert [r.run_id for r in reports] == ["recycled"]
        assert reports[0].stopped == [] and reports[0].survived == []
        assert victim.poll() is None and other.poll() is None and living_driver.poll() is None
        assert live.exists() and not dead.exists()
    finally:
        for p in (living_driver, victim, other):
            p.kill()
            p.wait()


def test_begin_add_end_records_and_stops_leftovers(tmp_path):
    victim = _sleeper()
    try:
        led = ledger.begin("mine", directory=tmp_path)
        assert ledger.current() is led
        ledger.add(victim.pid, "sleeper")
        ledger.add(None)
        on_disk = json.loads(led.path.read_text())
        assert on_disk["driver"]["pid"] == os.getpid()
        assert [p["pid"] for p in on_disk["processes"]] == [victim.pid]
        left = ledger.end(grace_s=5)
        assert [p.pid for p in left] == [victim.pid]          # the teardown had not stopped it
        assert victim.wait(timeout=5) is not None
        assert not led.path.exists() and ledger.current() is None
        ledger.add(os.getpid())                                 # no ledger open: a no-op
    finally:
        if victim.poll() is None:
            victim.kill()
            victim.wait()


@pytest.mark.ray
def test_sigkilled_driver_leaves_nothing_after_cleanup(tmp_path):
    """A driver that started the embedded Redis and a local Ray (with an actor) is SIGKILLed;
    some of Ray's processes outlive it (measured: the dashboard and runtime-env agents);
    ``ha-testbed cleanup`` stops every process the driver recorded."""
    runs = tmp_path / "runs"
    env = _env(runs)
    drv = subprocess.Popen([PY, "-m", "tests.runtime.ledger_driver", "sigkill-run"], cwd=ROOT, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    recorded: list[ledger.ProcessRecord] = []
    try:
        line = drv.stdout.readline()
        assert line, f"the driver exited early (rc {drv.poll()})"
        info = json.loads(line)
        led = ledger.Ledger.load(Path(info["ledger"]))
        recorded = led.processes
        whats = sorted({p.what for p in recorded})
        assert whats == ["ray", "redis-server"], whats
        assert all(p.alive() for p in recorded)
        drv.send_signal(signal.SIGKILL)
        drv.wait(timeout=10)
        time.sleep(2)   # let what dies with the driver die
        out = subprocess.run([*CLI, "cleanup", "--json"], cwd=ROOT, env=env, capture_output=True, text=True,
                             timeout=120)
        assert out.returncode == 0, out.stderr
        reports = json.loads(out.stdout)
        assert [r["run_id"] for r in reports] == ["sigkill-run"]
        assert reports[0]["survived"] == []
        # the premise: something outlived the driver and cleanup was what stopped it
        assert any(p["what"] == "ray" for p in reports[0]["stopped"]), reports
        alive = [p for p in recorded if p.alive()]
        assert alive == [], f"still running after cleanup: {alive}"
        assert not psutil.pid_exists(info["actor_pid"]) or \
            psutil.Process(info["actor_pid"]).status() == psutil.STATUS_ZOMBIE
        assert not Path(info["ledger"]).exists()
        # and a second cleanup finds nothing to do
        again = subprocess.run([*CLI, "cleanup", "--json"], cwd=ROOT, env=env, capture_output=True, text=True,
                               timeout=60)
        assert json.loads(again.stdout) == []
    finally:
        if drv.poll() is None:
            drv.kill()
            drv.wait()
        ledger.stop_processes(recorded, grace_s=2)


RUNNER = ROOT / "ha" / "experiment" / "runner.py"


def _rows(path: Path) -> int:
    try:
        return max(0, len(path.read_text().splitlines()) - 1)
    except FileNotFoundError:
        return 0


@pytest.mark.ray
@pytest.mark.skipif("ledger.begin(" not in RUNNER.read_text(),
                    reason="the runner does not open a process ledger (ha.runtime.ledger.begin)")
def test_sigkilled_run_leaves_nothing_after_cleanup(tmp_path):
    """``kill -9`` of ``ha-testbed run`` mid-run, then ``ha-testbed cleanup``: every process the
    run recorded is gone."""
    runs = tmp_path / "runs"
    env = _env(runs)
    out = tmp_path / "r"
    run = subprocess.Popen([*CLI, "run", "examples/quickstart.yaml", "--duration", "2m", "--out", str(out)],
                           cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    recorded: list[ledger.ProcessRecord] = []
    try:
        deadline = time.monotonic() + 180
        while _rows(out / "history" / "ticks.jsonl") < 3:   # measuring: Ray and the actors are up
            assert run.poll() is None, f"the run exited early (rc {run.poll()})"
            assert time.monotonic() < deadline, "the run did not start measuring in time"
            time.sleep(0.5)
        files = list(runs.glob("*.json"))
        assert len(files) == 1, files
        recorded = ledger.Ledger.load(files[0]).processes
        assert {"ray", "redis-server"} <= {p.what for p in recorded}
        run.send_signal(signal.SIGKILL)
        run.wait(timeout=10)
        time.sleep(2)
        res = subprocess.run([*CLI, "cleanup", "--json"], cwd=ROOT, env=env, capture_output=True, text=True,
                             timeout=120)
        assert res.returncode == 0, res.stderr
        assert [r["run_id"] for r in json.loads(res.stdout)] == [files[0].stem]
        alive = [p for p in recorded if p.alive()]
        assert alive == [], f"still running after cleanup: {alive}"
        assert not files[0].exists()
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        ledger.stop_processes(recorded, grace_s=2)
