"""Real kubectl against the front: ``get pods -o wide`` prints the server-side Table, NOMINATED
NODE included; podgroups print Volcano's printer columns. Skipped when kubectl is missing."""
from __future__ import annotations

import subprocess

import pytest

from tests.cluster_state.helpers import podgroup
from tests.kube_api.conftest import kubectl_binary
from tests.kube_api.write_helpers import pod_json

KUBECTL = kubectl_binary()
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")


def kubectl(front, *args: str) -> str:
    out = subprocess.run([KUBECTL, "--kubeconfig", front.kubeconfig, *args], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_get_pods_wide_shows_the_nominated_node(kube_front):
    kube_front.api.create(pod_json("waiting"))
    p = kube_front.api.get("Pod", "waiting", "default")
    kube_front.api.update_status({**p, "status": {"phase": "Pending", "nominatedNodeName": "node-7"}})
    kube_front.api.create(pod_json("bound", node="node-2"))
    lines = kubectl(kube_front, "get", "pods", "-o", "wide").splitlines()
    header = lines[0].split()
    assert header[:5] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert "NOMINATED" in header and "NODE" in header and "GATES" in header
    rows = {ln.split()[0]: ln.split() for ln in lines[1:]}
    # NAME READY STATUS RESTARTS AGE IP NODE NOMINATED-NODE READINESS-GATES
    assert rows["waiting"][1:3] == ["0/1", "Pending"] and rows["waiting"][5:] == ["<none>", "<none>", "node-7", "<none>"]
    assert rows["bound"][6] == "node-2" and rows["bound"][7] == "<none>"
    narrow = kubectl(kube_front, "get", "pods").splitlines()
    assert narrow[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]


def test_get_podgroups_prints_volcano_columns(kube_front):
    pg = kube_front.api.create(podgroup("pg1", min_member=3, queue="q9"))
    kube_front.api.update_status({**pg, "status": {"phase": "Running", "running": 2}})
    lines = kubectl(kube_front, "get", "podgroups.scheduling.volcano.sh", "-o", "wide").splitlines()
    assert lines[0].split() == ["NAME", "STATUS", "MINMEMBER", "RUNNINGS", "AGE", "QUEUE"]
    cells = lines[1].split()
    assert cells[:4] == ["pg1", "Running", "3", "2"] and cells[-1] == "q9"


def test_kubectl_writes(kube_front, tmp_path):
    # --validate=false: the front serves no OpenAPI document (kubectl validates against it)
    import json as _json
    manifest = tmp_path / "pod.json"
    manifest.write_text(_json.dumps(pod_json("web")))
    assert "pod/web created" in kubectl(kube_front, "create", "--validate=false", "-f", str(manifest))
    kubectl(kube_front, "label", "pod", "web", "tier=front")
    kubectl(kube_front, "annotate", "pod", "web", "note=hi")
    kubectl(kube_front, "patch", "pod", "web", "--type=merge", "-p", '{"metadata":{"labels":{"m":"1"}}}')
    kubectl(kube_front, "patch", "pod", "web", "--type=json", "-p",
            '[{"op":"replace","path":"/spec/containers/0/image","value":"busybox:2"}]')
    st = kube_front.api.get("Pod", "web", "default")
    assert st["metadata"]["labels"] == {"app": "a", "tier": "front", "m": "1"}
    assert st["metadata"]["annotations"]["note"] == "hi"
    assert st["spec"]["containers"][0]["image"] == "busybox:2"
    out = subprocess.run([KUBECTL, "--kubeconfig", kube_front.kubeconfig, "create", "--validate=false", "-f", str(manifest)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "AlreadyExists" in out.stderr
    assert 'pod "web" deleted' in kubectl(kube_front, "delete", "pod", "web", "--wait=false")
    from cluster_state.errors import NotFound
    with pytest.raises(NotFound):       # not bound to a node: deleted at once
        kube_front.api.get("Pod", "web", "default")


def test_kubectl_apply_twice_patches_with_a_strategic_merge_patch(kube_front, tmp_path):
    """Client-side apply: a create, then a three-way strategic merge patch kubectl computes itself
    ($setElementOrder for the containers it lists, the last-applied annotation)."""
    import json as _json
    p = pod_json("app")
    p["spec"]["containers"].append({"name": "side", "image": "busybox"})
    manifest = tmp_path / "pod.json"
    manifest.write_text(_json.dumps(p))
    assert "pod/app created" in kubectl(kube_front, "apply", "--validate=false", "-f", str(manifest))
    p["metadata"]["labels"] = {"app": "a", "rev": "2"}
    p["spec"]["containers"][1]["image"] = "busybox:2"
    manifest.write_text(_json.dumps(p))
    assert "pod/app configured" in kubectl(kube_front, "apply", "--validate=false", "-f", str(manifest))
    st = kube_front.api.get("Pod", "app", "default")
    assert st["metadata"]["labels"] == {"app": "a", "rev": "2"}
    assert [(c["name"], c["image"]) for c in st["spec"]["containers"]] == [("main", "busybox"), ("side", "busybox:2")]
    assert "kubectl.kubernetes.io/last-applied-configuration" in st["metadata"]["annotations"]
    out = subprocess.run([KUBECTL, "--kubeconfig", kube_front.kubeconfig, "apply", "--server-side", "--validate=false", "-f",
                          str(manifest)], capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "server-side apply" in out.stderr, out.stderr
