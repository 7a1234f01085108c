"""crash-point in a real run (Redis + Ray): the leader's process dies inside its bind batch,
between the binds of one gang — the first binding is written, the rest are not — and a standby
takes over. The recorded history says so: a crash of the leader, after the point was armed."""
from __future__ import annotations

import json

import pytest
from rich.console import Console

from ha.experiment.config import load_experiment
from ha.experiment.history import History
from ha.experiment.runner import ExperimentRunner

EXP = """\
name: crash-point
seed: 5
duration: 12s
profile: v1.14
cluster: {nodes: 4, node: {cpu: 16, memory: 32Gi, pods: 110}}
queues: [{name: q1}]
workload: {arrivals: constant, rate: 2/s, gang_size: [3, 3], runtime: [30s, 30s], queues: [q1],
           request: {cpu: 1, memory: 1Gi}}
schedulers: {instances: 2, mode: leader-elected, period: 300ms,
             lease: {duration: 2s, renew_deadline: 1500ms, retry: 400ms}, standby: warm}
chaos:
  - {at: 3s, for: 6s, fault: crash-point, target: leader, point: between-gang-binds}
measure: {every: 500ms}
"""


@pytest.mark.ray
def test_the_leader_crashes_between_the_binds_of_a_gang(ray_session, tmp_path, redis_url):
    f = tmp_path / "exp.yaml"
    f.write_text(EXP)
    out = tmp_path / "out"
    ExperimentRunner(load_experiment(f), out, redis_url=redis_url, source=str(f),
                     console=Console(quiet=True), progress=False).run()
    m = json.loads((out / "metrics.json").read_text())
    entry = m["chaos"][0]
    assert entry["status"] == "applied", entry
    armed_by = entry["target"]
    h = History(out)
    crashes = [life for life in h.lives() if life["event"] == "crash"]
    assert [c["instance"] for c in crashes] == [armed_by], h.lives()
    assert crashes[0]["was_leader"] is True and crashes[0]["t"] >= 3.0
    # the crashed batch: the leader's last bind decisions end with one gang partly bound — its
    # decisions never recorded the rest, and the standby bound them after taking over
    standby = next(n for n in ("scheduler-1", "scheduler-2") if n != armed_by)
    took_over = [r for r in h.leases() if r["holder"].startswith(standby)]
    assert took_over, h.leases()
    binds_after = [d for d in h.decisions() if d["op"] == "bind" and d["ok"] and d["instance"] == standby
                   and d["t"] > crashes[0]["t"]]
    assert binds_after, "the new leader bound nothing after the crash"
    assert m["summary"]["leader_changes"] >= 1
