"""The API server's logic, written once for both clients ("sans-IO").

Every operation is a generator that *yields* Redis requests (:class:`Script`, :class:`Command`, or
:class:`Stream` of scripts) and receives their raw replies; :class:`ApiClient` drives it with redis-py, :class:`AsyncApiClient`
with redis.asyncio. So validation, encoding, preconditions, retries and reply parsing exist once.

Redis layout under ``<prefix>:``
  rv               global resourceVersion counter, shared by all kinds
  obj:<Kind>       hash  "ns/name" | "name" -> object bytes (see codec.py for the layout), and
                   "\0" + that field -> length of the object's packed status (for Lua splicing)
  ev:<Kind>        stream of watch events, entry ID "<rv>-0", fields t=<type>, o=<object bytes>
  compacted        hash  Kind -> RV up to which that kind's history may be missing (410 below it)
  terminating      zset  Pod field -> graceful-deletion deadline (unix seconds)
Every write is ONE EVALSHA of lua/apply.lua (check, bump RV, store, append event, trim), or of
lua/create.lua (the same for one create, leaner); pods/binding runs inside Redis (lua/bind.lua,
100 pods per EVALSHA).
"""
from __future__ import annotations

import hashlib
import itertools
import os
import re
import time
import uuid
from dataclasses import dataclass
from importlib import resources
from typing import Any, Callable, Generator, Iterable, Iterator

import msgpack

from .codec import decode, encode, rv_bytes
from .errors import (AlreadyExists, ApiError, BadRequest, Conflict, CorruptObject, Gone, Invalid,
                     NotFound, ServerError)
from .objects import KindInfo, kind_info, normalise, object_key
from .watch import ListResult, WatchEvent, events_from_entries

__all__ = ["Script", "Command", "Stream", "Txn", "Store", "Op", "keys_for", "SCRIPTS"]

_packb = msgpack.packb
# retries of read-modify-write operations (bind, patch, graceful delete) on a racing writer,
# like the apiserver's GuaranteedUpdate loop
MAX_RETRIES = 16
BIND_CHUNK = 50          # binds per Lua call in bind_many, calls pipelined (Stream): the client
                         # decodes chunk k's pods while Redis binds chunk k+1
FINALIZE_BATCH = 1000


def _load_scripts() -> dict[str, tuple[str, str]]:
    lua = resources.files("cluster_state") / "lua"
    lib = (lua / "lib.lua").read_text()
    out = {}
    for name in ("apply", "create", "bind", "list", "compact", "finalize"):
        src = lib + "\n" + (lua / f"{name}.lua").read_text()
        out[name] = (src, hashlib.sha1(src.encode()).hexdigest())
    return out


SCRIPTS = _load_scripts()   # name -> (source, sha1)


@dataclass(frozen=True)
class Script:
    name: str
    args: list


@dataclass(frozen=True)
class Command:
    args: tuple


@dataclass(frozen=True)
class Stream:
    """Scripts sent on one connection *as they are produced* (the iterator does the Python work
    between sends), replies read at the end: Redis runs chunk k while we encode chunk k+1. The
    driver returns the replies in order, and calls ``on_reply(i, reply)`` (if given) for each
    successful reply as soon as it is read, so the caller's work on reply k overlaps Redis's work
    on script k+1."""
    scripts: Iterator[Script]
    on_reply: Callable[[int, Any], None] | None = None


@dataclass(frozen=True)
class Txn:
    """Commands run as one MULTI/EXEC (atomic, no script): the driver returns EXEC's reply, the
    commands' raw replies in order (an error reply is raised)."""
    commands: tuple


Op = Generator[Any, Any, Any]


class _Keys:
    def __init__(self, prefix: str):
        self.prefix = prefix
        self.rv = f"{prefix}:rv"
        self.compacted = f"{prefix}:compacted"
        self.terminating = f"{prefix}:terminating"

    def obj(self, kind: str) -> str:
        return f"{self.prefix}:obj:{kind}"

    def stream(self, kind: str) -> str:
        return f"{self.prefix}:ev:{kind}"


def keys_for(prefix: str) -> _Keys:
    """Key names of an API server (e.g. for chaos that writes raw entries into a watch stream)."""
    return _Keys(prefix)


def _reseed_uids() -> None:
    global _UID_PREFIX, _UID_SEQ
    b = uuid.uuid4().hex
    _UID_PREFIX = f"{b[:8]}-{b[8:12]}-{b[12:16]}-{b[16:20]}-"
    _UID_SEQ = itertools.count(1)


_reseed_uids()
os.register_at_fork(after_in_child=_reseed_uids)  # a forked child must not repeat the parent's uids


def _new_uid() -> str:
    """UUID-shaped and unique: 80 random bits per process + a counter (uuid4() per object costs
    more than the rest of a create's Python work)."""
    return f"{_UID_PREFIX}{next(_UID_SEQ):012x}"


KINDS_POD = kind_info("Pod")
_NAME_OK = re.compile(r"[^/\s]{1,253}").fullmatch   # objects._check_name's rule (fast path only)


def _ref(info: KindInfo, key: str) -> dict:
    ns, _, name = key.rpartition("/")
    return {"kind": info.name, "namespace": ns or None, "name": name}


def _raise_for(code: int, rv: int, info: KindInfo, key: str, what: str) -> None:
    ref = _ref(info, key)
    if code == 404:
        raise NotFound(f"{what}: not found", **ref)
    if code == 4091:
        raise AlreadyExists(f"{what}: already exists (resourceVersion {rv})", resource_version=rv, **ref)
    if code == 4092:
        raise Conflict(f"{what}: the object has been modified (stored resourceVersion {rv}); "
                       f"get the latest version and try again", field="metadata.resourceVersion",
                       resource_version=rv, **ref)
    raise ServerError(f"{what}: unexpected reply code {code}", **ref)


def _input_object(obj: object) -> object:
    """Objects may be given as dicts or as msgpack bytes; undecodable bytes are a 400."""
    if isinstance(obj, (bytes, bytearray, memoryview)):
        try:
            return decode(obj, what="request body")
        except CorruptObject as e:
            raise BadRequest(e.message, field="<body>") from None
    return obj


def _check_str(value: object, field: str, ref: dict) -> str:
    if not isinstance(value, str) or not value:
        raise BadRequest(f"expected a non-empty string, got {value!r}", field=field, **ref)
    return value


class Store:
    """Request builder + reply parser shared by the sync and async clients."""

    def __init__(self, prefix: str = "ht", *, history: int = 100_000, clear_nnn_on_binding: bool = False):
        if not isinstance(prefix, str) or not prefix or any(c.isspace() for c in prefix):
            raise ValueError(f"prefix must be a non-empty string without spaces, got {prefix!r}")
        if isinstance(history, bool) or not isinstance(history, int) or history < 1:
            raise ValueError(f"history must be a positive integer, got {history!r}")
        self.prefix = prefix
        self.history = history
        self.clear_nnn_on_binding = bool(clear_nnn_on_binding)
        self.keys = _Keys(prefix)

    # --- request helpers --------------------------------------------------------------------
    def _script(self, name: str, *args) -> Script:
        return Script(name, [self.prefix, *args])

    def _apply(self, ops: Iterable[tuple]) -> Script:
        # every op's 7 fields in ONE msgpack argument: redis-py packs one big argument ~6x faster
        # than 7 per op. use_bin_type=False because Redis 6.2's cmsgpack cannot read bin types.
        # Each blob goes without its 8 placeholder RV bytes: Lua appends the real RV.
        flat: list = []
        for op, kind, key, expect, blob, slen, extra in ops:
            flat += (op, kind, key, expect, blob[:-8] if blob else blob, slen, extra)
        return Script("apply", [self.prefix, self.history, _packb(flat, use_bin_type=False)])

    @staticmethod
    def _triples(raw: list) -> list[tuple[int, int, bytes | None]]:
        return [(raw[i], raw[i + 1], raw[i + 2]) for i in range(0, len(raw), 3)]

    def _decode_stored(self, raw: bytes, info: KindInfo, key: str) -> dict:
        try:
            return decode(raw)
        except CorruptObject as e:
            raise CorruptObject(f"stored {info.name} {key}: {e.message}", **_ref(info, key)) from None

    # --- create / get / list / update / delete ---------------------------------------------
    def create(self, obj: object) -> Op:
        obj, info, key = normalise(_input_object(obj))
        md = obj["metadata"]
        if not md.get("uid"):
            md["uid"] = _new_uid()
        if md.get("creationTimestamp") is None:
            md["creationTimestamp"] = time.time()
        blob, slen = encode(obj)
        # lua/create.lua: apply's op C without an op list to pack and unpack
        code, rv = yield Script("create", [self.prefix, self.history, info.name, key, blob[:-8], slen])
        if code:
            _raise_for(code, rv, info, key, "create")
        md["resourceVersion"] = rv
        return obj

    def get(self, kind: str, name: str, namespace: str | None = None) -> Op:
        info = kind_info(kind, namespace=namespace, name=name)
        key = object_key(info, name, namespace)
        raw = yield Command(("HGET", self.keys.obj(info.name), key))
        if raw is None:
            raise NotFound("get: not found", **_ref(info, key))
        return self._decode_stored(raw, info, key)

    def list(self, kind: str, namespace: str | None = None) -> Op:
        info = kind_info(kind, namespace=namespace)
        if namespace is not None and not info.namespaced:
            raise BadRequest(f"{info.name} is cluster-scoped; list it without a namespace",
                             kind=info.name, namespace=namespace, field="namespace")
        rv, flat = yield self._script("list", info.name)
        pre = f"{namespace}/".encode() if namespace else None
        items, corrupt = [], []
        for i in range(0, len(flat), 2):
            k = flat[i]
            if k[:1] == b"\0" or (pre is not None and not k.startswith(pre)):
                continue  # status-length fields, other namespaces
            try:
                items.append(decode(flat[i + 1]))
            except CorruptObject as e:
                corrupt.append((k.decode(errors="replace"), f"stored {info.name} {k!r}: {e.message}"))
        return ListResult(items, rv, corrupt)

    def update(self, obj: object) -> Op:
        """Replace everything but ``status`` (precondition: metadata.resourceVersion, if set)."""
        return (yield from self._write_part("U", obj, "update"))

    def update_status(self, obj: object) -> Op:
        """The /status subresource: replace only ``status``; spec and metadata are ignored."""
        return (yield from self._write_part("T", obj, "update_status"))

    def _write_part(self, op: str, obj: object, what: str) -> Op:
        obj, info, key = normalise(_input_object(obj))
        md = obj["metadata"]
        rv = md.get("resourceVersion")
        if op == "U" and (not md.get("uid") or md.get("creationTimestamp") is None):
            # server-assigned fields missing from the request: carry them over from the stored
            # object (and pin its RV so a re-created object is not overwritten by mistake)
            raw = yield Command(("HGET", self.keys.obj(info.name), key))
            if raw is None:
                raise NotFound(f"{what}: not found", **_ref(info, key))
            cur = self._decode_stored(raw, info, key)["metadata"]
            for f in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds"):
                if md.get(f) is None and cur.get(f) is not None:
                    md[f] = cur[f]
            if not rv:
                rv = cur.get("resourceVersion")
        blob, slen = encode(obj)
        expect = rv_bytes(rv) if rv else ""
        raw = yield self._apply([(op, info.name, key, expect, blob, slen, "")])
        code, new_rv, new = raw
        if code:
            _raise_for(code, new_rv, info, key, what)
        return self._decode_stored(new, info, key)

    def delete(self, kind: str, name: str, namespace: str | None = None, *,
               grace_period_seconds: int | None = None, resource_version: int | None = None,
               now: float | None = None) -> Op:
        """Objects go at once; a Pod with a grace period > 0 gets ``deletionTimestamp`` (= the time
        it will be removed, as in Kubernetes) and ``deletionGracePeriodSeconds`` (MODIFIED) and is
        removed (DELETED) by :meth:`finalize_deletions` or a later delete with grace 0."""
        info = kind_info(kind, namespace=namespace, name=name)
        key = object_key(info, name, namespace)
        ref = _ref(info, key)
        if grace_period_seconds is not None and (isinstance(grace_period_seconds, bool) or not
                                                 isinstance(grace_period_seconds, int)
                                                 or grace_period_seconds < 0):
            raise BadRequest(f"grace_period_seconds must be an integer >= 0, got {grace_period_seconds!r}",
                             field="gracePeriodSeconds", **ref)
        okey = self.keys.obj(info.name)
        for _ in range(MAX_RETRIES):
            grace = grace_period_seconds
            if info.name == "Pod" and grace != 0:
                raw = yield Command(("HGET", okey, key))
                if raw is None:
                    raise NotFound("delete: not found", **ref)
                pod = self._decode_stored(raw, info, key)
                md = pod["metadata"]
                if resource_version is not None and md.get("resourceVersion") != resource_version:
                    _raise_for(4092, md.get("resourceVersion"), info, key, "delete")
                if grace is None:
                    grace = (pod.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
                    grace = grace if isinstance(grace, int) and grace >= 0 else 30
                expect = raw[-8:]
                if grace > 0:
                    t = time.time() if now is None else now
                    deadline = t + grace
                    old = md.get("deletionTimestamp")
                    if old is not None and old <= deadline:
                        return pod  # already terminating at least as soon: nothing to change
                    md["deletionTimestamp"] = deadline
                    md["deletionGracePeriodSeconds"] = grace
                    blob, slen = encode(pod)
                    code, rv, _ = yield self._apply([("P", info.name, key, expect, blob, slen, repr(deadline))])
                    if code == 4092:
                        continue
                    if code:
                        _raise_for(code, rv, info, key, "delete")
                    md["resourceVersion"] = rv
                    return pod
            else:
                expect = rv_bytes(resource_version) if resource_version is not None else ""
            code, rv, last = yield self._apply([("D", info.name, key, expect, "", 0, "")])
            if code == 4092 and resource_version is None:
                continue  # raced with a writer after our read: re-read
            if code:
                _raise_for(code, rv, info, key, "delete")
            return self._decode_stored(last, info, key)
        raise Conflict(f"delete: gave up after {MAX_RETRIES} conflicting writes", **ref)

    def evict(self, namespace: str, name: str, *, grace_period_seconds: int | None = None) -> Op:
        """The eviction subresource: a graceful delete of a Pod (404 if it is missing)."""
        return (yield from self.delete("Pod", name, namespace, grace_period_seconds=grace_period_seconds))

    def finalize_deletions(self, now: float | None = None) -> Op:
        """Remove pods whose grace period has ended (DELETED events); returns how many."""
        t = time.time() if now is None else now
        total = 0
        while True:
            removed, seen = yield self._script("finalize", self.history, repr(t), FINALIZE_BATCH)
            total += removed
            if seen < FINALIZE_BATCH:
                return total

    # --- read-modify-write subresources ---------------------------------------------------------
    def _guaranteed_update(self, info: KindInfo, key: str, mutate: Callable[[dict], dict | None],
                           what: str) -> Op:
        okey = self.keys.obj(info.name)
        for _ in range(MAX_RETRIES):
            raw = yield Command(("HGET", okey, key))
            if raw is None:
                raise NotFound(f"{what}: not found", **_ref(info, key))
            obj = self._decode_stored(raw, info, key)
            new = mutate(obj)
            if new is None:
                return obj
            blob, slen = encode(new)
            code, rv, _ = yield self._apply([("P", info.name, key, raw[-8:], blob, slen, "")])
            if code == 4092:
                continue
            if code:
                _raise_for(code, rv, info, key, what)
            new["metadata"]["resourceVersion"] = rv
            return new
        raise Conflict(f"{what}: gave up after {MAX_RETRIES} conflicting writes", **_ref(info, key))

    def patch_annotations(self, kind: str, name: str, namespace: str | None,
                          patch: dict[str, str | None]) -> Op:
        """Merge-patch metadata.annotations; a value of None removes the key."""
        info = kind_info(kind, namespace=namespace, name=name)
        key = object_key(info, name, namespace)
        ref = _ref(info, key)
        if not isinstance(patch, dict):
            raise BadRequest(f"expected a map of annotation -> string or None, got {type(patch).__name__}",
                             field="metadata.annotations", **ref)
        for k, v in patch.items():
            if not isinstance(k, str) or not k or not (v is None or isinstance(v, str)):
                raise Invalid(f"annotation {k!r}: expected a non-empty string key and a string or None "
                              f"value, got {v!r}", field=f"metadata.annotations.{k}", **ref)

        def mutate(obj: dict) -> dict | None:
            ann = dict(obj["metadata"].get("annotations") or {})
            before = dict(ann)
            for k, v in patch.items():
                if v is None:
                    ann.pop(k, None)
                else:
                    ann[k] = v
            if ann == before:
                return None  # no-op patches do not bump the RV (as in Kubernetes)
            obj["metadata"]["annotations"] = ann
            return obj

        return (yield from self._guaranteed_update(info, key, mutate, "patch_annotations"))

    def _bind_pod(self, pod: dict, node: str, uid: str | None, key: str, now: float) -> dict:
        """pods/binding preconditions and effect (pkg/registry/core/pod/storage: BindingREST)."""
        md = pod["metadata"]
        spec = pod.get("spec")
        if type(spec) is not dict:
            spec = pod["spec"] = {}
        status = pod.get("status")
        if type(status) is not dict:
            status = pod["status"] = {}
        if uid is not None and md.get("uid") != uid:
            raise Conflict(f"bind: precondition failed: uid {uid!r} != stored {md.get('uid')!r}",
                           **_ref(KINDS_POD, key))
        if md.get("deletionTimestamp") is not None:
            raise Conflict(f"bind: pod {key} is being deleted, cannot be assigned to a host",
                           **_ref(KINDS_POD, key))
        if spec.get("nodeName"):
            raise Conflict(f"bind: pod {key} is already assigned to node {spec['nodeName']!r}",
                           field="spec.nodeName", **_ref(KINDS_POD, key))
        spec["nodeName"] = node
        cond = {"type": "PodScheduled", "status": "True", "reason": "", "message": "",
                "lastTransitionTime": now}
        old = status.get("conditions")
        if old:
            status["conditions"] = [c for c in old if not (type(c) is dict and c.get("type") == "PodScheduled")]
            status["conditions"].append(cond)
        else:
            status["conditions"] = [cond]
        if self.clear_nnn_on_binding and status.get("nominatedNodeName"):
            status["nominatedNodeName"] = ""  # ClearingNominatedNodeNameAfterBinding: same write
        return pod

    def bind(self, namespace: str, name: str, node_name: str, *, uid: str | None = None) -> Op:
        results = yield from self.bind_many([(namespace, name, node_name)], uids=[uid])
        if isinstance(results[0], ApiError):
            raise results[0]
        return results[0]

    def bind_many(self, bindings: list[tuple[str, str, str]], *, uids: list | None = None) -> Op:
        """Many pods/binding writes; per-item result (the bound pod) or ApiError. ``uids``: per
        binding a uid precondition or None.

        The binding itself runs inside Redis (lua/bind.lua: read, check, splice, store, event —
        atomic per pod, so no RV precondition or retry is needed), 100 per script. A pod whose
        stored shape the script does not handle (e.g. a non-map spec) comes back as 422 and is
        bound here by the Python read-modify-write path, with an RV precondition."""
        info = KINDS_POD
        n = len(bindings)
        if uids is not None and (not isinstance(uids, (list, tuple)) or len(uids) != n):
            raise BadRequest(f"uids: expected a list of {n} uids or None, got {uids!r:.80}",
                             kind="Pod", field="uids")
        results: list[Any] = [None] * n
        pending: list[int] = []
        keys: list[str] = [""] * n
        name_ok = _NAME_OK
        for i, b in enumerate(bindings):
            try:
                if not isinstance(b, (tuple, list)) or len(b) != 3:
                    raise BadRequest(f"binding #{i}: expected (namespace, name, node_name), got {b!r:.80}",
                                     kind="Pod", field="binding")
                ns, name, node = b
                u = uids[i] if uids is not None else None
                if (type(ns) is str and type(name) is str and type(node) is str and node
                        and (u is None or type(u) is str) and name_ok(ns) and name_ok(name)):
                    keys[i] = f"{ns}/{name}"   # the common case, checked as object_key would
                else:
                    keys[i] = object_key(info, name, ns)
                    ref = {"kind": "Pod", "namespace": ns, "name": name}
                    _check_str(node, "target.name", ref)
                    if u is not None and not isinstance(u, str):
                        raise BadRequest(f"uid precondition must be a string or None, got {u!r:.80}",
                                         field="metadata.uid", **ref)
                pending.append(i)
            except ApiError as e:
                results[i] = e
        if not pending:
            return results
        cond = _packb({"type": "PodScheduled", "status": "True", "reason": "", "message": "",
                       "lastTransitionTime": time.time()}, use_bin_type=True)
        head = [cond, 1 if self.clear_nnn_on_binding else 0]
        chunks = [pending[j:j + BIND_CHUNK] for j in range(0, len(pending), BIND_CHUNK)]

        def script(idx: list[int]) -> Script:
            flat = list(head)
            for i in idx:
                u = uids[i] if uids is not None else None
                flat += (keys[i], bindings[i][2], False if u is None else u)
            return Script("bind", [self.prefix, self.history, _packb(flat, use_bin_type=False)])

        fallback: list[int] = []
        unpackb = msgpack.unpackb   # our script wrote these bytes: a stored-layout map
        done = [False] * len(chunks)

        def handle(k: int, raw: list) -> None:
            done[k] = True
            for j, i in enumerate(chunks[k]):
                code, a, b = raw[3 * j], raw[3 * j + 1], raw[3 * j + 2]
                if code == 0:
                    try:
                        results[i] = unpackb(b, raw=False, strict_map_key=False)
                    except Exception:
                        try:
                            results[i] = self._decode_stored(b, info, keys[i])
                        except ApiError as e:
                            results[i] = e
                elif code == 422:
                    fallback.append(i)
                else:
                    results[i] = self._bind_error(code, a, b, keys[i], uids[i] if uids else None)

        if len(chunks) == 1:
            replies = [(yield script(chunks[0]))]
        else:
            replies = yield Stream((script(c) for c in chunks), on_reply=handle)
        for k, raw in enumerate(replies):
            if not done[k]:
                handle(k, raw)
        if fallback:
            yield from self._bind_many_rmw(bindings, keys, fallback, uids, results)
        return results

    @staticmethod
    def _bind_error(code: int, reason: int, detail: Any, key: str, uid: str | None) -> ApiError:
        ref = _ref(KINDS_POD, key)
        if code == 404:
            return NotFound("bind: not found", **ref)
        if isinstance(detail, bytes):
            detail = detail.decode(errors="replace")
        if code == 409 and reason == 1:
            return Conflict(f"bind: precondition failed: uid {uid!r} != stored {detail!r}", **ref)
        if code == 409 and reason == 2:
            return Conflict(f"bind: pod {key} is being deleted, cannot be assigned to a host", **ref)
        if code == 409 and reason == 3:
            return Conflict(f"bind: pod {key} is already assigned to node {detail!r}",
                            field="spec.nodeName", **ref)
        return ServerError(f"bind: unexpected reply code {code}", **ref)

    def _bind_many_rmw(self, bindings, keys: list[str], pending: list[int], uids: list | None,
                       results: list) -> Op:
        """The Python read-modify-write binder (HMGET, bind, RV-checked put; retried on a race),
        for the pods the Lua binder hands back."""
        info = KINDS_POD
        okey = self.keys.obj("Pod")
        for _ in range(MAX_RETRIES):
            if not pending:
                break
            raws = yield Command(("HMGET", okey, *[keys[i] for i in pending]))
            ops, idx = [], []
            now = time.time()
            for i, raw in zip(pending, raws):
                try:
                    if raw is None:
                        raise NotFound("bind: not found", **_ref(info, keys[i]))
                    pod = self._bind_pod(self._decode_stored(raw, info, keys[i]), bindings[i][2],
                                         uids[i] if uids else None, keys[i], now)
                    blob, slen = encode(pod)
                except ApiError as e:
                    results[i] = e
                    continue
                results[i] = pod
                ops.append(("P", "Pod", keys[i], raw[-8:], blob, slen, ""))
                idx.append(i)
            pending = []
            if not ops:
                break
            raw = yield self._apply(ops)
            for i, (code, rv, _) in zip(idx, self._triples(raw)):
                if code == 0:
                    results[i]["metadata"]["resourceVersion"] = rv
                elif code == 4092:
                    pending.append(i)   # raced with another writer: re-read, re-check, retry
                else:
                    try:
                        _raise_for(code, rv, info, keys[i], "bind")
                    except ApiError as e:
                        results[i] = e
        for i in pending:
            results[i] = Conflict(f"bind: gave up after {MAX_RETRIES} conflicting writes", **_ref(info, keys[i]))

    # --- watch ----------------------------------------------------------------------------------
    def watch(self, kind: str, resource_version: int, *, block_ms: int = 1000, count: int = 1000) -> Op:
        """Events after ``resource_version`` (oldest first), else after blocking up to ``block_ms``
        a BOOKMARK at the current RV (if it moved) or []. ``block_ms <= 0`` never blocks."""
        info = kind_info(kind)
        rv = resource_version
        if isinstance(rv, bool) or not isinstance(rv, int) or rv < 0:
            raise BadRequest(f"resource_version must be an integer >= 0, got {rv!r}", kind=info.name,
                             field="resourceVersion")
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise BadRequest(f"count must be a positive integer, got {count!r}", kind=info.name, field="count")
        # Gone check, events after rv, current RV: read in ONE MULTI/EXEC, so the three are
        # consistent (a bookmark at the returned RV can never skip an event of this kind) without
        # a Lua script copying every entry into Lua and back
        stream = self.keys.stream(info.name)
        read = Txn((("HGET", self.keys.compacted, info.name),
                    ("XRANGE", stream, f"{rv + 1}-0", "+", "COUNT", count),
                    ("GET", self.keys.rv)))
        res = yield read
        if not res[1] and block_ms and block_ms > 0 and not self._gone(res, rv):
            # nothing yet: block on the stream (a wake-up only), then re-read atomically so the
            # Gone check and the bookmark stay exact
            yield Command(("XREAD", "BLOCK", int(block_ms), "COUNT", 1, "STREAMS", stream, f"{rv}-0"))
            res = yield read
        return self._watch_result(info, rv, res)

    @staticmethod
    def _gone(res: list, rv: int) -> bool:
        return res[0] is not None and int(res[0]) > rv

    def _watch_result(self, info: KindInfo, rv: int, res: list) -> list[WatchEvent]:
        compacted, entries, cur = res
        if compacted is not None and int(compacted) > rv:
            compacted = int(compacted)
            raise Gone(f"watch from resourceVersion {rv}: too old, history of {info.name} is compacted "
                       f"up to {compacted}; relist", kind=info.name, field="resourceVersion",
                       compacted=compacted)
        if entries:
            return events_from_entries(info.name, entries)
        cur = int(cur) if cur is not None else 0
        return [WatchEvent("BOOKMARK", info.name, None, cur)] if cur > rv else []

    # --- misc -------------------------------------------------------------------------------
    def current_resource_version(self) -> Op:
        raw = yield Command(("GET", self.keys.rv))
        return int(raw) if raw is not None else 0

    def compact(self, kind: str, up_to_rv: int) -> Op:
        info = kind_info(kind)
        if isinstance(up_to_rv, bool) or not isinstance(up_to_rv, int) or up_to_rv < 0:
            raise BadRequest(f"up_to_rv must be an integer >= 0, got {up_to_rv!r}", kind=info.name,
                             field="up_to_rv")
        yield self._script("compact", info.name, up_to_rv)
        return None

