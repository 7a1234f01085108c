"""The supervisor of a real scheduler between a life's exit and the next life's start.

vc-scheduler exits on a panic or a fatal (``klog.Fatalf``); the supervisor starts the next life
``restart_delay_s`` later, as the kubelet restarts a container. In that window there is no process
and so no cache: a tick must record the instance as not synced, with the reason, never as a synced
instance with an empty cache -- the checkers would count every task of the cluster as missing from
it (cache_divergence, resource_drift).

The scheduler here is a stand-in process (a Python script given as the binary): it answers SIGUSR1
with a snapshot file in vc-scheduler's format (six JSON values, one per line, into
``--cache-dump-dir``) and, once told to, prints a panic line and exits 2 as a Go panic does.
"""
from __future__ import annotations

import asyncio
import sys
import textwrap
import time

from ha.experiment.checkers import registry
from ha.experiment.recorder import Observation, Recorder
from ha.runtime.external.observe.cache_dump import catches_sigusr1
from ha.runtime.external.process import ExternalConfig
from ha.runtime.external.supervisor import ExternalScheduler
from tests.experiment.histories import Api, History, HistoryWriter, header, node, pg, pod, queue
from tests.runtime.test_volcano_observe_history import _SyncApi

_STAND_IN = textwrap.dedent('''\
    #!{python}
    """vc-scheduler's dumper and its panic, and nothing else."""
    import json, os, signal, sys, time
    args = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--") and "=" in a)
    dump_dir, die = args["cache-dump-dir"], args["die-file"]
    task = {{"UID": "u-p1", "Status": 32, "NodeName": "n1",
             "Pod": {{"metadata": {{"name": "p1", "namespace": "default", "resourceVersion": "7"}}}}}}
    node = {{"Name": "n1", "Idle": {{"MilliCPU": 3000, "Memory": 8589934592}}, "Used": {{"MilliCPU": 1000}},
             "Tasks": {{"default/p1": task}}}}
    job = {{"UID": "default/g", "PodGroup": {{"metadata": {{"resourceVersion": "5"}}}},
            "Tasks": {{"uid-1": task}}}}
    def dump(*_):
        path = os.path.join(dump_dir, "snapshot-%d.json" % int(time.time()))
        with open(path, "w") as f:
            for v in ({{"n1": node}}, {{}}, {{}}, {{}}, {{}}, {{"default/g": job}}):
                f.write(json.dumps(v) + "\\n")
    signal.signal(signal.SIGUSR1, dump)
    print("I0101 00:00:00.000000 1 leaderelection.go:1] stand-in started", flush=True)
    while not os.path.exists(die):
        time.sleep(0.02)
    print("panic: resource is not sufficient to do operation [recovered, repanicked]", flush=True)
    sys.exit(2)
''')


def _config(tmp_path, die) -> ExternalConfig:
    binary = tmp_path / "vc-scheduler"
    binary.write_text(_STAND_IN.format(python=sys.executable))
    binary.chmod(0o755)
    return ExternalConfig(
        name="scheduler-1", binary=str(binary), version="stand-in", endpoint_url="http://127.0.0.1:1",
        kubeconfig=str(tmp_path / "kubeconfig"), workdir=str(tmp_path / "work"),
        log_path=str(tmp_path / "scheduler-1.log"), request_log=str(tmp_path / "requests.jsonl"),
        delivery_log=str(tmp_path / "delivery.log"), scheduler_conf_yaml="actions: allocate\n",
        leader_elect=False,              # schedules (and holds a cache) from its start
        restart_delay_s=30.0,            # a window far longer than the test: no next life in it
        extra_args=(f"--die-file={die}",), tmp_root=str(tmp_path / "tmp"))


async def _until(pred, timeout=15.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


def test_no_cache_is_recorded_between_an_exit_and_the_next_life(tmp_path):
    die = tmp_path / "die"
    sup = ExternalScheduler(_config(tmp_path, die))

    async def run():
        await sup.start()
        try:
            await _until(lambda: catches_sigusr1(sup.life.handle.pid) is True)
            alive = await sup.observe()
            die.write_text("now")
            await _until(lambda: sup.ends)           # the watcher saw the exit: the window opens
            dead = await sup.observe()
            stats = await sup.stats()
            return alive, dead, stats
        finally:
            await sup.stop()

    alive, dead, stats = asyncio.run(run())
    # while it runs, the cache is its dump's
    assert alive["digest"]["synced"] is True
    assert alive["digest"]["tasks"] == {"u-p1": ["Running", "n1"]}
    assert "cache" not in alive["digest"]["unobserved"]
    # between the exit and the next life: no cache, and why -- not an empty cache counted as synced
    d = dead["digest"]
    assert sup.life.ended is not None and sup.life.handle.life == 0     # still the ended life
    assert d["synced"] is False
    assert not d.get("tasks") and not d.get("nodes")
    assert "exited" in d["unobserved"]["cache"] and "panic: resource is not sufficient" in d["unobserved"]["cache"]
    assert stats["synced"] is False and stats["restarts"] == 1

    # through the recorder into a history: the truth has p1 Running on n1, as the dump said; the
    # tick after the exit is left out of cache_divergence with its reason, not counted as p1 missing
    api = Api()
    api.create(queue(), node("n1"), pg("g", 1), pod("p1", group="g"))
    api.bind("default/p1", "n1")
    sync = _SyncApi(api)
    out = tmp_path / "history-out"
    with HistoryWriter(out, header(instances=("scheduler-1",))) as w:
        rec = Recorder(w, sync, t0_wall=0.0)
        rv = sync.current_resource_version()
        for i, obs in enumerate((alive, dead)):
            rec.tick(float(i), rv, [Observation("scheduler-1", 0, True, obs)], rv)
    cd = registry()["cache_divergence"].check(History(out))
    assert cd["max"] == 0
    assert cd["unobserved"]["scheduler-1"]["ticks"] == 1
    assert "exited" in cd["unobserved"]["scheduler-1"]["reason"]


_HALF_LINE = textwrap.dedent('''\
    #!{python}
    """Starts, then is caught half-way through writing a fatal line (killed mid-write)."""
    import sys, time
    print("I0101 00:00:00.000000 1 leaderelection.go:1] stand-in started", flush=True)
    sys.stdout.write("F0101 00:00:01.000000 1 cache.go:1] half a fatal line")
    sys.stdout.flush()
    while True:
        time.sleep(1)
''')


def test_a_line_a_killed_life_left_half_written_is_not_the_next_lifes(tmp_path):
    """A life killed mid-write leaves a line without its end; the next life's first line must not be
    read as its continuation (that glued line starts like a fatal one, and the next life, killed in
    its turn, would be reported as having died of it)."""
    import os
    import signal
    binary = tmp_path / "vc-scheduler"
    binary.write_text(_HALF_LINE.format(python=sys.executable))
    binary.chmod(0o755)
    cfg = ExternalConfig(
        name="scheduler-1", binary=str(binary), version="stand-in", endpoint_url="http://127.0.0.1:1",
        kubeconfig=str(tmp_path / "kubeconfig"), workdir=str(tmp_path / "work"),
        log_path=str(tmp_path / "scheduler-1.log"), request_log=str(tmp_path / "requests.jsonl"),
        delivery_log=str(tmp_path / "delivery.log"), scheduler_conf_yaml="actions: allocate\n",
        leader_elect=False, restart_delay_s=0.2, tmp_root=str(tmp_path / "tmp"))
    sup = ExternalScheduler(cfg)
    log = tmp_path / "scheduler-1.log"

    async def run():
        await sup.start()
        try:
            for life in (0, 1):
                await _until(lambda: sup.life.handle.life == life
                             and log.read_text().count("half a fatal line") == life + 1)
                os.kill(sup.life.handle.pid, signal.SIGKILL)
                await _until(lambda: len(sup.ends) == life + 1)
        finally:
            await sup.stop()

    asyncio.run(run())
    assert [e.reason for e in sup.ends[:2]] == ["signal SIGKILL", "signal SIGKILL"], sup.ends
