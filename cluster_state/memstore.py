"""The API server in memory: the same operations, results and watch streams as the Redis one, for
the simulation engine (one process, virtual clock, deterministic).

Design: a second *executor* of the one operation table. Every API operation is written once, in
:class:`cluster_state.store.Store`, as a generator yielding storage requests (``Script``,
``Command``, ``Txn``, ``Stream``); :class:`~cluster_state.client.ApiClient` and
:class:`~cluster_state.aio.AsyncApiClient` send them to Redis. :class:`MemoryServer` executes the
same requests against Python data shaped like the Redis keyspace (per kind an object hash and a
watch stream, the RV counter, the compacted points, the terminating set, paged-list snapshots),
and :class:`MemApiClient` / :class:`AsyncMemApiClient` are those two clients with only the
executor swapped. So validation, encoding, preconditions, retries, error types and messages,
continue tokens, exact reads rebuilt from history, watch-list and the Gone checks are *shared
code*; what is written twice is only the storage data plane: the Lua scripts (apply, create,
list, list_page, compact, finalize) as Python functions below, each doing what its script does,
atomically (nothing else runs while one executes). ``lua/bind.lua`` is a byte-splicing speed-up
of ``Store._bind_pod`` (tests/cluster_state/test_api_bind_lua.py proves them byte-equal); here
every binding is handed to that reference binder instead (the script's "unusual shape: bind it
yourself" reply, code 422), so there is no second binder. A separate dict-of-objects
implementation would have duplicated every rule above; this way the differential test
(tests/cluster_state/test_memstore_differential.py) only has to keep the data plane equal.

Deterministic: no wall clock (``clock`` is injected: unix seconds for timestamps, grace
deadlines and snapshot expiry), uids and snapshot ids from counters (``uid_seed`` varies the
uid prefix), plain lists in key order (Redis returns hash order; Kubernetes key order), no set or
hash order anywhere. ``XREAD BLOCK`` (a watch waiting for events) waits on asyncio futures that
the next write of that kind resolves (registration order), with the block time as an asyncio
timeout: virtual time under :mod:`ha.experiment.engine.sim.loop`; no threads. The sync client never blocks (nobody
else could write while it waited): a watch without events returns at once.

Differences from Redis, all outside the API's results: stored values are never corrupt unless a
test puts raw bytes in (:meth:`MemoryServer.put_raw` / :meth:`MemoryServer.add_raw_event`, for
the clients' CORRUPT paths); a continue token's snapshot expires on the injected clock.
"""
from __future__ import annotations

import asyncio
import bisect
import struct
from typing import Any, Callable

import msgpack

from .aio import AsyncApiClient
from .client import ApiClient
from .codec import decode, encode
from .errors import CorruptObject, ServerError
from .store import SCRIPTS, Command, Script, Store, Stream, Txn, keys_for
from .timeouts import wait_for

__all__ = ["MemoryServer", "MemApiClient", "AsyncMemApiClient", "SeqIds", "DEFAULT_EPOCH"]

DEFAULT_EPOCH = 1_700_000_000.0   # the time a server without a clock stands still at


def _rv8(n: int) -> bytes:
    return struct.pack(">Q", n)


def _rv_of(blob: bytes) -> int:
    return struct.unpack(">Q", blob[-8:])[0]


def _b(x: Any) -> bytes:
    if isinstance(x, bytes):
        return x
    if isinstance(x, str):
        return x.encode()
    if isinstance(x, (bytearray, memoryview)):
        return bytes(x)
    return str(x).encode()   # numbers, as Redis stores them


class _Stream:
    """One kind's watch history: entries ``(rv, type, object bytes)`` in RV order."""

    __slots__ = ("rvs", "entries")

    def __init__(self) -> None:
        self.rvs: list[int] = []
        self.entries: list[tuple[int, bytes, bytes]] = []

    def append(self, rv: int, typ: bytes, blob: bytes) -> None:
        self.rvs.append(rv)
        self.entries.append((rv, typ, blob))

    def drop_before(self, n: int) -> None:
        """Drop the first ``n`` entries."""
        del self.rvs[:n]
        del self.entries[:n]

    @staticmethod
    def reply(e: tuple[int, bytes, bytes]) -> list:
        # what XRANGE returns for an entry our writer made: [id, [t, <type>, o, <object>]]
        return [b"%d-0" % e[0], [b"t", e[1], b"o", e[2]]]


def _stream_id(s: Any, default: int) -> int:
    """The RV of a stream ID argument (``"<rv>-0"``, ``"-"``, ``"+"``)."""
    s = _b(s)
    if s == b"-":
        return 0
    if s == b"+":
        return default
    return int(s.split(b"-", 1)[0])


class SeqIds:
    """Deterministic ids for a Store: uids ``<seed as 8-4-4-4>-<counter:012x>`` (UUID-shaped) and
    snapshot ids ``<counter:032x>``. (Give a Redis-backed client one too, to compare the two.)"""

    def __init__(self, uid_seed: int = 0) -> None:
        u = f"{int(uid_seed) & (2**80 - 1):020x}"
        self._prefix = f"{u[:8]}-{u[8:12]}-{u[12:16]}-{u[16:20]}-"
        self._uids = 0
        self._snaps = 0

    def uid(self) -> str:
        self._uids += 1
        return f"{self._prefix}{self._uids:012x}"

    def snapshot_id(self) -> str:
        self._snaps += 1
        return f"{self._snaps:032x}"


class MemoryServer:
    """The API server's storage in memory, and the executor of :class:`Store` requests.

    ``MemoryServer(prefix="ht", history=100_000, clear_nnn_on_binding=False, clock=None,
    uid_seed=0)``; ``clock()`` = unix seconds (default: stands still at :data:`DEFAULT_EPOCH`;
    give ``SimClock.now``). Clients: :meth:`client` (sync) and :meth:`async_client`. Every
    client of one server sees the same state, as clients of one Redis do."""

    def __init__(self, prefix: str = "ht", *, history: int = 100_000, clear_nnn_on_binding: bool = False,
                 clock: Callable[[], float] | None = None, uid_seed: int = 0) -> None:
        self.clock: Callable[[], float] = clock or (lambda: DEFAULT_EPOCH)
        self.ids = SeqIds(uid_seed)
        # the Store every client of this server uses: one config, deterministic ids, this clock
        self.store = Store(prefix, history=history, clear_nnn_on_binding=clear_nnn_on_binding,
                           clock=self.clock, new_uid=self.ids.uid, new_snapshot_id=self.ids.snapshot_id)
        self.prefix = prefix
        self.history = history
        self.keys = keys_for(prefix)
        self.rv = 0
        self.objects: dict[str, dict[bytes, bytes]] = {}      # kind -> field -> stored bytes
        self._slen: dict[str, dict[bytes, int]] = {}          # kind -> field -> packed status length
        self.streams: dict[str, _Stream] = {}
        self.compacted: dict[str, int] = {}
        self.terminating: dict[bytes, float] = {}             # Pod field -> grace deadline
        self._keyspace: dict[str, Any] = {}                   # paged-list snapshots (zset / hash)
        self._expiry: dict[str, float] = {}
        self._waiters: dict[str, list[asyncio.Future]] = {}   # kind -> XREAD BLOCK waiters
        self._touched: dict[str, None] = {}
        self._scripts = {"apply": self._apply, "create": self._create, "bind": self._bind,
                         "list_page": self._list_page, "compact": self._compact,
                         "finalize": self._finalize}
        self._commands = {"GET": self._get, "HGET": self._hget, "HMGET": self._hmget,
                          "HGETALL": self._hgetall, "XRANGE": self._xrange, "XREVRANGE": self._xrevrange,
                          "XREAD": self._xread_now, "DEL": self._del, "ZADD": self._zadd, "HSET": self._hset,
                          "EXPIRE": self._expire, "EXISTS": self._exists, "XLEN": self._xlen}

    # --- clients ------------------------------------------------------------------------------
    def client(self) -> "MemApiClient":
        return MemApiClient(self)

    def async_client(self, *, latency: float = 0.0) -> "AsyncMemApiClient":
        return AsyncMemApiClient(self, latency=latency)

    # --- raw access (tests, chaos): what a raw Redis write would do ------------------------------
    def put_raw(self, kind: str, key: str, value: bytes) -> None:
        """Store bytes as an object's value as they are (e.g. corrupt ones), no event."""
        self.objects.setdefault(kind, {})[_b(key)] = value
        self._slen.setdefault(kind, {})[_b(key)] = 0

    def add_raw_event(self, kind: str, type_: bytes, value: bytes) -> int:
        """Append a watch entry as it is (e.g. undecodable), at a new RV; returns the RV."""
        self.rv += 1
        self._emit(kind, self.rv, type_, value)
        return self.rv

    # --- executor -----------------------------------------------------------------------------
    def execute(self, req: Script | Command | Txn | Stream) -> Any:
        """One request, atomically (a Stream: each script atomically, in order)."""
        if isinstance(req, Script):
            return self._run_script(req)
        if isinstance(req, Command):
            return self._command(req.args)
        if isinstance(req, Txn):
            return [self._command(c) for c in req.commands]
        if isinstance(req, Stream):
            out = []
            for i, s in enumerate(req.scripts):
                r = self._run_script(s)
                out.append(r)
                if req.on_reply is not None:
                    req.on_reply(i, r)
            return out
        raise TypeError(f"not a storage request: {req!r:.80}")

    def _run_script(self, s: Script) -> Any:
        fn = self._scripts.get(s.name)
        if fn is None or s.name not in SCRIPTS:
            raise ServerError(f"memory server: unknown script {s.name!r}")
        if s.args[0] != self.prefix:
            raise ServerError(f"memory server {self.prefix!r}: a request for prefix {s.args[0]!r}")
        self._touched = {}
        try:
            return fn(*s.args[1:])
        finally:
            self._trim_touched()

    def _command(self, args: tuple) -> Any:
        fn = self._commands.get(str(args[0]).upper())
        if fn is None:
            raise ServerError(f"memory server: unsupported command {args[0]!r}")
        return fn(*args[1:])

    # --- keys -----------------------------------------------------------------------------------
    def _kind_of(self, key: str, part: str) -> str | None:
        head = f"{self.prefix}:{part}:"
        return key[len(head):] if key.startswith(head) else None

    def _live(self, key: str) -> Any:
        """A snapshot key's value, dropped once expired (Redis's lazy expiry)."""
        exp = self._expiry.get(key)
        if exp is not None and self.clock() >= exp:
            self._keyspace.pop(key, None)
            del self._expiry[key]
        return self._keyspace.get(key)

    # --- data plane shared by the scripts (lua/lib.lua) ----------------------------------------
    def _emit(self, kind: str, rv: int, typ: bytes, blob: bytes) -> None:
        self.streams.setdefault(kind, _Stream()).append(rv, typ, blob)
        self._touched[kind] = None
        waiters = self._waiters.pop(kind, None)
        for fut in waiters or ():
            if not fut.done():
                fut.set_result(None)

    def _trim_touched(self) -> None:
        h = self.history
        for kind in self._touched:
            st = self.streams[kind]
            if len(st.rvs) > h + max(1, h // 16):
                st.drop_before(len(st.rvs) - h)
                frv = st.rvs[0]
                if frv - 1 > self.compacted.get(kind, 0):
                    self.compacted[kind] = frv - 1
        self._touched = {}

    def _store(self, kind: str, f: bytes, blob: bytes, slen: int | None) -> None:
        self.objects.setdefault(kind, {})[f] = blob
        if slen is not None:
            self._slen.setdefault(kind, {})[f] = slen

    def _remove(self, kind: str, f: bytes, old: bytes) -> tuple[int, bytes]:
        self.rv += 1
        last = old[:-8] + _rv8(self.rv)
        del self.objects[kind][f]
        self._slen.get(kind, {}).pop(f, None)
        if kind == "Pod":
            self.terminating.pop(f, None)
        self._emit(kind, self.rv, b"DELETED", last)
        return self.rv, last

    @staticmethod
    def _check_layout(blob: bytes, what: str) -> None:
        if not blob or blob[-1] != 0xCF or blob[1:2] != b"\xa6":
            raise ServerError(f"{what} is not in stored layout")

    # --- scripts ----------------------------------------------------------------------------------
    def _create(self, history: int, kind: str, f: Any, blob: bytes, slen: int) -> list:
        f = _b(f)
        self._check_layout(blob, f"create: value for {kind} {f!r}")
        old = self.objects.get(kind, {}).get(f)
        if old is not None:
            return [4091, _rv_of(old)]
        self.rv += 1
        new = blob + _rv8(self.rv)
        self._store(kind, f, new, int(slen))
        self._emit(kind, self.rv, b"ADDED", new)
        return [0, self.rv]

    def _apply(self, history: int, packed: bytes) -> list:
        a = msgpack.unpackb(packed, raw=True)
        ops = [a[i:i + 7] for i in range(0, len(a) - 6, 7)]
        for op, kind, f, _e, blob, _s, _x in ops:   # validate all before the first write
            if op not in (b"C", b"U", b"T", b"P", b"D"):
                raise ServerError(f"apply: unknown op {op!r}")
            if op != b"D":
                self._check_layout(blob, f"apply: value for {kind!r} {f!r}")
        out: list = []
        for op, kind, f, expect, blob, slen, extra in ops:
            kind = kind.decode()
            objs = self.objects.get(kind, {})
            old = objs.get(f)
            code, rv, res = 0, 0, None
            if op == b"C":
                if old is not None:
                    code, rv = 4091, _rv_of(old)
                else:
                    self.rv += 1
                    rv = self.rv
                    new = blob + _rv8(rv)
                    self._store(kind, f, new, slen)
                    self._emit(kind, rv, b"ADDED", new)
            elif old is None:
                code = 404
            elif expect and old[-8:] != expect:
                code, rv = 4092, _rv_of(old)
            elif op == b"D":
                rv, res = self._remove(kind, f, old)
            else:
                self.rv += 1
                rv = self.rv
                if op == b"U":   # keep the stored status
                    os_ = self._slen[kind][f]
                    new = blob[:8] + old[8:8 + os_] + blob[8 + slen:] + _rv8(rv)
                    self._store(kind, f, new, None)
                    res = new
                elif op == b"T":   # keep everything but the status
                    os_ = self._slen[kind][f]
                    new = old[:8] + blob[8:8 + slen] + old[8 + os_:-8] + _rv8(rv)
                    self._store(kind, f, new, slen)
                    res = new
                else:   # P: put whole
                    new = blob + _rv8(rv)
                    self._store(kind, f, new, slen)
                    if extra and kind == "Pod":
                        self.terminating[f] = float(extra)
                self._emit(kind, rv, b"MODIFIED", new)
            out += (code, rv, res)
        return out

    def _bind(self, history: int, packed: bytes) -> list:
        # every binding goes to Store's reference binder (see the module docstring)
        a = msgpack.unpackb(packed, raw=True)
        n = (len(a) - 2) // 3
        return [422, 0, None] * n

    def _page(self, snap: str, after: bytes, limit: int, vals: dict | None) -> tuple[list, list, int]:
        idx: list[bytes] = self._live(f"{snap}:idx") or []
        lo = bisect.bisect_right(idx, after) if after else 0
        ks = idx[lo:lo + limit] if limit > 0 else idx[lo:]
        if vals is None:
            vals = self._live(f"{snap}:obj") or {}
        vs = [vals.get(k) for k in ks]
        rest = len(idx) - bisect.bisect_right(idx, ks[-1]) if ks else 0
        return ks, vs, rest

    def _list_page(self, mode: Any, *args) -> list:
        if _b(mode) == b"next":
            kind, snap, rv, after, limit, ttl = args
            rv = int(rv)
            c = self.compacted.get(kind, 0)
            if c > rv:
                return [410, c]
            if self._live(f"{snap}:idx") is None:
                return [410, -1]
            ks, vs, rest = self._page(snap, _b(after), int(limit), None)
            if rest == 0:
                self._del(f"{snap}:idx", f"{snap}:obj")
            else:
                self._expire(f"{snap}:idx", ttl)
                self._expire(f"{snap}:obj", ttl)
            return [0, rv, ks, vs, rest]
        kind, pre, after, limit, minrv, exact, snap, ttl = args
        pre, after, limit = _b(pre), _b(after), int(limit)
        cur = self.rv
        if cur < int(minrv):
            return [504, cur]
        if int(exact) > 0 and int(exact) != cur:
            return [409, cur]
        objs = self.objects.get(kind, {})
        keys = sorted(k for k in objs if not pre or k.startswith(pre))
        if not keys:
            return [0, cur, [], [], 0]
        if not after and (limit == 0 or len(keys) <= limit):
            return [0, cur, keys, [objs[k] for k in keys], 0]
        self._del(f"{snap}:idx", f"{snap}:obj")
        self._keyspace[f"{snap}:idx"] = keys
        ks, vs, rest = self._page(snap, after, limit, objs)
        if rest == 0:
            self._del(f"{snap}:idx")
        else:
            self._keyspace[f"{snap}:obj"] = dict(objs)
            self._expire(f"{snap}:idx", ttl)
            self._expire(f"{snap}:obj", ttl)
        return [0, cur, ks, vs, rest]

    def _compact(self, kind: str, up_to_rv: Any) -> int:
        up = min(int(up_to_rv), self.rv)
        st = self.streams.get(kind)
        if st is not None:
            st.drop_before(bisect.bisect_right(st.rvs, up))
        c = self.compacted.get(kind, 0)
        if up > c:
            self.compacted[kind] = c = up
        return c

    def _finalize(self, history: int, now: Any, limit: Any) -> list:
        t = float(now)
        due = sorted((d, f) for f, d in self.terminating.items() if d <= t)[:int(limit)]
        objs = self.objects.get("Pod", {})
        removed = kept = 0
        for _d, f in due:
            old = objs.get(f)
            if old is None:
                self.terminating.pop(f, None)
                continue
            try:
                obj = decode(old)
                md = obj["metadata"]
                fins = md.get("finalizers")
                has = isinstance(fins, list) and len(fins) > 0
            except (CorruptObject, KeyError, TypeError):
                has = False
            if has:
                self.terminating.pop(f, None)
                kept += 1
                dg = md.get("deletionGracePeriodSeconds", None)
                if "deletionGracePeriodSeconds" in md and not (type(dg) is int and dg == 0):
                    # as after the kubelet's final delete with grace 0: the pod waits for its
                    # finalizers only (status untouched, so its stored length stays)
                    self.rv += 1
                    md["deletionGracePeriodSeconds"] = 0
                    new = encode(obj, self.rv)[0]
                    objs[f] = new
                    self._emit("Pod", self.rv, b"MODIFIED", new)
            else:
                self._remove("Pod", f, old)
                removed += 1
        return [removed, len(due), kept]

    # --- commands -----------------------------------------------------------------------------
    def _get(self, key: str) -> bytes | None:
        if key == self.keys.rv:
            return str(self.rv).encode() if self.rv else None
        raise ServerError(f"memory server: GET {key!r} is not a key of the API server")

    def _hget(self, key: str, field: Any) -> bytes | None:
        if key == self.keys.compacted:
            c = self.compacted.get(_b(field).decode())
            return None if c is None else str(c).encode()
        kind = self._kind_of(key, "obj")
        if kind is not None:
            return self.objects.get(kind, {}).get(_b(field))
        h = self._live(key)
        return None if h is None else h.get(_b(field))

    def _hmget(self, key: str, *fields) -> list:
        return [self._hget(key, f) for f in fields]

    def _hgetall(self, key: str) -> list:
        kind = self._kind_of(key, "obj")
        h = self.objects.get(kind, {}) if kind is not None else (self._live(key) or {})
        flat: list = []
        for k in sorted(h):
            flat += (k, h[k])
        return flat

    def _stream_of(self, key: str) -> _Stream:
        kind = self._kind_of(key, "ev")
        if kind is None:
            raise ServerError(f"memory server: {key!r} is not a watch stream")
        return self.streams.get(kind) or _Stream()

    def _xrange(self, key: str, start: Any, end: Any, *opts) -> list:
        st = self._stream_of(key)
        lo = bisect.bisect_left(st.rvs, _stream_id(start, 0))
        hi = bisect.bisect_right(st.rvs, _stream_id(end, self.rv))
        n = int(opts[1]) if len(opts) >= 2 and str(opts[0]).upper() == "COUNT" else None
        sel = st.entries[lo:hi] if n is None else st.entries[lo:min(hi, lo + n)]
        return [_Stream.reply(e) for e in sel]

    def _xrevrange(self, key: str, end: Any, start: Any, *opts) -> list:
        st = self._stream_of(key)
        lo = bisect.bisect_left(st.rvs, _stream_id(start, 0))
        hi = bisect.bisect_right(st.rvs, _stream_id(end, self.rv))
        n = int(opts[1]) if len(opts) >= 2 and str(opts[0]).upper() == "COUNT" else None
        sel = st.entries[lo:hi][::-1]
        return [_Stream.reply(e) for e in (sel if n is None else sel[:n])]

    def _xlen(self, key: str) -> int:
        return len(self._stream_of(key).rvs)

    @staticmethod
    def _xread_args(args: tuple) -> tuple[float, str, int]:
        a = [str(x) if not isinstance(x, bytes) else x.decode() for x in args]
        block = float(a[a.index("BLOCK") + 1]) / 1000.0 if "BLOCK" in a else 0.0
        i = a.index("STREAMS")
        return block, a[i + 1], _stream_id(a[i + 2], 0)

    def _xread_now(self, *args) -> list | None:
        """XREAD without waiting (the sync client's, and the check before an async wait)."""
        _block, key, after = self._xread_args(args)
        return self._xread_after(key, after)

    def _xread_after(self, key: str, after: int) -> list | None:
        st = self._stream_of(key)
        i = bisect.bisect_right(st.rvs, after)
        if i < len(st.rvs):
            return [[key.encode(), [_Stream.reply(st.entries[i])]]]
        return None

    async def xread_block(self, args: tuple) -> list | None:
        """XREAD BLOCK: the entry after the given ID, waiting up to the block time (an asyncio
        timeout: virtual under the sim loop) for the kind's next write."""
        block, key, after = self._xread_args(args)    # parsed once for both looks
        got = self._xread_after(key, after)
        if got is not None or block <= 0:
            return got
        kind = self._kind_of(key, "ev")
        fut = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(kind, []).append(fut)   # type: ignore[arg-type]
        try:
            await wait_for(fut, block)
        except asyncio.TimeoutError:
            return None
        finally:
            ws = self._waiters.get(kind)   # type: ignore[arg-type]
            if ws and fut in ws:
                ws.remove(fut)
        return self._xread_after(key, after)

    def _del(self, *keys: str) -> int:
        n = 0
        for k in keys:
            if self._live(k) is not None:
                n += 1
            self._keyspace.pop(k, None)
            self._expiry.pop(k, None)
        return n

    def _exists(self, *keys: str) -> int:
        return sum(1 for k in keys if self._live(k) is not None)

    def _zadd(self, key: str, *score_members) -> int:
        # paged-list snapshots only: every score is 0, so the set is in bytewise member order
        cur = set(self._live(key) or ())
        new = {_b(m) for m in score_members[1::2]}
        self._keyspace[key] = sorted(cur | new)
        return len(new - cur)

    def _hset(self, key: str, *pairs) -> int:
        if self._kind_of(key, "obj") is not None:
            raise ServerError("memory server: objects are written by the API's scripts only")
        h = self._live(key)
        if h is None:
            h = self._keyspace[key] = {}
        n = 0
        for k, v in zip(pairs[::2], pairs[1::2]):
            n += _b(k) not in h
            h[_b(k)] = _b(v)
        return n

    def _expire(self, key: str, seconds: Any) -> int:
        if self._live(key) is None:
            return 0
        self._expiry[key] = self.clock() + float(seconds)
        return 1


class MemApiClient(ApiClient):
    """:class:`ApiClient` on a :class:`MemoryServer`: the same methods (``store.API_OPS``,
    ``watch``, ``stream_key``, ``prefix``), each request executed in memory, atomically."""

    def __init__(self, server: MemoryServer) -> None:   # noqa: D107 -- no Redis connection to make
        self.server = server
        self.redis = None
        self.store = server.store
        self.keys = server.keys

    @classmethod
    def from_url(cls, url: str, prefix: str = "ht", **kw):   # pragma: no cover - a guard
        raise TypeError("MemApiClient has no URL: build it from a MemoryServer")

    def close(self) -> None:
        pass

    def _execute(self, req):
        return self.server.execute(req)


class AsyncMemApiClient(AsyncApiClient):
    """:class:`AsyncApiClient` on a :class:`MemoryServer`. Each request first awaits
    ``asyncio.sleep(latency)`` (0: one turn of the loop, so concurrent callers interleave between
    requests as they do between Redis round trips), then runs atomically; a blocking watch waits
    on the server's futures (see the module docstring)."""

    def __init__(self, server: MemoryServer, *, latency: float = 0.0) -> None:   # noqa: D107
        self.server = server
        self.redis = None
        self.store = server.store
        self.keys = server.keys
        self.latency = float(latency)

    @classmethod
    def from_url(cls, url: str, prefix: str = "ht", **kw):   # pragma: no cover - a guard
        raise TypeError("AsyncMemApiClient has no URL: build it from a MemoryServer")

    async def close(self) -> None:
        pass

    async def aclose(self) -> None:
        pass

    async def _execute(self, req):
        await asyncio.sleep(self.latency)
        if isinstance(req, Command) and str(req.args[0]).upper() == "XREAD":
            return await self.server.xread_block(req.args[1:])
        return self.server.execute(req)
