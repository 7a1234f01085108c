"""Kinds the API server stores, and their validation + normalisation (docs/object-shapes.md).

``normalise(obj)`` returns a *new* dict in canonical form (quantities normalised, defaults filled)
or raises :class:`Invalid` / :class:`BadRequest` naming the object and the field. Validation is
structural, like an OpenAPI schema: known fields must have the right types; unknown fields are kept.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

from .errors import BadRequest, Invalid
from .quantity import QuantityError, normalise_resources

__all__ = ["KindInfo", "KINDS", "kind_info", "object_key", "normalise", "normalise_status",
           "ref_of", "POD_PHASES", "served_shape", "EVENT_BODY_FIELD"]


@dataclass(frozen=True)
class KindInfo:
    name: str
    api_version: str
    namespaced: bool


KINDS: dict[str, KindInfo] = {k.name: k for k in (
    KindInfo("Node", "v1", False),
    KindInfo("Pod", "v1", True),
    KindInfo("PodGroup", "scheduling.volcano.sh/v1beta1", True),
    KindInfo("Queue", "scheduling.volcano.sh/v1beta1", False),
    KindInfo("PriorityClass", "scheduling.k8s.io/v1", False),
    KindInfo("Lease", "coordination.k8s.io/v1", True),
    KindInfo("HyperNode", "topology.volcano.sh/v1alpha1", False),
    KindInfo("Namespace", "v1", False),
    KindInfo("Event", "v1", True),
)}

POD_PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")
PG_PHASES = ("Pending", "Inqueue", "Running", "Unknown", "Completed")
QUEUE_STATES = ("Open", "Closed", "Closing")
NAMESPACE_PHASES = ("Active", "Terminating")
# A core/v1 Event has up to 17 top-level fields (involvedObject, reason, message, source, count,
# firstTimestamp, ... reportingInstance); the stored layout allows 15. So an Event is stored with
# every field but apiVersion / kind / metadata under this one (an Event has no field of that
# name), and served_shape() puts them back.
EVENT_BODY_FIELD = "spec"
_EVENT_TOP = ("apiVersion", "kind", "metadata", "status", EVENT_BODY_FIELD)
PREEMPTION_POLICIES = ("PreemptLowerPriority", "Never")
# Stored form keeps at most this many top-level fields (the codec's fixed-width layout needs a
# one-byte map header).
MAX_TOP_LEVEL_FIELDS = 15


def kind_info(kind: object, *, namespace: object = None, name: object = None) -> KindInfo:
    info = KINDS.get(kind) if isinstance(kind, str) else None
    if info is None:
        raise BadRequest(f"unknown kind {kind!r}; known kinds: {', '.join(KINDS)}",
                         kind=kind if isinstance(kind, str) else repr(kind),
                         namespace=namespace if isinstance(namespace, str) else None,
                         name=name if isinstance(name, str) else None, field="kind")
    return info


_NAME_RE = re.compile(r"[^/\s]{1,253}")


def _check_name(value: object, what: str, ref: dict) -> str:
    if type(value) is str and _NAME_RE.fullmatch(value):
        return value
    if not isinstance(value, str) or not value:
        raise Invalid(f"{what} is required (a non-empty string), got {value!r}", field=f"metadata.{what}",
                      **ref)
    if "/" in value or len(value) > 253 or any(c.isspace() for c in value):
        raise Invalid(f"{what} {value!r} must be at most 253 characters without '/' or whitespace",
                      field=f"metadata.{what}", **ref)
    return value


def object_key(info: KindInfo, name: object, namespace: object = None) -> str:
    """The object's field in its kind's hash: ``ns/name`` or ``name``."""
    ref = {"kind": info.name, "name": name if isinstance(name, str) else None,
           "namespace": namespace if isinstance(namespace, str) else None}
    name = _check_name(name, "name", ref)
    if info.namespaced:
        namespace = _check_name(namespace, "namespace", ref)
        return f"{namespace}/{name}"
    if namespace not in (None, ""):
        raise Invalid(f"{info.name} is cluster-scoped and takes no namespace (got {namespace!r})",
                      field="metadata.namespace", **ref)
    return name


def ref_of(obj: object) -> dict:
    """kind / namespace / name of a (possibly malformed) object, for error messages."""
    if not isinstance(obj, dict):
        return {}
    md = obj.get("metadata")
    md = md if isinstance(md, dict) else {}
    k, ns, n = obj.get("kind"), md.get("namespace"), md.get("name")
    return {"kind": k if isinstance(k, str) else None, "namespace": ns if isinstance(ns, str) else None,
            "name": n if isinstance(n, str) else None}


_RES_CACHE: dict[tuple, dict[str, str]] = {}


# --- small typed checkers; each raises Invalid naming the field path --------------------------

class _V:
    """Validation context: the object's ref, so every error names the object."""

    def __init__(self, ref: dict):
        self.ref = ref

    def fail(self, path: str, msg: str) -> None:
        raise Invalid(msg, field=path, **self.ref)

    def map(self, v: object, path: str, *, default: Any = None, nullable: bool = False) -> Any:
        if v is None:
            if nullable:
                return None
            return {} if default is None else default
        if not isinstance(v, dict):
            self.fail(path, f"expected a map, got {type(v).__name__}")
        return v

    def str_map(self, v: object, path: str) -> dict[str, str]:
        m = self.map(v, path)
        for k, x in m.items():
            if not isinstance(k, str) or not isinstance(x, str):
                self.fail(f"{path}.{k}", f"expected string keys and values, got {k!r}: {x!r}")
        return dict(m)

    def int(self, v: object, path: str, *, default: Any = None, minimum: int | None = None,
            nullable: bool = False) -> Any:
        if v is None:
            if nullable or default is not None:
                return default
            self.fail(path, "an integer is required")
        if isinstance(v, bool) or not isinstance(v, int):
            self.fail(path, f"expected an integer, got {type(v).__name__} {v!r}")
        if minimum is not None and v < minimum:
            self.fail(path, f"must be >= {minimum}, got {v}")
        return v

    def num(self, v: object, path: str, *, nullable: bool = True) -> Any:
        if v is None and nullable:
            return None
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            self.fail(path, f"expected a number, got {type(v).__name__} {v!r}")
        return v

    def bool(self, v: object, path: str, *, default: Any = False, nullable: bool = False) -> Any:
        if v is None:
            return None if nullable else default
        if not isinstance(v, bool):
            self.fail(path, f"expected a boolean, got {type(v).__name__} {v!r}")
        return v

    def str(self, v: object, path: str, *, default: Any = "", choices: tuple | None = None,
            nullable: bool = False) -> Any:
        if v is None:
            return None if nullable else default
        if not isinstance(v, str):
            self.fail(path, f"expected a string, got {type(v).__name__} {v!r}")
        if choices is not None and v not in choices:
            self.fail(path, f"must be one of {', '.join(choices)}, got {v!r}")
        return v

    def list(self, v: object, path: str) -> list:
        if v is None:
            return []
        if not isinstance(v, list):
            self.fail(path, f"expected a list, got {type(v).__name__}")
        return v

    def resources(self, v: object, path: str, *, nullable: bool = False) -> Any:
        if v is None and nullable:
            return None
        # the same few request shapes repeat across thousands of pods: memoise the parse (only for
        # str/int values, so True or 1.0 never hit the entry of 1)
        ck = None
        if type(v) is dict and all(type(x) is str or type(x) is int for x in v.values()):
            ck = tuple(v.items())
            hit = _RES_CACHE.get(ck)
            if hit is not None:
                return dict(hit)
        try:
            out = normalise_resources(v, path)
        except QuantityError as e:
            raise Invalid(f"{e.why} (got {e.value!r})", field=e.resource, **self.ref) from None
        if ck is not None:
            if len(_RES_CACHE) > 4096:
                _RES_CACHE.clear()
            _RES_CACHE[ck] = out
            return dict(out)
        return out

    def conditions(self, v: object, path: str) -> list:
        out = []
        for i, c in enumerate(self.list(v, path)):
            p = f"{path}[{i}]"
            c = dict(self.map(c, p))
            self.str(c.get("type"), f"{p}.type", default=None)
            if not c.get("type"):
                self.fail(f"{p}.type", "a condition needs a type")
            for f in ("status", "reason", "message"):
                if f in c:
                    c[f] = self.str(c[f], f"{p}.{f}")
            out.append(c)
        return out


# --- per-kind spec / status ---------------------------------------------------------------------

def _containers(v: _V, spec: dict, field: str) -> None:
    if field not in spec:
        return
    out = []
    for i, c in enumerate(v.list(spec[field], f"spec.{field}")):
        p = f"spec.{field}[{i}]"
        c = dict(v.map(c, p))
        if "name" in c:
            v.str(c["name"], f"{p}.name")
        res = dict(v.map(c.get("resources"), f"{p}.resources"))
        for part in ("requests", "limits"):
            if part in res:
                res[part] = v.resources(res[part], f"{p}.resources.{part}")
        c["resources"] = res
        out.append(c)
    spec[field] = out


def _pod_spec(v: _V, spec: dict) -> None:
    spec["schedulerName"] = v.str(spec.get("schedulerName"), "spec.schedulerName", default="volcano")
    spec["nodeName"] = v.str(spec.get("nodeName"), "spec.nodeName")
    if "priority" in spec:
        v.int(spec["priority"], "spec.priority", nullable=True)
    if "priorityClassName" in spec:
        spec["priorityClassName"] = v.str(spec["priorityClassName"], "spec.priorityClassName")
    if "preemptionPolicy" in spec:
        v.str(spec["preemptionPolicy"], "spec.preemptionPolicy", choices=PREEMPTION_POLICIES, nullable=True)
    if "nodeSelector" in spec:
        spec["nodeSelector"] = v.str_map(spec["nodeSelector"], "spec.nodeSelector")
    _containers(v, spec, "containers")
    _containers(v, spec, "initContainers")
    if "schedulingGates" in spec:
        spec["schedulingGates"] = _scheduling_gates(v, spec["schedulingGates"])
        if spec["schedulingGates"] and spec["nodeName"]:
            # validatePodSpec: a gated pod is not scheduled yet
            v.fail("spec.nodeName", "cannot be set until all schedulingGates have been cleared")
    spec["terminationGracePeriodSeconds"] = v.int(spec.get("terminationGracePeriodSeconds"),
                                                  "spec.terminationGracePeriodSeconds", default=30,
                                                  minimum=0)


def _scheduling_gates(v: _V, value: object) -> list:
    """``spec.schedulingGates``: [{name: str}], names non-empty and unique (validateSchedulingGates)."""
    out, seen = [], set()
    for i, g in enumerate(v.list(value, "spec.schedulingGates")):
        p = f"spec.schedulingGates[{i}]"
        if not isinstance(g, dict):
            v.fail(p, f"expected a map with a name, got {type(g).__name__}")
        name = g.get("name")
        if not isinstance(name, str) or not name or any(c.isspace() for c in name):
            v.fail(f"{p}.name", f"a scheduling gate needs a non-empty name without whitespace, got {name!r}")
        if name in seen:
            v.fail(f"{p}.name", f"Duplicate value: {name!r}")
        seen.add(name)
        out.append(dict(g))
    return out


def _pod_status(v: _V, st: dict) -> None:
    st["phase"] = v.str(st.get("phase"), "status.phase", default="Pending", choices=POD_PHASES)
    if "nominatedNodeName" in st:
        st["nominatedNodeName"] = v.str(st["nominatedNodeName"], "status.nominatedNodeName")
    if "conditions" in st:
        st["conditions"] = v.conditions(st["conditions"], "status.conditions")


def _node_spec(v: _V, spec: dict) -> None:
    spec["unschedulable"] = v.bool(spec.get("unschedulable"), "spec.unschedulable")


def _node_status(v: _V, st: dict) -> None:
    for f in ("allocatable", "capacity"):
        if f in st:
            st[f] = v.resources(st[f], f"status.{f}")
    if "conditions" in st:
        st["conditions"] = v.conditions(st["conditions"], "status.conditions")


def _pg_spec(v: _V, spec: dict) -> None:
    spec["minMember"] = v.int(spec.get("minMember"), "spec.minMember", default=1, minimum=0)
    if "minTaskMember" in spec:
        m = v.map(spec["minTaskMember"], "spec.minTaskMember")
        for role, n in m.items():
            if not isinstance(role, str):
                v.fail("spec.minTaskMember", f"role names must be strings, got {role!r}")
            v.int(n, f"spec.minTaskMember.{role}", minimum=0)
        spec["minTaskMember"] = dict(m)
    spec["queue"] = v.str(spec.get("queue"), "spec.queue", default="default")
    if "priorityClassName" in spec:
        spec["priorityClassName"] = v.str(spec["priorityClassName"], "spec.priorityClassName")
    if "minResources" in spec:
        spec["minResources"] = v.resources(spec["minResources"], "spec.minResources", nullable=True)
    if spec.get("networkTopology") is not None:
        spec["networkTopology"] = _network_topology(v, spec["networkTopology"], "spec.networkTopology")


def _pg_status(v: _V, st: dict) -> None:
    st["phase"] = v.str(st.get("phase"), "status.phase", default="Pending", choices=PG_PHASES)
    if "conditions" in st:
        st["conditions"] = v.conditions(st["conditions"], "status.conditions")
    for f in ("running", "succeeded", "failed"):
        if f in st:
            v.int(st[f], f"status.{f}", minimum=0)


def _queue_spec(v: _V, spec: dict) -> None:
    spec["weight"] = v.int(spec.get("weight"), "spec.weight", default=1, minimum=0)
    for f in ("capability", "deserved"):
        if f in spec:
            spec[f] = v.resources(spec[f], f"spec.{f}", nullable=True)
    if spec.get("guarantee") is not None:
        g = dict(v.map(spec["guarantee"], "spec.guarantee"))
        if "resource" in g:
            g["resource"] = v.resources(g["resource"], "spec.guarantee.resource", nullable=True)
        spec["guarantee"] = g
    if "reclaimable" in spec:
        v.bool(spec["reclaimable"], "spec.reclaimable", nullable=True)
    spec["priority"] = v.int(spec.get("priority"), "spec.priority", default=0)


def _queue_status(v: _V, st: dict) -> None:
    st["state"] = v.str(st.get("state"), "status.state", default="Open", choices=QUEUE_STATES)


def _lease_spec(v: _V, spec: dict) -> None:
    if "holderIdentity" in spec:
        v.str(spec["holderIdentity"], "spec.holderIdentity", nullable=True)
    for f in ("leaseDurationSeconds", "leaseTransitions"):
        if f in spec:
            v.int(spec[f], f"spec.{f}", minimum=0, nullable=True)
    for f in ("acquireTime", "renewTime"):
        if f in spec:
            v.num(spec[f], f"spec.{f}")


def _namespace_spec(v: _V, spec: dict) -> None:
    if "finalizers" in spec:
        for i, f in enumerate(v.list(spec["finalizers"], "spec.finalizers")):
            v.str(f, f"spec.finalizers[{i}]")


def _namespace_status(v: _V, st: dict) -> None:
    st["phase"] = v.str(st.get("phase"), "status.phase", default="Active", choices=NAMESPACE_PHASES)


def _event_body(v: _V, body: dict) -> None:
    """The core/v1 Event fields the store looks at (types only; unknown fields are kept)."""
    for f in ("involvedObject", "source", "series", "related"):
        if body.get(f) is not None:
            v.map(body[f], f)
    for f in ("reason", "message", "type", "action", "reportingComponent", "reportingInstance"):
        if f in body:
            v.str(body[f], f, nullable=True)
    if body.get("count") is not None:
        v.int(body["count"], "count", minimum=0)


def _fold_event(obj: dict) -> dict:
    """An Event in its served shape (fields at the top level) -> its stored shape (under
    EVENT_BODY_FIELD); an Event already stored so is returned as is."""
    extra = [k for k in obj if k not in _EVENT_TOP]
    if not extra:
        return obj
    body = obj.get(EVENT_BODY_FIELD)
    body = dict(body) if isinstance(body, dict) else {}
    out = {}
    for k, x in obj.items():
        if k in _EVENT_TOP:
            out[k] = x
        else:
            body[k] = x
    out[EVENT_BODY_FIELD] = body
    return out


def served_shape(obj: dict) -> dict:
    """A stored object in the shape its API serves (a new dict when it differs): an Event's
    fields back at the top level, without the empty ``spec`` / ``status`` the layout adds. Other
    kinds are returned as they are."""
    if not isinstance(obj, dict) or obj.get("kind") != "Event":
        return obj
    body = obj.get(EVENT_BODY_FIELD)
    out = {k: x for k, x in obj.items() if k not in ("status", EVENT_BODY_FIELD)}
    if isinstance(body, dict):
        for k, x in body.items():
            out.setdefault(k, x)
    if obj.get("status"):
        out["status"] = obj["status"]
    return out


MEMBER_TYPES = ("Node", "HyperNode")
SELECTOR_KINDS = ("exactMatch", "regexMatch", "labelMatch")
LABEL_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
NETWORK_TOPOLOGY_MODES = ("hard", "soft", "")


def _label_selector(v: _V, sel: object, path: str) -> dict:
    """A metav1.LabelSelector: matchLabels (string map) and matchExpressions."""
    sel = dict(v.map(sel, path))
    for k in sel:
        if k not in ("matchLabels", "matchExpressions"):
            v.fail(f"{path}.{k}", "unknown field; a label selector has matchLabels and matchExpressions")
    if "matchLabels" in sel:
        sel["matchLabels"] = v.str_map(sel["matchLabels"], f"{path}.matchLabels")
    exprs = []
    for i, e in enumerate(v.list(sel.get("matchExpressions"), f"{path}.matchExpressions")):
        p = f"{path}.matchExpressions[{i}]"
        e = dict(v.map(e, p))
        if not v.str(e.get("key"), f"{p}.key"):
            v.fail(f"{p}.key", "a key is required")
        op = v.str(e.get("operator"), f"{p}.operator", default=None, choices=LABEL_OPERATORS)
        if op is None:
            v.fail(f"{p}.operator", f"an operator is required ({', '.join(LABEL_OPERATORS)})")
        vals = v.list(e.get("values"), f"{p}.values")
        for j, x in enumerate(vals):
            v.str(x, f"{p}.values[{j}]")
        if op in ("In", "NotIn") and not vals:
            v.fail(f"{p}.values", f"operator {op} needs at least one value")
        if op in ("Exists", "DoesNotExist") and vals:
            v.fail(f"{p}.values", f"operator {op} takes no values")
        exprs.append(e)
    if "matchExpressions" in sel:
        sel["matchExpressions"] = exprs
    return sel


def _hyper_node_spec(v: _V, spec: dict) -> None:
    """HyperNode (topology.volcano.sh/v1alpha1): tier >= 0, tierName, members with a type and
    exactly one selector (exactMatch {name} | regexMatch {pattern, a valid regex} | labelMatch)."""
    import re
    if spec.get("tier") is None:
        v.fail("spec.tier", "a tier (integer >= 0) is required")
    spec["tier"] = v.int(spec.get("tier"), "spec.tier", minimum=0)
    spec["tierName"] = v.str(spec.get("tierName"), "spec.tierName")
    members = []
    for i, m in enumerate(v.list(spec.get("members"), "spec.members")):
        p = f"spec.members[{i}]"
        m = dict(v.map(m, p))
        for k in m:
            if k not in ("type", "selector"):
                v.fail(f"{p}.{k}", "unknown field; a member has type and selector")
        if m.get("type") is None:
            v.fail(f"{p}.type", f"a member type is required ({', '.join(MEMBER_TYPES)})")
        v.str(m.get("type"), f"{p}.type", choices=MEMBER_TYPES)
        sel = dict(v.map(m.get("selector"), f"{p}.selector"))
        given = [k for k in sel if sel[k] is not None]
        for k in given:
            if k not in SELECTOR_KINDS:
                v.fail(f"{p}.selector.{k}", f"unknown selector; expected one of {', '.join(SELECTOR_KINDS)}")
        if len(given) != 1:
            v.fail(f"{p}.selector", f"exactly one of {', '.join(SELECTOR_KINDS)} is required, got "
                   f"{', '.join(given) or 'none'}")
        kind = given[0]
        sp = f"{p}.selector.{kind}"
        if kind == "exactMatch":
            ex = v.map(sel[kind], sp)
            if not v.str(ex.get("name"), f"{sp}.name"):
                v.fail(f"{sp}.name", "a name is required")
            sel[kind] = {"name": ex["name"]}
        elif kind == "regexMatch":
            rx = v.map(sel[kind], sp)
            pat = v.str(rx.get("pattern"), f"{sp}.pattern")
            if not pat:
                v.fail(f"{sp}.pattern", "a pattern is required")
            try:
                re.compile(pat)
            except re.error as e:
                v.fail(f"{sp}.pattern", f"not a valid regular expression: {e}")
            sel[kind] = {"pattern": pat}
        else:
            sel[kind] = _label_selector(v, sel[kind], sp)
        members.append({"type": m["type"], "selector": {kind: sel[kind]}})
    spec["members"] = members


def _network_topology(v: _V, nt: object, path: str) -> dict:
    nt = dict(v.map(nt, path))
    nt["mode"] = v.str(nt.get("mode"), f"{path}.mode", default="hard", choices=NETWORK_TOPOLOGY_MODES)
    if nt.get("highestTierAllowed") is not None:
        v.int(nt["highestTierAllowed"], f"{path}.highestTierAllowed", minimum=0)
    if "highestTierName" in nt:
        v.str(nt["highestTierName"], f"{path}.highestTierName")
    return nt


def _priority_class_top(v: _V, obj: dict) -> None:
    obj["value"] = v.int(obj.get("value"), "value")
    obj["globalDefault"] = v.bool(obj.get("globalDefault"), "globalDefault")
    obj["preemptionPolicy"] = v.str(obj.get("preemptionPolicy"), "preemptionPolicy",
                                    default="PreemptLowerPriority", choices=PREEMPTION_POLICIES)


_Fn = Callable[[_V, dict], None]
_SPEC: dict[str, _Fn] = {"Pod": _pod_spec, "Node": _node_spec, "PodGroup": _pg_spec,
                         "Queue": _queue_spec, "Lease": _lease_spec, "HyperNode": _hyper_node_spec,
                         "Namespace": _namespace_spec, "Event": _event_body}
_STATUS: dict[str, _Fn] = {"Pod": _pod_status, "Node": _node_status, "PodGroup": _pg_status,
                           "Queue": _queue_status, "Namespace": _namespace_status}


def _metadata(v: _V, info: KindInfo, md: object) -> tuple[dict, str]:
    md = dict(v.map(md, "metadata"))
    key = object_key(info, md.get("name"), md.get("namespace"))
    if not info.namespaced:
        md.pop("namespace", None)
    for f in ("labels", "annotations"):
        if f in md:
            md[f] = v.str_map(md[f], f"metadata.{f}")
    if "uid" in md and md["uid"] is not None:
        v.str(md["uid"], "metadata.uid")
    if "resourceVersion" in md and md["resourceVersion"] is not None:
        rv = md["resourceVersion"]
        if isinstance(rv, str) and rv.isdigit():  # accept Kubernetes' string form
            md["resourceVersion"] = rv = int(rv)
        v.int(rv, "metadata.resourceVersion", minimum=0)
        if rv >= 2**63:
            v.fail("metadata.resourceVersion", f"out of range: {rv}")
    for f in ("creationTimestamp", "deletionTimestamp"):
        if f in md:
            v.num(md[f], f"metadata.{f}")
    if "deletionGracePeriodSeconds" in md:
        v.int(md["deletionGracePeriodSeconds"], "metadata.deletionGracePeriodSeconds", minimum=0,
              nullable=True)
    if "finalizers" in md:
        fins = v.list(md["finalizers"], "metadata.finalizers")
        for i, f in enumerate(fins):
            if not isinstance(f, str) or not f or any(c.isspace() for c in f):
                v.fail(f"metadata.finalizers[{i}]",
                       f"a finalizer must be a non-empty string without whitespace, got {f!r}")
        md["finalizers"] = list(fins)
    if "ownerReferences" in md:
        for i, o in enumerate(v.list(md["ownerReferences"], "metadata.ownerReferences")):
            v.map(o, f"metadata.ownerReferences[{i}]")
    if "generation" in md:
        v.int(md["generation"], "metadata.generation", minimum=0, nullable=True)
    return md, key


def normalise(obj: object, *, kind: str | None = None) -> tuple[dict, KindInfo, str]:
    """Validate and canonicalise a whole object; returns ``(new_obj, kind_info, key)``.

    The new object is shallow-copied where it is changed (spec, status, metadata), so the caller's
    dict is never mutated.
    """
    ref = ref_of(obj)
    if not isinstance(obj, dict):
        raise BadRequest(f"an object must be a map, got {type(obj).__name__}", field="<object>",
                         kind=kind)
    info = kind_info(obj.get("kind", kind), namespace=ref.get("namespace"), name=ref.get("name"))
    ref["kind"] = info.name
    if info.name == "Event":
        obj = _fold_event(obj)
    v = _V(ref)
    out = dict(obj)
    out["kind"] = info.name
    av = out.get("apiVersion")
    if av is None:
        out["apiVersion"] = info.api_version
    elif av != info.api_version:
        v.fail("apiVersion", f"{info.name} is served as {info.api_version!r}, got {av!r}")
    md, key = _metadata(v, info, obj.get("metadata"))
    out["metadata"] = md
    if info.name == "PriorityClass":
        _priority_class_top(v, out)
        out.pop("spec", None)
    else:
        spec = dict(v.map(out.get("spec"), "spec"))
        fn = _SPEC.get(info.name)
        if fn:
            fn(v, spec)
        out["spec"] = spec
    out["status"] = normalise_status(v, info, out.get("status"))
    if len(out) > MAX_TOP_LEVEL_FIELDS:
        v.fail("<object>", f"at most {MAX_TOP_LEVEL_FIELDS} top-level fields, got {len(out)}")
    if not all(type(k) is str for k in out):
        v.fail("<object>", f"field names must be strings, got {[k for k in out if not isinstance(k, str)]!r}")
    # stored order (status first, metadata last, resourceVersion last): codec.encode packs it as is
    final = {"status": out["status"]}
    for k, x in out.items():
        if k != "status" and k != "metadata":
            final[k] = x
    if "resourceVersion" in md:
        md["resourceVersion"] = md.pop("resourceVersion")
    final["metadata"] = md
    return final, info, key


def normalise_status(v: _V | dict, info: KindInfo, status: object) -> dict:
    if isinstance(v, dict):
        v = _V(v)
    st = dict(v.map(status, "status"))
    fn = _STATUS.get(info.name)
    if fn:
        fn(v, st)
    return st
