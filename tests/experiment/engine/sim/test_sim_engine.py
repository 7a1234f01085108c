"""The sim engine: a whole experiment in one process under the virtual clock (``--engine sim``).

* a small run completes and its summary has the core metrics; a leader kill gives a failover;
* the run opens no socket, starts no thread and writes nothing outside its results folder;
* every fault has its effect (parametrised over the engines: the live one runs them when
  ``HA_LIVE_FAULT_EFFECTS=1``, since each costs a real run of Redis + Ray);
* the ``sim:`` cost settings reach the run (a slower session model gives longer sessions).
"""
from __future__ import annotations

import io
import json
import os
import socket
import tempfile
import threading
from pathlib import Path

import pytest
import yaml
from rich.console import Console

from ha.errors import BadInput
from ha.experiment.config import parse_experiment
from ha.experiment.runner import ExperimentRunner

DATA = Path(__file__).resolve().parents[3] / "data" / "sim"

ENGINES = ["sim", pytest.param("live", marks=pytest.mark.skipif(
    os.environ.get("HA_LIVE_FAULT_EFFECTS") != "1",
    reason="live fault effects: set HA_LIVE_FAULT_EFFECTS=1 (a Redis + Ray run each)"))]


def small(**changes) -> dict:
    doc = yaml.safe_load((DATA / "small.yaml").read_text())
    doc.update(changes)
    return doc


def run(doc: dict, out: Path, engine: str = "sim"):
    exp = parse_experiment(doc, source="test")
    runner = ExperimentRunner(exp, out, engine=engine, progress=False,
                              console=Console(file=io.StringIO(), width=120))
    outcome = runner.run()
    return outcome.summary, json.loads((out / "metrics.json").read_text())


def jsonl(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def test_small_run_has_the_core_metrics_and_a_failover(tmp_path):
    summary, metrics = run(small(chaos=[{"at": "5s", "fault": "kill", "target": "leader"}]),
                           tmp_path / "out")
    assert metrics["engine"] == "sim" and metrics["seed"] == 3 and "commit" in metrics["code"]
    assert summary["pods_bound_per_s"] > 0
    assert "cache_divergence" in summary and "instances" in summary["cache_divergence"]
    assert summary["failover_recovery_s"] is not None
    # lease 3 s: a new leader binds once the dead leader's lease ran out, not before
    assert 3.0 <= summary["failover_recovery_s"] < 8.0
    lives = jsonl(tmp_path / "out" / "history" / "lives.jsonl")
    kills = [x for x in lives if x["event"] == "kill"]
    assert len(kills) == 1 and kills[0].get("was_leader") is True
    header = json.loads((tmp_path / "out" / "history" / "run.json").read_text())
    assert header["engine"] == "sim"


def test_no_socket_no_thread_no_file_outside_out(tmp_path, monkeypatch):
    opened: list[str] = []

    class NoSocket(socket.socket):
        def __init__(self, *a, **kw):
            opened.append("socket")
            raise AssertionError("a sim run opened a socket")

    real_start = threading.Thread.start

    def no_thread(self, *a, **kw):
        opened.append(f"thread {self.name}")
        return real_start(self, *a, **kw)

    monkeypatch.setattr(socket, "socket", NoSocket)
    monkeypatch.setattr(threading.Thread, "start", no_thread)
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    tmp = tmp_path / "tmp"      # where tempfile would write
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    summary, _ = run(small(duration="6s", chaos=[{"at": "2s", "for": "2s", "fault": "partition",
                                                  "target": "scheduler-2"}]), work / "out")
    assert summary["pods_bound_per_s"] > 0
    assert opened == []
    assert sorted(p.name for p in work.iterdir()) == ["out"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cwd", "tmp"]
    assert list(tmp.iterdir()) == []


def test_sim_refuses_live_addresses(tmp_path):
    exp = parse_experiment(small(), source="test")
    with pytest.raises(BadInput, match="--engine sim"):
        ExperimentRunner(exp, tmp_path / "o", engine="sim", redis_url="redis://x:1/0")
    with pytest.raises(BadInput, match="--engine"):
        ExperimentRunner(exp, tmp_path / "o", engine="warp")


def test_sim_cost_settings_reach_the_run(tmp_path):
    _, fast = run(small(duration="6s"), tmp_path / "fast")
    _, slow = run(small(duration="6s", sim={"session_ms": 400.0}), tmp_path / "slow")
    leader = {name: max((s.get("last_session_ms") or 0) for s in m["instances"].values())
              for name, m in (("fast", fast), ("slow", slow))}
    assert 0 < leader["fast"] < 200 and leader["slow"] >= 400
    with pytest.raises(BadInput, match="session_ms"):
        parse_experiment(small(sim={"session_ms": -1}), source="test")
    with pytest.raises(BadInput, match="nonsense"):
        parse_experiment(small(sim={"nonsense": 1}), source="test")


# -- each fault has an effect --------------------------------------------------------------------

def _final_instances(metrics: dict) -> dict:
    return metrics.get("instances") or {}


def _leader_changed(summary, metrics, out):
    assert summary["leader_changes"] >= 1


def _watch_errors(summary, metrics, out):
    errs = sum((s.get("informers") or {}).get("Pod", {}).get("watch_errors", 0)
               for s in _final_instances(metrics).values())
    assert errs > 0


def _stale_target(summary, metrics, out):
    st = summary["staleness_ms"]
    assert st["scheduler-2"]["p99"] > 100 and st["scheduler-1"]["p99"] < 20


def _relisted(summary, metrics, out):
    s2 = _final_instances(metrics)["scheduler-2"]
    assert s2["informers"]["Pod"]["relists"] >= 1


def _leader_relisted(summary, metrics, out):
    """Fired through the engine's targets (a leader is resolved at the moment), not the
    instance's own schedule: some instance's Pod informer relisted."""
    assert sum(s["informers"]["Pod"]["relists"] for s in _final_instances(metrics).values()) >= 1
    fired = [r for r in jsonl(out / "history" / "faults.jsonl") if r["fault"] == "watch-expire"]
    assert fired and all("relist Pod" in r["detail"] for r in fired), fired


def _api_delayed(summary, metrics, out):
    api = [(s.get("chaos") or {}).get("api") or {} for s in _final_instances(metrics).values()]
    assert sum(a.get("delayed", 0) for a in api) > 0


def _api_conflicts(summary, metrics, out):
    assert summary["bind_conflicts"] > 0


def _restarted(summary, metrics, out):
    lives = jsonl(out / "history" / "lives.jsonl")
    assert [x["event"] for x in lives if x["instance"] == "scheduler-1" and x["event"] != "start"] == \
        ["kill", "restart"]
    assert _final_instances(metrics)["scheduler-1"]["ended_alive"] is True


FAULT_EFFECTS = {
    "kill": ({"at": "4s", "fault": "kill", "target": "leader"}, _leader_changed),
    "kill-restart": ({"at": "3s", "fault": "kill", "target": "scheduler-1", "restart_after": "2s"},
                     _restarted),
    "pause": ({"at": "4s", "for": "6s", "fault": "pause", "target": "leader"}, _leader_changed),
    # live: tests/runtime/test_node_kill_cluster.py (a node of its own per instance)
    "node-kill": ({"at": "4s", "fault": "node-kill", "target": "leader"}, _leader_changed),
    "partition": ({"at": "4s", "for": "6s", "fault": "partition", "target": "leader"}, _leader_changed),
    "redis-restart": ({"at": "4s", "for": "2s", "fault": "redis-restart"}, _watch_errors),
    "watch-delay": ({"at": "1s", "for": "10s", "fault": "watch-delay", "target": "scheduler-2",
                     "kinds": ["Pod"], "delay": {"dist": "fixed", "value": "400ms"}}, _stale_target),
    "watch-stall": ({"at": "2s", "for": "3s", "fault": "watch-stall", "target": "scheduler-2",
                     "kinds": ["Pod"]}, _stale_target),
    "watch-expire": ({"at": "5s", "fault": "watch-expire", "target": "scheduler-2", "kinds": ["Pod"]},
                     _relisted),
    "watch-expire-leader": ({"at": "5s", "fault": "watch-expire", "target": "leader", "kinds": ["Pod"]},
                            _leader_relisted),
    "api-latency": ({"at": "1s", "for": "8s", "fault": "api-latency", "target": "all",
                     "delay": {"dist": "fixed", "value": "50ms"}}, _api_delayed),
    "api-conflict": ({"at": "1s", "for": "8s", "fault": "api-conflict", "probability": 0.5,
                      "verbs": ["bind", "bind_many"]}, _api_conflicts),
    # the leader's clock at 0.1x: it renews every 5 real seconds, its 3 s lease runs out meanwhile
    "clock-rate": ({"at": "3s", "for": "8s", "fault": "clock-rate", "target": "leader",
                    "rate": 0.1}, _leader_changed),
}


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("fault", sorted(FAULT_EFFECTS))
def test_fault_has_its_effect(fault, engine, tmp_path):
    if engine == "live" and fault == "node-kill":
        pytest.skip("a live node-kill needs a Ray node per instance: tests/runtime/test_node_kill_cluster.py")
    entry, check = FAULT_EFFECTS[fault]
    out = tmp_path / "out"
    summary, metrics = run(small(chaos=[entry]), out, engine=engine)
    fired = jsonl(out / "history" / "faults.jsonl")
    assert fired and all(r["status"] == "applied" for r in fired), fired
    check(summary, metrics, out)


@pytest.mark.parametrize("fault", ["watch-delay", "partition", "api-conflict", "redis-restart",
                                   "watch-expire-leader"])
def test_without_the_fault_the_effect_is_absent(fault, tmp_path):
    """The checks above can fail: the same run without chaos does not pass them."""
    _entry, check = FAULT_EFFECTS[fault]
    out = tmp_path / "out"
    summary, metrics = run(small(), out)
    with pytest.raises(AssertionError):
        check(summary, metrics, out)


@pytest.mark.parametrize("mode,standby", [("leader-elected", "cold"), ("active-active", "warm"),
                                          ("shadow", "warm")])
def test_every_mode_runs(mode, standby, tmp_path):
    doc = small(duration="8s")
    doc["schedulers"] = {**doc["schedulers"], "mode": mode, "standby": standby}
    summary, metrics = run(doc, tmp_path / "out")
    assert summary["pods_bound_per_s"] > 0
    sessions = {n: s.get("sessions", 0) for n, s in metrics["instances"].items()}
    scheduling = sorted(n for n, k in sessions.items() if k > 0)
    if mode == "leader-elected":
        assert len(scheduling) == 1          # only the leader; cold standbys hold no cache
        assert sum(1 for s in metrics["instances"].values() if s.get("synced")) == 1
    else:                                     # everyone schedules (shadow: standbys in dry run)
        assert scheduling == ["scheduler-1", "scheduler-2", "scheduler-3"]
    if mode == "shadow":
        assert sum(s.get("dry_run_ops", 0) for s in metrics["instances"].values()) > 0


# -- the timing switches reach the run ------------------------------------------------------------

def _started(doc: dict, out: Path) -> ExperimentRunner:
    """The runner's parts started as ``run()`` starts them (API server, history, cluster objects,
    synced instances, cluster), so a test can step the virtual clock and look at the instances."""
    runner = ExperimentRunner(parse_experiment(doc, source="test"), out, engine="sim", progress=False,
                              console=Console(file=io.StringIO(), width=120))
    life = runner.life
    life.start_redis()
    runner._open_history()
    life.create_cluster_objects()
    life.start_ray()
    life.start_parts(runner.recorder)
    return runner


def _queue_for_resync(inst) -> str:
    cache = inst.inc.cache
    with cache.mutex:
        task = min((t for j in cache.jobs.values() for t in j.tasks.values()), key=lambda t: t.uid)
        cache.resync_task(task)
    return next(iter(cache.err_tasks))


@pytest.mark.parametrize("resync", ["continuous", "after-session"])
def test_resync_setting_decides_who_retries_errtasks_when(resync, tmp_path):
    """``schedulers.resync`` reaches every instance of a sim run: continuous, a standby (no
    session) and the leader retry a task queued for resync within milliseconds; after-session,
    the standby never does and the leader only once its next session has ended."""
    doc = small()
    doc["schedulers"] = {**doc["schedulers"], "resync": resync}
    runner = _started(doc, tmp_path / "out")
    life = runner.life
    try:
        life.advance_to(3.0)
        insts = [s.actor for s in life.slots.values()]
        leader = next(i for i in insts if i.is_leader_now())
        standby = next(i for i in insts if not i.is_leader_now())
        assert standby.sessions == 0 and standby.inc.cache.jobs
        for inst in (standby, leader):
            _queue_for_resync(inst)
        sessions = leader.sessions
        life.advance_to(3.02)           # 20 ms: the resync worker's turn, not a session's end
        assert leader.sessions == sessions
        pending = {n: bool(i.inc.cache.err_tasks) for n, i in (("standby", standby), ("leader", leader))}
        if resync == "continuous":
            assert pending == {"standby": False, "leader": False}
        else:
            assert pending == {"standby": True, "leader": True}
        life.advance_to(5.0)            # sessions every 500 ms: the leader has run some
        assert leader.sessions > sessions and standby.sessions == 0
        assert not leader.inc.cache.err_tasks
        assert bool(standby.inc.cache.err_tasks) is (resync == "after-session")
    finally:
        runner._finish(interrupted=False, error=None)
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert {s["resync"] for s in metrics["instances"].values()} == {resync}


def test_bind_order_switch_reaches_the_sim_run_whose_sessions_run_inline(tmp_path):
    """``switches: {bind_before_nomination_clear: true}`` reaches the instances of a sim run, and
    there it changes nothing: a session runs inline on the virtual loop, so the clear it writes
    after releasing the cache lock still goes out before the bind worker's next turn (the race the
    switch brings back needs the live engine's threads: tests/cluster_state/test_bind_clear_order.py)."""
    doc = yaml.safe_load((Path(__file__).resolve().parents[4] / "examples" /
                          "seed000-current-vs-proposed.yaml").read_text())
    doc.update(duration="14s", profile="pr5045")
    seen = {}
    for bind_first in (False, True):
        doc["switches"] = {"bind_before_nomination_clear": bind_first}
        out = tmp_path / f"bind-first-{bind_first}"
        _, metrics = run(doc, out)
        assert metrics["switches"]["bind_before_nomination_clear"] is bind_first
        seen[bind_first] = [(d["t"], d["instance"], d["op"], d["pod"], d["node"], d["ok"])
                            for d in jsonl(out / "history" / "decisions.jsonl")]
    pipelined = {d[3] for d in seen[False] if d[2] == "pipeline"}
    assert any(d[2] == "bind" and d[5] and d[3] in pipelined for d in seen[False])   # clears were made
    assert seen[True] == seen[False]
