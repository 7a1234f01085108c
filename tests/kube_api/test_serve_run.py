"""``ha-testbed run --kube-api``: an observer endpoint open during a live run (real Redis, real
local Ray) and the kubeconfig in the results folder."""
from __future__ import annotations

import threading
import time

import pytest
import yaml
from rich.console import Console

from ha.experiment.serve import run_with_kube_api

from .read_helpers import get

SMALL = """\
name: kubeapi-small
seed: 5
duration: 8s
cluster: {nodes: 2, node: {cpu: 8, memory: 16Gi, pods: 110}}
queues: [{name: q1}]
workload: {arrivals: poisson, rate: 4/s, gang_size: [1, 2], runtime: [1s, 2s], queues: [q1],
           request: {cpu: 1, memory: 1Gi}}
schedulers: {instances: 2, mode: leader-elected, period: 300ms,
             lease: {duration: 2s, renew_deadline: 1500ms, retry: 400ms}, standby: warm}
measure: {every: 500ms}
"""


@pytest.mark.ray
def test_run_with_kube_api_serves_the_run(ray_session, tmp_path, redis_url):
    exp = tmp_path / "small.yaml"
    exp.write_text(SMALL)
    out = tmp_path / "results"
    seen: dict = {"bound": set(), "codes": []}
    done = threading.Event()

    def observe():
        kc = out / "kubeconfig"
        while not done.is_set():
            if kc.exists():
                url = yaml.safe_load(kc.read_text())["clusters"][0]["cluster"]["server"]
                try:
                    code, body = get(url, "/api/v1/pods", timeout=5)
                except OSError:
                    break             # the run is over: the endpoint is gone
                seen["codes"].append(code)
                if code == 200:
                    seen["bound"] |= {p["metadata"]["name"] for p in body["items"] if p["spec"].get("nodeName")}
            time.sleep(0.3)
    t = threading.Thread(target=observe, daemon=True)
    t.start()
    try:
        rc = run_with_kube_api(exp, out=out, redis_url=redis_url, console=Console(quiet=True), progress=False)
    finally:
        done.set()
        t.join(10)
    assert rc == 0
    assert (out / "metrics.json").exists()
    assert seen["codes"] and set(seen["codes"]) == {200}
    assert seen["bound"], "no bound pod seen through the front during the run"
    reqs = (out / "kube-api" / "observer" / "requests.jsonl").read_text().splitlines()
    assert len(reqs) == len(seen["codes"])
