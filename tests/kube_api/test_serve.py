"""``ha-testbed serve``: an API server with the living cluster and no schedulers, for kubectl and
external schedulers; Ctrl-C stops everything it started."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from .read_helpers import get

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "quickstart.yaml"


def _start(tmp_path, *args):
    env = dict(os.environ, HA_TESTBED_RUNS_DIR=str(tmp_path / "runs"))
    p = subprocess.Popen([sys.executable, "-m", "ha.cli", "serve", str(EXAMPLE), "--out", str(tmp_path / "out"), *args],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    url = None
    deadline = time.monotonic() + 60
    lines = []
    while time.monotonic() < deadline:
        line = p.stdout.readline()
        if not line:
            break
        lines.append(line)
        if line.startswith("serving "):
            url = line.split(" at ", 1)[1].strip()
            break
    assert url, f"no URL printed: {lines} {p.stderr.read() if p.poll() is not None else ''}"
    return p, url


def test_serve_runs_the_living_cluster_and_stops_on_ctrl_c(tmp_path):
    p, url = _start(tmp_path)
    try:
        kids = psutil.Process(p.pid).children(recursive=True)
        assert any("redis" in k.name() for k in kids), [k.name() for k in kids]
        assert url.startswith("http://127.0.0.1:")
        kc = (tmp_path / "out" / "kubeconfig").read_text()
        assert f"server: {url}" in kc
        code, nodes = get(url, "/api/v1/nodes")
        assert code == 200 and len(nodes["items"]) >= 1
        # the workload generator creates pods; nobody schedules them
        deadline = time.monotonic() + 30
        while True:
            code, pods = get(url, "/api/v1/pods")
            if pods["items"]:
                break
            assert time.monotonic() < deadline, "the workload created no pods"
            time.sleep(0.5)
        assert all(not it["spec"].get("nodeName") for it in pods["items"])
        # and a PodGroup per job, made by the job controller / generator
        code, pgs = get(url, "/apis/scheduling.volcano.sh/v1beta1/podgroups")
        assert code == 200 and pgs["items"]
    finally:
        p.send_signal(signal.SIGINT)
        rc = p.wait(60)
    assert rc == 130
    for k in kids:
        assert not k.is_running() or k.status() == psutil.STATUS_ZOMBIE, k
    reqs = [json.loads(x) for x in (tmp_path / "out" / "kube-api" / "observer" / "requests.jsonl").read_text().splitlines()]
    assert {"nodes", "pods", "podgroups"} <= {r["resource"] for r in reqs}


def test_serve_with_a_duration_ends_by_itself(tmp_path):
    p, url = _start(tmp_path, "--duration", "2", "--no-workload")
    assert p.wait(60) == 0
    with pytest.raises(OSError):
        import urllib.request
        urllib.request.urlopen(url + "/healthz", timeout=2)


def test_serve_bad_port_is_exit_2(tmp_path):
    r = subprocess.run([sys.executable, "-m", "ha.cli", "serve", str(EXAMPLE), "--port", "70000",
                        "--out", str(tmp_path / "o")], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, HA_TESTBED_RUNS_DIR=str(tmp_path / "runs")))
    assert r.returncode == 2 and "--port" in r.stderr


DELAYED = """\
name: serve-delayed
seed: 2
duration: 60s
cluster: {nodes: 2, node: {cpu: 8, memory: 16Gi, pods: 110}}
queues: [{name: q1}]
workload: {arrivals: poisson, rate: 5/s, gang_size: [1, 2], runtime: [1s, 2s], queues: [q1],
           request: {cpu: 1, memory: 1Gi}}
schedulers: {instances: 2}
chaos:
  - {at: 0s, for: 60s, fault: watch-delay, target: scheduler-1, kinds: [Pod],
     delay: {dist: fixed, value: 700ms}}
"""


def test_serve_instance_endpoint_gets_the_experiments_watch_faults(tmp_path):
    """An external scheduler's endpoint (--endpoint scheduler-1) delays its pod watch as the
    experiment says; the observer's and scheduler-2's are not delayed."""
    import threading
    exp = tmp_path / "delayed.yaml"
    exp.write_text(DELAYED)
    env = dict(os.environ, HA_TESTBED_RUNS_DIR=str(tmp_path / "runs"))
    p = subprocess.Popen([sys.executable, "-m", "ha.cli", "serve", str(exp), "--out", str(tmp_path / "out"),
                          "--endpoint", "scheduler-1", "--endpoint", "scheduler-2"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    urls = {}
    try:
        while len(urls) < 3:
            line = p.stdout.readline()
            assert line, p.stderr.read()
            if line.startswith("serving "):
                urls["observer"] = line.split(" at ", 1)[1].strip()
            elif line.startswith("endpoint "):
                name, url = line.split()[1], line.split()[3]
                urls[name] = url
        assert (tmp_path / "out" / "kubeconfig-scheduler-1").exists()
        from .read_helpers import WatchReader
        code, body = get(urls["observer"], "/api/v1/pods")
        rv = body["metadata"]["resourceVersion"]
        arrivals: dict = {}

        def follow(name):
            seen = arrivals.setdefault(name, {})
            with WatchReader(urls[name], f"/api/v1/pods?watch=true&resourceVersion={rv}&timeoutSeconds=8") as w:
                while (got := w.next(15)) is not None:
                    t, ev = got
                    if ev["type"] == "ADDED":
                        seen.setdefault(ev["object"]["metadata"]["name"], t)
        threads = [threading.Thread(target=follow, args=(n,)) for n in urls]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
    finally:
        p.send_signal(signal.SIGINT)
        p.wait(60)
    common = set(arrivals["observer"]) & set(arrivals["scheduler-1"]) & set(arrivals["scheduler-2"])
    assert len(common) >= 5, {k: len(v) for k, v in arrivals.items()}
    lag1 = [arrivals["scheduler-1"][k] - arrivals["observer"][k] for k in common]
    lag2 = [abs(arrivals["scheduler-2"][k] - arrivals["observer"][k]) for k in common]
    assert min(lag1) >= 0.6, sorted(lag1)[:5]
    assert max(lag2) < 0.4, sorted(lag2)[-5:]


def test_run_kube_api_needs_the_live_engine(tmp_path):
    r = subprocess.run([sys.executable, "-m", "ha.cli", "run", str(EXAMPLE), "--kube-api", "--engine", "sim",
                        "--out", str(tmp_path / "o")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "--kube-api" in r.stderr and "live engine" in r.stderr
    assert not (tmp_path / "o").exists()
