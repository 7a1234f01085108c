"""The stored msgpack shape <-> Kubernetes JSON, and the front's JSON encoder.

Stored objects (docs/object-shapes.md) differ from Kubernetes JSON in a few typed fields only;
everything else passes untouched both ways, so a GET-then-PUT keeps fields the store does not model:

| field | stored | Kubernetes JSON |
|---|---|---|
| ``metadata.resourceVersion`` | int | string |
| ``metadata.creationTimestamp``, ``deletionTimestamp`` | float unix seconds | RFC 3339 ``2026-11-27T19:22:51Z`` (metav1.Time: seconds) |
| ``status.conditions[*].lastTransitionTime`` / ``lastProbeTime`` / ``lastHeartbeatTime`` / ``lastUpdateTime`` | float | RFC 3339 |
| Lease ``spec.acquireTime`` / ``spec.renewTime`` | float | metav1.MicroTime ``2026-11-27T19:22:51.123456Z`` |

``to_kube`` also sets ``kind`` and ``apiVersion`` (a watch decoder has no target type without them).
``to_kube_owned`` does the same in place on a dict the caller owns (the list and watch paths:
objects decoded from msgpack once, converted once). ``from_kube`` is the reverse and raises a 400
``KubeError`` naming the field on bad input. ``dumps`` is orjson.
"""
from __future__ import annotations

import calendar
import math
import time
from datetime import datetime, timezone
from typing import TYPE_CHECKING

import orjson

from cluster_state.objects import served_shape
from kube_api.status import KubeError

if TYPE_CHECKING:
    from kube_api.resources import Resource

__all__ = ["to_kube", "to_kube_owned", "from_kube", "rfc3339", "micro_time", "parse_time", "dumps", "loads",
           "CONDITION_TIME_FIELDS"]

dumps = orjson.dumps
loads = orjson.loads

CONDITION_TIME_FIELDS = ("lastTransitionTime", "lastProbeTime", "lastHeartbeatTime", "lastUpdateTime")
_LEASE_TIME_FIELDS = ("acquireTime", "renewTime")
_SECOND_CACHE: dict[int, str] = {}


def rfc3339(t: float) -> str:
    """metav1.Time's JSON: UTC, whole seconds (Kubernetes truncates)."""
    s = math.floor(t)
    out = _SECOND_CACHE.get(s)
    if out is None:
        if len(_SECOND_CACHE) > 100_000:
            _SECOND_CACHE.clear()
        out = _SECOND_CACHE[s] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(s))
    return out


def micro_time(t: float) -> str:
    """metav1.MicroTime's JSON: UTC with microseconds."""
    s = math.floor(t)
    us = int(round((t - s) * 1_000_000))
    if us >= 1_000_000:
        s, us = s + 1, us - 1_000_000
    return f"{rfc3339(s)[:-1]}.{us:06d}Z"


def parse_time(value: object, field: str) -> float:
    """RFC 3339 (with or without fractional seconds, Z or an offset) -> unix seconds; a number
    passes as is. 400 naming ``field`` otherwise."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        v = value.strip()
        if len(v) == 20 and v[10] == "T" and v[19] == "Z":   # the common whole-second UTC form
            try:
                return float(calendar.timegm(time.strptime(v, "%Y-%m-%dT%H:%M:%SZ")))
            except ValueError:
                pass
        try:
            dt = datetime.fromisoformat(v.replace("Z", "+00:00").replace("z", "+00:00"))
            if dt.tzinfo is None:
                dt = dt.replace(tzinfo=timezone.utc)
            return dt.timestamp()
        except ValueError:
            pass
    raise KubeError(400, "BadRequest", f"{field}: not an RFC 3339 time: {value!r:.80}",
                    details={"causes": [{"reason": "FieldValueInvalid", "field": field,
                                         "message": f"not an RFC 3339 time: {value!r:.80}"}]})


def _num(v: object) -> bool:
    return (type(v) is float or type(v) is int)


def to_kube_owned(obj: dict, resource: "Resource", *, type_meta: bool = True) -> dict:
    """Convert ``obj`` (the caller's own dict, e.g. fresh from msgpack) in place; returns it.
    ``type_meta=False``: leave ``kind`` / ``apiVersion`` out (the items of a list: the list's
    own say them, and kube-apiserver leaves them out of items too)."""
    if resource.store_kind == "Event":
        # stored with its fields under spec (the layout's top-level limit): served at the top
        shaped = served_shape(obj)
        if shaped is not obj:
            obj.clear()
            obj.update(shaped)
    if type_meta:
        obj["kind"] = resource.kind
        obj["apiVersion"] = resource.api_version
    else:
        obj.pop("kind", None)
        obj.pop("apiVersion", None)
    md = obj.get("metadata")
    if type(md) is dict:
        rv = md.get("resourceVersion")
        if type(rv) is int:
            md["resourceVersion"] = str(rv)
        t = md.get("creationTimestamp")
        if t is not None and _num(t):
            md["creationTimestamp"] = rfc3339(t)
        t = md.get("deletionTimestamp")
        if t is not None and _num(t):
            md["deletionTimestamp"] = rfc3339(t)
    st = obj.get("status")
    if type(st) is dict:
        conds = st.get("conditions")
        if type(conds) is list:
            for c in conds:
                if type(c) is dict:
                    for f in CONDITION_TIME_FIELDS:
                        t = c.get(f)
                        if t is not None and _num(t):
                            c[f] = rfc3339(t)
    if resource.kind == "Lease":
        spec = obj.get("spec")
        if type(spec) is dict:
            for f in _LEASE_TIME_FIELDS:
                t = spec.get(f)
                if t is not None and _num(t):
                    spec[f] = micro_time(t)
    return obj


def _copy_for_kube(stored: dict) -> dict:
    """Copy the parts to_kube_owned changes (top level, metadata, status.conditions, spec)."""
    out = dict(stored)
    md = out.get("metadata")
    if type(md) is dict:
        out["metadata"] = dict(md)
    st = out.get("status")
    if type(st) is dict:
        st = out["status"] = dict(st)
        conds = st.get("conditions")
        if type(conds) is list:
            st["conditions"] = [dict(c) if type(c) is dict else c for c in conds]
    sp = out.get("spec")
    if type(sp) is dict:
        out["spec"] = dict(sp)
    return out


def to_kube(stored: dict, resource: "Resource") -> dict:
    """A stored object as Kubernetes JSON (a new dict; ``stored`` is not changed)."""
    return to_kube_owned(_copy_for_kube(stored), resource)


def _bad(field: str, message: str) -> KubeError:
    return KubeError(400, "BadRequest", f"{field}: {message}",
                     details={"causes": [{"reason": "FieldValueInvalid", "field": field, "message": message}]})


def from_kube(obj: dict, resource: "Resource") -> dict:
    """Kubernetes JSON -> the stored shape (a new dict). 400 naming the field on bad input."""
    if not isinstance(obj, dict):
        raise _bad("<body>", f"expected a JSON object, got {type(obj).__name__}")
    out = dict(obj)
    md = out.get("metadata")
    if md is not None:
        if not isinstance(md, dict):
            raise _bad("metadata", f"expected an object, got {type(md).__name__}")
        md = out["metadata"] = dict(md)
        rv = md.get("resourceVersion")
        if rv is not None:
            if rv == "":
                del md["resourceVersion"]
            elif isinstance(rv, str) and rv.isdigit() and rv.isascii():
                md["resourceVersion"] = int(rv)
            elif isinstance(rv, int) and not isinstance(rv, bool) and rv >= 0:
                pass
            else:
                raise _bad("metadata.resourceVersion", f"not a resourceVersion: {rv!r:.80}")
        for f in ("creationTimestamp", "deletionTimestamp"):
            t = md.get(f)
            if t is None:
                md.pop(f, None) if f in md else None
            else:
                md[f] = parse_time(t, f"metadata.{f}")
    st = out.get("status")
    if isinstance(st, dict):
        conds = st.get("conditions")
        if isinstance(conds, list):
            st = out["status"] = dict(st)
            new = []
            for i, c in enumerate(conds):
                if isinstance(c, dict):
                    c = dict(c)
                    for f in CONDITION_TIME_FIELDS:
                        t = c.get(f)
                        if t is not None:
                            c[f] = parse_time(t, f"status.conditions[{i}].{f}")
                new.append(c)
            st["conditions"] = new
    if resource.kind == "Lease":
        spec = out.get("spec")
        if isinstance(spec, dict):
            spec = out["spec"] = dict(spec)
            for f in _LEASE_TIME_FIELDS:
                t = spec.get(f)
                if t is not None:
                    spec[f] = parse_time(t, f"spec.{f}")
    return out
