"""Beyond one machine, on loopback: ``ha-testbed run`` against a four-node Ray cluster (a head and
three workers, each with its own resources and temp folder; tests/runtime/loopback_cluster.py)
through the Ray Client and an external redis-server. The three instances land on three different
worker nodes; a ``node-kill`` of the leader's node kills that node's raylet and everything under it
(the leader dies with it: a ``kill`` life with ``was_leader``), another instance takes over and
binds, and the results folder is complete although no disk is shared with the instances (delivery
logs shipped back through Ray). A module of its own: its Ray cluster overlaps no other module's."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psutil
import yaml
import pytest

from ha.runtime import ledger
from tests.runtime.loopback_cluster import ENV, running_cluster

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parents[1] / "data"
CLI = [sys.executable, "-m", "ha.cli"]

pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    # the instances' own temp folders (their delivery logs) under the test's, not the system's:
    # an instance killed with its node (or by the teardown) never removes its folder
    tmp = tmp_path_factory.mktemp("node-tmp")
    with running_cluster(workers=3, env={"TMPDIR": str(tmp)}) as c:
        yield c


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def test_instances_one_per_node_and_a_node_kill_of_the_leader_fails_over(cluster, tmp_path):
    out = tmp_path / "out"
    env = {**os.environ, **ENV, "PYTHONPATH": str(ROOT), ledger.RUNS_DIR_ENV: str(tmp_path / "runs")}
    raylets_before = {p.pid for p in map(psutil.Process, cluster.pids()) if _name(p) == "raylet"}
    res = subprocess.run([*CLI, "run", str(DATA / "node_kill.yaml"), "--out", str(out),
                          "--ray-address", cluster.ray_address, "--redis-url", cluster.redis.url],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    text = (res.stdout + res.stderr)[-4000:]
    assert res.returncode == 0, text

    # the results folder is complete
    for f in ("metrics.json", "report.md", "timeseries.csv", "history/lives.jsonl",
              "history/leases.jsonl", "history/ticks.jsonl"):
        assert (out / f).is_file(), f"{f} missing; {sorted(p.name for p in out.rglob('*'))}"
    m = json.loads((out / "metrics.json").read_text())
    lives = _lines(out / "history/lives.jsonl")

    # one instance per node: three different Ray nodes, none of them the head (4 nodes, 3 instances)
    starts = {r["instance"]: r for r in lives if r["event"] == "start"}
    assert sorted(starts) == ["scheduler-1", "scheduler-2", "scheduler-3"], lives
    nodes = {r["node_id"] for r in starts.values()}
    assert len(nodes) == 3 and None not in nodes, starts
    assert all(m["instances"][n]["placement"]["strategy"] == "node-affinity" for n in starts), m["instances"]

    # the node-kill took the leader's node: the leader's life ended as a kill, as leader, on that node
    chaos = m["chaos"][0]
    assert m["chaos"][1]["status"] in ("applied", "skipped"), json.dumps(m["chaos"])   # skipped: died with the node
    assert chaos["fault"] == "node-kill" and chaos["status"] == "applied", json.dumps(m["chaos"])
    kills = [r for r in lives if r["event"] == "kill" and r.get("cause") == "node-kill"]
    assert len(kills) == 1, lives
    k = kills[0]
    assert k["was_leader"] is True and k["cause"] == "node-kill", k
    assert k["instance"] == chaos["target"] and k["node_id"] == starts[k["instance"]]["node_id"], (k, chaos)
    # its raylet is gone (one of the cluster's raylets, killed by PID)
    raylet = int(chaos["detail"].split("raylet pid ")[1].split()[0])
    assert raylet in raylets_before and _name_of(raylet) != "raylet", (raylet, raylets_before, chaos)

    # another instance took over and bound: a failover, timed
    holders = [r.get("holder") for r in _lines(out / "history/leases.jsonl") if r.get("holder")]
    survivors = {n for n in starts if n != k["instance"]}
    assert any(h.rsplit("_", 1)[0] in survivors for h in holders), holders
    s = m["summary"]
    assert s["leader_changes"] >= 1, s
    assert s["failover_recovery_s"] is not None, s
    assert 0 < s["failover_recovery_s"] < 20, s

    # the restarted instance went back to its own node, or — its node killed — to an alive one
    restarts = [r for r in lives if r["event"] == "restart"]
    assert [r["instance"] for r in restarts] == ["scheduler-1"], lives
    again = restarts[0]["node_id"]
    assert again and again != k["node_id"], (restarts, k)
    if k["instance"] != "scheduler-1":
        assert again == starts["scheduler-1"]["node_id"], (restarts, starts)

    # no shared disk: the delivery log of every instance alive at the end came back through Ray
    alive_at_end = {n for n, v in m["instances"].items() if v.get("ended_alive")}
    assert alive_at_end == survivors | {"scheduler-1"}, m["instances"]
    for n in sorted(alive_at_end):
        log = out / "delivery" / f"{n}.log"
        assert log.is_file() and log.stat().st_size > 0, sorted(p.name for p in out.rglob("*"))
    # and the report says where each instance ran
    report = (out / "report.md").read_text()
    for n, r in starts.items():
        assert f"| {n} | {r['node_id'][:12]}" in report, report


def _name(p: psutil.Process) -> str:
    try:
        return p.name()
    except psutil.NoSuchProcess:
        return ""


def _name_of(pid: int) -> str:
    try:
        return psutil.Process(pid).name()
    except psutil.NoSuchProcess:
        return ""


def test_an_instance_whose_node_was_killed_restarts_elsewhere(cluster, tmp_path):
    """The kill entry of an instance that died with its node is skipped, its restart is not: the
    GCS still holds the dead actor's name (until its health checks give the node up) and the
    restart frees it; the new life runs on another alive node."""
    doc = yaml.safe_load((DATA / "node_kill.yaml").read_text())
    doc.update(duration="12s", chaos=[{"at": "3s", "fault": "node-kill", "target": "scheduler-2"},
                                      {"at": "5s", "fault": "kill", "target": "scheduler-2", "restart_after": "1s"}])
    exp = tmp_path / "exp.yaml"
    exp.write_text(yaml.safe_dump(doc))
    out = tmp_path / "out"
    env = {**os.environ, **ENV, "PYTHONPATH": str(ROOT), ledger.RUNS_DIR_ENV: str(tmp_path / "runs")}
    res = subprocess.run([*CLI, "run", str(exp), "--out", str(out), "--ray-address", cluster.ray_address,
                          "--redis-url", cluster.redis.url], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=240)
    assert res.returncode == 0, (res.stdout + res.stderr)[-4000:]
    lives = _lines(out / "history/lives.jsonl")
    faults = _lines(out / "history/faults.jsonl")
    assert [(f["action"], f["status"]) for f in faults if f["fault"] == "kill"] == [("fire", "skipped"),
                                                                                   ("restart", "applied")], faults
    start = next(r for r in lives if r["instance"] == "scheduler-2" and r["event"] == "start")
    killed = [r for r in lives if r["instance"] == "scheduler-2" and r["event"] == "kill"]
    again = [r for r in lives if r["instance"] == "scheduler-2" and r["event"] == "restart"]
    assert [k.get("cause") for k in killed] == ["node-kill"], lives
    assert len(again) == 1 and again[0]["node_id"] not in (None, start["node_id"]), lives
