"""Ctrl-C on ``ha-testbed run``: the run stops, writes what it measured, exits 130, and every
process it started (redis-server, Ray's processes, the actors' workers) is gone.

A module of its own so that its Ray (started by the command under test) never overlaps another
module's Ray on a 2-core machine."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[2]


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _rows(path: Path) -> int:
    try:
        return max(0, len(path.read_text().splitlines()) - 1)
    except FileNotFoundError:
        return 0


@pytest.mark.ray
def test_sigint_cleans_up_everything(tmp_path):
    out = tmp_path / "r"
    log = open(tmp_path / "stdout.txt", "w")
    proc = subprocess.Popen([sys.executable, "-m", "ha.cli", "run", "examples/quickstart.yaml",
                             "--out", str(out), "--duration", "2m"],
                            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    try:
        # running for real: at least two measurement ticks of three instances written
        deadline = time.monotonic() + 240
        while _rows(out / "history" / "ticks.jsonl") < 2:   # each line: one tick of every instance
            assert proc.poll() is None, (tmp_path / "stdout.txt").read_text()
            assert time.monotonic() < deadline, "the run did not start measuring in time"
            time.sleep(0.5)
        started = psutil.Process(proc.pid).children(recursive=True)
        names = {p.name() for p in started if _alive(p.pid)}
        assert "redis-server" in names, names
        assert {"raylet", "gcs_server"} & names, names
        pids = [p.pid for p in started]

        proc.send_signal(signal.SIGINT)
        rc = proc.wait(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
    output = (tmp_path / "stdout.txt").read_text()
    assert rc == 130, output
    deadline = time.monotonic() + 30
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.5)
    left = [(p, psutil.Process(p).name()) for p in pids if _alive(p)]
    assert not left, f"processes left behind: {left}"
    m = json.loads((out / "metrics.json").read_text())
    assert m["run"]["interrupted"] is True
    assert m["run"]["ticks"] >= 2 and _rows(out / "timeseries.csv") >= 6
    assert "interrupted" in output
