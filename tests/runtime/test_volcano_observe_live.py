"""The observation of a real vc-scheduler, end to end: ``ha-testbed serve`` (a living cluster and
an endpoint ``scheduler-1``), vc-scheduler v1.14.1 run against that endpoint, and
``ha.runtime.external.observe.observe`` sampling it as the supervisor does at every tick. A pod the
scheduler bound must show in the sampled digest on its node, and in the decisions; the API
server's own view of the pod must agree.

Skipped, with the reason, when the binary is not built and ``HA_TESTBED_BUILD_VOLCANO`` is unset
(with it set, the binary is built first: a cold build takes many minutes).
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ha.runtime.external.observe import observe
from ha.runtime.external.process import ProcessHandle

EXPERIMENT = """
name: observe-live
seed: 5
duration: 120s
profile: v1.14
cluster: {nodes: 2, node: {cpu: 4, memory: 16Gi, pods: 110}}
queues: [{name: q1, weight: 1}]
workload: {arrivals: poisson, rate: 2/s, gang_size: [1, 2], runtime: [60s, 90s], queues: [q1],
           request: {cpu: 1, memory: 1Gi}}
schedulers: {instances: 1, mode: leader-elected, period: 1s}
measure: {every: 500ms}
"""


def _binary() -> Path:
    from ha.runtime.external.volcano import built_binary
    b = built_binary("v1.14.1")
    if b is not None:
        return b
    if not os.environ.get("HA_TESTBED_BUILD_VOLCANO"):
        pytest.skip("vc-scheduler v1.14.1 is not built (`ha-testbed volcano build v1.14.1`, or set "
                    "HA_TESTBED_BUILD_VOLCANO=1 to build it here)")
    from ha.volcano.build import build
    return build("v1.14.1", log=lambda m: None).binary


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(pred, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")


def _stop(proc: subprocess.Popen, sig=signal.SIGTERM) -> None:
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_bound_pod_shows_in_digest_and_decisions(tmp_path):
    binary = _binary()
    exp = tmp_path / "exp.yaml"
    exp.write_text(EXPERIMENT)
    out = tmp_path / "serve"
    serve = subprocess.Popen([sys.executable, "-m", "ha.cli", "serve", str(exp), "--out", str(out),
                              "--endpoint", "scheduler-1", "--duration", "150"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    vc = None
    try:
        kubeconfig = _wait(lambda: (out / "kubeconfig-scheduler-1").exists() and out / "kubeconfig-scheduler-1",
                           60, "ha-testbed serve's endpoint kubeconfig")
        conf_dir = tmp_path / "conf"          # its own folder: vc-scheduler reloads on any change in it
        conf_dir.mkdir()
        (conf_dir / "scheduler.conf").write_text(
            'actions: "enqueue, allocate, backfill"\ntiers:\n- plugins:\n  - name: priority\n  - name: gang\n'
            '- plugins:\n  - name: drf\n  - name: predicates\n  - name: proportion\n  - name: nodeorder\n')
        dump_dir, sock_dir = tmp_path / "dump", tmp_path / "sock"
        dump_dir.mkdir()
        sock_dir.mkdir()
        mport, hport = _free_port(), _free_port()
        argv = [str(binary), f"--kubeconfig={kubeconfig}", f"--scheduler-conf={conf_dir / 'scheduler.conf'}",
                "--leader-elect=false", "--schedule-period=1s", f"--listen-address=127.0.0.1:{mport}",
                "--enable-metrics=true", f"--healthz-address=127.0.0.1:{hport}", "--cache-dumper=true",
                f"--cache-dump-dir={dump_dir}", "-v=2"]
        log = open(tmp_path / "vc-scheduler.log", "w")
        vc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                              env={**os.environ, "DEBUG_SOCKET_DIR": str(sock_dir)})
        reqlog = out / "kube-api" / "scheduler-1" / "requests.jsonl"
        handle = ProcessHandle(instance="scheduler-1", life=0, pid=vc.pid, argv=argv, dump_dir=str(dump_dir),
                               socket_dir=str(sock_dir), metrics_url=f"http://127.0.0.1:{mport}/metrics",
                               healthz_url=f"http://127.0.0.1:{hport}/healthz", endpoint_url="",
                               request_log=str(reqlog), delivery_log="", log_path=str(tmp_path / "vc-scheduler.log"),
                               started_at=time.time())
        decisions: list[dict] = []
        got: dict = {}

        def bound_and_sampled():
            nonlocal got
            assert vc.poll() is None, (tmp_path / "vc-scheduler.log").read_text()[-3000:]
            got = observe(handle, decisions[-1]["seq"] if decisions else 0)
            decisions.extend(got["decisions"])
            binds = [d for d in decisions if d["op"] == "bind" and d["ok"]]
            return bool(binds) and got["digest"].get("synced")

        _wait(bound_and_sampled, 90, "a bind by vc-scheduler and a cache dump")
        # the decisions: seq without gaps, every bind a 201 of the request log
        assert [d["seq"] for d in decisions] == list(range(1, len(decisions) + 1))
        recs = [json.loads(ln) for ln in reqlog.read_text().splitlines() if ln.strip()]
        ok_binds = {(f"{r['namespace']}/{r['name']}", r["node"]) for r in recs
                    if r.get("subresource") == "binding" and r["code"] == 201}
        binds = [d for d in decisions if d["op"] == "bind" and d["ok"]]
        assert {(d["pod"], d["node"]) for d in binds} <= ok_binds
        # a bound pod is in the digest sampled after it: on its node, Binding/Bound/Running
        digest = got["digest"]
        assert digest["synced"] is True and "cache" not in digest["unobserved"]
        d = binds[0]
        assert d["uid"] in digest["tasks"], (d, sorted(digest["tasks"])[:10])
        status, node = digest["tasks"][d["uid"]]
        assert node == d["node"] and status in ("Binding", "Bound", "Running")
        # the API server agrees: the pod is bound to that node
        from kubernetes import client as k, config as kconfig
        api = kconfig.new_client_from_config(str(out / "kubeconfig"))
        try:
            ns, name = d["pod"].split("/")
            pod = k.CoreV1Api(api).read_namespaced_pod(name, ns)
        finally:
            api.close()
        assert pod.spec.node_name == d["node"] and pod.metadata.uid == d["uid"]
        # nodes in plain units: what is used on the bound node covers the pod's request
        used = digest["nodes"][node]["used"]
        assert used["cpu"] >= 1000 and used["memory"] >= 1 << 30
        if status != "Binding":      # the bind came back through its informer: its RV is in the cache
            bind_rv = next(int(r["rv"]) for r in recs if r.get("subresource") == "binding" and r["code"] == 201
                           and f"{r['namespace']}/{r['name']}" == d["pod"])
            assert digest["rvs"]["Pod"] >= bind_rv
        # /metrics: the sessions vc-scheduler ran, as the model's counter
        assert got["scrape"]["sessions"] >= 1 and got["stats"]["sessions"] == got["scrape"]["sessions"]
        assert got["stats"]["binds"] == len(binds)
        assert got["staleness_ms"] == [] and "staleness_ms" in digest["unobserved"]
        # a process that stops answering: the cache is unobserved, with the reason, not empty
        from ha.runtime.external.observe.cache_dump import process_state
        vc.send_signal(signal.SIGSTOP)
        try:
            _wait(lambda: process_state(vc.pid) == "T", 10, "the stopped state")
            paused = observe(handle, decisions[-1]["seq"])
        finally:
            vc.send_signal(signal.SIGCONT)
        assert paused["digest"]["synced"] is False and "tasks" not in paused["digest"]
        assert "is stopped (SIGSTOP)" in paused["digest"]["unobserved"]["cache"]
        assert "is stopped (SIGSTOP)" in paused["scrape"]["unobserved"]
        assert "sessions" not in paused["stats"]          # not observed: absent, not zero
        resumed = observe(handle, decisions[-1]["seq"])
        assert resumed["digest"]["synced"] is True and d["uid"] in resumed["digest"]["tasks"]
    finally:
        if vc is not None:
            _stop(vc)
        _stop(serve, signal.SIGINT)
