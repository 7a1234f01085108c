"""Real kubectl (1.33) against the front: get pods -o wide, get -w, get nodes, get podgroups,
describe pod. Skipped, with the reason, when no kubectl is installed."""
from __future__ import annotations

import os
import queue
import subprocess
import threading
import time

import pytest

from .conftest import kubectl_binary
from .read_helpers import NS, node, pod, podgroup

KUBECTL = kubectl_binary()
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="no kubectl found (looked for kubectl.1.33 and kubectl)")


def kubectl(front, tmp_path, *args, timeout=60) -> str:
    env = dict(os.environ, HOME=str(tmp_path))
    r = subprocess.run([KUBECTL, "--kubeconfig", front.kubeconfig, "--cache-dir", str(tmp_path / "cache"), *args],
                       capture_output=True, text=True, timeout=timeout, env=env)
    assert r.returncode == 0, f"kubectl {' '.join(args)}: exit {r.returncode}\n{r.stderr}"
    return r.stdout


def rows(out: str) -> list[list[str]]:
    return [line.split() for line in out.strip().splitlines()]


def _seed(api):
    api.create(node("n1"))
    api.create(node("n2"))
    api.create(pod("a"))
    api.create(pod("b"))
    api.create(pod("c", "kube-system"))
    api.bind(NS, "a", "n1")


def test_get_pods_wide_nodes_podgroups(kube_front, tmp_path):
    api = kube_front.api
    _seed(api)
    api.create(podgroup("pg1"))
    out = rows(kubectl(kube_front, tmp_path, "get", "pods", "-o", "wide"))
    assert out[0][0] == "NAME"
    assert sorted(r[0] for r in out[1:]) == ["a", "b"]            # the default namespace only
    header = out[0]
    if "NODE" in header:   # a server-side Table: the pod columns
        col = header.index("NODE")
        assert {r[0]: r[col] for r in out[1:]}["a"] == "n1"
    out = rows(kubectl(kube_front, tmp_path, "get", "pods", "-A"))
    assert sorted(r[1] for r in out[1:]) == ["a", "b", "c"]
    out = rows(kubectl(kube_front, tmp_path, "get", "nodes"))
    assert [r[0] for r in out[1:]] == ["n1", "n2"]
    out = rows(kubectl(kube_front, tmp_path, "get", "podgroups"))
    assert [r[0] for r in out[1:]] == ["pg1"]
    out = kubectl(kube_front, tmp_path, "get", "pods", "-o",
                  "custom-columns=NAME:.metadata.name,NODE:.spec.nodeName,PHASE:.status.phase")
    # the store keeps an unbound pod's spec.nodeName as "" (a kube-apiserver omits it: "<none>")
    assert rows(out)[1:] == [["a", "n1", "Pending"], ["b", "Pending"]]
    out = kubectl(kube_front, tmp_path, "get", "pod", "a", "-o", "jsonpath={.metadata.resourceVersion}")
    assert out == str(api.get("Pod", "a", NS)["metadata"]["resourceVersion"])


def test_describe_pod(kube_front, tmp_path):
    _seed(kube_front.api)
    out = kubectl(kube_front, tmp_path, "describe", "pod", "a")
    lines = {ln.split(":", 1)[0].strip(): ln.split(":", 1)[1].strip() for ln in out.splitlines() if ":" in ln}
    assert lines["Name"] == "a" and lines["Namespace"] == NS
    assert lines["Node"].startswith("n1")
    assert "PodScheduled" in out


def test_get_pods_watch(kube_front, tmp_path):
    api = kube_front.api
    _seed(api)
    env = dict(os.environ, HOME=str(tmp_path))
    p = subprocess.Popen([KUBECTL, "--kubeconfig", kube_front.kubeconfig, "--cache-dir", str(tmp_path / "cache"),
                          "get", "pods", "-w", "-o", "custom-columns=NAME:.metadata.name,NODE:.spec.nodeName"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in p.stdout], daemon=True).start()

    def read(n, timeout=20):
        out, end = [], time.monotonic() + timeout
        while len(out) < n:
            try:
                out.append(lines.get(timeout=max(0.01, end - time.monotonic())).split())
            except queue.Empty:
                break
        return out
    try:
        first = read(3)                          # header, a, b
        assert first[0] == ["NAME", "NODE"] and sorted(r[0] for r in first[1:]) == ["a", "b"]
        api.create(pod("d"))
        api.bind(NS, "b", "n2")
        later = read(2)
        assert later == [["d"], ["b", "n2"]]
    finally:
        p.kill()
        p.wait(10)
