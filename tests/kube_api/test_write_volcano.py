"""The real vc-scheduler (v1.14.1, built from the Go module proxy into the user cache) against the
front, with no leader election: it creates its root and default queues (201), binds a gang
(pods/binding, 201), writes the PodGroup and Queue status, marks a pod that fits nowhere
Unschedulable through a protobuf pod status PUT, and records events -- every write through
kube_api.writes, none refused. Skipped when the binary is not built (ha/runtime/external/volcano.py
builds it) or protobuf bodies cannot be decoded here."""
from __future__ import annotations

import collections
import subprocess
import time

import pytest

from kube_api import protobuf as pb
from kube_api.server import write_kubeconfig

CONF = """actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
"""


def _binary():
    try:
        from ha.runtime.external.volcano import built_binary
    except ImportError:
        return None
    return built_binary()


BINARY = _binary()
pytestmark = pytest.mark.skipif(BINARY is None, reason="vc-scheduler is not built (ha/runtime/external/volcano.py)")


def node(name: str) -> dict:
    return {"kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}, "spec": {},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                       "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def pod(name: str, group: str, cpu: str) -> dict:
    return {"kind": "Pod", "metadata": {"name": name, "namespace": "default",
                                        "annotations": {"scheduling.k8s.io/group-name": group}},
            "spec": {"schedulerName": "volcano",
                     "containers": [{"name": "c", "image": "busybox",
                                     "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]},
            "status": {"phase": "Pending"}}


def podgroup(name: str, n: int) -> dict:
    return {"kind": "PodGroup", "metadata": {"name": name, "namespace": "default"},
            "spec": {"minMember": n, "queue": "default"}, "status": {"phase": "Pending"}}


def test_vc_scheduler_schedules_through_the_write_path(kube_front, tmp_path):
    if pb.go_binary() is None and not pb.binary_path(pb.K8SPROTO_DIR, "k8sproto").exists():
        pytest.skip("protobuf bodies cannot be decoded here (no Go, no built go/k8sproto)")
    api = kube_front.api
    for n in ("n1", "n2"):
        api.create(node(n))
    api.create(podgroup("gang", 3))
    api.create(podgroup("huge", 1))
    for i in range(3):
        api.create(pod(f"g{i}", "gang", "1"))
    api.create(pod("big", "huge", "100"))
    ep = kube_front.add_endpoint("scheduler-1")
    kc = write_kubeconfig(tmp_path / "kubeconfig", ep.url)
    conf = tmp_path / "conf.yaml"
    conf.write_text(CONF)
    with open(tmp_path / "vc.log", "w") as out:
        proc = subprocess.Popen([BINARY, f"--kubeconfig={kc}", f"--scheduler-conf={conf}", "--scheduler-name=volcano",
                                 "--schedule-period=1s", "--leader-elect=false", "--listen-address=127.0.0.1:0",
                                 "--enable-healthz=false", "--enable-metrics=false", "-v=2"],
                                stdout=out, stderr=subprocess.STDOUT)
        try:
            end = time.monotonic() + 90
            while time.monotonic() < end:
                gang = [api.get("Pod", f"g{i}", "default") for i in range(3)]
                big = api.get("Pod", "big", "default")
                unsched = [c for c in big["status"].get("conditions") or ()
                           if c.get("type") == "PodScheduled" and c.get("status") == "False"]
                if all(p["spec"].get("nodeName") for p in gang) and unsched:
                    break
                time.sleep(0.5)
        finally:
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
    log = (tmp_path / "vc.log").read_text()[-3000:]
    assert all(p["spec"].get("nodeName") in ("n1", "n2") for p in gang), log
    assert unsched and unsched[0].get("reason") == "Unschedulable", (big["status"], log)
    assert not big["spec"].get("nodeName")
    assert {q["metadata"]["name"] for q in api.list("Queue").items} >= {"root", "default"}
    assert api.get("PodGroup", "gang", "default")["status"]["phase"] in ("Inqueue", "Running")
    assert api.list("Event", "default").items, "no events were recorded"
    writes = collections.Counter((r["resource"], r["subresource"], r["code"]) for r in ep.requests
                                 if r["verb"] in ("create", "update", "patch", "delete"))
    assert writes[("pods", "binding", 201)] == 3, writes
    assert writes[("queues", None, 201)] == 2, writes
    assert writes[("pods", "status", 200)] >= 1, writes
    assert writes[("events", None, 201)] >= 1, writes
    refused = [r for r in ep.requests if r["verb"] in ("create", "update", "patch", "delete") and r["code"] >= 400
               and not (r["resource"] == "queues" and r.get("reason") == "AlreadyExists")]
    assert not refused, refused
