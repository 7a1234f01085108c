"""Writes whose bodies are Kubernetes protobuf, as client-go >= 0.32 sends them for built-in types
(vc-scheduler's pod status PUT, its DELETE with DeleteOptions, leader election's Lease POST/PUT).
The bodies are made by k8s.io/apimachinery's own encoder (kube_api.protobuf.encode). Skipped
where Go is missing."""
from __future__ import annotations

import asyncio

import pytest
import requests

from kube_api import protobuf as pb
from tests.kube_api.conftest import go_program
from tests.kube_api.write_helpers import POD, assert_status, call, pod_json

PROTO = "application/vnd.kubernetes.protobuf"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/volcano-system/leases"


@pytest.fixture(scope="module")
def encoder():
    go_program(pb.K8SPROTO_DIR, "k8sproto")
    return lambda obj: asyncio.run(pb.encode(obj))


def send(url: str, method: str, path: str, body: bytes) -> tuple[int, dict]:
    r = requests.request(method, url + path, data=body, headers={"Content-Type": PROTO,
                                                                 "Accept": f"{PROTO},application/json"},
                         timeout=30)
    return r.status_code, r.json()


def test_pod_status_put_and_delete_in_protobuf(kube_front, encoder):
    kube_front.api.create(pod_json("p1", node="n1"))
    _, got = call(kube_front.url, "GET", POD + "/p1")
    got["status"]["conditions"] = [
        {"type": "Ready", "status": "False", "reason": "Evict", "lastTransitionTime": "2026-11-27T19:22:52Z"},
        {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
         "lastTransitionTime": "2026-11-27T19:22:52Z"}]
    got["status"]["nominatedNodeName"] = "n3"
    code, body = send(kube_front.url, "PUT", POD + "/p1/status", encoder(got))
    assert code == 200, body
    st = kube_front.api.get("Pod", "p1", "default")["status"]
    assert [c["type"] for c in st["conditions"]] == ["Ready", "DisruptionTarget"]
    assert st["nominatedNodeName"] == "n3"
    stale = encoder(got)                          # the same resourceVersion again: stale now
    code, body = send(kube_front.url, "PUT", POD + "/p1/status", stale)
    assert_status(body, 409, "Conflict")
    opts = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 7,
            "preconditions": {"uid": got["metadata"]["uid"]}}
    code, body = send(kube_front.url, "DELETE", POD + "/p1", encoder(opts))
    assert code == 200, body
    md = kube_front.api.get("Pod", "p1", "default")["metadata"]
    assert md["deletionGracePeriodSeconds"] == 7
    code, body = send(kube_front.url, "DELETE", POD + "/p1", b"k8s\x00garbage")
    assert_status(body, 400, "BadRequest")


def test_lease_create_and_update_in_protobuf(kube_front, encoder):
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
             "metadata": {"name": "volcano", "namespace": "volcano-system"},
             "spec": {"holderIdentity": "vc-1", "leaseDurationSeconds": 15,
                      "acquireTime": "2026-11-27T19:22:51.123456Z", "renewTime": "2026-11-27T19:22:51.123456Z",
                      "leaseTransitions": 0}}
    code, body = send(kube_front.url, "POST", LEASES, encoder(lease))
    assert code == 201, body
    assert body["spec"]["renewTime"] == "2026-11-27T19:22:51.123456Z"
    stored = kube_front.api.get("Lease", "volcano", "volcano-system")
    assert stored["spec"]["holderIdentity"] == "vc-1"
    renewed = {**body, "spec": {**body["spec"], "renewTime": "2026-11-27T19:23:01.000001Z"}}
    code, out = send(kube_front.url, "PUT", LEASES + "/volcano", encoder(renewed))
    assert code == 200, out
    code, out = send(kube_front.url, "PUT", LEASES + "/volcano",
                     encoder({**renewed, "spec": {**renewed["spec"], "holderIdentity": "vc-2"}}))
    assert_status(out, 409, "Conflict")          # the other candidate's stale read loses
    assert kube_front.api.get("Lease", "volcano", "volcano-system")["spec"]["holderIdentity"] == "vc-1"
