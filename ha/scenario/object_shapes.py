"""The one schema of starting objects: a cluster's nodes, queues, priority classes, podgroups, pods
and hypernodes written in scenario-file shapes (docs/design.md "Scenario files"), read field by field
into the Kubernetes-shaped objects of docs/object-shapes.md.

Scenario files (``ha.scenario.loader``), bug repros (``ha.scenario.repros``) and the ``initial``
section of experiment files (``ha.experiment.config``, ``ha.experiment.objects``) are read by these
builders, so they accept the same objects and refuse the same mistakes with the same words: every
problem is a :class:`ScenarioError` naming the file, the field (``pods[2].request.cpu``) and what is
wrong.

Plain units, as Volcano's Go unit tests build a cluster: cpu in millicores, memory in bytes, other
scalars as counts (a string is a Kubernetes quantity). The Go test helpers give pods and jobs zero
creation timestamps and the UID ``<ns>-<name>``; task order then falls back to the pod-name index
and the UID (docs/volcano-semantics.md §16.3). The objects are built the same way.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from cluster_state.quantity import QuantityError, format_quantity, parse_quantity
from ha.errors import BadInput

__all__ = [
    "ScenarioError", "ClusterObjects", "HyperNodeCache", "build_objects", "new_context", "node_object",
    "queue_object", "podgroup_object", "pod_object", "priority_class_object", "hypernode_object",
    "parse_hypernodes", "scenario_amount", "GROUP_NAME_ANNOTATION", "POD_PHASES", "PG_PHASES",
    "QUEUE_STATES", "PREEMPTION_POLICIES",
]


GROUP_NAME_ANNOTATION = "scheduling.k8s.io/group-name"
# the Go tests' pods have zero creation timestamps; a deleting pod just needs a timestamp
ZERO_TIME = 0.0
DELETION_TIME = 1.0

POD_PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")
PG_PHASES = ("Pending", "Inqueue", "Running", "Unknown", "Completed")
QUEUE_STATES = ("Open", "Closed", "Closing", "Unknown")
PREEMPTION_POLICIES = ("PreemptLowerPriority", "Never")


class ScenarioError(BadInput):
    """A bad scenario file; the message is ``<file>: <field>: <problem>``."""

    def __init__(self, path: str, field_: str, problem: str):
        self.path, self.field, self.problem = path, field_, problem
        super().__init__(f"{path}: {field_}: {problem}" if field_ else f"{path}: {problem}")


@dataclass
class ClusterObjects:
    """A cluster's objects by kind: a scenario file's, a bug repro's, an experiment's starting
    objects (``ha.experiment.objects.starting_objects``). Created in the order of
    :meth:`in_order`."""
    nodes: list[dict] = field(default_factory=list)
    queues: list[dict] = field(default_factory=list)
    podgroups: list[dict] = field(default_factory=list)
    pods: list[dict] = field(default_factory=list)
    priority_classes: list[dict] = field(default_factory=list)
    # HyperNode objects, and the Go harness's injected hypernode cache (None: derive it)
    hyper_nodes: list[dict] = field(default_factory=list)
    hyper_node_cache: "HyperNodeCache | None" = None
    # hypernode -> its ``parent`` option (api.ParentOpt; used with hyper_node_cache)
    hyper_node_parents: dict[str, str] = field(default_factory=dict)

    def in_order(self) -> list[dict]:
        """Every object in creation order: priority classes, queues, nodes, hypernodes,
        podgroups, pods (what an object refers to exists before it)."""
        return (self.priority_classes + self.queues + self.nodes + self.hyper_nodes + self.podgroups
                + self.pods)

    def counts(self) -> dict[str, int]:
        return {"PriorityClass": len(self.priority_classes), "Queue": len(self.queues),
                "Node": len(self.nodes), "HyperNode": len(self.hyper_nodes),
                "PodGroup": len(self.podgroups), "Pod": len(self.pods)}




# ------------------------------------------------------------------------------------ helpers

class _Ctx:
    """The file being read and a running resourceVersion for the objects built from it."""

    def __init__(self, path: str):
        self.path = path
        self.rv = 0

    def err(self, field_: str, problem: str) -> ScenarioError:
        return ScenarioError(self.path, field_, problem)

    def next_rv(self) -> int:
        self.rv += 1
        return self.rv


def _typename(v: Any) -> str:
    return "null" if v is None else {dict: "object", list: "list", str: "string", bool: "boolean",
                                     int: "integer", float: "number"}.get(type(v), type(v).__name__)


def _req(ctx: _Ctx, obj: dict, key: str, where: str) -> Any:
    if key not in obj:
        raise ctx.err(f"{where}.{key}" if where else key, "missing required field")
    return obj[key]


def _str(ctx: _Ctx, v: Any, where: str, *, allow_empty: bool = True, nullable: bool = False) -> str:
    if v is None and nullable:
        return ""
    if not isinstance(v, str):
        raise ctx.err(where, f"expected a string, got {_typename(v)}")
    if not allow_empty and not v:
        raise ctx.err(where, "must not be empty")
    return v


def _int(ctx: _Ctx, v: Any, where: str, *, minimum: int | None = None, nullable: bool = False) -> int | None:
    if v is None and nullable:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        else:
            raise ctx.err(where, f"expected an integer, got {_typename(v)} {v!r}")
    if minimum is not None and v < minimum:
        raise ctx.err(where, f"must be >= {minimum}, got {v}")
    return v


def _bool(ctx: _Ctx, v: Any, where: str, *, nullable: bool = False) -> bool | None:
    if v is None and nullable:
        return None
    if not isinstance(v, bool):
        raise ctx.err(where, f"expected true or false, got {_typename(v)} {v!r}")
    return v


def _obj(ctx: _Ctx, v: Any, where: str, *, nullable: bool = False) -> dict | None:
    if v is None and nullable:
        return None
    if not isinstance(v, dict):
        raise ctx.err(where, f"expected an object, got {_typename(v)}")
    return v


def _list(ctx: _Ctx, v: Any, where: str, *, nullable: bool = False) -> list:
    if v is None and nullable:
        return []
    if not isinstance(v, list):
        raise ctx.err(where, f"expected a list, got {_typename(v)}")
    return v


def _str_map(ctx: _Ctx, v: Any, where: str) -> dict[str, str]:
    m = _obj(ctx, v, where, nullable=True) or {}
    for k, val in m.items():
        if not isinstance(val, str):
            raise ctx.err(f"{where}.{k}", f"expected a string value, got {_typename(val)}")
    return dict(m)


def _one_of(ctx: _Ctx, v: Any, where: str, allowed: tuple[str, ...]) -> str:
    s = _str(ctx, v, where)
    if s not in allowed:
        raise ctx.err(where, f"unknown value {s!r}; expected one of {', '.join(allowed)}")
    return s


def scenario_amount(name: str, value: Any) -> int:
    """A scenario quantity in plain units: a number is millicores for cpu and base units
    otherwise; a string is a Kubernetes quantity ("2", "500m", "1Gi")."""
    if isinstance(value, bool):
        raise QuantityError(name, value, "a boolean is not a quantity")
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            raise QuantityError(name, value, "not a finite number")
        if value < 0:
            raise QuantityError(name, value, "negative quantity")
        return int(math.ceil(value))
    if isinstance(value, str):
        return parse_quantity(name, value)
    raise QuantityError(name, value, f"expected a number or a quantity string, not {_typename(value)}")


def _resources(ctx: _Ctx, v: Any, where: str, *, nullable: bool = False) -> dict[str, str] | None:
    """A resource map in plain units -> the normalised stored form ({"cpu": "1000m", ...})."""
    if v is None and nullable:
        return None
    m = _obj(ctx, v, where)
    out: dict[str, str] = {}
    for name, value in m.items():
        if not name:
            raise ctx.err(where, "resource names must be non-empty")
        try:
            out[name] = format_quantity(name, scenario_amount(name, value))
        except QuantityError as e:
            raise ctx.err(f"{where}.{name}", f"{e.why} (got {value!r})") from None
    return out


def _unique(ctx: _Ctx, seen: set, key: Any, where: str, what: str) -> None:
    if key in seen:
        # a key is (kind, [namespace,] name): the message names the object, not the kind tag
        raise ctx.err(where, f"duplicate {what} {key!r}" if not isinstance(key, tuple)
                      else f"duplicate {what} {'/'.join(key[1:])!r}")
    seen.add(key)


# Every field a starting object may hold, per kind. A field not listed is an error (a misspelt or
# unsupported field used to be ignored without a word). The PodGroup's ``networkTopology`` /
# ``annotations`` belong to the network-topology part of the format (docs/design.md, scenario
# files item 1), read by their own functions.
NODE_FIELDS = ("name", "allocatable", "capacity", "labels", "unschedulable", "taints")
QUEUE_FIELDS = ("name", "weight", "capability", "deserved", "guarantee", "priority", "state",
                "reclaimable", "parent")
PODGROUP_FIELDS = ("name", "namespace", "job_id", "queue", "minMember", "minTaskMember", "phase",
                   "priorityClassName", "minResources", "networkTopology", "annotations")
# preemptable / bestEffort are derived fields of the format (docs/volcano-semantics.md §16.1)
POD_FIELDS = ("namespace", "name", "key", "podgroup", "request", "phase", "nodeName", "priority",
              "priorityClassName", "nominatedNodeName", "deletionTimestamp", "labels", "nodeSelector",
              "preemptionPolicy", "annotations", "preemptable", "taskRole", "bestEffort", "tolerations",
              "affinity")
PRIORITY_CLASS_FIELDS = ("name", "value", "globalDefault", "preemptionPolicy")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
NODE_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
LABEL_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


def _known_fields(ctx: _Ctx, obj: dict, where: str, known: tuple[str, ...]) -> None:
    """Reject any key of ``obj`` not in ``known`` (the first one, in file order)."""
    for k in obj:
        if k not in known:
            raise ctx.err(f"{where}.{k}" if where else str(k),
                          f"unknown field {k!r}; known fields: {', '.join(known)}")


# ------------------------------------------------------------- taints, tolerations, affinity

def _taints(ctx: _Ctx, v: Any, where: str) -> list[dict]:
    out = []
    for i, t in enumerate(_list(ctx, v, where, nullable=True)):
        w = f"{where}[{i}]"
        t = _obj(ctx, t, w)
        _known_fields(ctx, t, w, ("key", "value", "effect"))
        out.append({"key": _str(ctx, _req(ctx, t, "key", w), f"{w}.key", allow_empty=False),
                    "value": _str(ctx, t.get("value"), f"{w}.value", nullable=True),
                    "effect": _one_of(ctx, _req(ctx, t, "effect", w), f"{w}.effect", TAINT_EFFECTS)})
    return out


def _tolerations(ctx: _Ctx, v: Any, where: str) -> list[dict]:
    out = []
    for i, t in enumerate(_list(ctx, v, where, nullable=True)):
        w = f"{where}[{i}]"
        t = _obj(ctx, t, w)
        _known_fields(ctx, t, w, ("key", "operator", "value", "effect", "tolerationSeconds"))
        op = t.get("operator")
        op = "Equal" if op in (None, "") else _one_of(ctx, op, f"{w}.operator", ("Equal", "Exists"))
        effect = t.get("effect")
        effect = "" if effect in (None, "") else _one_of(ctx, effect, f"{w}.effect", TAINT_EFFECTS)
        key = _str(ctx, t.get("key"), f"{w}.key", nullable=True)
        value = _str(ctx, t.get("value"), f"{w}.value", nullable=True)
        if op == "Exists" and value:
            raise ctx.err(f"{w}.value", "must be empty when operator is Exists")
        if not key and op != "Exists":
            raise ctx.err(f"{w}.operator", "an empty key needs operator Exists")
        tol = {"key": key, "operator": op, "value": value, "effect": effect}
        secs = _int(ctx, t.get("tolerationSeconds"), f"{w}.tolerationSeconds", nullable=True)
        if secs is not None:
            tol["tolerationSeconds"] = secs
        out.append(tol)
    return out


def _requirement(ctx: _Ctx, e: Any, where: str, operators: tuple[str, ...]) -> dict:
    e = _obj(ctx, e, where)
    _known_fields(ctx, e, where, ("key", "operator", "values"))
    key = _str(ctx, _req(ctx, e, "key", where), f"{where}.key", allow_empty=False)
    op = _one_of(ctx, _req(ctx, e, "operator", where), f"{where}.operator", operators)
    values = [_str(ctx, x, f"{where}.values[{j}]")
              for j, x in enumerate(_list(ctx, e.get("values"), f"{where}.values", nullable=True))]
    if op in ("In", "NotIn") and not values:
        raise ctx.err(f"{where}.values", f"operator {op} needs at least one value")
    if op in ("Exists", "DoesNotExist") and values:
        raise ctx.err(f"{where}.values", f"must be empty for operator {op}")
    if op in ("Gt", "Lt"):
        if len(values) != 1:
            raise ctx.err(f"{where}.values", f"operator {op} needs exactly one value")
        try:
            int(values[0])
        except ValueError:
            raise ctx.err(f"{where}.values[0]", f"operator {op} needs an integer, got {values[0]!r}") from None
    return {"key": key, "operator": op, "values": values}


def _node_selector_term(ctx: _Ctx, v: Any, where: str) -> dict:
    t = _obj(ctx, v, where)
    _known_fields(ctx, t, where, ("matchExpressions", "matchFields"))
    out: dict[str, Any] = {}
    for fld in ("matchExpressions", "matchFields"):
        if t.get(fld) is not None:
            out[fld] = [_requirement(ctx, e, f"{where}.{fld}[{j}]", NODE_SELECTOR_OPERATORS)
                        for j, e in enumerate(_list(ctx, t[fld], f"{where}.{fld}"))]
    for j, e in enumerate(out.get("matchFields") or ()):
        if e["key"] != "metadata.name":
            raise ctx.err(f"{where}.matchFields[{j}].key", "only metadata.name is supported")
    return out


def _label_selector(ctx: _Ctx, v: Any, where: str) -> dict | None:
    if v is None:
        return None  # a nil selector matches nothing
    s = _obj(ctx, v, where)
    _known_fields(ctx, s, where, ("matchLabels", "matchExpressions"))
    out: dict[str, Any] = {}
    if s.get("matchLabels") is not None:
        out["matchLabels"] = _str_map(ctx, s["matchLabels"], f"{where}.matchLabels")
    if s.get("matchExpressions") is not None:
        out["matchExpressions"] = [
            _requirement(ctx, e, f"{where}.matchExpressions[{j}]", LABEL_SELECTOR_OPERATORS)
            for j, e in enumerate(_list(ctx, s["matchExpressions"], f"{where}.matchExpressions"))]
    return out


def _pod_affinity_term(ctx: _Ctx, v: Any, where: str) -> dict:
    t = _obj(ctx, v, where)
    _known_fields(ctx, t, where, ("labelSelector", "topologyKey", "namespaces"))
    out: dict[str, Any] = {
        "labelSelector": _label_selector(ctx, t.get("labelSelector"), f"{where}.labelSelector"),
        "topologyKey": _str(ctx, _req(ctx, t, "topologyKey", where), f"{where}.topologyKey",
                            allow_empty=False)}
    if t.get("namespaces") is not None:
        out["namespaces"] = [_str(ctx, n, f"{where}.namespaces[{j}]", allow_empty=False)
                             for j, n in enumerate(_list(ctx, t["namespaces"], f"{where}.namespaces"))]
    return out


def _weight(ctx: _Ctx, v: Any, where: str) -> int:
    w = _int(ctx, v, where)
    if not 1 <= w <= 100:
        raise ctx.err(where, f"must be in 1..100, got {w}")
    return w


def _weighted_terms(ctx: _Ctx, v: Any, where: str, term_field: str, read_term: Any) -> list[dict]:
    """A preferred... list: ``[{weight: 1..100, <term_field>: term}]``."""
    out = []
    for j, p in enumerate(_list(ctx, v, where)):
        wp = f"{where}[{j}]"
        p = _obj(ctx, p, wp)
        _known_fields(ctx, p, wp, ("weight", term_field))
        out.append({"weight": _weight(ctx, _req(ctx, p, "weight", wp), f"{wp}.weight"),
                    term_field: read_term(ctx, _req(ctx, p, term_field, wp), f"{wp}.{term_field}")})
    return out


_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
_PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


def _affinity(ctx: _Ctx, v: Any, where: str) -> dict | None:
    """Kubernetes ``core/v1`` Affinity, validated field by field (docs/design.md, scenario files item 3)."""
    a = _obj(ctx, v, where, nullable=True)
    if a is None:
        return None
    _known_fields(ctx, a, where, ("nodeAffinity", "podAffinity", "podAntiAffinity"))
    out: dict[str, Any] = {}
    if a.get("nodeAffinity") is not None:
        w = f"{where}.nodeAffinity"
        na = _obj(ctx, a["nodeAffinity"], w)
        _known_fields(ctx, na, w, (_REQUIRED, _PREFERRED))
        o: dict[str, Any] = {}
        if na.get(_REQUIRED) is not None:
            wr = f"{w}.{_REQUIRED}"
            req = _obj(ctx, na[_REQUIRED], wr)
            _known_fields(ctx, req, wr, ("nodeSelectorTerms",))
            o[_REQUIRED] = {"nodeSelectorTerms": [
                _node_selector_term(ctx, t, f"{wr}.nodeSelectorTerms[{j}]")
                for j, t in enumerate(_list(ctx, _req(ctx, req, "nodeSelectorTerms", wr),
                                            f"{wr}.nodeSelectorTerms"))]}
        if na.get(_PREFERRED) is not None:
            o[_PREFERRED] = _weighted_terms(ctx, na[_PREFERRED], f"{w}.{_PREFERRED}", "preference",
                                            _node_selector_term)
        out["nodeAffinity"] = o
    for kind in ("podAffinity", "podAntiAffinity"):
        if a.get(kind) is None:
            continue
        w = f"{where}.{kind}"
        pa = _obj(ctx, a[kind], w)
        _known_fields(ctx, pa, w, (_REQUIRED, _PREFERRED))
        o = {}
        if pa.get(_REQUIRED) is not None:
            o[_REQUIRED] = [_pod_affinity_term(ctx, t, f"{w}.{_REQUIRED}[{j}]")
                            for j, t in enumerate(_list(ctx, pa[_REQUIRED], f"{w}.{_REQUIRED}"))]
        if pa.get(_PREFERRED) is not None:
            o[_PREFERRED] = _weighted_terms(ctx, pa[_PREFERRED], f"{w}.{_PREFERRED}", "podAffinityTerm",
                                            _pod_affinity_term)
        out[kind] = o
    return out


# ----------------------------------------------------------------------------- object builders

def node_object(ctx: _Ctx, spec: Any, where: str) -> dict:
    spec = _obj(ctx, spec, where)
    _known_fields(ctx, spec, where, NODE_FIELDS)
    name = _str(ctx, _req(ctx, spec, "name", where), f"{where}.name", allow_empty=False)
    alloc = _resources(ctx, _req(ctx, spec, "allocatable", where), f"{where}.allocatable")
    cap = _resources(ctx, spec.get("capacity"), f"{where}.capacity", nullable=True)
    labels = _str_map(ctx, spec.get("labels"), f"{where}.labels")
    unsched = _bool(ctx, spec.get("unschedulable", False), f"{where}.unschedulable")
    node_spec: dict[str, Any] = {"unschedulable": unsched}
    taints = _taints(ctx, spec.get("taints"), f"{where}.taints")
    if taints:
        node_spec["taints"] = taints
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "uid": name, "resourceVersion": ctx.next_rv(),
                     "creationTimestamp": ZERO_TIME, "labels": labels, "annotations": {}},
        "spec": node_spec,
        "status": {"allocatable": alloc, "capacity": cap if cap is not None else dict(alloc),
                   "conditions": [{"type": "Ready", "status": "True"}]},
    }


def queue_object(ctx: _Ctx, spec: Any, where: str) -> dict:
    spec = _obj(ctx, spec, where)
    _known_fields(ctx, spec, where, QUEUE_FIELDS)
    name = _str(ctx, _req(ctx, spec, "name", where), f"{where}.name", allow_empty=False)
    weight = _int(ctx, spec.get("weight", 1), f"{where}.weight", minimum=0)
    guarantee = spec.get("guarantee")
    if guarantee is not None:
        g = _obj(ctx, guarantee, f"{where}.guarantee")
        # accept both {"resource": {...}} (the API shape) and a bare resource map
        if set(g) == {"resource"}:
            guarantee = {"resource": _resources(ctx, g["resource"], f"{where}.guarantee.resource")}
        else:
            guarantee = {"resource": _resources(ctx, g, f"{where}.guarantee")}
    state = spec.get("state") or "Open"
    parent = _str(ctx, spec.get("parent"), f"{where}.parent", nullable=True)
    if parent == name:
        raise ctx.err(f"{where}.parent", f"queue {name!r} cannot be its own parent")
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
        "metadata": {"name": name, "uid": name, "resourceVersion": ctx.next_rv(),
                     "creationTimestamp": ZERO_TIME, "labels": {}, "annotations": {}},
        "spec": {
            "weight": weight,
            "capability": _resources(ctx, spec.get("capability"), f"{where}.capability", nullable=True),
            "deserved": _resources(ctx, spec.get("deserved"), f"{where}.deserved", nullable=True),
            "guarantee": guarantee,
            "reclaimable": _bool(ctx, spec.get("reclaimable"), f"{where}.reclaimable", nullable=True),
            "priority": _int(ctx, spec.get("priority", 0) or 0, f"{where}.priority"),
            "parent": parent,
        },
        "status": {"state": _one_of(ctx, state, f"{where}.state", QUEUE_STATES)},
    }


def podgroup_object(ctx: _Ctx, spec: Any, where: str) -> dict:
    spec = _obj(ctx, spec, where)
    _known_fields(ctx, spec, where, PODGROUP_FIELDS)
    name = _str(ctx, _req(ctx, spec, "name", where), f"{where}.name", allow_empty=False)
    ns = _str(ctx, _req(ctx, spec, "namespace", where), f"{where}.namespace", allow_empty=False)
    job_id = spec.get("job_id")
    if job_id is not None and job_id != f"{ns}/{name}":
        raise ctx.err(f"{where}.job_id", f"{job_id!r} does not match namespace/name {ns}/{name}")
    mtm = _obj(ctx, spec.get("minTaskMember"), f"{where}.minTaskMember", nullable=True) or {}
    for role, n in mtm.items():
        _int(ctx, n, f"{where}.minTaskMember.{role}", minimum=0)
    phase = spec.get("phase") or "Pending"
    extra: dict[str, Any] = {}
    if spec.get("networkTopology") is not None:
        extra["networkTopology"] = _network_topology(ctx, spec["networkTopology"], f"{where}.networkTopology")
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": name, "namespace": ns, "uid": f"{ns}-{name}",
                     "resourceVersion": ctx.next_rv(), "creationTimestamp": ZERO_TIME,
                     "labels": {}, "annotations": _str_map(ctx, spec.get("annotations"), f"{where}.annotations")},
        "spec": {
            "minMember": _int(ctx, spec.get("minMember", 0), f"{where}.minMember", minimum=0),
            "minTaskMember": dict(mtm),
            "queue": _str(ctx, _req(ctx, spec, "queue", where), f"{where}.queue", allow_empty=False),
            "priorityClassName": _str(ctx, spec.get("priorityClassName"), f"{where}.priorityClassName",
                                      nullable=True),
            "minResources": _resources(ctx, spec.get("minResources"), f"{where}.minResources", nullable=True),
            **extra,
        },
        "status": {"phase": _one_of(ctx, phase, f"{where}.phase", PG_PHASES), "conditions": [],
                   "running": 0, "succeeded": 0, "failed": 0},
    }


def _network_topology(ctx: _Ctx, v: Any, where: str) -> dict:
    """PodGroup ``spec.networkTopology`` (docs/design.md, scenario files item 1): ``mode`` hard | soft | "" (absent:
    the CRD default ``hard``), ``highestTierAllowed`` int >= 0 (absent: nil — kept out of the
    object), ``highestTierName`` (absent: "")."""
    nt = _obj(ctx, v, where)
    for k in nt:
        if k not in ("mode", "highestTierAllowed", "highestTierName"):
            raise ctx.err(f"{where}.{k}", "unknown field; expected mode, highestTierAllowed and highestTierName")
    out: dict[str, Any] = {"mode": _one_of(ctx, nt.get("mode", "hard"), f"{where}.mode", ("hard", "soft", ""))}
    tier = _int(ctx, nt.get("highestTierAllowed"), f"{where}.highestTierAllowed", minimum=0, nullable=True)
    if tier is not None:
        out["highestTierAllowed"] = tier
    name = _str(ctx, nt.get("highestTierName"), f"{where}.highestTierName", nullable=True)
    if name:
        out["highestTierName"] = name
    return out


def pod_object(ctx: _Ctx, spec: Any, where: str) -> dict:
    spec = _obj(ctx, spec, where)
    _known_fields(ctx, spec, where, POD_FIELDS)
    name = _str(ctx, _req(ctx, spec, "name", where), f"{where}.name", allow_empty=False)
    ns = _str(ctx, _req(ctx, spec, "namespace", where), f"{where}.namespace", allow_empty=False)
    key = spec.get("key")
    if key is not None and key != f"{ns}/{name}":
        raise ctx.err(f"{where}.key", f"{key!r} does not match namespace/name {ns}/{name}")
    # a pod without a podgroup belongs to no job (the cache keeps it on its node only)
    group = _str(ctx, spec.get("podgroup"), f"{where}.podgroup", nullable=True)
    request = _resources(ctx, spec.get("request") or {}, f"{where}.request")
    labels = _str_map(ctx, spec.get("labels"), f"{where}.labels")
    annotations = _str_map(ctx, spec.get("annotations"), f"{where}.annotations")
    if group:
        annotations[GROUP_NAME_ANNOTATION] = group
    # derived fields of the scenario format (docs/volcano-semantics.md §16.1) must agree with what
    # they derive from
    if "taskRole" in spec and spec["taskRole"] and "volcano.sh/task-spec" not in labels \
            and "volcano.sh/task-spec" not in annotations:
        annotations["volcano.sh/task-spec"] = _str(ctx, spec["taskRole"], f"{where}.taskRole")
    deleting = _bool(ctx, spec.get("deletionTimestamp", False), f"{where}.deletionTimestamp", nullable=True)
    policy = spec.get("preemptionPolicy")
    policy = "PreemptLowerPriority" if policy is None else _one_of(
        ctx, policy, f"{where}.preemptionPolicy", PREEMPTION_POLICIES)
    for fld in ("preemptable", "bestEffort"):
        _bool(ctx, spec.get(fld), f"{where}.{fld}", nullable=True)
    pod_spec_extra: dict[str, Any] = {}
    tolerations = _tolerations(ctx, spec.get("tolerations"), f"{where}.tolerations")
    if tolerations:
        pod_spec_extra["tolerations"] = tolerations
    affinity = _affinity(ctx, spec.get("affinity"), f"{where}.affinity")
    if affinity:
        pod_spec_extra["affinity"] = affinity
    meta = {"name": name, "namespace": ns, "uid": f"{ns}-{name}", "resourceVersion": ctx.next_rv(),
            "creationTimestamp": ZERO_TIME, "labels": labels, "annotations": annotations}
    if deleting:
        meta["deletionTimestamp"] = DELETION_TIME
        meta["deletionGracePeriodSeconds"] = 30
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": meta,
        "spec": {
            "schedulerName": "volcano",
            "nodeName": _str(ctx, spec.get("nodeName"), f"{where}.nodeName", nullable=True),
            "priority": _int(ctx, spec.get("priority"), f"{where}.priority", nullable=True),
            "priorityClassName": _str(ctx, spec.get("priorityClassName"), f"{where}.priorityClassName",
                                      nullable=True),
            "preemptionPolicy": policy,
            "nodeSelector": _str_map(ctx, spec.get("nodeSelector"), f"{where}.nodeSelector"),
            "containers": [{"name": "main", "resources": {"requests": request}}],
            "initContainers": [],
            "terminationGracePeriodSeconds": 30,
            **pod_spec_extra,
        },
        "status": {
            "phase": _one_of(ctx, spec.get("phase") or "Pending", f"{where}.phase", POD_PHASES),
            "nominatedNodeName": _str(ctx, spec.get("nominatedNodeName"), f"{where}.nominatedNodeName",
                                      nullable=True),
            "conditions": [],
        },
    }


def priority_class_object(ctx: _Ctx, spec: Any, where: str) -> dict:
    spec = _obj(ctx, spec, where)
    _known_fields(ctx, spec, where, PRIORITY_CLASS_FIELDS)
    name = _str(ctx, _req(ctx, spec, "name", where), f"{where}.name", allow_empty=False)
    policy = spec.get("preemptionPolicy")
    return {
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": {"name": name, "uid": name, "resourceVersion": ctx.next_rv(),
                     "creationTimestamp": ZERO_TIME, "labels": {}, "annotations": {}},
        "value": _int(ctx, _req(ctx, spec, "value", where), f"{where}.value"),
        "globalDefault": bool(_bool(ctx, spec.get("globalDefault", False), f"{where}.globalDefault")),
        "preemptionPolicy": "PreemptLowerPriority" if policy is None else _one_of(
            ctx, policy, f"{where}.preemptionPolicy", PREEMPTION_POLICIES),
    }


def _check_queue_tree(ctx: _Ctx, queues: list[dict], where: str) -> None:
    """Every ``parent`` names a queue of the file, and following parents never loops."""
    parents = {q["metadata"]["name"]: q["spec"].get("parent") or "" for q in queues}
    for i, q in enumerate(queues):
        name, parent = q["metadata"]["name"], parents[q["metadata"]["name"]]
        if parent and parent not in parents:
            raise ctx.err(f"{where}[{i}].parent", f"unknown queue {parent!r}; queues: "
                          f"{', '.join(sorted(parents))}")
        seen, cur = [name], parent
        while cur:
            if cur in seen:
                raise ctx.err(f"{where}[{i}].parent", f"queue hierarchy has a cycle: "
                              f"{' -> '.join(seen + [cur])}")
            seen.append(cur)
            cur = parents.get(cur, "")


def build_objects(ctx: _Ctx, spec: dict, prefix: str = "", *, priority_classes: Any = None,
                  default_queue: str = "default", strict: bool = True) -> ClusterObjects:
    """nodes / queues / podgroups / pods (and priority classes) of a scenario or a bug repro's
    ``initial`` section, validated and cross-checked."""
    p = f"{prefix}." if prefix else ""
    out = ClusterObjects()
    seen: set = set()
    for i, n in enumerate(_list(ctx, _req(ctx, spec, "nodes", prefix), f"{p}nodes")):
        o = node_object(ctx, n, f"{p}nodes[{i}]")
        _unique(ctx, seen, ("node", o["metadata"]["name"]), f"{p}nodes[{i}].name", "node")
        out.nodes.append(o)
    for i, q in enumerate(_list(ctx, spec.get("queues"), f"{p}queues", nullable=True)):
        o = queue_object(ctx, q, f"{p}queues[{i}]")
        _unique(ctx, seen, ("queue", o["metadata"]["name"]), f"{p}queues[{i}].name", "queue")
        out.queues.append(o)
    pcs = spec.get("priority_classes") if priority_classes is None else priority_classes
    for i, pc in enumerate(_list(ctx, pcs, f"{p}priority_classes" if priority_classes is None
                                 else "priority_classes", nullable=True)):
        o = priority_class_object(ctx, pc, f"{p}priority_classes[{i}]" if priority_classes is None
                                  else f"priority_classes[{i}]")
        _unique(ctx, seen, ("pc", o["metadata"]["name"]), f"priority_classes[{i}].name", "priority class")
        out.priority_classes.append(o)
    queue_names = {q["metadata"]["name"] for q in out.queues}
    if strict:
        _check_queue_tree(ctx, out.queues, f"{p}queues")
    for i, g in enumerate(_list(ctx, spec.get("podgroups"), f"{p}podgroups", nullable=True)):
        o = podgroup_object(ctx, g, f"{p}podgroups[{i}]")
        m = o["metadata"]
        _unique(ctx, seen, ("pg", m["namespace"], m["name"]), f"{p}podgroups[{i}].name", "podgroup")
        q = o["spec"]["queue"]
        # the default queue exists in every cluster (Volcano's controller creates it)
        if strict and q not in queue_names and q != default_queue:
            raise ctx.err(f"{p}podgroups[{i}].queue", f"unknown queue {q!r}; queues: "
                          f"{', '.join(sorted(queue_names)) or '(none)'}")
        out.podgroups.append(o)
    node_names = {n["metadata"]["name"] for n in out.nodes}
    groups = {(g["metadata"]["namespace"], g["metadata"]["name"]) for g in out.podgroups}
    for i, pod in enumerate(_list(ctx, _req(ctx, spec, "pods", prefix), f"{p}pods")):
        o = pod_object(ctx, pod, f"{p}pods[{i}]")
        m = o["metadata"]
        _unique(ctx, seen, ("pod", m["namespace"], m["name"]), f"{p}pods[{i}].name", "pod")
        group = m["annotations"].get(GROUP_NAME_ANNOTATION)
        if strict and group and (m["namespace"], group) not in groups:
            raise ctx.err(f"{p}pods[{i}].podgroup", f"unknown podgroup {m['namespace']}/{group}")
        for fld, val in (("nodeName", o["spec"]["nodeName"]), ("nominatedNodeName", o["status"]["nominatedNodeName"])):
            if strict and val and val not in node_names:
                raise ctx.err(f"{p}pods[{i}].{fld}", f"unknown node {val!r}")
        out.pods.append(o)
    parse_hypernodes(ctx, spec, out, prefix)
    return out


# ------------------------------------------------------------------------------------ hypernodes
# docs/design.md, scenario files item 1: top-level ``hypernodes`` (HyperNode objects) and ``hypernode_cache`` (the Go
# harness's injected tier sets and real-node sets); item 4's ``expected.bind_check`` and
# ``bind_counts_by_hypernode`` are read with the rest of ``expected``.


@dataclass
class HyperNodeCache:
    """What the Go harness hands ``NewHyperNodesInfoWithCache``: tier -> hypernode names and
    hypernode -> node names, verbatim."""
    set_by_tier: dict[int, list[str]]
    real_nodes: dict[str, list[str]]


def hypernode_object(ctx: _Ctx, spec: Any, where: str) -> tuple[dict, str]:
    """One ``hypernodes[i]`` entry -> (HyperNode object validated as the API server does, the
    ``parent`` option or "")."""
    from cluster_state.errors import ApiError
    from cluster_state.objects import normalise
    spec = _obj(ctx, spec, where)
    for k in spec:
        if k not in ("name", "tier", "tierName", "members", "parent"):
            raise ctx.err(f"{where}.{k}", "unknown field; expected name, tier, tierName, members, parent")
    name = _str(ctx, _req(ctx, spec, "name", where), f"{where}.name", allow_empty=False)
    tier = _int(ctx, _req(ctx, spec, "tier", where), f"{where}.tier", minimum=0)
    obj = {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
           "metadata": {"name": name, "uid": name, "resourceVersion": ctx.next_rv(),
                        "creationTimestamp": ZERO_TIME, "labels": {}, "annotations": {}},
           "spec": {"tier": tier, "tierName": _str(ctx, spec.get("tierName"), f"{where}.tierName", nullable=True),
                    "members": _list(ctx, spec.get("members"), f"{where}.members", nullable=True)},
           "status": {}}
    try:
        obj, _, _ = normalise(obj)
    except ApiError as e:
        fld = getattr(e, "field", "") or ""
        fld = fld[len("spec."):] if fld.startswith("spec.") else fld
        raise ctx.err(f"{where}.{fld}" if fld else where, str(getattr(e, "message", "") or e)) from None
    parent = _str(ctx, spec.get("parent"), f"{where}.parent", nullable=True)
    return obj, parent


def parse_hypernodes(ctx: _Ctx, d: dict, objects: ClusterObjects, prefix: str = "") -> None:
    """``hypernodes`` and ``hypernode_cache`` of a scenario (or an ``initial`` section) into
    ``objects``; names are unique, parents name hypernodes of the file."""
    p = f"{prefix}." if prefix else ""
    names: list[str] = []
    parents: dict[str, str] = {}
    for i, h in enumerate(_list(ctx, d.get("hypernodes"), f"{p}hypernodes", nullable=True)):
        obj, parent = hypernode_object(ctx, h, f"{p}hypernodes[{i}]")
        name = obj["metadata"]["name"]
        if name in names:
            raise ctx.err(f"{p}hypernodes[{i}].name", f"duplicate hypernode {name!r}")
        names.append(name)
        if parent:
            parents[name] = parent
        objects.hyper_nodes.append(obj)
    for i, name in enumerate(names):
        if name in parents and parents[name] not in names:
            raise ctx.err(f"{p}hypernodes[{i}].parent", f"unknown hypernode {parents[name]!r}; "
                          f"hypernodes: {', '.join(names)}")
    objects.hyper_node_parents = parents
    raw = d.get("hypernode_cache")
    if raw is None:
        return
    w = f"{p}hypernode_cache"
    hc = _obj(ctx, raw, w)
    for k in hc:
        if k not in ("setByTier", "realNodes"):
            raise ctx.err(f"{w}.{k}", "unknown field; expected setByTier and realNodes")
    by_tier: dict[int, list[str]] = {}
    for k, v in (_obj(ctx, hc.get("setByTier"), f"{w}.setByTier", nullable=True) or {}).items():
        try:
            tier = int(k)
        except ValueError:
            raise ctx.err(f"{w}.setByTier.{k}", "keys are tiers written as decimal strings") from None
        by_tier[tier] = [_str(ctx, x, f"{w}.setByTier.{k}[{j}]", allow_empty=False)
                         for j, x in enumerate(_list(ctx, v, f"{w}.setByTier.{k}"))]
    real: dict[str, list[str]] = {}
    for k, v in (_obj(ctx, hc.get("realNodes"), f"{w}.realNodes", nullable=True) or {}).items():
        real[k] = [_str(ctx, x, f"{w}.realNodes.{k}[{j}]", allow_empty=False)
                   for j, x in enumerate(_list(ctx, v, f"{w}.realNodes.{k}"))]
    objects.hyper_node_cache = HyperNodeCache(by_tier, real)





def new_context(path: str) -> _Ctx:
    """A validation context for callers that build objects from their own files (bug repros)."""
    return _Ctx(path)
