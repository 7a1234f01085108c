"""``ha-testbed run``: the runner end to end against real Redis and a real local Ray (one Ray start
for the module), plus the bad-input paths (exit code 2) that never reach Ray."""
from __future__ import annotations

import csv
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from rich.console import Console

from ha.errors import BadInput
from ha.experiment.config import load_experiment
from ha.experiment.results import TIMESERIES_COLUMNS, read_results
from ha.experiment.runner import ExperimentRunner, run_cli

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "ha.cli"]


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT)


# -- bad input: exit code 2, no Ray -----------------------------------------------------------

def test_bad_experiment_exits_2_with_file_field_problem(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("schedulers: {instances: 0}\n")
    r = cli("run", str(bad), "--out", str(tmp_path / "out"))
    assert r.returncode == 2, r.stderr
    assert f"{bad}: schedulers.instances: must be ≥ 1" in r.stderr
    assert not (tmp_path / "out").exists()       # nothing started, nothing written


def test_bad_overrides_exit_2(tmp_path):
    r = cli("run", "examples/quickstart.yaml", "--profile", "nope", "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and "--profile: unknown profile 'nope'" in r.stderr
    r = cli("run", "examples/quickstart.yaml", "--duration", "soon", "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and "--duration: expected a duration" in r.stderr
    r = cli("run", str(tmp_path / "missing.yaml"))
    assert r.returncode == 2 and "missing.yaml: no such file" in r.stderr


def test_unreachable_redis_is_bad_input(tmp_path):
    import socket
    with socket.socket() as s:          # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(BadInput, match=rf"--redis-url redis://127.0.0.1:{port}/0: cannot connect"):
        run_cli(ROOT / "examples" / "quickstart.yaml", out=tmp_path / "o",
                redis_url=f"redis://127.0.0.1:{port}/0", console=Console(quiet=True), progress=False)
    assert not (tmp_path / "o").exists()


def test_results_folder_is_never_overwritten(tmp_path):
    out = tmp_path / "o"
    out.mkdir()
    (out / "metrics.json").write_text("{}")
    with pytest.raises(BadInput, match="already holds results"):
        run_cli(ROOT / "examples" / "quickstart.yaml", out=out, console=Console(quiet=True), progress=False)


# -- the real thing: Redis + Ray -------------------------------------------------------------

SMALL = """\
name: small
seed: 3
duration: 12s
profile: pr5045
cluster: {nodes: 3, node: {cpu: 8, memory: 16Gi, pods: 110}}
queues: [{name: q1}]
workload: {arrivals: poisson, rate: 4/s, gang_size: [1, 3], runtime: [1s, 3s], queues: [q1],
           request: {cpu: 1, memory: 1Gi}}
schedulers: {instances: 3, mode: leader-elected, period: 300ms,
             lease: {duration: 2s, renew_deadline: 1500ms, retry: 400ms}, standby: warm}
chaos:
  - {at: 1s, for: 3s, fault: watch-delay, target: scheduler-2, kinds: [Pod],
     delay: {dist: fixed, value: 200ms}}
  - {at: 3s, fault: kill, target: leader}
  - {at: 4s, fault: pause, target: scheduler-3, for: 1500ms}
measure: {every: 500ms}
"""


@pytest.mark.ray
def test_run_end_to_end(ray_session, tmp_path, redis_url):
    exp_file = tmp_path / "small.yaml"
    exp_file.write_text(SMALL)
    exp = load_experiment(exp_file)
    out = tmp_path / "results"
    console = Console(record=True, width=120, force_terminal=False)
    outcome = ExperimentRunner(exp, out, redis_url=redis_url, source=str(exp_file), console=console,
                               progress=False).run()
    assert not outcome.interrupted
    res = read_results(out)
    s = res.summary
    # what is measured now, under the contract's names (docs/design.md) — and nothing faked
    assert s["pods_bound_per_s"] > 0
    # the conflict counter is the run's recorded 409s on binding, one per failed bind decision
    binds = [json.loads(x) for x in (out / "history" / "decisions.jsonl").read_text().splitlines() if x.strip()]
    conflicts = [d for d in binds if d["op"] == "bind" and not d["ok"] and "409" in (d.get("error") or "")]
    assert s["bind_conflicts"] == len(conflicts), conflicts
    # scheduler-2's pod watch ran 200 ms behind the others for 3 s of a 4 pods/s workload
    assert "pairwise_drift" in s and s["pairwise_drift"]["max"] > 0
    assert s["failover_recovery_s"] is not None and 0 < s["failover_recovery_s"] < 9
    # the resolved experiment round-trips
    assert res.experiment["name"] == "small" and res.experiment["schedulers"]["instances"] == 3
    m = res.metrics
    assert m["run"]["interrupted"] is False and m["run"]["redis"] == redis_url
    chaos = {c["fault"]: c for c in m["chaos"]}
    assert chaos["watch-delay"]["status"] == "applied"
    assert chaos["kill"]["status"] == "applied"
    killed = chaos["kill"]["target"]
    assert killed in {"scheduler-1", "scheduler-2", "scheduler-3"}
    fo = m["failovers"][0]
    assert fo["instance"] == killed and fo["new_leader"] not in (None, killed)
    # timeseries: one row per tick per instance
    with open(out / "timeseries.csv") as f:
        rows = list(csv.DictReader(f))
    # the pause hit scheduler-3 unless it was the one killed
    pause = chaos["pause"]
    if killed != "scheduler-3":
        assert pause["status"] == "applied" and pause["ended_at_s"] is not None
        t_on, t_off = pause["applied_at_s"], pause["ended_at_s"]
        s3 = [(float(r["t"]), r["alive"]) for r in rows if r["instance"] == "scheduler-3"]
        during = [a for t, a in s3 if t_on < t < t_off]
        assert during and set(during) == {"0"}                    # not answering while stopped
        later = [a for t, a in s3 if t > t_off + 1.5]
        assert later and set(later) == {"1"}                      # and back after SIGCONT
    else:
        assert pause["status"] == "skipped"
    assert list(rows[0]) == list(TIMESERIES_COLUMNS)
    assert len(rows) == 3 * m["run"]["ticks"] and m["run"]["ticks"] >= 10
    after_kill = [r for r in rows if r["instance"] == killed and float(r["t"]) > 4.0]
    assert after_kill and all(r["alive"] == "0" for r in after_kill)
    leaders_at_end = {r["instance"] for r in rows[-3:] if r["is_leader"] == "1"}
    assert leaders_at_end and killed not in leaders_at_end
    assert any(int(r["tasks_running"] or 0) + int(r["tasks_bound"] or 0) > 0 for r in rows)
    # delivery logs of every instance (a killed one may lose what it had not flushed)
    for n in ("scheduler-1", "scheduler-2", "scheduler-3"):
        assert (out / "delivery" / f"{n}.log").exists()
        if n != killed:
            assert (out / "delivery" / f"{n}.log").stat().st_size > 0
    text = console.export_text()
    assert "pods_bound_per_s" in text and "failover_recovery_s" in text
    # Ray (started by the fixture) is left running for the next test; our actors are gone
    import ray
    assert ray.is_initialized()
    with pytest.raises(ValueError):
        ray.get_actor("scheduler-1", namespace=f"ha-testbed-{m['run']['run_id']}")


@pytest.mark.ray
def test_active_active_without_chaos(ray_session, tmp_path, redis_url):
    text = textwrap.dedent("""\
        name: aa
        duration: 5s
        cluster: {nodes: 2, node: {cpu: 4, memory: 8Gi, pods: 20}}
        workload: {rate: 5/s, gang_size: 1, runtime: 1s, request: {cpu: 500m, memory: 256Mi}}
        schedulers: {instances: 2, mode: active-active, period: 200ms}
        measure: {every: 1s}
        """)
    p = tmp_path / "aa.yaml"
    p.write_text(text)
    code = run_cli(p, out=tmp_path / "r", redis_url=redis_url, console=Console(quiet=True), progress=False)
    assert code == 0
    m = json.loads((tmp_path / "r" / "metrics.json").read_text())
    assert "failover_recovery_s" not in m["summary"]     # no leader loss: not measured, not zero
    assert m["totals"]["binds"] > 0
