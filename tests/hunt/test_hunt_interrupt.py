"""Ctrl-C keeps what was found: SIGINT to the hunt's process group (what a terminal sends) after
its first run is judged stops it with exit 130, hunt.json / hunt.md written for the runs done and
marked interrupted; the same command again resumes without redoing them."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

HUNT = str(Path(sys.executable).with_name("ha-testbed"))


def _sigint_as_in_a_terminal() -> None:
    """The hunt starts with SIGINT's default disposition and unblocked, as a shell starts a
    command. A process inherits an ignored (or blocked) SIGINT across exec, and Python then keeps
    ignoring it: a test process in which earlier tests left SIGINT ignored would otherwise start a
    hunt that Ctrl-C cannot stop."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def test_ctrl_c_keeps_what_was_found_and_a_rerun_resumes(tmp_path):
    out = tmp_path / "hunt"
    args = [HUNT, "hunt", "--profile", "v1.14", "--seed", "3", "--intensity", "low", "--jobs", "1",
            "--no-shrink", "--out", str(out)]
    p = subprocess.Popen(args + ["--runs", "40"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         start_new_session=True, preexec_fn=_sigint_as_in_a_terminal,
                         env=dict(os.environ, MPLBACKEND="Agg"))
    try:
        deadline = time.monotonic() + 240
        while not list(out.glob("runs/*/run.json")) and time.monotonic() < deadline:
            assert p.poll() is None, p.stdout.read().decode()
            time.sleep(0.5)
        assert list(out.glob("runs/*/run.json")), "no run finished in time"
        os.killpg(p.pid, signal.SIGINT)
        output = p.communicate(timeout=120)[0].decode()
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    assert p.returncode == 130, output
    doc = json.loads((out / "hunt.json").read_text())
    assert doc["interrupted"] is True and 1 <= doc["runs"] < 40
    assert "interrupted" in (out / "hunt.md").read_text()
    done = {f.parent.name: f.stat().st_mtime_ns for f in out.glob("runs/*/run.json")
            if json.loads(f.read_text())["status"] == "ok"}
    r = subprocess.run(args + ["--runs", str(doc["runs"]), "--json"], capture_output=True, text=True, timeout=300)
    assert r.returncode in (0, 1), r.stdout + r.stderr
    again = json.loads(r.stdout[r.stdout.index("{"):])
    assert again["runs"] == doc["runs"] and again["interrupted"] is False
    assert {k: (out / "runs" / k / "run.json").stat().st_mtime_ns for k in done} == done
