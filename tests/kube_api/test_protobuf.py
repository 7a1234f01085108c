"""kube_api.protobuf: real Kubernetes protobuf bodies (made by k8s.io/apimachinery's own encoder
in go/k8sproto) decode to the JSON a kube-apiserver would read, field for field; malformed bodies
raise ProtobufError naming what is wrong. Skips where Go is missing; fails with Go's error where
Go is present and the build fails."""
from __future__ import annotations

import asyncio
import os
import signal

import pytest

from kube_api import protobuf as pb

from .conftest import go_program


@pytest.fixture(scope="module")
def transcoder():
    go_program(pb.K8SPROTO_DIR, "k8sproto")
    assert pb.available() is None
    yield pb


POD = {
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "p1", "namespace": "default", "uid": "5b0c1e0e-2f44-4a5e-9a55-0c3b6c1d2e3f",
                 "resourceVersion": "42", "creationTimestamp": "2026-11-27T19:22:51Z",
                 "labels": {"app": "web"}, "annotations": {"scheduling.k8s.io/group-name": "pg1"}},
    "spec": {"schedulerName": "volcano", "nodeName": "n1", "priority": 100,
             "containers": [{"name": "c", "image": "busybox",
                             "resources": {"requests": {"cpu": "500m", "memory": "1Gi",
                                                        "nvidia.com/gpu": "2"},
                                           "limits": {"cpu": "1500m", "memory": "1536Mi"}},
                             "ports": [{"containerPort": 8080, "name": "http", "protocol": "TCP"}],
                             "livenessProbe": {"httpGet": {"path": "/healthz", "port": "http"}},
                             "readinessProbe": {"tcpSocket": {"port": 8080}}}],
             "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule",
                              "tolerationSeconds": 30}]},
    "status": {"phase": "Pending", "nominatedNodeName": "n2",
               "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                               "message": "0/3 nodes are available",
                               "lastTransitionTime": "2026-11-27T19:22:52Z"},
                              {"type": "DisruptionTarget", "status": "True",
                               "reason": "PreemptionByScheduler",
                               "lastTransitionTime": "2026-11-27T19:22:53Z"}]},
}

LEASE = {
    "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
    "metadata": {"name": "volcano", "namespace": "volcano-system", "resourceVersion": "7"},
    "spec": {"holderIdentity": "vc-1_0f3e", "leaseDurationSeconds": 15, "leaseTransitions": 3,
             "acquireTime": "2026-11-27T19:22:51.123456Z", "renewTime": "2026-11-27T19:22:53.000001Z"},
}

DELETE_OPTIONS = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0,
                  "preconditions": {"uid": "5b0c1e0e-2f44-4a5e-9a55-0c3b6c1d2e3f",
                                    "resourceVersion": "42"},
                  "propagationPolicy": "Background"}


def roundtrip(obj: dict) -> tuple[bytes, dict]:
    body = asyncio.run(pb.encode(obj))
    return body, asyncio.run(pb.decode(body))


def test_pod_with_quantities_times_and_int_or_string(transcoder):
    body, out = roundtrip(POD)
    assert body.startswith(b"k8s\x00")
    # runtime.Unknown's TypeMeta (field 1) carries apiVersion "v1" and kind "Pod"
    assert b"\n\x02v1\x12\x03Pod" in body[:20]
    c = out["spec"]["containers"][0]
    # Quantity keeps its canonical string, not a number
    assert c["resources"]["requests"] == {"cpu": "500m", "memory": "1Gi", "nvidia.com/gpu": "2"}
    assert c["resources"]["limits"] == {"cpu": "1500m", "memory": "1536Mi"}
    # IntOrString: a named port stays a string, a numbered one an int
    assert c["livenessProbe"]["httpGet"]["port"] == "http"
    assert c["readinessProbe"]["tcpSocket"]["port"] == 8080
    assert out["metadata"]["creationTimestamp"] == "2026-11-27T19:22:51Z"
    conds = {x["type"]: x for x in out["status"]["conditions"]}
    assert conds["PodScheduled"]["lastTransitionTime"] == "2026-11-27T19:22:52Z"
    assert conds["DisruptionTarget"]["reason"] == "PreemptionByScheduler"
    assert out["status"]["nominatedNodeName"] == "n2"
    assert out["spec"]["tolerations"][0]["tolerationSeconds"] == 30
    assert out["metadata"]["resourceVersion"] == "42"      # a string, as on the wire
    assert (out["apiVersion"], out["kind"]) == ("v1", "Pod")
    assert out["metadata"]["annotations"] == POD["metadata"]["annotations"]


def test_lease_micro_time_keeps_microseconds(transcoder):
    _, out = roundtrip(LEASE)
    assert (out["apiVersion"], out["kind"]) == ("coordination.k8s.io/v1", "Lease")
    assert out["spec"] == LEASE["spec"]
    assert out["metadata"]["resourceVersion"] == "7"


def test_delete_options(transcoder):
    _, out = roundtrip(DELETE_OPTIONS)
    assert out == DELETE_OPTIONS


@pytest.mark.parametrize("obj", [
    {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "p1.1", "namespace": "default"},
     "involvedObject": {"kind": "Pod", "name": "p1", "namespace": "default"}, "reason": "Scheduled",
     "message": "bound", "type": "Normal", "count": 2, "firstTimestamp": "2026-11-27T19:22:51Z",
     "lastTimestamp": "2026-11-27T19:22:55Z", "source": {"component": "volcano"}},
    {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e", "namespace": "default"},
     "eventTime": "2026-11-27T19:22:51.500000Z", "reportingController": "kube-scheduler",
     "reportingInstance": "ks-1", "action": "Binding", "reason": "Scheduled", "type": "Normal",
     "regarding": {"kind": "Pod", "name": "p1", "namespace": "default"}},
    {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p1", "namespace": "default"},
     "deleteOptions": {"gracePeriodSeconds": 5}},
    {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p1", "namespace": "default"},
     "target": {"kind": "Node", "name": "n1"}},
    {"apiVersion": "coordination.k8s.io/v1", "kind": "DeleteOptions", "dryRun": ["All"]},
])
def test_other_types_client_go_may_send(transcoder, obj):
    _, out = roundtrip(obj)
    assert {k: v for k, v in out.items() if k in obj} == obj
    # what is left are fields Go's JSON writes even when zero (core Event's eventTime, ...),
    # as a kube-apiserver would
    assert all(v in (None, "", 0, {}) for k, v in out.items() if k not in obj), out


def test_malformed_bodies_raise_protobuf_error_naming_the_problem(transcoder):
    good = asyncio.run(pb.encode(POD))
    cases = {
        b"": "empty body",
        b'{"kind":"Pod"}': "must start with the bytes 6b 38 73 00",
        b"k8s\x00\x0a\xff\xff\xff\xff\x0f": "protobuf body",
        good[:-7]: "unexpected EOF",
    }
    for body, words in cases.items():
        with pytest.raises(pb.ProtobufError, match=words.replace("(", r"\(")):
            asyncio.run(pb.decode(body))
    # an Unknown envelope naming a kind nobody registered
    forged = good.replace(b"\x12\x03Pod", b"\x12\x03Pxd", 1)
    with pytest.raises(pb.ProtobufError, match='no kind "Pxd" is registered'):
        asyncio.run(pb.decode(forged))
    # the decoder still works after errors
    assert asyncio.run(pb.decode(good))["metadata"]["name"] == "p1"


def test_concurrent_decodes_from_many_tasks_and_loops(transcoder):
    bodies = [asyncio.run(pb.encode({**LEASE, "metadata": {**LEASE["metadata"], "name": f"l{i}"}}))
              for i in range(20)]

    async def many():
        return await asyncio.gather(*(pb.decode(b) for b in bodies * 5))

    outs = asyncio.run(many())
    assert [o["metadata"]["name"] for o in outs] == [f"l{i}" for i in range(20)] * 5
    assert asyncio.run(pb.decode(bodies[3]))["metadata"]["name"] == "l3"      # another loop, same process


def test_a_killed_transcoder_is_replaced(transcoder):
    body = asyncio.run(pb.encode(LEASE))
    asyncio.run(pb.decode(body))
    pid = pb.transcoder_pid()
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    # the request that finds it dead fails as unavailable; the next one runs on a fresh process
    try:
        out = asyncio.run(pb.decode(body))
    except pb.ProtobufUnavailable as e:
        assert f"pid {pid}" in str(e)
        out = asyncio.run(pb.decode(body))
    assert out["spec"]["holderIdentity"] == "vc-1_0f3e"
    assert pb.transcoder_pid() not in (None, pid)


def test_stop_ends_the_process_by_pid(transcoder):
    asyncio.run(pb.decode(asyncio.run(pb.encode(LEASE))))
    pid = pb.transcoder_pid()
    pb.stop()
    assert pb.transcoder_pid() is None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_cli_bad_input_exits_2(tmp_path, capsys):
    assert pb.main(["build", str(tmp_path)]) == 2
    assert "no go.mod there" in capsys.readouterr().err
    assert pb.main([]) == 2


def test_build_error_carries_gos_message(transcoder, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "go.mod").write_text("module example.local/bad\n\ngo 1.24\n")
    (tmp_path / "bad" / "main.go").write_text("package main\n\nfunc main() { undefinedThing() }\n")
    with pytest.raises(pb.GoBuildError, match="undefined: undefinedThing"):
        pb.build_go_program(tmp_path / "bad")
    assert not list((tmp_path / "cache").rglob("bad-*"))       # nothing half-written in the cache


def test_without_go_available_names_the_reason(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))          # no binary built there
    monkeypatch.setattr(pb, "go_binary", lambda: None)
    monkeypatch.setattr(pb._state, "binary", None)              # as in a fresh process
    assert "Go is not installed" in pb.available()
    with pytest.raises(pb.GoBuildError, match="Go is not installed"):
        pb.build_go_program(pb.K8SPROTO_DIR, "k8sproto")
