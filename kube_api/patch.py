"""PATCH bodies applied as kube-apiserver applies them, to an object in its Kubernetes JSON shape.

Three patch types (``Content-Type`` of the PATCH request):

* ``application/merge-patch+json`` -- JSON merge patch (RFC 7386): maps merge, ``null`` deletes,
  lists and scalars replace. :func:`merge_patch`.
* ``application/json-patch+json`` -- JSON patch (RFC 6902): ``add``, ``remove``, ``replace``,
  ``move``, ``copy``, ``test`` with JSON pointers (``~0``/``~1`` escapes, ``-`` appends).
  :func:`json_patch`.
* ``application/strategic-merge-patch+json`` -- strategic merge patch, apimachinery's
  ``strategicpatch.StrategicMergeMapPatch`` for the built-in kinds: lists with a merge key merge
  element by element (``status.conditions`` by ``type``, ``spec.containers`` by ``name``, ...),
  lists of scalars with the merge strategy are unions, every other list is replaced; the
  directives ``$patch: replace | delete`` (in maps and as list elements), ``$setElementOrder/<f>``,
  ``$deleteFromPrimitiveList/<f>`` and ``$retainKeys``; ``null`` deletes. The merged list order is
  apimachinery's: patch items in ``$setElementOrder`` (or patch) order, the live object's other
  items in their order, interleaved by the live order. :func:`strategic_merge_patch`; the merge
  keys are in :data:`MERGE_KEYS` (from the ``patchMergeKey`` / ``patchStrategy`` tags of k8s.io/api
  for the kinds the front stores). Custom resources (the Volcano kinds) take no strategic merge
  patch: 415, as for a CRD.

Errors are :class:`PatchError` with Kubernetes' codes: 400 for a malformed patch (not JSON of the
right shape, an unknown op or directive, a list element without its merge key), 422 when a
well-formed patch does not apply (a JSON patch ``test`` that fails, a path that does not exist).
Nothing is mutated: every function returns a new document.
"""
from __future__ import annotations

import copy
from typing import Any

__all__ = ["PatchError", "MERGE_KEYS", "PRIMITIVE_MERGE", "apply_patch", "merge_patch", "json_patch",
           "strategic_merge_patch", "PATCH_TYPES", "supports_strategic", "MAX_JSON_PATCH_OPS"]

MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
APPLY = "application/apply-patch+yaml"
PATCH_TYPES = (MERGE, JSON_PATCH, STRATEGIC)
MAX_JSON_PATCH_OPS = 10_000      # kube-apiserver's limit on the operations of one JSON patch

# a path element standing for "every element of a list"
ANY = "*"
# the patch strategy of a list of scalars that merges (a union), e.g. metadata.finalizers
PRIMITIVE_MERGE = ""


class PatchError(Exception):
    """A patch that is malformed (400) or does not apply (422); ``field`` names where."""

    def __init__(self, code: int, message: str, field: str | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.field = field


def _bad(message: str, field: str | None = None) -> PatchError:
    return PatchError(400, message, field)


def _unprocessable(message: str, field: str | None = None) -> PatchError:
    return PatchError(422, message, field)


# --- strategic merge patch schema: the lists that merge (others are replaced) -------------------
_META = {("metadata", "ownerReferences"): "uid", ("metadata", "finalizers"): PRIMITIVE_MERGE}
_CONTAINER = {"ports": "containerPort", "env": "name", "volumeMounts": "mountPath",
              "volumeDevices": "devicePath"}


def _containers(field: str) -> dict:
    out = {("spec", field): "name"}
    for sub, key in _CONTAINER.items():
        out[("spec", field, ANY, sub)] = key
    return out


MERGE_KEYS: dict[str, dict[tuple, str]] = {
    "Pod": {**_META, **_containers("containers"), **_containers("initContainers"),
            **_containers("ephemeralContainers"),
            ("spec", "volumes"): "name", ("spec", "imagePullSecrets"): "name",
            ("spec", "hostAliases"): "ip", ("spec", "schedulingGates"): "name",
            ("spec", "resourceClaims"): "name", ("spec", "topologySpreadConstraints"): "topologyKey",
            ("status", "conditions"): "type", ("status", "podIPs"): "ip", ("status", "hostIPs"): "ip",
            ("status", "resourceClaimStatuses"): "name"},
    "Node": {**_META, ("spec", "podCIDRs"): PRIMITIVE_MERGE, ("status", "conditions"): "type",
             ("status", "addresses"): "type"},
    "Namespace": dict(_META),
    "Event": dict(_META),
    "Lease": dict(_META),
    "PriorityClass": dict(_META),
    "Binding": dict(_META),
    "Eviction": dict(_META),
}


def supports_strategic(kind: str) -> bool:
    """Strategic merge patch needs the Go struct tags of a built-in kind; custom resources have none."""
    return kind in MERGE_KEYS


def apply_patch(doc: dict, patch: Any, content_type: str, kind: str) -> dict:
    """The patched copy of ``doc`` for a PATCH of ``content_type``; PatchError otherwise (415 for
    server-side apply and unknown types, as kube-apiserver answers)."""
    if content_type == MERGE:
        return merge_patch(doc, patch)
    if content_type == JSON_PATCH:
        return json_patch(doc, patch)
    if content_type == STRATEGIC:
        if not supports_strategic(kind):
            raise PatchError(415, f"strategic merge patch is not supported for {kind} (a custom resource); "
                                  f"accepted media types: {MERGE}, {JSON_PATCH}")
        return strategic_merge_patch(doc, patch, MERGE_KEYS[kind])
    if content_type == APPLY:
        raise PatchError(415, "server-side apply (application/apply-patch+yaml) is not supported by this API "
                              f"server; send {MERGE}, {JSON_PATCH} or {STRATEGIC}")
    raise PatchError(415, f"the patch content type {content_type or '(none)'!r} is unsupported; accepted "
                          f"media types: {JSON_PATCH}, {MERGE}, {STRATEGIC}")


# --- JSON merge patch (RFC 7386) ----------------------------------------------------------------
def merge_patch(doc: dict, patch: Any) -> dict:
    if not isinstance(patch, dict):
        raise _bad(f"a merge patch must be a JSON object, got {_type(patch)}")
    return _merge(doc, patch)


def _merge(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = _merge(out.get(k), v)
    return out


# --- JSON patch (RFC 6902) ----------------------------------------------------------------------
def _pointer(path: Any, i: int, what: str = "path") -> list[str]:
    where = f"[{i}].{what}"
    if not isinstance(path, str):
        raise _bad(f"JSON patch operation {i}: {what} must be a string, got {_type(path)}", where)
    if path == "":
        return []
    if not path.startswith("/"):
        raise _bad(f"JSON patch operation {i}: {what} {path!r} is not a JSON pointer (must start with '/')", where)
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _index(container: list, token: str, path: str, *, append_ok: bool) -> int:
    if token == "-" and append_ok:
        return len(container)
    if not token.isdigit() or (len(token) > 1 and token[0] == "0"):
        raise _unprocessable(f"{path}: {token!r} is not a list index")
    i = int(token)
    limit = len(container) if append_ok else len(container) - 1
    if i > limit:
        raise _unprocessable(f"{path}: index {i} is out of range (the list has {len(container)} elements)")
    return i


def _walk(doc: Any, parts: list[str], path: str) -> Any:
    cur = doc
    for p in parts:
        if isinstance(cur, dict):
            if p not in cur:
                raise _unprocessable(f"{path}: the document has no {p!r} (missing key)")
            cur = cur[p]
        elif isinstance(cur, list):
            cur = cur[_index(cur, p, path, append_ok=False)]
        else:
            raise _unprocessable(f"{path}: cannot descend into a {_type(cur)} at {p!r}")
    return cur


def _add(doc: Any, parts: list[str], value: Any, path: str) -> Any:
    if not parts:
        return value
    parent = _walk(doc, parts[:-1], path)
    last = parts[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, path, append_ok=True), value)
    else:
        raise _unprocessable(f"{path}: the parent is a {_type(parent)}, not an object or a list")
    return doc


def _remove(doc: Any, parts: list[str], path: str) -> tuple[Any, Any]:
    if not parts:
        raise _unprocessable(f"{path!r}: cannot remove the whole document")
    parent = _walk(doc, parts[:-1], path)
    last = parts[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise _unprocessable(f"{path}: the document has no {last!r} to remove")
        return doc, parent.pop(last)
    if isinstance(parent, list):
        return doc, parent.pop(_index(parent, last, path, append_ok=False))
    raise _unprocessable(f"{path}: the parent is a {_type(parent)}, not an object or a list")


def json_patch(doc: dict, patch: Any) -> dict:
    if not isinstance(patch, list):
        raise _bad(f"a JSON patch must be a JSON array of operations, got {_type(patch)}")
    if len(patch) > MAX_JSON_PATCH_OPS:
        raise PatchError(413, f"the JSON patch has {len(patch)} operations, more than the limit of "
                              f"{MAX_JSON_PATCH_OPS}")
    out: Any = copy.deepcopy(doc)
    for i, op in enumerate(patch):
        if not isinstance(op, dict):
            raise _bad(f"JSON patch operation {i} must be an object, got {_type(op)}", f"[{i}]")
        kind = op.get("op")
        path = op.get("path")
        parts = _pointer(path, i)
        if kind in ("add", "replace", "test") and "value" not in op:
            raise _bad(f"JSON patch operation {i} ({kind} {path}) has no value", f"[{i}].value")
        if kind == "add":
            out = _add(out, parts, copy.deepcopy(op["value"]), path)
        elif kind == "remove":
            out, _ = _remove(out, parts, path)
        elif kind == "replace":
            if parts:
                _walk(out, parts, path)     # must exist
                out, _ = _remove(out, parts, path)
            out = _add(out, parts, copy.deepcopy(op["value"]), path)
        elif kind in ("move", "copy"):
            src = _pointer(op.get("from"), i, "from")
            if kind == "move":
                if src == parts[:len(src)] and len(parts) > len(src):
                    raise _unprocessable(f"{path}: cannot move {op.get('from')!r} into its own child")
                out, value = _remove(out, src, op.get("from"))
            else:
                value = copy.deepcopy(_walk(out, src, op.get("from")))
            out = _add(out, parts, value, path)
        elif kind == "test":
            got = _walk(out, parts, path)
            if not _json_equal(got, op["value"]):
                raise _unprocessable(f"JSON patch test operation {i} failed: {path} is {got!r:.120}, "
                                     f"not {op['value']!r:.120}", path)
        else:
            raise _bad(f"JSON patch operation {i}: unknown op {kind!r} (add, remove, replace, move, copy, test)",
                       f"[{i}].op")
    if not isinstance(out, dict):
        raise _unprocessable(f"the patched document is a {_type(out)}, not an object")
    return out


def _json_equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


# --- strategic merge patch ----------------------------------------------------------------------
DIRECTIVE = "$patch"
SET_ORDER = "$setElementOrder/"
DELETE_PRIMITIVE = "$deleteFromPrimitiveList/"
RETAIN_KEYS = "$retainKeys"


def strategic_merge_patch(doc: dict, patch: Any, merge_keys: dict[tuple, str]) -> dict:
    """apimachinery's StrategicMergeMapPatch (MergeParallelList, IgnoreUnmatchedNulls) with
    ``merge_keys``: list path (``ANY`` for list elements) -> merge key, or PRIMITIVE_MERGE."""
    if not isinstance(patch, dict):
        raise _bad(f"a strategic merge patch must be a JSON object, got {_type(patch)}")
    out = _smp_map(copy.deepcopy(doc), copy.deepcopy(patch), (), merge_keys)
    if not isinstance(out, dict):
        raise _unprocessable("the patched document is not an object")
    return out


def _fmt(path: tuple) -> str:
    return ".".join(p if p != ANY else "[*]" for p in path).replace(".[*]", "[*]") or "<object>"


def _smp_map(original: Any, patch: dict, path: tuple, mk: dict) -> Any:
    if DIRECTIVE in patch:
        d = patch[DIRECTIVE]
        if d == "replace":
            rest = {k: v for k, v in patch.items() if k != DIRECTIVE}
            return _discard_nulls(rest)
        if d == "delete":
            return {}
        raise _bad(f"{_fmt(path)}: unknown $patch directive {d!r} (replace or delete)", _fmt(path))
    if not isinstance(original, dict):
        original = {}
    if RETAIN_KEYS in patch:
        keep = patch.pop(RETAIN_KEYS)
        if not isinstance(keep, list) or not all(isinstance(k, str) for k in keep):
            raise _bad(f"{_fmt(path)}: $retainKeys must be a list of field names", _fmt(path))
        for k in [k for k in original if k not in keep]:
            del original[k]
        for k in patch:
            if not k.startswith("$") and k not in keep:
                raise _unprocessable(f"{_fmt(path)}: the patch sets {k!r}, which $retainKeys does not list",
                                     _fmt(path))
    # $setElementOrder lists, each with its patch list
    for key in [k for k in patch if k.startswith(SET_ORDER)]:
        field = key[len(SET_ORDER):]
        order = patch.pop(key)
        fpath = path + (field,)
        if not isinstance(order, list):
            raise _bad(f"{_fmt(fpath)}: {key} must be a list", _fmt(fpath))
        merge_key = mk.get(fpath)
        if merge_key is None:
            raise _bad(f"{_fmt(fpath)}: {key} is given for a list that does not merge", _fmt(fpath))
        orig_list = original.get(field)
        orig_list = orig_list if isinstance(orig_list, list) else []
        has_patch = field in patch
        patch_list = patch.pop(field, None)
        if has_patch and patch_list is not None and not isinstance(patch_list, list):
            raise _bad(f"{_fmt(fpath)}: expected a list, got {_type(patch_list)}", _fmt(fpath))
        delete_key = DELETE_PRIMITIVE + field
        if merge_key == PRIMITIVE_MERGE and delete_key in patch:
            orig_list = _delete_primitives(orig_list, patch.pop(delete_key), fpath)
        _check_order(order, patch_list or [], merge_key, fpath)
        if patch_list:
            merged = _smp_list(orig_list, patch_list, fpath, mk, merge_key, reorder=False)
        else:
            merged = list(orig_list)
        in_order, server_only = _partition(merged, order, merge_key)
        merged = _normalize_order(in_order, server_only, order, orig_list, merge_key)
        if merged or field in original:
            original[field] = merged
    for k, pv in list(patch.items()):
        if k.startswith(DELETE_PRIMITIVE):
            field = k[len(DELETE_PRIMITIVE):]
            fpath = path + (field,)
            if mk.get(fpath) != PRIMITIVE_MERGE:
                raise _bad(f"{_fmt(fpath)}: {k} is given for a list that is not a merging list of scalars",
                           _fmt(fpath))
            if field in original:
                cur = original[field] if isinstance(original[field], list) else []
                original[field] = _delete_primitives(cur, pv, fpath)
            continue
        if k.startswith("$"):
            raise _bad(f"{_fmt(path)}: unknown directive {k!r}", _fmt(path + (k,)))
        if pv is None:
            original.pop(k, None)
            continue
        fpath = path + (k,)
        if k not in original:
            original[k] = _strip_directives(_discard_nulls(pv))
            continue
        ov = original[k]
        if isinstance(ov, dict) and isinstance(pv, dict):
            original[k] = _smp_map(ov, pv, fpath, mk)
        elif isinstance(ov, list) and isinstance(pv, list):
            strategy = mk.get(fpath)
            if strategy is None:
                original[k] = _strip_directives(_discard_nulls(pv))   # no merge key: the list is replaced
            else:
                original[k] = _smp_list(ov, pv, fpath, mk, strategy, reorder=True)
        else:
            original[k] = _strip_directives(_discard_nulls(pv))
    return original


def _smp_list(original: list, patch: list, path: tuple, mk: dict, merge_key: str, *, reorder: bool) -> list:
    """mergeSlice: scalars are a union; maps merge by ``merge_key`` with $patch elements."""
    if not original and not patch:
        return []
    if merge_key == PRIMITIVE_MERGE or not any(isinstance(x, dict) for x in original + patch):
        if any(isinstance(x, (dict, list)) for x in patch):
            raise _bad(f"{_fmt(path)}: expected a list of scalars", _fmt(path))
        merged = []
        for x in list(original) + list(patch):
            if x not in merged:
                merged.append(x)
        if not reorder:
            return merged
        in_patch = [x for x in merged if x in patch]
        server_only = [x for x in merged if x not in patch]
        return _normalize_order(in_patch, server_only, patch, original, None)
    for i, x in enumerate(patch):
        if not isinstance(x, dict):
            raise _bad(f"{_fmt(path)}[{i}]: expected an object with the merge key {merge_key!r}, got {_type(x)}",
                       f"{_fmt(path)}[{i}]")
    # special elements: {"$patch": "delete", key: v} and {"$patch": "replace"}
    plain, replace = [], False
    original = list(original)
    for i, x in enumerate(patch):
        d = x.get(DIRECTIVE)
        if d is None:
            plain.append(x)
        elif d == "delete":
            if merge_key not in x:
                raise _bad(f"{_fmt(path)}[{i}]: a $patch: delete element needs the merge key {merge_key!r}",
                           f"{_fmt(path)}[{i}]")
            original = [o for o in original if not (isinstance(o, dict) and o.get(merge_key) == x[merge_key])]
        elif d == "replace":
            replace = True
        else:
            raise _bad(f"{_fmt(path)}[{i}]: unknown $patch directive {d!r} in a list (delete or replace)",
                       f"{_fmt(path)}[{i}]")
    if replace:
        return [_strip_directives(_discard_nulls(x)) for x in plain]
    elem_path = path + (ANY,)
    merged = list(original)
    for i, x in enumerate(plain):
        if merge_key not in x:
            raise _bad(f"{_fmt(path)}[{i}]: the element has no merge key {merge_key!r}", f"{_fmt(path)}[{i}]")
        for j, o in enumerate(merged):
            if isinstance(o, dict) and o.get(merge_key) == x[merge_key]:
                merged[j] = _smp_map(o, x, elem_path, mk)
                break
        else:
            merged.append(_strip_directives(_discard_nulls(x)))
    if not reorder:
        return merged
    in_patch, server_only = _partition(merged, plain, merge_key)
    return _normalize_order(in_patch, server_only, plain, original, merge_key)


def _delete_primitives(items: list, values: Any, path: tuple) -> list:
    if not isinstance(values, list):
        raise _bad(f"{_fmt(path)}: $deleteFromPrimitiveList must be a list", _fmt(path))
    return [x for x in items if x not in values]


def _key_of(item: Any, merge_key: str | None) -> Any:
    if merge_key:
        return item.get(merge_key) if isinstance(item, dict) else object()
    return item


def _check_order(order: list, patch_list: list, merge_key: str, path: tuple) -> None:
    """validatePatchWithSetOrderList: every patch item (not a $patch: delete) is in the order list."""
    keys = []
    for x in order:
        if merge_key:
            if not isinstance(x, dict) or merge_key not in x:
                raise _bad(f"{_fmt(path)}: every $setElementOrder item needs the merge key {merge_key!r}",
                           _fmt(path))
            keys.append(x[merge_key])
        else:
            keys.append(x)
    for x in patch_list:
        if isinstance(x, dict) and x.get(DIRECTIVE) == "delete":
            continue
        k = _key_of(x, merge_key)
        if k not in keys:
            raise _bad(f"{_fmt(path)}: the patch item {k!r} is not in $setElementOrder", _fmt(path))


def _partition(merged: list, order: list, merge_key: str | None) -> tuple[list, list]:
    keys = [_key_of(x, merge_key) for x in order if not (isinstance(x, dict) and x.get(DIRECTIVE))]
    inside, outside = [], []
    for x in merged:
        (inside if _key_of(x, merge_key) in keys else outside).append(x)
    return inside, outside


def _position(items: list, item: Any, merge_key: str | None) -> int:
    k = _key_of(item, merge_key)
    for i, x in enumerate(items):
        if _key_of(x, merge_key) == k:
            return i
    return -1


def _normalize_order(in_patch: list, server_only: list, patch_order: list, server_order: list,
                     merge_key: str | None) -> list:
    """normalizeElementOrder + mergeSortedSlice: patch items sorted by the patch order, server-only
    items by the live order, then interleaved by the live order (both orders kept)."""
    in_patch = sorted(in_patch, key=lambda x: _position(patch_order, x, merge_key))
    server_only = sorted(server_only, key=lambda x: _position(server_order, x, merge_key))
    out, i, j = [], 0, 0
    while i < len(server_only) or j < len(in_patch):
        if i >= len(server_only):
            out.append(in_patch[j]); j += 1
        elif j >= len(in_patch):
            out.append(server_only[i]); i += 1
        else:
            li = _position(server_order, server_only[i], merge_key)
            ri = _position(server_order, in_patch[j], merge_key)
            if li >= 0 and ri >= 0 and li < ri:
                out.append(server_only[i]); i += 1
            else:
                out.append(in_patch[j]); j += 1
    return out


def _discard_nulls(v: Any) -> Any:
    """IgnoreUnmatchedNulls: a null inside a value that the live object does not have is dropped."""
    if isinstance(v, dict):
        return {k: _discard_nulls(x) for k, x in v.items() if x is not None}
    return v


def _strip_directives(v: Any) -> Any:
    """A new value taken from the patch carries no directives of its own."""
    if isinstance(v, dict):
        return {k: _strip_directives(x) for k, x in v.items() if not k.startswith("$")}
    if isinstance(v, list):
        return [_strip_directives(x) for x in v if not (isinstance(x, dict) and DIRECTIVE in x)]
    return v


def _type(v: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number",
            type(None): "null"}.get(type(v), type(v).__name__)
