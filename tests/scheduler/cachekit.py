"""Builders for cache tests: object-shape dicts (docs/object-shapes.md) from compact arguments and
from scenario-file entries (tests/data/scenarios/*.json, tests/data/bug-repros.json)."""
from __future__ import annotations

import json
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data"
SCENARIOS = DATA / "scenarios"


def _requests(plain: dict) -> dict:
    """Scenario units (cpu millicores, memory bytes, scalars counts) → stored quantity strings."""
    return {k: (f"{int(v)}m" if k == "cpu" else str(int(v))) for k, v in plain.items()}


def make_pod(name: str, ns: str = "ns", *, cpu: int = 1000, memory: int = 10**9, group: str | None = None,
             node: str = "", phase: str = "Pending", nominated: str = "", deleting: bool = False,
             scheduler: str = "volcano", uid: str | None = None, priority: int | None = None,
             annotations: dict | None = None, labels: dict | None = None, extra: dict | None = None) -> dict:
    ann = dict(annotations or {})
    if group:
        ann["scheduling.k8s.io/group-name"] = group
    req = {"cpu": cpu, "memory": memory, **(extra or {})}
    md = {"name": name, "namespace": ns, "uid": uid or f"{ns}-{name}", "annotations": ann,
          "labels": dict(labels or {}), "resourceVersion": 1}
    if deleting:
        md["deletionTimestamp"] = 1.0
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": md,
        "spec": {"schedulerName": scheduler, "nodeName": node, "priority": priority,
                 "containers": [{"name": "c", "resources": {"requests": _requests(req)}}]},
        "status": {"phase": phase, "nominatedNodeName": nominated, "conditions": []},
    }


def make_node(name: str, *, cpu: int = 4000, memory: int = 8 * 2**30, pods: int = 10, labels: dict | None = None,
              extra: dict | None = None) -> dict:
    alloc = _requests({"cpu": cpu, "memory": memory, "pods": pods, **(extra or {})})
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": dict(labels or {}), "resourceVersion": 1},
            "spec": {"unschedulable": False},
            "status": {"allocatable": alloc, "capacity": dict(alloc),
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def make_pod_group(name: str, ns: str = "ns", *, min_member: int = 1, queue: str = "default",
                   phase: str = "Inqueue", priority_class: str | None = None, rv: int = 1) -> dict:
    spec = {"minMember": min_member, "minTaskMember": {}, "queue": queue, "minResources": None}
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": ns, "uid": f"pg-{ns}-{name}", "annotations": {},
                         "resourceVersion": rv},
            "spec": spec, "status": {"phase": phase}}


def make_queue(name: str, *, weight: int = 1, state: str = "Open") -> dict:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
            "metadata": {"name": name, "resourceVersion": 1},
            "spec": {"weight": weight, "capability": None, "deserved": None, "guarantee": None,
                     "reclaimable": None, "priority": 0},
            "status": {"state": state}}


# ---- scenario entries ---------------------------------------------------------------------------
def pod_from_scenario(p: dict, scheduler: str = "volcano") -> dict:
    ann = dict(p.get("annotations") or {})
    labels = dict(p.get("labels") or {})
    if p.get("podgroup"):
        ann["scheduling.k8s.io/group-name"] = p["podgroup"]
    if not p.get("preemptable", True) and "volcano.sh/preemptable" not in ann and "volcano.sh/preemptable" not in labels:
        ann["volcano.sh/preemptable"] = "false"
    if p.get("taskRole") and "volcano.sh/task-spec" not in ann and "volcano.sh/task-spec" not in labels:
        ann["volcano.sh/task-spec"] = p["taskRole"]
    ns, name = p["namespace"], p["name"]
    md = {"name": name, "namespace": ns, "uid": f"{ns}-{name}", "annotations": ann, "labels": labels,
          "resourceVersion": 1, "creationTimestamp": 0.0}
    if p.get("deletionTimestamp"):
        md["deletionTimestamp"] = 1.0
    spec = {"schedulerName": scheduler, "nodeName": p.get("nodeName") or "", "priority": p.get("priority"),
            "nodeSelector": dict(p.get("nodeSelector") or {}),
            "containers": [{"name": "c", "resources": {"requests": _requests(p.get("request") or {})}}]}
    if p.get("preemptionPolicy"):
        spec["preemptionPolicy"] = p["preemptionPolicy"]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": spec,
            "status": {"phase": p.get("phase") or "Pending", "nominatedNodeName": p.get("nominatedNodeName") or "",
                       "conditions": []}}


def node_from_scenario(n: dict) -> dict:
    alloc = _requests(n.get("allocatable") or {})
    cap = _requests(n.get("capacity") or n.get("allocatable") or {})
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": n["name"], "labels": dict(n.get("labels") or {}), "resourceVersion": 1},
            "spec": {"unschedulable": False},
            "status": {"allocatable": alloc, "capacity": cap, "conditions": [{"type": "Ready", "status": "True"}]}}


def pod_group_from_scenario(pg: dict) -> dict:
    spec = {"minMember": pg.get("minMember", 0), "minTaskMember": dict(pg.get("minTaskMember") or {}),
            "queue": pg.get("queue") or "", "minResources": pg.get("minResources")}
    if pg.get("priorityClassName"):
        spec["priorityClassName"] = pg["priorityClassName"]
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": pg["name"], "namespace": pg["namespace"],
                         "uid": f"pg-{pg['namespace']}-{pg['name']}", "annotations": {}, "resourceVersion": 1},
            "spec": spec, "status": {"phase": pg.get("phase") or "Pending"}}


def queue_from_scenario(q: dict) -> dict:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
            "metadata": {"name": q["name"], "resourceVersion": 1},
            "spec": {"weight": q.get("weight", 1), "capability": q.get("capability"), "deserved": q.get("deserved"),
                     "guarantee": q.get("guarantee"), "reclaimable": q.get("reclaimable"),
                     "priority": q.get("priority", 0)},
            "status": {"state": q.get("state") or "Open"}}


def load_scenario(name: str) -> dict:
    return json.loads((SCENARIOS / name).read_text())


def unit_scenarios() -> list[Path]:
    return sorted(p for p in SCENARIOS.glob("*.json") if json.loads(p.read_text()).get("kind") == "unit")


def bug_repro(prefix: str) -> dict:
    for r in json.loads((DATA / "bug-repros.json").read_text()):
        if r["id"].startswith(prefix):
            return r
    raise KeyError(prefix)
