"""The starting objects of an experiment in docs/object-shapes.md shape: the cluster's nodes, the
queues, priority classes and the ``initial`` section (scenario-shaped; built with the starting
objects' one schema, ha/scenario/object_shapes.py, so both file formats make the very same objects,
held in the same ``ClusterObjects``)."""
from __future__ import annotations

from cluster_state.quantity import normalise_resources
from ha.errors import BadInput
from ha.experiment.config import Experiment
from ha.scenario.object_shapes import ClusterObjects, build_objects, new_context

__all__ = ["starting_objects", "node_names"]

# fields the API server assigns on create
_SERVER_META = ("uid", "resourceVersion", "creationTimestamp")

# Initial pods get the workload's short grace period (ha.runtime.workload.WorkloadConfig
# termination_grace_s), not the scenario loader's Kubernetes default of 30 s: an evicted initial pod
# must be gone (and re-created by the job controller) within a ~30-60 s run, like workload pods.
# An initial pod may ask for another grace period with this annotation (whole seconds), e.g. to keep
# a victim terminating (Releasing) across a failover (examples/br4-failover-reservation.yaml).
INITIAL_POD_GRACE_S = 1
GRACE_ANNOTATION = "ha-testbed/termination-grace-s"


def node_names(exp: Experiment) -> list[str]:
    return [f"node-{i}" for i in range(1, exp.cluster.nodes + 1)]


def _meta(name: str, **extra) -> dict:
    return {"name": name, "labels": {}, "annotations": {}, **extra}


def cluster_node(name: str, resources: dict, labels: dict[str, str]) -> dict:
    alloc = normalise_resources(resources, "cluster.node")
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {**_meta(name), "labels": {"kubernetes.io/hostname": name, **labels}},
            "spec": {"unschedulable": False},
            "status": {"allocatable": alloc, "capacity": dict(alloc),
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def queue(name: str, *, weight: int = 1, capability=None, deserved=None, guarantee=None,
          reclaimable=None, priority: int = 0, parent: str = "") -> dict:
    norm = (lambda r, w: None if r is None else normalise_resources(r, w))
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
            "metadata": _meta(name),
            "spec": {"weight": weight, "capability": norm(capability, f"queues.{name}.capability"),
                     "deserved": norm(deserved, f"queues.{name}.deserved"),
                     "guarantee": None if guarantee is None else
                     {"resource": normalise_resources(guarantee, f"queues.{name}.guarantee")},
                     "reclaimable": reclaimable, "priority": priority, "parent": parent},
            "status": {"state": "Open"}}


RACK_LABEL = "topology/rack"
SPINE_LABEL = "topology/switch"


def topology_hypernodes(n_nodes: int, rack_size: int, racks_per_spine: int) -> list[dict]:
    """Tier-1 rack HyperNodes (their nodes by the rack label) and tier-2 spine HyperNodes (their
    racks by name) over ``n_nodes`` generated nodes."""
    from ha.scheduler.api.hypernode_info import hyper_node_object
    racks = (n_nodes + rack_size - 1) // rack_size
    out = [hyper_node_object(f"rack-{r}", 1, [{"type": "Node", "selector": {
        "labelMatch": {"matchLabels": {RACK_LABEL: f"rack-{r}"}}}}], tier_name="rack")
        for r in range(racks)]
    for sp in range((racks + racks_per_spine - 1) // racks_per_spine):
        out.append(hyper_node_object(f"spine-{sp}", 2, [
            {"type": "HyperNode", "selector": {"exactMatch": {"name": f"rack-{r}"}}}
            for r in range(sp * racks_per_spine, min((sp + 1) * racks_per_spine, racks))],
            tier_name="spine"))
    return [_strip_server_fields(h) for h in out]


def priority_class(name: str, value: int, *, preemption_policy: str = "PreemptLowerPriority",
                   global_default: bool = False) -> dict:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": _meta(name),
            "value": int(value), "globalDefault": global_default, "preemptionPolicy": preemption_policy}


def _strip_server_fields(obj: dict) -> dict:
    for k in _SERVER_META:
        obj["metadata"].pop(k, None)
    return obj


def _grace(pod: dict, where: str) -> int:
    raw = (pod["metadata"].get("annotations") or {}).get(GRACE_ANNOTATION)
    if raw is None:
        return INITIAL_POD_GRACE_S
    try:
        v = int(raw)
    except (TypeError, ValueError):
        v = -1
    if v < 0:
        raise BadInput(f"{where}.annotations.{GRACE_ANNOTATION}: expected whole seconds >= 0, got {raw!r}")
    return v


def starting_objects(exp: Experiment, source: str = "<experiment>") -> ClusterObjects:
    """The experiment's starting objects (``ClusterObjects``, created in its ``in_order()``)."""
    out = ClusterObjects()
    pcs: dict[str, dict] = {}
    if exp.workload is not None:
        for name, value in exp.workload.priority_classes.items():
            pcs[name] = priority_class(name, value)
    for q in exp.queues:
        out.queues.append(queue(q.name, weight=q.weight, capability=q.capability,
                                deserved=q.deserved, guarantee=q.guarantee,
                                reclaimable=q.reclaimable, priority=q.priority, parent=q.parent))
    topo = exp.cluster.topology
    for i, name in enumerate(node_names(exp)):
        labels = dict(exp.cluster.labels)
        if topo is not None:
            rack = i // topo.rack_size
            labels[RACK_LABEL] = f"rack-{rack}"
            labels[SPINE_LABEL] = f"spine-{rack // topo.racks_per_spine}"
        out.nodes.append(cluster_node(name, exp.cluster.node, labels))
    if topo is not None:
        out.hyper_nodes += topology_hypernodes(len(out.nodes), topo.rack_size, topo.racks_per_spine)

    init = exp.initial
    if (init.nodes or init.queues or init.podgroups or init.pods or init.priority_classes
            or init.hypernodes):
        spec = init.model_dump(mode="python", exclude_none=True)
        spec["nodes"] = spec.get("nodes") or []
        spec["pods"] = spec.get("pods") or []
        ctx = new_context(source)
        # cross-references were checked by the config (against the generated nodes too)
        built = build_objects(ctx, spec, "initial", strict=False)
        for o in built.priority_classes:
            pcs[o["metadata"]["name"]] = _strip_server_fields(o)
        out.queues += [_strip_server_fields(o) for o in built.queues]
        out.nodes += [_strip_server_fields(o) for o in built.nodes]
        out.hyper_nodes += [_strip_server_fields(o) for o in built.hyper_nodes]
        out.podgroups += [_strip_server_fields(o) for o in built.podgroups]
        for i, o in enumerate(built.pods):
            o["spec"]["terminationGracePeriodSeconds"] = _grace(o, f"{source}: initial.pods[{i}]")
            out.pods.append(_strip_server_fields(o))
    if not any(q["metadata"]["name"] == "default" for q in out.queues):
        # Volcano's controller creates the default queue in every cluster
        out.queues.insert(0, queue("default"))
    out.priority_classes = list(pcs.values())
    return out
