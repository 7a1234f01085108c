"""The write path of the Kubernetes API front: every POST / PUT / PATCH / DELETE the server routes
here (``handle(ctx)``), mapped onto the store's operations the way kube-apiserver's registry
strategies behave. Every store call goes through ``ctx.endpoint.call`` (the endpoint's API chaos and
request log act there); every request is logged once with ``ctx.endpoint.log_request``.

| request | store | answer |
|---|---|---|
| POST collection | ``create`` (status reset as the strategy does: Pod -> ``{phase: Pending}``, kinds with a status subresource -> defaults) | 201 object; 409 ``AlreadyExists`` |
| PUT item | ``update`` (keeps the stored status: Pod, Node, Namespace, Queue, HyperNode); PodGroup (its CRD has no status subresource) writes status too: ``update`` / ``update_status`` / ``replace`` by what changed | 200 object; 409 ``Conflict`` on a stale resourceVersion |
| PUT item/status | ``update_status`` (only status); Pod and Node also take labels and annotations (``replace`` when those change) | 200 object |
| PATCH item[/status] | read, apply the patch (``kube_api.patch``), write as PUT would with the read resourceVersion as precondition, retried on a race unless the patch carries a resourceVersion | 200 object |
| DELETE item | ``delete`` with gracePeriodSeconds (a Pod not yet bound, or finished, goes at once) and ``preconditions`` (uid, resourceVersion) | 200 object (Pod, custom resources) or Status |
| DELETE collection | each object the label / field selectors match, deleted as above | 200 typed list of the deleted |
| POST pods/{n}/binding (or namespaces/{ns}/bindings) | ``bind`` (uid precondition; its 409s; the KEP-5278 NNN clearing is the store's switch); Binding annotations are merged into the pod by a second write | 201 Status |
| POST pods/{n}/eviction | graceful ``evict`` / ``delete`` with the Eviction's deleteOptions | 201 Status |

Errors are ``Status`` answers (400 malformed, 404 missing, 405 verb not allowed -- e.g. writes to
a resource the store does not model, POST on an item, 409, 415 content type -- incl. server-side
apply, 422 Invalid with ``details.causes`` naming the field); a failed request stores nothing.
``dryRun=All`` validates (and checks existence / preconditions) without storing; ``fieldManager``
and ``fieldValidation`` are accepted and ignored. Events are stored as the ``Event`` kind; a PATCH
of a missing event is 404 (client-go's recorder then creates it).
"""
from __future__ import annotations

import asyncio
import random
import re
import time
from typing import Any

from aiohttp import web

from cluster_state.errors import ApiError, Conflict
from cluster_state.objects import normalise, served_shape
from kube_api.codec import dumps, from_kube, to_kube
from kube_api.context import PROTOBUF, RequestContext
from kube_api.patch import APPLY, PATCH_TYPES, PatchError, apply_patch
from kube_api.resources import Resource, lookup
from kube_api.status import REASONS, KubeError, from_store_error, success_status

__all__ = ["handle", "MAX_PATCH_RETRIES", "STATUS_SUBRESOURCE_KINDS"]

_PODS = lookup("", "v1", "pods")

# the read-modify-write loops (PATCH, writes without a client resourceVersion) retry a lost race
# like the apiserver's GuaranteedUpdate, which has no limit; this one gives up (409) after so many,
# each retry after a short random pause so that racing writers fall out of step
MAX_PATCH_RETRIES = 64
RETRY_PAUSE_S = 0.002
# kinds whose main-resource writes leave status alone (their strategies reset it; a CRD with a
# status subresource does the same); PodGroup's CRD declares no status subresource
STATUS_SUBRESOURCE_KINDS = frozenset(("Pod", "Node", "Namespace", "Queue", "HyperNode"))
# status writes of these kinds may change labels and annotations too (their status strategies do
# not reset metadata, unlike ResetObjectMetaForStatus of a CRD)
STATUS_WITH_METADATA = frozenset(("Pod", "Node"))
# custom resources: a PUT must carry a resourceVersion (AllowUnconditionalUpdate is false)
CUSTOM_KINDS = frozenset(("PodGroup", "Queue", "HyperNode"))
# DELETE answers the deleted object for these (ReturnDeletedObject), a Status for the others
RETURNS_DELETED_OBJECT = frozenset(("Pod", "PodGroup", "Queue", "HyperNode"))
BODY_TYPES = ("application/json", "", PROTOBUF, "application/yaml")
DELETE_OPTIONS_VERSIONS = ("v1", "meta.k8s.io/v1", "meta.k8s.io/v1beta1")
EVICTION_VERSIONS = ("policy/v1", "policy/v1beta1")
PROPAGATION = ("Orphan", "Background", "Foreground")
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"   # names.SimpleNameGenerator's alphabet
# a body nesting deeper than this is refused: what is stored must stay servable (orjson writes at
# most 255 levels) and the patch functions recurse
MAX_DEPTH = 100


# --- entry --------------------------------------------------------------------------------------
async def handle(ctx: RequestContext) -> web.Response:
    t0 = time.monotonic()
    extra: dict[str, Any] = {}
    try:
        try:
            resp = await _route(ctx, extra)
        except RecursionError:
            raise _bad("the request body nests too deeply", "<body>", ctx.resource, ctx.name) from None
    except KubeError as e:
        _log(ctx, e.code, t0, extra, reason=e.reason)
        raise
    _log(ctx, resp.status, t0, extra)
    return resp


def _log(ctx: RequestContext, code: int, t0: float, extra: dict, **more) -> None:
    rec = {"path": ctx.request.path, "ms": round((time.monotonic() - t0) * 1000, 3), **extra, **more}
    rec.update(getattr(ctx, "log_extra", None) or {})
    ctx.endpoint.log_request(ctx.verb, ctx.resource, ctx.namespace, ctx.name, ctx.subresource, code, **rec)


def _note_written(extra: dict, obj: dict | None, kind: str) -> None:
    """Facts of a successful write for the request log, so that a scheduler's decisions can be
    read from it alone (ha/runtime/external/observe): the object's ``uid`` and ``rv``; for a Pod
    also ``nodeName``, ``nominatedNodeName`` and ``conditions`` ({type: "status/reason"}), which
    tell a nomination (a status write setting nominatedNodeName) and an eviction (Volcano's
    DisruptionTarget status write before its DELETE) apart from other status writes."""
    if not isinstance(obj, dict):
        return
    md = obj.get("metadata") or {}
    if md.get("uid"):
        extra["uid"] = md["uid"]
    if md.get("resourceVersion") is not None:
        extra["rv"] = md["resourceVersion"]
    if kind != "Pod":
        return
    st = obj.get("status") or {}
    extra["nodeName"] = (obj.get("spec") or {}).get("nodeName") or ""
    extra["nominatedNodeName"] = st.get("nominatedNodeName") or ""
    conds = {c.get("type"): f"{c.get('status', '')}/{c.get('reason') or ''}"
             for c in st.get("conditions") or () if isinstance(c, dict) and c.get("type")}
    if conds:
        extra["conditions"] = conds


def _note_sent(extra: dict, obj: dict, kind: str, subresource: str | None) -> None:
    """The nomination a Pod status write asks for, logged whether the write succeeds or not
    (``sentNominatedNodeName``): a write refused with 409 leaves no written object behind, and
    Volcano's nomination of a Pipelined task is still the session's decision (the model records
    its pipeline decisions whether their status write lands or not, ha/runtime/incarnation.py)."""
    if kind == "Pod" and subresource == "status":
        extra["sentNominatedNodeName"] = ((obj.get("status") or {}).get("nominatedNodeName") or "")


async def _route(ctx: RequestContext, extra: dict) -> web.Response:
    r, method, sub = ctx.resource, ctx.request.method, ctx.subresource
    dry = _dry_run(ctx)
    if dry:
        extra["dryRun"] = True
    if r.group == "" and r.plural == "bindings":
        # the legacy bindings collection (the Python client's create_namespaced_binding): the
        # Binding's own name names the pod
        if method != "POST" or ctx.name is not None or ctx.namespace is None:
            raise _not_allowed(r, f"only POST /api/v1/namespaces/{{namespace}}/bindings is served, not {method} "
                                  f"{ctx.request.path}")
        return await _bind(ctx, dry, extra, legacy=True)
    if r.store_kind is None or not r.modelled:
        raise KubeError(405, "MethodNotAllowed",
                        f"{method} is not allowed on {r.qualified}: the testbed does not store {r.plural} "
                        f"(served as an always-empty collection)", details=_details(r, ctx.name))
    if ctx.name is None:
        if method == "POST" and sub is None:
            if r.namespaced and ctx.namespace is None:
                raise _not_allowed(r, f"POST of {r.plural} needs a namespace in the path "
                                      f"(/.../namespaces/{{namespace}}/{r.plural})")
            return await _create(ctx, dry, extra)
        if method == "DELETE":
            if r.namespaced and ctx.namespace is None:
                raise _not_allowed(r, f"deletecollection of {r.plural} needs a namespace in the path")
            return await _delete_collection(ctx, dry, extra)
        raise _not_allowed(r, f"{method} is not allowed on the collection {r.qualified}; name an object")
    if r.namespaced and ctx.namespace is None:
        raise KubeError(404, "NotFound", f"the server could not find the requested resource: {r.plural} are "
                                         f"namespaced; use /.../namespaces/{{namespace}}/{r.plural}/{ctx.name}")
    if method == "POST":
        if sub == "binding":
            return await _bind(ctx, dry, extra)
        if sub == "eviction":
            return await _evict(ctx, dry, extra)
        raise _not_allowed(r, f"POST is not allowed on {_what(ctx)}; create objects on the collection")
    if sub not in (None, "status"):
        raise _not_allowed(r, f"{method} is not allowed on {r.plural}/{sub} (only POST)")
    if method == "PUT":
        return await _update(ctx, dry, extra)
    if method == "PATCH":
        return await _patch(ctx, dry, extra)
    if method == "DELETE":
        if sub is not None:
            raise _not_allowed(r, f"DELETE is not allowed on {r.plural}/{sub}")
        return await _delete(ctx, dry, extra)
    raise _not_allowed(r, f"{method} is not a Kubernetes write verb")


# --- helpers ------------------------------------------------------------------------------------
def _what(ctx: RequestContext) -> str:
    s = f'{ctx.resource.qualified} "{ctx.name}"'
    return f"{s} ({ctx.subresource})" if ctx.subresource else s


def _details(r: Resource, name: str | None, **extra) -> dict:
    d: dict = {"name": name, "group": r.group or None, "kind": r.plural}
    d.update(extra)
    return {k: v for k, v in d.items() if v is not None}


def _not_allowed(r: Resource, message: str) -> KubeError:
    return KubeError(405, "MethodNotAllowed", message, details=_details(r, None))


def _bad(message: str, field: str | None = None, r: Resource | None = None, name: str | None = None) -> KubeError:
    d = _details(r, name) if r is not None else {}
    if field:
        d["causes"] = [{"reason": "FieldValueInvalid", "message": message, "field": field}]
    return KubeError(400, "BadRequest", message, details=d or None)


def _invalid(r: Resource, name: str | None, field: str, message: str, reason: str = "FieldValueInvalid") -> KubeError:
    d = _details(r, name, causes=[{"reason": reason, "message": message, "field": field}])
    d["kind"] = r.kind
    return KubeError(422, "Invalid", f'{r.kind} "{name or ""}" is invalid: {field}: {message}', details=d)


def _store_error(e: Exception, r: Resource, name: str | None) -> KubeError:
    return from_store_error(e, r, name)


async def _call(ctx: RequestContext, op: str, *args, name: str | None = None, resource: Resource | None = None,
                **kw) -> Any:
    try:
        return await ctx.endpoint.call(op, *args, **kw)
    except KubeError:
        raise
    except Exception as e:  # noqa: BLE001 -- store errors (and a lost store) become a Status
        raise _store_error(e, resource or ctx.resource, name if name is not None else ctx.name) from None


def _respond(obj: dict, r: Resource, code: int = 200) -> web.Response:
    return web.Response(status=code, body=dumps(to_kube(served_shape(obj), r)), content_type="application/json")


def _status(body: dict) -> web.Response:
    return web.Response(status=body["code"], body=dumps(body), content_type="application/json")


async def _pause() -> None:
    await asyncio.sleep(random.uniform(0, RETRY_PAUSE_S))


def _dry_run(ctx: RequestContext) -> bool:
    vals = ctx.query.getall("dryRun", [])
    for v in vals:
        if v != "All":
            raise _bad(f'dryRun: Unsupported value: "{v}": supported values: "All"', "dryRun")
    return bool(vals)


async def _body(ctx: RequestContext) -> Any:
    body = await ctx.body()
    if _depth(body, MAX_DEPTH) > MAX_DEPTH:
        raise _bad(f"the request body nests deeper than {MAX_DEPTH} levels", "<body>", ctx.resource, ctx.name)
    return body


def _depth(v: Any, limit: int) -> int:
    """Nesting depth of a JSON value, counted no further than ``limit + 1``."""
    stack = [(v, 1)]
    deepest = 0
    while stack:
        x, d = stack.pop()
        if d > limit:
            return d
        if isinstance(x, dict):
            deepest = max(deepest, d)
            stack.extend((y, d + 1) for y in x.values())
        elif isinstance(x, list):
            deepest = max(deepest, d)
            stack.extend((y, d + 1) for y in x)
    return deepest


def _check_body_type(ctx: RequestContext) -> None:
    ct = ctx.content_type
    if ct not in BODY_TYPES:
        raise KubeError(415, "UnsupportedMediaType",
                        f'the body of type "{ct}" is not accepted for {ctx.request.method}; send application/json '
                        f"or {PROTOBUF}", details=_details(ctx.resource, ctx.name))


async def _object_body(ctx: RequestContext, kind: str, versions: tuple[str, ...]) -> dict:
    """The request body as an object of ``kind`` (apiVersion one of ``versions``), metadata a map."""
    _check_body_type(ctx)
    body = await _body(ctx)
    if not isinstance(body, dict):
        raise _bad(f"the request body must be a JSON object, got {type(body).__name__}", "<body>")
    k, av = body.get("kind"), body.get("apiVersion")
    if k not in (None, "") and k != kind:
        raise _bad(f"the kind in the body ({k!r}) does not match the expected kind ({kind!r})", "kind",
                   ctx.resource, ctx.name)
    if av not in (None, "") and av not in versions:
        raise _bad(f"the API version in the body ({av!r}) does not match the expected API version "
                   f"({' or '.join(repr(v) for v in versions)})", "apiVersion", ctx.resource, ctx.name)
    md = body.get("metadata")
    if md is not None and not isinstance(md, dict):
        raise _bad(f"metadata must be an object, got {type(md).__name__}", "metadata", ctx.resource, ctx.name)
    return body


def _place(ctx: RequestContext, body: dict) -> dict:
    """metadata.namespace from the path (400 when the body names another); cluster-scoped: none."""
    md = dict(body.get("metadata") or {})
    r = ctx.resource
    if r.namespaced:
        ns = md.get("namespace")
        if ns in (None, ""):
            md["namespace"] = ctx.namespace
        elif ns != ctx.namespace:
            raise _bad(f"the namespace of the provided object ({ns!r}) does not match the namespace sent on the "
                       f"request ({ctx.namespace!r})", "metadata.namespace", r, md.get("name"))
    else:
        md.pop("namespace", None)
    out = dict(body)
    out["metadata"] = md
    out["kind"] = r.kind
    out["apiVersion"] = r.api_version
    return out


def _check_name(r: Resource, name: Any, field: str = "metadata.name") -> None:
    if not isinstance(name, str) or not name:
        raise _invalid(r, None, field, "Required value: name or generateName is required", "FieldValueRequired")
    if r.kind == "Namespace":
        ok, what = len(name) <= 63 and _LABEL.fullmatch(name), "a lowercase RFC 1123 label (at most 63 characters)"
    else:
        ok, what = len(name) <= 253 and _SUBDOMAIN.fullmatch(name), "a lowercase RFC 1123 subdomain (at most 253 characters)"
    if not ok:
        raise _invalid(r, name, field, f'Invalid value: "{name[:80]}": must be {what}: lower case alphanumeric '
                                       f"characters, '-' or '.', starting and ending with an alphanumeric character")


def _stored(body: dict, r: Resource) -> dict:
    return from_kube(body, r)


def _validate(obj: dict, r: Resource, name: str | None) -> dict:
    """The store's validation without a write (dry runs, and before a read-modify-write)."""
    try:
        return normalise(obj)[0]
    except ApiError as e:
        raise _store_error(e, r, name) from None


def _rv_of(obj: dict) -> int | None:
    rv = (obj.get("metadata") or {}).get("resourceVersion")
    return rv if isinstance(rv, int) and rv > 0 else None


# --- create -------------------------------------------------------------------------------------
def _reset_for_create(obj: dict, r: Resource) -> dict:
    """BeforeCreate: server-owned metadata is the server's; the strategy's status rule."""
    md = obj["metadata"]
    if md.get("resourceVersion") not in (None, "", 0):
        raise _bad("resourceVersion should not be set on objects to be created", "metadata.resourceVersion",
                   r, md.get("name"))
    for f in ("resourceVersion", "uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
              "selfLink"):
        md.pop(f, None)
    if r.kind == "Pod":
        obj["status"] = {"phase": "Pending"}          # podStrategy.PrepareForCreate
    elif r.kind in STATUS_SUBRESOURCE_KINDS and r.kind != "Node":
        obj.pop("status", None)                      # a status subresource: status is not taken on create
    return obj


async def _create(ctx: RequestContext, dry: bool, extra: dict) -> web.Response:
    r = ctx.resource
    body = _place(ctx, await _object_body(ctx, r.kind, (r.api_version,)))
    md = body["metadata"]
    if not md.get("name") and isinstance(md.get("generateName"), str) and md["generateName"]:
        md["name"] = md["generateName"] + "".join(random.choice(_NAME_CHARS) for _ in range(5))
    _check_name(r, md.get("name"))
    obj = _reset_for_create(_stored(body, r), r)
    name = md["name"]
    extra["op"] = "create"
    if dry:
        out = _validate(obj, r, name)
        try:
            await ctx.endpoint.call("get", r.store_kind, name, ctx.namespace)
        except ApiError as e:
            if e.code != 404:
                raise _store_error(e, r, name) from None
        else:
            raise KubeError(409, "AlreadyExists", f'{r.qualified} "{name}" already exists', details=_details(r, name))
        return _respond(out, r, 201)
    created = await _call(ctx, "create", obj, name=name)
    return _respond(created, r, 201)


# --- update / status ----------------------------------------------------------------------------
async def _update(ctx: RequestContext, dry: bool, extra: dict) -> web.Response:
    r = ctx.resource
    body = _place(ctx, await _object_body(ctx, r.kind, (r.api_version,)))
    name = body["metadata"].get("name")
    if name in (None, ""):
        body["metadata"]["name"] = name = ctx.name
    if name != ctx.name:
        raise _bad(f"the name of the object ({name!r}) does not match the name on the URL ({ctx.name!r})",
                   "metadata.name", r, ctx.name)
    new = _stored(body, r)
    _note_sent(extra, new, r.kind, ctx.subresource)
    user_rv = _rv_of(new)
    if user_rv is None and r.kind in CUSTOM_KINDS:
        raise _invalid(r, ctx.name, "metadata.resourceVersion",
                       "Invalid value: 0x0: must be specified for an update")
    status_sub = ctx.subresource == "status"
    try:
        out = await _write(ctx, new, None, status_sub=status_sub, user_rv=user_rv, dry=dry, extra=extra)
    except KubeError as e:
        if e.code == 404 and r.kind == "Event" and not status_sub:
            # events may be created by an update (AllowCreateOnUpdate)
            new["metadata"].pop("resourceVersion", None)
            obj = _reset_for_create(new, r)
            if dry:
                return _respond(_validate(obj, r, ctx.name), r, 201)
            extra["op"] = "create"
            return _respond(await _call(ctx, "create", obj), r, 201)
        raise
    return _respond(out, r)


def _without(obj: dict, *fields: str) -> dict:
    return {k: v for k, v in obj.items() if k not in fields}


def _meta_core(md: dict) -> dict:
    return {k: v for k, v in md.items() if k not in ("resourceVersion", "uid", "creationTimestamp")}


def _same_rest(a: dict, b: dict) -> bool:
    """Equal apart from status and the server-carried metadata."""
    return (_without(a, "status", "metadata") == _without(b, "status", "metadata")
            and _meta_core(a.get("metadata") or {}) == _meta_core(b.get("metadata") or {}))


async def _get_current(ctx: RequestContext) -> dict:
    return await _call(ctx, "get", ctx.resource.store_kind, ctx.name, ctx.namespace)


class _Raced(Exception):
    """The object changed between the read and the write (not the client's precondition)."""


async def _write(ctx: RequestContext, new: dict, current: dict | None, *, status_sub: bool,
                 user_rv: int | None, dry: bool, extra: dict, retry: bool = True) -> dict:
    """Store ``new`` (stored shape) as a PUT of the main resource or of ``/status`` would, with the
    strategy of the kind. ``current``: the stored object when the caller read it (PATCH);
    ``user_rv``: the client's resourceVersion precondition (None = unconditional, retried on a
    race; ``retry=False``: raise ``_Raced`` instead, for a caller that must recompute ``new``)."""
    r = ctx.resource
    kind = r.kind
    for _ in range(MAX_PATCH_RETRIES):
        needs_current = (status_sub and kind in STATUS_WITH_METADATA) or \
            (not status_sub and kind in ("PodGroup", "Pod")) or dry or current is not None
        if needs_current and current is None:
            current = await _get_current(ctx)
        if current is not None and user_rv is not None and _rv_of(current) != user_rv:
            raise _store_error(Conflict(f"the object has been modified (stored resourceVersion "
                                        f"{_rv_of(current)}); get the latest version and try again",
                                        field="metadata.resourceVersion", kind=kind, name=ctx.name,
                                        namespace=ctx.namespace), r, ctx.name)
        if current is not None:
            uid, have = (new.get("metadata") or {}).get("uid"), (current.get("metadata") or {}).get("uid")
            if uid and have and uid != have:     # the uid is a precondition of every update
                raise _precondition_failed(ctx, f"UID in precondition: {uid}, UID in object meta: {have}")
        if kind == "Pod" and not status_sub and current is not None:
            # the status a main-resource write ignores is not validated either
            _check_pod_update(r, ctx.name, _validate({**new, "status": current.get("status") or {}}, r, ctx.name),
                              current)
        rv = user_rv if user_rv is not None else (_rv_of(current) if current is not None else None)
        if kind == "PodGroup" and not status_sub and current is not None:
            new = _validate(new, r, ctx.name)   # compared with the stored object in its stored form
        op, obj = _plan(kind, new, current, status_sub)
        md = obj["metadata"] = dict(obj.get("metadata") or {})
        if rv is not None:
            md["resourceVersion"] = rv
        else:
            md.pop("resourceVersion", None)
        extra["op"] = op
        if dry:
            checked = _validate(obj, r, ctx.name)
            if op == "update_status":
                checked = {**current, "status": checked["status"]}
            elif op == "update":
                checked["status"] = current.get("status", {})
            return checked
        try:
            out = await ctx.endpoint.call(op, obj)
            _note_written(extra, out, kind)
            return out
        except Conflict as e:
            if user_rv is not None or rv is None or "resourceVersion" not in str(e.field or ""):
                raise _store_error(e, r, ctx.name) from None
            if not retry:
                raise _Raced() from None
            current = None      # raced with another writer after our read: read again
            await _pause()
            continue
        except KubeError:
            raise
        except Exception as e:  # noqa: BLE001
            raise _store_error(e, r, ctx.name) from None
    raise _store_error(Conflict(f"gave up after {MAX_PATCH_RETRIES} conflicting writes", kind=kind,
                                name=ctx.name, namespace=ctx.namespace), r, ctx.name)


_POD_MUTABLE = ("`spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,"
                "`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` "
                "(allow it to be set to 1 if it was previously negative),`spec.schedulingGates` (only removals)")


def _check_pod_update(r: Resource, name: str | None, new: dict, current: dict) -> None:
    """ValidatePodUpdate: a pod's spec is immutable but for images, activeDeadlineSeconds, added
    tolerations, removed scheduling gates and, while gated, nodeSelector / affinity (the store
    checks the gates themselves)."""
    old_spec, new_spec = dict(current.get("spec") or {}), dict(new.get("spec") or {})
    old_tol = old_spec.get("tolerations") or []
    new_tol = new_spec.get("tolerations") or []
    if not isinstance(new_tol, list) or any(t not in new_tol for t in old_tol):
        raise _invalid(r, name, "spec.tolerations", "Forbidden: existing toleration can not be modified except its "
                                                    "tolerationSeconds", "FieldValueForbidden")
    gated = bool(old_spec.get("schedulingGates"))
    for spec in (old_spec, new_spec):
        for f in ("tolerations", "activeDeadlineSeconds", "schedulingGates", "terminationGracePeriodSeconds"):
            spec.pop(f, None)
        if gated:
            spec.pop("nodeSelector", None)
            spec.pop("affinity", None)
        for f in ("containers", "initContainers"):
            if isinstance(spec.get(f), list):
                spec[f] = [{k: v for k, v in c.items() if k != "image"} if isinstance(c, dict) else c
                           for c in spec[f]]
    if old_spec != new_spec:
        changed = sorted(k for k in set(old_spec) | set(new_spec) if old_spec.get(k) != new_spec.get(k))
        raise _invalid(r, name, "spec", f"Forbidden: pod updates may not change fields other than {_POD_MUTABLE} "
                                        f"(changed: {', '.join(changed)})", "FieldValueForbidden")


def _plan(kind: str, new: dict, current: dict | None, status_sub: bool) -> tuple[str, dict]:
    """(store operation, object) for a write of ``new`` given the stored ``current``."""
    if status_sub:
        if kind in STATUS_WITH_METADATA and current is not None:
            cmd, nmd = current.get("metadata") or {}, new.get("metadata") or {}
            merged = dict(current)
            merged["status"] = new.get("status") if isinstance(new.get("status"), dict) else {}
            if all(nmd.get(f) == cmd.get(f) or (not nmd.get(f) and not cmd.get(f)) for f in ("labels", "annotations")):
                return "update_status", _status_only(merged)
            md = dict(cmd)
            for f in ("labels", "annotations"):
                if nmd.get(f):
                    md[f] = nmd[f]
                else:
                    md.pop(f, None)
            merged["metadata"] = md
            return "replace", merged
        return "update_status", _status_only(new)
    if kind == "PodGroup" and current is not None:
        if (new.get("status") or {}) == (current.get("status") or {}):
            return "update", new
        if _same_rest(new, current):
            return "update_status", _status_only(new)
        return "replace", new
    if kind in STATUS_SUBRESOURCE_KINDS:
        out = dict(new)
        out.pop("status", None)          # ignored by the store's update; not validated either
        return "update", out
    return "update", new


def _status_only(obj: dict) -> dict:
    """What update_status needs: identity, status and the spec to validate with (the store keeps
    its stored spec and metadata)."""
    md = obj.get("metadata") or {}
    out = {"kind": obj.get("kind"), "apiVersion": obj.get("apiVersion"),
           "metadata": {k: md[k] for k in ("name", "namespace", "resourceVersion") if k in md},
           "status": obj.get("status") if isinstance(obj.get("status"), dict) else {}}
    if isinstance(obj.get("spec"), dict):
        out["spec"] = obj["spec"]
    return out


# --- patch --------------------------------------------------------------------------------------
async def _patch(ctx: RequestContext, dry: bool, extra: dict) -> web.Response:
    r = ctx.resource
    ct = ctx.content_type
    if ct == APPLY or ct not in PATCH_TYPES:
        try:
            apply_patch({}, {}, ct, r.kind)
        except PatchError as e:
            raise KubeError(415, "UnsupportedMediaType", e.message, details=_details(r, ctx.name)) from None
    patch = await _body(ctx)
    extra["patchType"] = ct
    status_sub = ctx.subresource == "status"
    for _ in range(MAX_PATCH_RETRIES):
        current = await _get_current(ctx)
        doc = to_kube(served_shape(current), r)
        try:
            patched = apply_patch(doc, patch, ct, r.kind)
        except PatchError as e:
            d = _details(r, ctx.name)
            if e.field:
                d["causes"] = [{"reason": "FieldValueInvalid", "message": e.message, "field": e.field}]
            raise KubeError(e.code, REASONS.get(e.code, "BadRequest"), e.message, details=d) from None
        if patched.get("kind") != r.kind or patched.get("apiVersion") != r.api_version:
            raise _bad(f"a patch cannot change kind or apiVersion (to {patched.get('kind')!r} / "
                       f"{patched.get('apiVersion')!r})", "kind", r, ctx.name)
        md = patched.get("metadata")
        if not isinstance(md, dict):
            raise _bad("the patched object has no metadata object", "metadata", r, ctx.name)
        if md.get("name") != ctx.name:
            raise _bad(f"the name of the object ({md.get('name')!r}) does not match the name on the URL "
                       f"({ctx.name!r})", "metadata.name", r, ctx.name)
        if r.namespaced and md.get("namespace") != ctx.namespace:
            raise _bad(f"the namespace of the object ({md.get('namespace')!r}) does not match the namespace on "
                       f"the URL ({ctx.namespace!r})", "metadata.namespace", r, ctx.name)
        new = _stored(patched, r)
        _note_sent(extra, new, r.kind, ctx.subresource)
        patch_rv = _rv_of(new)
        user_rv = patch_rv if patch_rv is not None and patch_rv != _rv_of(current) else None
        if user_rv is None and _patch_sets_rv(patch):
            user_rv = patch_rv
        try:
            out = await _write(ctx, new, current, status_sub=status_sub, user_rv=user_rv, dry=dry, extra=extra,
                               retry=False)
        except _Raced:
            await _pause()
            continue        # the object changed between our read and write: patch it again
        return _respond(out, r)
    raise KubeError(409, "Conflict", f"Operation cannot be fulfilled on {_what(ctx)}: gave up after "
                                     f"{MAX_PATCH_RETRIES} conflicting writes", details=_details(r, ctx.name))


def _patch_sets_rv(patch: Any) -> bool:
    """The patch itself names a resourceVersion: then it is a precondition, never retried."""
    if isinstance(patch, dict):
        md = patch.get("metadata")
        return isinstance(md, dict) and md.get("resourceVersion") not in (None, "")
    if isinstance(patch, list):
        return any(isinstance(op, dict) and isinstance(op.get("path"), str)
                   and op["path"].startswith("/metadata/resourceVersion") and op.get("op") in ("add", "replace")
                   for op in patch)
    return False


# --- delete -------------------------------------------------------------------------------------
def _int_param(value: Any, field: str, r: Resource, name: str | None) -> int | None:
    if value is None or value == "":
        return None
    if isinstance(value, str):
        if not (value.lstrip("-").isdigit() and value.isascii()) or len(value) > 19:
            raise _bad(f"{field}: Invalid value: {value!r:.80}: must be an integer", field, r, name)
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _bad(f"{field}: Invalid value: {value!r:.80}: must be an integer", field, r, name)
    if value < 0:
        raise _invalid(r, name, field, f"Invalid value: {value}: must be greater than or equal to 0")
    return value


def _delete_options(raw: Any, query, r: Resource, name: str | None, field: str = "") -> dict:
    """DeleteOptions from the query and the body (the body wins), checked."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise _bad(f"{field or 'DeleteOptions'} must be an object, got {type(raw).__name__}", field or "<body>", r, name)
    k, av = raw.get("kind"), raw.get("apiVersion")
    if k not in (None, "", "DeleteOptions"):
        raise _bad(f"the kind in the body ({k!r}) is not DeleteOptions", f"{field}kind", r, name)
    if av not in (None, "") and av not in DELETE_OPTIONS_VERSIONS:
        raise _bad(f"the API version of the DeleteOptions ({av!r}) is not one of {', '.join(DELETE_OPTIONS_VERSIONS)}",
                   f"{field}apiVersion", r, name)
    grace = _int_param(query.get("gracePeriodSeconds"), "gracePeriodSeconds", r, name) if query is not None else None
    if raw.get("gracePeriodSeconds") is not None:
        grace = _int_param(raw["gracePeriodSeconds"], f"{field}gracePeriodSeconds", r, name)
    prop = raw.get("propagationPolicy", query.get("propagationPolicy") if query is not None else None)
    if prop not in (None, "") and prop not in PROPAGATION:
        raise _invalid(r, name, f"{field}propagationPolicy",
                       f'Unsupported value: "{prop}": supported values: "Foreground", "Background", "Orphan"',
                       "FieldValueNotSupported")
    pre = raw.get("preconditions")
    uid = rv = None
    if pre is not None:
        if not isinstance(pre, dict):
            raise _bad(f"preconditions must be an object, got {type(pre).__name__}", f"{field}preconditions", r, name)
        uid = pre.get("uid")
        if uid is not None and not isinstance(uid, str):
            raise _bad(f"preconditions.uid must be a string, got {uid!r:.80}", f"{field}preconditions.uid", r, name)
        rv = pre.get("resourceVersion")
        if rv is not None:
            if isinstance(rv, str) and rv.isascii() and rv.isdigit() and len(rv) <= 19:
                rv = int(rv)
            elif rv == "":
                rv = None
            else:
                raise _bad(f"preconditions.resourceVersion must be a resourceVersion string, got {rv!r:.80}",
                           f"{field}preconditions.resourceVersion", r, name)
    dry = raw.get("dryRun")
    if dry is not None and (not isinstance(dry, list) or any(v != "All" for v in dry)):
        raise _bad(f'dryRun: Unsupported value: {dry!r:.80}: supported values: "All"', f"{field}dryRun", r, name)
    return {"grace": grace, "uid": uid or None, "rv": rv, "dry": bool(dry)}


def _precondition_failed(ctx: RequestContext, message: str, name: str | None = None) -> KubeError:
    r = ctx.resource
    name = ctx.name if name is None else name
    return KubeError(409, "Conflict", f"Operation cannot be fulfilled on {r.qualified} \"{name}\": "
                                      f"Precondition failed: {message}", details=_details(r, name))


def _check_preconditions(ctx: RequestContext, current: dict, opts: dict, name: str | None = None) -> None:
    md = current.get("metadata") or {}
    if opts["uid"] is not None and md.get("uid") != opts["uid"]:
        raise _precondition_failed(ctx, f"UID in precondition: {opts['uid']}, UID in object meta: {md.get('uid')}",
                                   name)
    if opts["rv"] is not None and md.get("resourceVersion") != opts["rv"]:
        raise _precondition_failed(ctx, f"ResourceVersion in precondition: {opts['rv']}, ResourceVersion in "
                                        f"object meta: {md.get('resourceVersion')}", name)


def _pod_grace(current: dict, grace: int | None) -> int | None:
    """podStrategy.CheckGracefulDelete: a pod not bound to a node, or finished, goes at once."""
    if not (current.get("spec") or {}).get("nodeName"):
        return 0
    if (current.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return 0
    return grace


async def _delete(ctx: RequestContext, dry: bool, extra: dict) -> web.Response:
    r = ctx.resource
    _check_body_type(ctx)
    opts = _delete_options(await _body(ctx), ctx.query, r, ctx.name)
    dry = dry or opts["dry"]
    out = await _delete_object(ctx, opts, dry, extra, op="delete")
    if r.kind in RETURNS_DELETED_OBJECT:
        return _respond(out, r)
    uid = (out.get("metadata") or {}).get("uid")
    return _status(success_status(_details(r, ctx.name, uid=uid)))


async def _delete_collection(ctx: RequestContext, dry: bool, extra: dict) -> web.Response:
    """DELETE of a collection: every object the label / field selectors match, each as a DELETE of
    it would go (grace, the pod rules); the answer is the list of what was deleted, as the
    apiserver's DeleteCollection returns it. An object gone meanwhile is skipped."""
    from kube_api.selectors import Selector
    r = ctx.resource
    _check_body_type(ctx)
    opts = _delete_options(await _body(ctx), ctx.query, r, None)
    dry = dry or opts["dry"]
    sel = Selector.parse(ctx.query.get("labelSelector"), ctx.query.get("fieldSelector"), r)
    listed = await _call(ctx, "list", r.store_kind, ctx.namespace)
    extra["op"] = "delete"
    items = []
    for obj in sorted(listed.items, key=lambda o: o["metadata"]["name"]):
        if not sel.matches(obj):
            continue
        name = obj["metadata"]["name"]
        try:
            out = await _delete_object(ctx, opts, dry, extra, op="delete", name=name)
        except KubeError as e:
            if e.code == 404:
                continue
            raise
        items.append(to_kube(served_shape(out), r))
    extra["deleted"] = len(items)
    body = {"kind": r.list_kind, "apiVersion": r.api_version,
            "metadata": {"resourceVersion": str(listed.resource_version)}, "items": items}
    return web.Response(status=200, body=dumps(body), content_type="application/json")


async def _delete_object(ctx: RequestContext, opts: dict, dry: bool, extra: dict, *, op: str,
                         name: str | None = None) -> dict:
    r = ctx.resource
    name = ctx.name if name is None else name
    for _ in range(MAX_PATCH_RETRIES):
        current = None
        grace = opts["grace"]
        need = r.kind == "Pod" or opts["uid"] is not None or opts["rv"] is not None or dry
        if need:
            current = await _call(ctx, "get", r.store_kind, name, ctx.namespace, name=name)
            _check_preconditions(ctx, current, opts, name)
            if r.kind == "Pod":
                grace = _pod_grace(current, grace)
        extra["op"] = op
        if grace is not None:
            extra["gracePeriodSeconds"] = grace
        if dry:
            return current
        rv = opts["rv"] if opts["rv"] is not None else (_rv_of(current) if current is not None else None)
        try:
            out = await ctx.endpoint.call("delete", r.store_kind, name, ctx.namespace,
                                          grace_period_seconds=grace, resource_version=rv)
            _note_written(extra, current if current is not None else out, r.kind)
            if isinstance(out, dict) and (out.get("metadata") or {}).get("resourceVersion") is not None:
                extra["rv"] = out["metadata"]["resourceVersion"]     # the delete's own RV
            return out
        except Conflict as e:
            if opts["rv"] is None and rv is not None:
                await _pause()
                continue     # changed after our read (not the client's precondition): read again
            raise _store_error(e, r, name) from None
        except KubeError:
            raise
        except Exception as e:  # noqa: BLE001
            raise _store_error(e, r, name) from None
    raise KubeError(409, "Conflict", f'Operation cannot be fulfilled on {r.qualified} "{name}": gave up after '
                                     f"{MAX_PATCH_RETRIES} conflicting writes", details=_details(r, name))


# --- pods/binding, pods/eviction ----------------------------------------------------------------
async def _bind(ctx: RequestContext, dry: bool, extra: dict, *, legacy: bool = False) -> web.Response:
    r = ctx.resource if not legacy else _PODS
    if dry:
        raise _bad("dryRun is not supported for pods/binding", "dryRun", r, ctx.name)
    body = await _object_body(ctx, "Binding", ("v1",))
    md = body.get("metadata") or {}
    name = ctx.name
    if legacy:
        name = md.get("name")
        if not isinstance(name, str) or not name:
            raise _invalid(r, None, "metadata.name", "Required value: the name of the pod to bind",
                           "FieldValueRequired")
    if md.get("name") != name:
        raise _bad(f"name in URL ({name!r}) does not match name in Binding object ({md.get('name')!r})",
                   "metadata.name", r, name)
    if md.get("namespace") not in (None, "", ctx.namespace):
        raise _bad(f"the namespace of the Binding ({md.get('namespace')!r}) does not match the namespace sent on "
                   f"the request ({ctx.namespace!r})", "metadata.namespace", r, name)
    target = body.get("target")
    if not isinstance(target, dict):
        raise _invalid(r, name, "target", "Required value: a target object {kind: Node, name} is required",
                       "FieldValueRequired")
    if target.get("kind") not in (None, "", "Node"):
        raise _invalid(r, name, "target.kind", f"Invalid value: {target.get('kind')!r}: must be empty or 'Node'")
    node = target.get("name")
    if not isinstance(node, str) or not node:
        raise _invalid(r, name, "target.name", "Required value: the node to bind to", "FieldValueRequired")
    uid = md.get("uid")
    if uid is not None and not isinstance(uid, str):
        raise _bad(f"metadata.uid must be a string, got {uid!r:.80}", "metadata.uid", r, name)
    ann = md.get("annotations")
    if ann is not None and (not isinstance(ann, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                                  for k, v in ann.items())):
        raise _invalid(r, name, "metadata.annotations", "expected a map of string to string")
    extra["op"] = "bind"
    extra["node"] = node
    pod = await _call(ctx, "bind", ctx.namespace, name, node, uid=uid or None, name=name, resource=r)
    _note_written(extra, pod, "Pod")
    # setPodNodeAndMetadata copies the Binding's annotations onto the pod
    have = (pod.get("metadata") or {}).get("annotations") or {}
    changed = {k: v for k, v in (ann or {}).items() if have.get(k) != v}
    if changed:
        extra["annotations"] = len(changed)
        await _call(ctx, "patch_annotations", "Pod", name, ctx.namespace, changed, name=name, resource=r)
    return _status(success_status(code=201))


async def _evict(ctx: RequestContext, dry: bool, extra: dict) -> web.Response:
    r = ctx.resource
    body = await _object_body(ctx, "Eviction", EVICTION_VERSIONS)
    md = body.get("metadata") or {}
    if md.get("name") != ctx.name:
        raise _bad(f"name in URL ({ctx.name!r}) does not match name in Eviction object ({md.get('name')!r})",
                   "metadata.name", r, ctx.name)
    if md.get("namespace") not in (None, "", ctx.namespace):
        raise _bad(f"the namespace of the Eviction ({md.get('namespace')!r}) does not match the namespace sent on "
                   f"the request ({ctx.namespace!r})", "metadata.namespace", r, ctx.name)
    opts = _delete_options(body.get("deleteOptions"), None, r, ctx.name, "deleteOptions.")
    dry = dry or opts["dry"]
    current = await _get_current(ctx)
    if (current.get("metadata") or {}).get("deletionTimestamp") is not None:
        extra["op"] = "evict"
        extra["terminating"] = True
        return _status(success_status(code=201))     # already going: nothing to evict
    await _delete_object(ctx, opts, dry, extra, op="evict")
    return _status(success_status(code=201))
