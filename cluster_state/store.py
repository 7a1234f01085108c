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
  snap:<id>:idx    zset of keys + snap:<id>:obj (copy of obj:<Kind>): a paged list's snapshot,
                   read by its continue token; dropped with the last page or after CONTINUE_TTL_S
Every write is ONE EVALSHA of lua/apply.lua (check, bump RV, store, append event, trim), or of
lua/create.lua (the same for one create, leaner); pods/binding runs inside Redis (lua/bind.lua,
100 pods per EVALSHA). Writes that must check the stored object first (update, delete, patch)
read it and then write with its resourceVersion as the precondition, so the check and the write
are atomic (a race is a 409 inside, re-read and retried as in the apiserver's GuaranteedUpdate).
docs/api-server.md says what is faithful to Kubernetes and what differs.
"""
from __future__ import annotations

import base64
import hashlib
import itertools
import json
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
                     NotFound, ServerError, TooLargeResourceVersion)
from .objects import KindInfo, kind_info, normalise, object_key
from .watch import ListResult, WatchEvent, event_from_entry, events_from_entries

__all__ = ["Script", "Command", "Stream", "Txn", "Store", "Op", "keys_for", "SCRIPTS", "API_OPS",
           "sync_api_method", "async_api_method", "INITIAL_EVENTS_END", "CONTINUE_TTL_S"]

_packb = msgpack.packb
# retries of read-modify-write operations (bind, patch, graceful delete) on a racing writer,
# like the apiserver's GuaranteedUpdate loop
MAX_RETRIES = 16
STATUS_CHUNK = 50        # /status writes per Lua call in update_status_many, pipelined likewise
BIND_CHUNK = 50          # binds per Lua call in bind_many, calls pipelined (Stream): the client
                         # decodes chunk k's pods while Redis binds chunk k+1
FINALIZE_BATCH = 1000
CONTINUE_TTL_S = 300     # an unused paged-list snapshot is dropped after this long (etcd compacts
                         # every 5 minutes by default, which is what expires Kubernetes' tokens)
HISTORY_SCAN = 1000      # watch-history entries per read when rebuilding an older state
INITIAL_EVENTS_END = "k8s.io/initial-events-end"   # the watch-list bookmark's annotation
RV_MATCHES = ("NotOlderThan", "Exact")
# the operations both clients expose as ``client.<op>(...)`` (watch stays hand-written in each
# client: its read path is tuned there)
API_OPS = ("create", "get", "list", "update", "replace", "update_status", "update_status_many", "patch_annotations", "bind",
           "bind_many", "delete", "evict", "finalize_deletions", "watch_list",
           "current_resource_version", "compact")


def _load_scripts() -> dict[str, tuple[str, str]]:
    lua = resources.files("cluster_state") / "lua"
    lib = (lua / "lib.lua").read_text()
    out = {}
    for name in ("apply", "create", "bind", "list_page", "compact", "finalize"):
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


def _api_method(name: str, wrapper: Callable) -> Callable:
    op = getattr(Store, name)
    wrapper.__name__ = wrapper.__qualname__ = name
    wrapper.__doc__ = op.__doc__
    wrapper.__wrapped__ = op      # inspect.signature shows the Store operation's parameters
    return wrapper


def sync_api_method(name: str) -> Callable:
    """``ApiClient.<name>``: build the request(s) with ``Store.<name>`` and drive them blocking."""
    op = getattr(Store, name)

    def method(self, *args, **kw):
        return self._run(op(self.store, *args, **kw))
    return _api_method(name, method)


def async_api_method(name: str) -> Callable:
    """``AsyncApiClient.<name>``: the same operation, awaited."""
    op = getattr(Store, name)

    async def method(self, *args, **kw):
        return await self._run(op(self.store, *args, **kw))
    return _api_method(name, method)


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


def _new_snapshot_id() -> str:
    return uuid.uuid4().hex


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
    raise _error_for(code, rv, info, key, what)


def _error_for(code: int, rv: int, info: KindInfo, key: str, what: str) -> ApiError:
    ref = _ref(info, key)
    if code == 404:
        return NotFound(f"{what}: not found", **ref)
    if code == 4091:
        return AlreadyExists(f"{what}: already exists (resourceVersion {rv})", resource_version=rv, **ref)
    if code == 4092:
        return Conflict(f"{what}: the object has been modified (stored resourceVersion {rv}); "
                        f"get the latest version and try again", field="metadata.resourceVersion",
                        resource_version=rv, **ref)
    return ServerError(f"{what}: unexpected reply code {code}", **ref)


def _each_reply(scripts: Iterator[Script], n: int, handle: Callable[[int, Any], None]) -> Op:
    """Send ``n`` scripts -- one request, or pipelined in a ``Stream`` -- and hand every reply to
    ``handle(k, reply)``: as soon as it is read where the driver can, else (a single script, a
    script the driver had to load and resend) once all are in."""
    done = [False] * n

    def on_reply(k: int, raw: Any) -> None:
        done[k] = True
        handle(k, raw)

    if n == 1:
        replies = [(yield next(iter(scripts)))]
    else:
        replies = yield Stream(scripts, on_reply=on_reply)
    for k, raw in enumerate(replies):
        if not done[k]:
            handle(k, raw)


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


def _parse_rv(value: object, ref: dict) -> int | None:
    """A resourceVersion option: None/"" = unset, else an integer >= 0 (Kubernetes' string form
    of digits is accepted too)."""
    if value is None or value == "":
        return None
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BadRequest(f"resourceVersion must be an integer >= 0 or None, got {value!r:.80}",
                         field="resourceVersion", **ref)
    return value


def _check_rv_match(match: object, rv: int | None, has_continue: bool, ref: dict) -> str | None:
    """ValidateListOptions (apimachinery internalversion/validation), same words; 422."""
    if match is None or match == "":
        return None
    if rv is None:
        raise Invalid("resourceVersionMatch is forbidden unless resourceVersion is provided",
                      field="resourceVersionMatch", **ref)
    if has_continue:
        raise Invalid("resourceVersionMatch is forbidden when continue is provided",
                      field="resourceVersionMatch", **ref)
    if match not in RV_MATCHES:
        raise Invalid(f'Unsupported value: {match!r}: supported values: "Exact", "NotOlderThan", ""',
                      field="resourceVersionMatch", **ref)
    if match == "Exact" and rv == 0:
        raise Invalid('resourceVersionMatch "exact" is forbidden for resourceVersion "0"',
                      field="resourceVersionMatch", **ref)
    return match


def _too_large(asked: int, current: int, info: KindInfo, namespace: str | None) -> TooLargeResourceVersion:
    return TooLargeResourceVersion(f"Too large resource version: {asked}, current: {current}",
                                   kind=info.name, namespace=namespace, field="resourceVersion",
                                   retry_after_seconds=1, current=current)


@dataclass(frozen=True)
class _ContinueToken:
    """What a continue token carries (opaque to clients: base64url of JSON): the list it continues,
    the RV its pages are consistent at (0 = "the rest at the current RV", the remainder a 410
    offers), the snapshot and the last key served."""
    kind: str
    namespace: str | None
    rv: int
    snap: str
    after: bytes

    def encode(self) -> str:
        raw = json.dumps({"v": 1, "k": self.kind, "ns": self.namespace or "", "rv": self.rv,
                          "s": self.snap, "a": self.after.hex()}, separators=(",", ":"))
        return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")

    @classmethod
    def decode(cls, token: str, kind: str, namespace: str | None) -> "_ContinueToken":
        ref = {"kind": kind, "namespace": namespace}
        try:
            d = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
            rv, snap = d["rv"], d["s"]
            ok = (d["v"] == 1 and type(rv) is int and rv >= 0 and isinstance(snap, str)
                  and (rv == 0 or re.fullmatch(r"[0-9a-f]{32}", snap) is not None))
            tok = cls(d["k"], d["ns"] or None, rv, snap, bytes.fromhex(d["a"]))
        except Exception as e:  # noqa: BLE001 -- any malformation is the same 400
            raise BadRequest(f"invalid continue token ({type(e).__name__}: {e})", field="continue", **ref) from None
        if not ok:
            raise BadRequest("invalid continue token (unknown version or bad fields)", field="continue", **ref)
        if tok.kind != kind or tok.namespace != namespace:
            raise BadRequest(f"invalid continue token: it continues a list of {tok.kind} in namespace "
                             f"{tok.namespace!r}, not of {kind} in {namespace!r}", field="continue", **ref)
        return tok


class Store:
    """Request builder + reply parser shared by the sync and async clients."""

    def __init__(self, prefix: str = "ht", *, history: int = 100_000, clear_nnn_on_binding: bool = False,
                 clock: Callable[[], float] | None = None, new_uid: Callable[[], str] | None = None,
                 new_snapshot_id: Callable[[], str] | None = None):
        """``clock`` (unix seconds: creationTimestamp, deletion deadlines, PodScheduled's
        lastTransitionTime), ``new_uid`` (metadata.uid of a created object) and
        ``new_snapshot_id`` (32 hex digits: a paged list's snapshot, part of its continue token)
        default to the wall clock and random ids; a simulation gives virtual / seeded ones."""
        if not isinstance(prefix, str) or not prefix or any(c.isspace() for c in prefix):
            raise ValueError(f"prefix must be a non-empty string without spaces, got {prefix!r}")
        if isinstance(history, bool) or not isinstance(history, int) or history < 1:
            raise ValueError(f"history must be a positive integer, got {history!r}")
        self.prefix = prefix
        self.history = history
        self.clear_nnn_on_binding = bool(clear_nnn_on_binding)
        self.keys = _Keys(prefix)
        self.continue_ttl = CONTINUE_TTL_S
        self.clock: Callable[[], float] = clock or time.time
        self.new_uid: Callable[[], str] = new_uid or _new_uid
        self.new_snapshot_id: Callable[[], str] = new_snapshot_id or _new_snapshot_id

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
            md["uid"] = self.new_uid()
        if md.get("creationTimestamp") is None:
            md["creationTimestamp"] = self.clock()
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

    def list(self, kind: str, namespace: str | None = None, *, limit: int | None = None,
             continue_: str | None = None, resource_version: int | None = None,
             resource_version_match: str | None = None) -> Op:
        """The kind's objects and the resourceVersion they are consistent with.

        Without options: everything at the current RV, in one atomic read. With ``limit`` /
        ``continue_``: pages in key order, every page consistent at the first page's RV (the result
        carries ``continue_`` while more follow; an expired token is 410 with a fresh-list hint in
        ``details["continue"]``). ``resource_version`` / ``resource_version_match`` as in
        Kubernetes: None = most recent, 0 = any, N = not older than N, or exactly N
        (``"Exact"``, or N with a limit) -- an exact read of an older RV is rebuilt from the
        watch history (410 when that history is gone); a future RV is 504 TooLargeResourceVersion."""
        info = kind_info(kind, namespace=namespace)
        if namespace is not None and not info.namespaced:
            raise BadRequest(f"{info.name} is cluster-scoped; list it without a namespace",
                             kind=info.name, namespace=namespace, field="namespace")
        if limit is None and continue_ is None and resource_version is None and resource_version_match is None:
            rv, flat = yield from self._read_all(info)
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
        return (yield from self._list_with_options(info, namespace or None, limit, continue_,
                                                   resource_version, resource_version_match))

    def _read_all(self, info: KindInfo) -> Op:
        """(current RV, [field, value, ...] of the kind's hash), read atomically: one MULTI/EXEC
        (no script: a Lua HGETALL builds the whole reply as a Lua table first, ~2x the server's
        time for 100,000 pods)."""
        rv, flat = yield Txn((("GET", self.keys.rv), ("HGETALL", self.keys.obj(info.name))))
        if isinstance(flat, dict):   # RESP3
            flat = [x for kv in flat.items() for x in kv]
        return (int(rv) if rv is not None else 0), flat

    # --- list options: paging, resourceVersion semantics ------------------------------------------
    def _list_with_options(self, info: KindInfo, namespace: str | None, limit: object, continue_: object,
                           resource_version: object, match: object) -> Op:
        ref = {"kind": info.name, "namespace": namespace}
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            raise BadRequest(f"limit must be an integer >= 0 (0 = no limit), got {limit!r}", field="limit", **ref)
        if continue_ is not None and not isinstance(continue_, str):
            raise BadRequest(f"continue must be a token string from an earlier page, got {continue_!r:.80}",
                             field="continue", **ref)
        rv = _parse_rv(resource_version, ref)
        match = _check_rv_match(match, rv, bool(continue_), ref)
        lim = limit or 0
        pre = f"{namespace}/".encode() if namespace else b""
        if continue_:
            if rv:   # "0" is tolerated with a continue token, as in Kubernetes
                raise BadRequest("specifying resource version is not allowed when using continue",
                                 field="resourceVersion", **ref)
            tok = _ContinueToken.decode(continue_, info.name, namespace)
            if tok.rv == 0:   # the inconsistent remainder a 410 offered: read at the current RV
                return (yield from self._first_page(info, namespace, pre, tok.after, lim, 0, 0))
            res = yield self._script("list_page", "next", info.name, self._snap_key(tok.snap), tok.rv,
                                     tok.after, lim, self.continue_ttl)
            if res[0] == 410 or None in res[3]:
                raise self._continue_expired(info, namespace, tok, res[1] if res[0] == 410 else -1)
            return self._page_result(info, namespace, tok.rv, tok.snap, res[2], res[3], res[4])
        min_rv = exact = 0
        if rv:   # None (most recent) and 0 (any) both read the current state
            if match == "Exact" or (match is None and lim):
                exact = rv     # Kubernetes: an RV with a limit and no match is an exact read
            else:
                min_rv = rv
        return (yield from self._first_page(info, namespace, pre, b"", lim, min_rv, exact))

    def _snap_key(self, snap: str) -> str:
        return f"{self.prefix}:snap:{snap}"

    def _first_page(self, info: KindInfo, namespace: str | None, pre: bytes, after: bytes, lim: int,
                    min_rv: int, exact: int) -> Op:
        snap = self.new_snapshot_id()
        res = yield self._script("list_page", "first", info.name, pre, after, lim, min_rv, exact,
                                 self._snap_key(snap), self.continue_ttl)
        code, cur = res[0], res[1]
        if code == 504 or (code == 409 and exact > cur):
            raise _too_large(min_rv or exact, cur, info, namespace)
        if code == 409:   # an exact read of an older RV: rebuild that state from the watch history
            state = yield from self._state_at(info, exact, namespace)
            keys = sorted(k for k in state if k.startswith(pre) and k > after)
            page = keys[:lim] if lim else keys
            rest = keys[len(page):]
            if rest:
                idx, obj = f"{self._snap_key(snap)}:idx", f"{self._snap_key(snap)}:obj"
                zadd, hset = [], []
                for k in rest:
                    zadd += (0, k)
                    hset += (k, state[k])
                yield Txn((("DEL", idx, obj), ("ZADD", idx, *zadd), ("HSET", obj, *hset),
                           ("EXPIRE", idx, self.continue_ttl), ("EXPIRE", obj, self.continue_ttl)))
            return self._page_result(info, namespace, exact, snap, page, [state[k] for k in page], len(rest))
        return self._page_result(info, namespace, cur, snap, res[2], res[3], res[4])

    def _page_result(self, info: KindInfo, namespace: str | None, rv: int, snap: str, keys: list,
                     values: list, remaining: int) -> ListResult:
        items, corrupt = [], []
        last = None
        for k, v in sorted(zip(keys, values)):
            last = k
            try:
                items.append(decode(v))
            except CorruptObject as e:
                corrupt.append((k.decode(errors="replace"), f"stored {info.name} {k!r}: {e.message}"))
        tok = None
        if remaining and last is not None:
            tok = _ContinueToken(info.name, namespace, rv, snap, last).encode()
        return ListResult(items, rv, corrupt, continue_=tok, remaining_item_count=remaining or None)

    def _continue_expired(self, info: KindInfo, namespace: str | None, tok: "_ContinueToken",
                          compacted: int) -> Gone:
        fresh = _ContinueToken(info.name, namespace, 0, "", tok.after).encode()
        why = (f"history of {info.name} is compacted up to {compacted}" if compacted >= 0
               else "its snapshot was dropped (unused for too long)")
        # Kubernetes' words (etcd3 store), plus why; details["continue"] = the inconsistent remainder
        return Gone("The provided continue parameter is too old to display a consistent list result "
                    f"at resourceVersion {tok.rv} ({why}). You can start a new list without the continue "
                    "parameter, or use the continue token in this response to retrieve the remainder of "
                    "the results. Continuing with the provided token results in an inconsistent list - "
                    "objects that were created, modified, or deleted between the time the first chunk was "
                    "returned and now may show up in the list.", kind=info.name, namespace=namespace,
                    field="continue", **{"continue": fresh, "resource_version": tok.rv})

    def _event_key(self, info: KindInfo, obj: dict) -> bytes:
        md = obj["metadata"]
        return (f"{md.get('namespace')}/{md['name']}" if info.namespaced else md["name"]).encode()

    def _state_at(self, info: KindInfo, rv: int, namespace: str | None = None) -> Op:
        """The kind's stored values (key -> bytes) as they were at ``rv``: today's, with every
        object written after ``rv`` taken back to its last write at or before ``rv`` (found in the
        watch history, which the MULTI read and the immutable older entries keep consistent)."""
        stream = self.keys.stream(info.name)
        compacted, cur, flat, entries = yield Txn((
            ("HGET", self.keys.compacted, info.name), ("GET", self.keys.rv),
            ("HGETALL", self.keys.obj(info.name)), ("XRANGE", stream, f"{rv + 1}-0", "+")))
        cur = int(cur) if cur is not None else 0
        if rv > cur:
            raise _too_large(rv, cur, info, namespace)
        if compacted is not None and int(compacted) > rv:
            raise Gone(f"The resourceVersion for the provided list is too old: {rv} (the history of "
                       f"{info.name} is compacted up to {int(compacted)}); list at a newer resourceVersion",
                       kind=info.name, namespace=namespace, field="resourceVersion",
                       compacted=int(compacted))
        pairs = flat.items() if isinstance(flat, dict) else zip(flat[::2], flat[1::2])  # RESP3 | RESP2
        state = {k: v for k, v in pairs if k[:1] != b"\0"}
        changed, need = set(), set()
        for ev in events_from_entries(info.name, entries):
            k = self._history_key(info, ev, rv)
            if k in changed:
                continue
            changed.add(k)
            state.pop(k, None)            # first write after rv: ADDED = absent at rv
            if ev.type != "ADDED":
                need.add(k)               # MODIFIED / DELETED: existed at rv, in its last older state
        hi = rv
        while need and hi > 0:
            (chunk,) = yield Txn((("XREVRANGE", stream, f"{hi}-0", "-", "COUNT", HISTORY_SCAN),))
            for entry in chunk:
                ev = event_from_entry(info.name, entry)
                k = self._history_key(info, ev, rv)
                if k in need:
                    need.discard(k)
                    if ev.type != "DELETED":
                        state[k] = dict(zip(entry[1][::2], entry[1][1::2]))[b"o"]
                hi = ev.resource_version - 1
            if len(chunk) < HISTORY_SCAN:
                break
        if need:
            example = min(need).decode(errors="replace")
            raise Gone(f"The resourceVersion for the provided list is too old: the state at {rv} of "
                       f"{len(need)} {info.name} object(s) (e.g. {example}) is older than the kept watch "
                       f"history; list at a newer resourceVersion", kind=info.name, namespace=namespace,
                       field="resourceVersion")
        return state

    def _history_key(self, info: KindInfo, ev: WatchEvent, rv: int) -> bytes:
        if ev.type == "CORRUPT":
            raise CorruptObject(f"exact list at resourceVersion {rv}: the watch history has an undecodable "
                                f"entry ({ev.error}); the state at that version cannot be rebuilt",
                                kind=info.name, field="resourceVersion")
        try:
            return self._event_key(info, ev.object)
        except (KeyError, TypeError, AttributeError):
            raise CorruptObject(f"exact list at resourceVersion {rv}: a watch event at "
                                f"{ev.resource_version} has no metadata.name", kind=info.name) from None

    # --- watch-list (sendInitialEvents) --------------------------------------------------------
    def watch_with_options(self, kind: str, resource_version: int | None, send_initial_events: bool,
                           resource_version_match: str | None) -> Op:
        """``watch(..., send_initial_events=True, resource_version_match="NotOlderThan")``: the
        watch-list reply; the options checked as validateWatchOptions does."""
        if not send_initial_events:
            raise Invalid("resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
                          field="resourceVersionMatch", kind=kind if isinstance(kind, str) else None)
        return (yield from self.watch_list(kind, resource_version,
                                           resource_version_match=resource_version_match))

    def watch_list(self, kind: str, resource_version: int | None = None, *,
                   resource_version_match: str = "NotOlderThan") -> Op:
        """The first reply of a watch with ``sendInitialEvents=true`` (KEP-3157): a synthetic ADDED
        per object (key order; its own resourceVersion; CORRUPT for a value that does not decode),
        then a BOOKMARK at the state's RV annotated ``k8s.io/initial-events-end: "true"``. Continue
        with ``watch(kind, bookmark.resource_version)``: that is every later event, none twice.
        ``resource_version``: None = most recent, 0 = any, N = not older than N (else 504)."""
        info = kind_info(kind)
        ref = {"kind": info.name}
        if resource_version_match != "NotOlderThan":
            raise Invalid("sendInitialEvents requires setting resourceVersionMatch to NotOlderThan, "
                          f"got {resource_version_match!r}", field="resourceVersionMatch", **ref)
        rv = _parse_rv(resource_version, ref)
        cur, flat = yield from self._read_all(info)
        if rv and rv > cur:
            raise _too_large(rv, cur, info, None)
        pairs = sorted((flat[i], flat[i + 1]) for i in range(0, len(flat), 2) if flat[i][:1] != b"\0")
        events = []
        for k, v in pairs:
            try:
                obj = decode(v)
            except CorruptObject as e:
                events.append(WatchEvent("CORRUPT", info.name, None, cur, f"stored {info.name} {k!r}: {e.message}"))
                continue
            events.append(WatchEvent("ADDED", info.name, obj, obj["metadata"].get("resourceVersion", cur)))
        events.append(WatchEvent("BOOKMARK", info.name,
                                 {"kind": info.name, "apiVersion": info.api_version,
                                  "metadata": {"resourceVersion": cur, "annotations": {INITIAL_EVENTS_END: "true"}}},
                                 cur))
        return events

    def update(self, obj: object) -> Op:
        """Replace everything but ``status``. Precondition: metadata.resourceVersion if set (409),
        else unconditional (re-read and retried on a race). Checked against the stored object, as
        the apiserver does: a given uid must match (409); uid and creationTimestamp are carried
        over; deletionTimestamp / deletionGracePeriodSeconds cannot be set or changed; no new
        finalizers once it is being deleted, and removing the last finalizer of an object deleted
        with grace 0 removes it (DELETED; returns its last stored state); Pod
        ``spec.schedulingGates`` may only shrink."""
        return (yield from self._update(obj, "U", "update"))

    def replace(self, obj: object) -> Op:
        """Replace the whole object, ``status`` included: a PUT of a kind whose status has no
        subresource of its own (Volcano's PodGroup CRD has ``subresources: {}``), and a write that
        changes status and metadata together (``pods/status`` may change labels and annotations).
        Preconditions, checks and the last-finalizer rule exactly as :meth:`update`."""
        return (yield from self._update(obj, "P", "replace"))

    def _update(self, obj: object, op: str, what: str) -> Op:
        obj, info, key = normalise(_input_object(obj))
        md = obj["metadata"]
        want = md.get("resourceVersion")
        okey = self.keys.obj(info.name)
        for _ in range(MAX_RETRIES):
            raw = yield Command(("HGET", okey, key))
            if raw is None:
                raise NotFound(f"{what}: not found", **_ref(info, key))
            cur = self._decode_stored(raw, info, key)
            cmd = cur["metadata"]
            if want and cmd.get("resourceVersion") != want:
                _raise_for(4092, cmd.get("resourceVersion"), info, key, what)
            self._check_update(info, key, cur, obj)
            expect = raw[-8:]
            if (cmd.get("deletionTimestamp") is not None and cmd.get("deletionGracePeriodSeconds") == 0
                    and not md.get("finalizers")):
                # shouldDeleteDuringUpdate: the last finalizer is gone -> the object goes now
                code, rv, last = yield self._apply([("D", info.name, key, expect, "", 0, "")])
            else:
                blob, slen = encode(obj)
                code, rv, last = yield self._apply([(op, info.name, key, expect, blob, slen, "")])
            if code == 4092 and not want:
                continue   # raced with another writer after our read: re-read, re-check
            if code:
                _raise_for(code, rv, info, key, what)
            if last is None or last is False:   # P answers no blob: the object is what was sent
                md["resourceVersion"] = rv
                return obj
            return self._decode_stored(last, info, key)
        raise Conflict(f"{what}: gave up after {MAX_RETRIES} conflicting writes", **_ref(info, key))

    def _check_update(self, info: KindInfo, key: str, cur: dict, new: dict) -> None:
        """The update rules of ValidateObjectMetaUpdate / BeforeUpdate / ValidatePodUpdate that
        concern server-owned fields, finalizers and scheduling gates; fills ``new``'s carried
        fields."""
        ref = _ref(info, key)
        cmd, md = cur["metadata"], new["metadata"]
        uid = md.get("uid")
        if uid and cmd.get("uid") and uid != cmd["uid"]:
            raise Conflict(f"update: precondition failed: uid {uid!r} != stored {cmd['uid']!r}",
                           field="metadata.uid", **ref)
        for f in ("uid", "creationTimestamp"):
            if md.get(f) is None and cmd.get(f) is not None:
                md[f] = cmd[f]
        if cmd.get("deletionTimestamp") is not None:
            # an update can never remove or change the deletion fields
            md["deletionTimestamp"] = cmd["deletionTimestamp"]
            if cmd.get("deletionGracePeriodSeconds") is not None:
                md["deletionGracePeriodSeconds"] = cmd["deletionGracePeriodSeconds"]
            added = set(md.get("finalizers") or ()) - set(cmd.get("finalizers") or ())
            if added:
                raise Invalid("no new finalizers can be added if the object is being deleted, found new "
                              f"finalizers {sorted(added)!r}", field="metadata.finalizers", **ref)
        else:
            for f in ("deletionTimestamp", "deletionGracePeriodSeconds"):
                if md.get(f) is not None:
                    raise Invalid("field is immutable; it is set by deleting the object, not by an update",
                                  field=f"metadata.{f}", **ref)
        if info.name == "Pod":
            old = {g.get("name") for g in ((cur.get("spec") or {}).get("schedulingGates") or ())
                   if isinstance(g, dict)}
            for i, g in enumerate(new["spec"].get("schedulingGates") or ()):
                if g["name"] not in old:
                    raise Invalid(f"only deletion is allowed, but found new scheduling gate {g['name']!r}",
                                  field=f"spec.schedulingGates[{i}].name", **ref)

    def update_status(self, obj: object) -> Op:
        """The /status subresource: replace only ``status``; spec and metadata are ignored."""
        obj, info, key = normalise(_input_object(obj))
        rv = obj["metadata"].get("resourceVersion")
        blob, slen = encode(obj)
        expect = rv_bytes(rv) if rv else ""
        code, new_rv, new = yield self._apply([("T", info.name, key, expect, blob, slen, "")])
        if code:
            _raise_for(code, new_rv, info, key, "update_status")
        return self._decode_stored(new, info, key)

    def update_status_many(self, objs: list) -> Op:
        """Many /status writes in one request: per item, in order, what :meth:`update_status`
        would return (the stored object) or the ``ApiError`` it would raise. Each write is its own:
        its own resourceVersion precondition and event, a failed one (stale, gone, invalid)
        leaving the others be. They run as lua/apply.lua's T op, ``STATUS_CHUNK`` to a script,
        the scripts pipelined: a session's thousand condition writes cost a few round trips
        instead of a thousand (what a client with many workers gets from the API server, without
        a thousand replies to wait for)."""
        if not isinstance(objs, (list, tuple)):
            raise BadRequest(f"update_status_many: expected a list of objects, got {type(objs).__name__}",
                             field="<body>")
        results: list[Any] = [None] * len(objs)
        todo: list[tuple[int, KindInfo, str, tuple]] = []
        for i, o in enumerate(objs):
            try:
                obj, info, key = normalise(_input_object(o))
            except ApiError as e:
                results[i] = e
                continue
            rv = obj["metadata"].get("resourceVersion")
            blob, slen = encode(obj)
            todo.append((i, info, key, ("T", info.name, key, rv_bytes(rv) if rv else "", blob, slen, "")))
        if not todo:
            return results
        chunks = [todo[j:j + STATUS_CHUNK] for j in range(0, len(todo), STATUS_CHUNK)]

        def handle(k: int, raw: list) -> None:
            for j, (i, info, key, _op) in enumerate(chunks[k]):
                code, rv, new = raw[3 * j], raw[3 * j + 1], raw[3 * j + 2]
                if code:
                    results[i] = _error_for(code, rv, info, key, "update_status")
                    continue
                try:
                    results[i] = self._decode_stored(new, info, key)
                except ApiError as e:
                    results[i] = e

        yield from _each_reply((self._apply([t[3] for t in c]) for c in chunks), len(chunks), handle)
        return results

    def delete(self, kind: str, name: str, namespace: str | None = None, *,
               grace_period_seconds: int | None = None, resource_version: int | None = None,
               now: float | None = None) -> Op:
        """Remove an object (DELETED, returns its last state), unless it must stay a while (then
        MODIFIED, returns it): a Pod with a grace period > 0 gets ``deletionTimestamp`` (= when it
        will be removed, as in Kubernetes) and ``deletionGracePeriodSeconds`` and is removed by
        :meth:`finalize_deletions` or a later delete with grace 0; an object with
        ``metadata.finalizers`` gets ``deletionTimestamp`` (now, or its grace deadline) and stays
        until an update removes its last finalizer."""
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
            raw = yield Command(("HGET", okey, key))
            if raw is None:
                raise NotFound("delete: not found", **ref)
            obj = self._decode_stored(raw, info, key)
            md = obj["metadata"]
            if resource_version is not None and md.get("resourceVersion") != resource_version:
                _raise_for(4092, md.get("resourceVersion"), info, key, "delete")
            grace = 0
            if info.name == "Pod":   # only pods delete gracefully
                grace = grace_period_seconds
                if grace is None:
                    grace = (obj.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
                    grace = grace if isinstance(grace, int) and grace >= 0 else 30
            expect = raw[-8:]
            t = self.clock() if now is None else now
            old = md.get("deletionTimestamp")
            if grace > 0:
                deadline = t + grace
                if old is not None and old <= deadline:
                    return obj  # already terminating at least as soon: nothing to change
                md["deletionTimestamp"] = deadline
                md["deletionGracePeriodSeconds"] = grace
                op = ("P", info.name, key, expect, *encode(obj), repr(deadline))
            elif md.get("finalizers"):
                if old is not None and md.get("deletionGracePeriodSeconds") == 0:
                    return obj  # already waiting for its finalizers only
                md["deletionTimestamp"] = t if old is None else min(old, t)
                md["deletionGracePeriodSeconds"] = 0
                op = ("P", info.name, key, expect, *encode(obj), "")
            else:
                op = ("D", info.name, key, expect, "", 0, "")
            code, rv, last = yield self._apply([op])
            if code == 4092 and resource_version is None:
                continue  # raced with a writer after our read: re-read
            if code:
                _raise_for(code, rv, info, key, "delete")
            if op[0] == "P":
                md["resourceVersion"] = rv
                return obj
            return self._decode_stored(last, info, key)
        raise Conflict(f"delete: gave up after {MAX_RETRIES} conflicting writes", **ref)

    def evict(self, namespace: str, name: str, *, grace_period_seconds: int | None = None) -> Op:
        """The eviction subresource: a graceful delete of a Pod (404 if it is missing)."""
        return (yield from self.delete("Pod", name, namespace, grace_period_seconds=grace_period_seconds))

    def finalize_deletions(self, now: float | None = None) -> Op:
        """Remove pods whose grace period has ended (DELETED events); returns how many. Pods that
        still have finalizers stay (deletionGracePeriodSeconds becomes 0, MODIFIED) until an update
        removes the last one."""
        t = self.clock() if now is None else now
        total = 0
        while True:
            removed, seen, _kept = yield self._script("finalize", self.history, repr(t), FINALIZE_BATCH)
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
        if spec.get("schedulingGates"):   # "Reject binding to a scheduling un-ready Pod"
            raise Conflict(f"bind: pod {key} has non-empty .spec.schedulingGates",
                           field="spec.schedulingGates", **_ref(KINDS_POD, key))
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
                       "lastTransitionTime": self.clock()}, use_bin_type=True)
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

        def handle(k: int, raw: list) -> None:
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

        yield from _each_reply((script(c) for c in chunks), len(chunks), handle)
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
        if code == 409 and reason == 4:
            return Conflict(f"bind: pod {key} has non-empty .spec.schedulingGates",
                            field="spec.schedulingGates", **ref)
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
            now = self.clock()
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
    def watch(self, kind: str, resource_version: int, *, block_ms: int = 1000, count: int = 1000,
              decode: Callable[[str, list], Any] | None = None) -> Op:
        """Events after ``resource_version`` (oldest first), else after blocking up to ``block_ms``
        a BOOKMARK at the current RV (if it moved) or []. ``block_ms <= 0`` never blocks.
        ``decode``: when the read finds events, ``decode(kind, entries)`` gets the raw stream
        entries (each ``[id, [field, value, ...]]``) and its result is returned instead of
        ``events_from_entries(kind, entries)`` (the informer decodes straight into its deliveries);
        Gone and bookmarks are unchanged."""
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
        return self._watch_result(info, rv, res, decode)

    @staticmethod
    def _gone(res: list, rv: int) -> bool:
        return res[0] is not None and int(res[0]) > rv

    def _watch_result(self, info: KindInfo, rv: int, res: list,
                      decode: Callable[[str, list], Any] | None = None) -> list[WatchEvent]:
        compacted, entries, cur = res
        if compacted is not None and int(compacted) > rv:
            compacted = int(compacted)
            raise Gone(f"watch from resourceVersion {rv}: too old, history of {info.name} is compacted "
                       f"up to {compacted}; relist", kind=info.name, field="resourceVersion",
                       compacted=compacted)
        if entries:
            return (decode or events_from_entries)(info.name, entries)
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

