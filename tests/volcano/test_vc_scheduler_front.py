"""The real vc-scheduler (as built by ``ha-testbed volcano build``) against the Kubernetes API front:
it creates its queues, takes the Lease (a protobuf body the front decodes), syncs every informer
and binds a gang's pod. Skips unless the binary is already in the cache (a cold build takes many
minutes) or HA_TESTBED_BUILD_VOLCANO is set."""
from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from ha.volcano import build as vb
from tests.kube_api.conftest import kube_front  # noqa: F401 -- the fixture
from tests.kube_api.read_helpers import NS, node, pod, podgroup


@pytest.fixture(scope="module")
def vc_scheduler():
    version = vb.pinned_versions()[0]
    binary = vb.binary_path(version)
    if not binary.exists():
        if not os.environ.get("HA_TESTBED_BUILD_VOLCANO"):
            pytest.skip(f"vc-scheduler {version} is not in the cache ({binary}) and HA_TESTBED_BUILD_VOLCANO "
                        f"is unset (ha-testbed volcano build {version})")
        vb.build(version, log=lambda m: None)
    return binary


def wait(pred, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = pred()
        if got:
            return got
        time.sleep(0.5)
    raise AssertionError(f"{what} within {timeout}s")


@pytest.mark.timeout(180)
def test_vc_scheduler_binds_a_gang_through_the_front(kube_front, vc_scheduler, tmp_path):  # noqa: F811
    api = kube_front.api
    api.create(node("n1"))
    api.create(podgroup("pg1"))
    p = pod("p1")
    p["metadata"]["annotations"] = {"scheduling.k8s.io/group-name": "pg1"}
    api.create(p)
    log = open(tmp_path / "vc-scheduler.log", "w")
    proc = subprocess.Popen(
        [str(vc_scheduler), f"--master={kube_front.url}", "--listen-address=127.0.0.1:0",
         "--healthz-address=127.0.0.1:0", f"--cache-dump-dir={tmp_path}", "--leader-elect=true",
         "--feature-gates=DynamicResourceAllocation=false", "-v=2"],
        stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, DEBUG_SOCKET_DIR=str(tmp_path / "socks")))
    try:
        def lease():
            try:
                return api.get("Lease", "volcano", "volcano-system")
            except Exception:       # noqa: BLE001 -- not created yet
                return None
        held = wait(lease, 60, "no Lease volcano-system/volcano")
        assert held["spec"]["leaseDurationSeconds"] == 15 and held["spec"]["holderIdentity"]
        assert {q["metadata"]["name"] for q in api.list("Queue").items} >= {"root", "default"}
        node_name = wait(lambda: api.get("Pod", "p1", NS)["spec"].get("nodeName"), 90, "p1 was not bound")
        assert node_name == "n1"
        pg = api.get("PodGroup", "pg1", NS)
        assert pg["status"]["phase"] in ("Inqueue", "Running")
        renewed = wait(lambda: (x := lease()) and x["spec"]["renewTime"] > held["spec"]["renewTime"] and x,
                       30, "the Lease was not renewed")
        assert renewed["spec"]["holderIdentity"] == held["spec"]["holderIdentity"]
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
    text = (tmp_path / "vc-scheduler.log").read_text()
    assert "successfully acquired lease volcano-system/volcano" in text
    assert "Scheduler completes Initialization and start to run" in text
