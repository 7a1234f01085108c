"""One short real run (Redis + Ray): on a quiet run every synced instance's cache_divergence ends at
0, nothing is overcommitted, the API server equals the replay of its event stream, and report.md
with its PNGs is written."""
from __future__ import annotations

import textwrap

import pytest
from rich.console import Console

from ha.experiment.config import load_experiment
from ha.experiment.results import read_results
from ha.experiment.runner import ExperimentRunner

QUIET = textwrap.dedent("""
    name: quiet-oracles
    seed: 3
    duration: 14s
    profile: pr5045-fixed
    cluster: {nodes: 3, node: {cpu: 8, memory: 32Gi, pods: 110}}
    queues: [{name: q1, weight: 1}]
    workload: {arrivals: constant, rate: 4/s, gang_size: [1, 3], runtime: [60s, 60s], queues: [q1],
               request: {cpu: 1, memory: 1Gi}, max_gangs: 6}
    schedulers: {instances: 2, mode: leader-elected, period: 300ms,
                 lease: {duration: 4s, renew_deadline: 3s, retry: 1s}, standby: warm}
    measure: {every: 500ms}
""")


@pytest.mark.ray
def test_quiet_run_converges_and_reports(ray_session, tmp_path, redis_url):
    path = tmp_path / "quiet.yaml"
    path.write_text(QUIET)
    out = tmp_path / "out"
    runner = ExperimentRunner(load_experiment(path), out, redis_url=redis_url, source=str(path),
                              console=Console(quiet=True), progress=False)
    outcome = runner.run()
    res = read_results(out)
    s = res.summary
    assert s["pods_bound_per_s"] > 0
    cd = s["cache_divergence"]
    assert set(cd["instances"]) == {"scheduler-1", "scheduler-2"}
    assert all(v["final"] == 0 for v in cd["instances"].values()), cd
    assert s["overcommit_violations"]["count"] == 0 and s["overcommit_violations"]["ticks"] > 5
    assert s["partial_gang_binds"]["count"] == 0 and s["partial_gang_binds"]["groups"] > 0
    assert s["cyclic_evictions"]["count"] == 0
    cons = res.metrics["oracles"]["api_consistency"]
    assert cons["ok"] is True and cons["lost_writes"] == 0, cons
    assert "cache_divergence" in res.timeseries[0]
    report = (out / "report.md").read_text()
    assert "ended equal to the reference" in report
    for png in ("drift.png", "binds_evictions.png"):
        assert (out / png).stat().st_size > 1000
    assert outcome.summary == s
    # the run's summary is the checkers' over its history: analyzing the folder again, in another
    # process, reproduces it and the timeseries byte for byte
    import json
    import subprocess
    import sys
    before = {f: (out / f).read_bytes() for f in ("timeseries.csv", "divergence.jsonl")}
    r = subprocess.run([sys.executable, "-m", "ha.cli", "analyze", str(out), "--json"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == json.loads(json.dumps(s))
    assert {f: (out / f).read_bytes() for f in before} == before
    assert read_results(out).summary == s
