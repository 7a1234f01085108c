"""kill / pause by PID of real child processes, redis-restart of a real redis-server with
persistence, and the nemesis firing a schedule against a driver's Targets (chaos.targets) whose
instances are real child processes."""
from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import pytest

from chaos.injectors import process
from chaos.injectors.watch import WatchChaos
from chaos.nemesis import Nemesis
from chaos.schedule import build_schedule

SLEEPER = [sys.executable, "-c", "import time; time.sleep(120)"]


@pytest.fixture
def children():
    procs: list[subprocess.Popen] = []

    def spawn() -> subprocess.Popen:
        p = subprocess.Popen(SLEEPER)
        procs.append(p)
        return p
    yield spawn
    for p in procs:     # our own children, by their PIDs
        if p.poll() is None:
            try:
                os.kill(p.pid, 18)   # SIGCONT, in case a test left it stopped
            except ProcessLookupError:
                pass
            p.kill()
        p.wait(10)


def test_sigstop_sigcont_and_kill_by_pid(children):
    p = children()
    assert process.wait_pid_state(p.pid, "RS", 10)
    process.pause_pid(p.pid)
    assert process.wait_pid_state(p.pid, "T", 10)
    process.resume_pid(p.pid)
    assert process.wait_pid_state(p.pid, "RS", 10)
    process.kill_pid(p.pid)
    assert p.wait(10) == -9
    assert not process.pid_alive(p.pid)


def test_refuses_bad_pids():
    for bad in (0, 1, -5, True, "123", os.getpid()):
        with pytest.raises(ValueError):
            process.pause_pid(bad)


class ProcTargets:
    """A driver's Targets: instances are child processes signalled by PID; the 'leader' is whoever
    we say; no proxy() (partitions are skipped)."""

    def __init__(self, spawn, names):
        self.spawn = spawn
        self.procs = {n: spawn() for n in names}
        self.leader_name = names[-1]
        self.rates: list[tuple[str, float]] = []
        self.restarted: list[str] = []
        self.watches: dict[str, WatchChaos] = {}

    def leader(self):
        return self.leader_name

    def kill(self, name):
        pid = self.procs[name].pid
        process.kill_pid(pid)
        return f"SIGKILL {name} (pid {pid})"

    def pause(self, name):
        process.pause_pid(self.procs[name].pid)

    async def resume(self, name):                    # async on purpose: both kinds are accepted
        process.resume_pid(self.procs[name].pid)

    def restart(self, name):
        self.procs[name] = self.spawn()
        self.restarted.append(name)

    async def set_clock_rate(self, name, rate):    # async on purpose: both kinds are accepted
        self.rates.append((name, rate))

    def watch(self, name):
        return self.watches.get(name)


async def test_nemesis_fires_the_schedule_and_resolves_the_leader_at_fire_time(children):
    names = ["scheduler-1", "scheduler-2"]
    s = build_schedule([
        {"at": "1s", "for": "2s", "fault": "pause", "target": "scheduler-1"},
        {"at": "2s", "fault": "kill", "target": "leader", "restart_after": "1s"},
        {"at": "0s", "for": "4s", "fault": "clock-rate", "target": "leader", "rate": 3},
        {"at": "0s", "for": "1s", "fault": "partition", "target": "scheduler-1"},      # no proxy()
        {"at": "0s", "fault": "watch-delay", "target": "scheduler-1", "delay": "10ms"},
    ], 9, names)
    t = ProcTargets(children, names)
    t.watches["scheduler-1"] = WatchChaos("scheduler-1")
    nem = Nemesis(s, t)
    nem.t0 = 0.0
    first = await nem.fire_due(0.0)
    assert {(r.fault, r.status) for r in first} == {("clock-rate", "applied"), ("partition", "skipped"),
                                                   ("watch-delay", "applied")}
    assert t.rates == [("scheduler-2", 3.0)]                    # the leader at that moment
    assert 4 in t.watches["scheduler-1"].hooks["Pod"].activations
    p1 = t.procs["scheduler-1"]
    await nem.fire_due(1.0)
    assert process.wait_pid_state(p1.pid, "T", 10)               # paused
    old_leader = t.procs["scheduler-2"]
    t.leader_name = "scheduler-2"
    await nem.fire_due(2.0)
    assert old_leader.wait(10) == -9                             # killed by PID
    await nem.fire_due(3.0)
    assert process.wait_pid_state(p1.pid, "RS", 10)              # resumed at the window's end
    assert t.restarted == ["scheduler-2"]
    await nem.fire_due(4.0)
    assert t.rates[-1] == ("scheduler-2", 1.0)                   # clock restored
    assert nem.pending() == 0
    log = [(r["fault"], r["action"], r["status"]) for r in nem.to_json()]
    assert ("kill", "fire", "applied") in log and ("kill", "restart", "applied") in log
    assert ("pause", "end", "applied") in log
    kill = next(r for r in nem.records if r.fault == "kill" and r.action == "fire")
    assert kill.targets == ["scheduler-2"] and "SIGKILL" in kill.detail


async def test_stop_undoes_open_windows_and_no_leader_is_skipped(children):
    names = ["scheduler-1"]
    s = build_schedule([{"at": 0, "for": "10m", "fault": "pause", "target": "scheduler-1"},
                        {"at": 0, "fault": "kill", "target": "leader"}], 1, names)
    t = ProcTargets(children, names)
    t.leader_name = None
    nem = Nemesis(s, t)
    await nem.fire_due(0.0)
    p = t.procs["scheduler-1"]
    assert process.wait_pid_state(p.pid, "T", 10)
    assert p.poll() is None                                      # no leader: the kill was skipped
    assert next(r for r in nem.records if r.fault == "kill").status == "skipped"
    await nem.stop()
    assert process.wait_pid_state(p.pid, "RS", 10)
    assert nem.records[-1].action == "end" and "run ended" in nem.records[-1].detail


def test_redis_restart_keeps_state_with_persistence(tmp_path):
    from cluster_state.client import ApiClient
    from cluster_state.embedded import EmbeddedRedis
    from ha.runtime.retry import RetryingApiClient
    server = EmbeddedRedis(persistence=True, data_dir=str(tmp_path)).start()
    try:
        api = RetryingApiClient(ApiClient.from_url(server.url, prefix="rr"), deadline_s=30,
                                initial_s=0.05, max_wait_s=0.3)
        api.create({"kind": "Queue", "metadata": {"name": "q1"}, "spec": {"weight": 1}})
        rv = api.current_resource_version()
        s = build_schedule([{"at": "100ms", "for": "300ms", "fault": "redis-restart"}], 1, [])

        class T:
            def redis_restart(self, down_s):         # blocking: the nemesis runs it in a thread
                process.restart_redis(server, down_s)

        async def run():
            nem = Nemesis(s, T())
            await asyncio.wait_for(nem.run(), 60)
            await nem.stop()
            return nem.to_json()
        recs = asyncio.run(run())
        assert [(r["fault"], r["status"]) for r in recs][:1] == [("redis-restart", "applied")]
        assert api.get("Queue", "q1")["metadata"]["name"] == "q1"     # state survived
        assert api.current_resource_version() == rv
        api.create({"kind": "Queue", "metadata": {"name": "q2"}, "spec": {"weight": 1}})
        assert api.current_resource_version() > rv                     # RVs keep rising
        with pytest.raises(ValueError, match="persistence"):
            process.restart_redis(EmbeddedRedis())
    finally:
        server.close()


def test_node_kill_reaches_only_a_raylet_of_this_machine(redis_url):
    """node-kill's injector finds the raylet by the address and port Ray lists for its node; it
    refuses an address that is not this machine's, a port nobody here listens on, and a port held
    by a process that is not a raylet (here a real redis-server) — that one is left running. The
    kill of a real raylet is tests/runtime/test_node_kill_cluster.py."""
    import socket
    from urllib.parse import urlparse

    import psutil
    u = urlparse(redis_url)
    with pytest.raises(process.NotHere, match="203.0.113.9:4000, not an address of this machine"):
        process.kill_ray_node("203.0.113.9", 4000)
    with socket.socket() as s:       # a port bound by nobody (closed again at once)
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
    with pytest.raises(process.NotHere, match=f"no process of this machine listens on 127.0.0.1:{free}"):
        process.kill_ray_node("127.0.0.1", free)
    with pytest.raises(process.NotHere, match=r"is held by redis-server \(pid \d+\), not a raylet"):
        process.kill_ray_node(u.hostname, u.port)
    holders = {c.pid for c in psutil.net_connections(kind="tcp")
               if c.laddr and c.laddr.port == u.port and c.status == psutil.CONN_LISTEN}
    assert holders and all(psutil.pid_exists(p) for p in holders)
