"""Synchronous API client (redis-py + hiredis). All logic lives in :mod:`cluster_state.store`;
this module only drives its operations over a blocking connection."""
from __future__ import annotations

import os
import threading
from typing import Any, Callable

import redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from .store import API_OPS, SCRIPTS, Command, Op, Script, Store, Stream, Txn, keys_for, sync_api_method
from .watch import ListResult, WatchEvent

__all__ = ["ApiClient"]

# commands whose raw reply is what redis-py's execute_command would return (no response callback)
_RAW_REPLY = frozenset({"GET", "HGET", "HMGET"})


def _check_client(client: Any) -> None:
    kw = getattr(getattr(client, "connection_pool", None), "connection_kwargs", {}) or {}
    if kw.get("decode_responses"):
        raise ValueError("the API client needs a Redis client with decode_responses=False "
                         "(objects are msgpack bytes)")


class ApiClient:
    """A Kubernetes-like API server on Redis; see docs in store.py and docs/api-server.md."""

    def __init__(self, redis_client: "redis.Redis", prefix: str = "ht", *, history: int = 100_000,
                 clear_nnn_on_binding: bool = False, **store_options: Any):
        """``store_options``: Store's clock / new_uid / new_snapshot_id (default: wall clock and
        random ids)."""
        _check_client(redis_client)
        self.redis = redis_client
        self.store = Store(prefix, history=history, clear_nnn_on_binding=clear_nnn_on_binding,
                           **store_options)
        self.keys = keys_for(prefix)
        # one connection per thread, taken from the pool once and kept: a pool checkout per call
        # (redis-py polls the socket for stale data each time) cost ~20 us, a third of a create
        self._local = threading.local()
        self._held: list = []
        self._held_lock = threading.Lock()

    @classmethod
    def from_url(cls, url: str, prefix: str = "ht", **kw) -> "ApiClient":
        return cls(redis.Redis.from_url(url, decode_responses=False), prefix, **kw)

    @property
    def prefix(self) -> str:
        return self.store.prefix

    def close(self) -> None:
        self._release_held()
        self.redis.close()

    def _release_held(self) -> None:
        with self._held_lock:
            held, self._held = self._held, []
        pool = self.redis.connection_pool
        for conn in held:
            try:
                pool.release(conn)
            except Exception:   # pragma: no cover - a pool already torn down
                pass
        self._local = threading.local()

    def _conn(self):
        loc = self._local
        conn = getattr(loc, "conn", None)
        if conn is None or loc.pid != os.getpid():   # a forked child never shares the parent's socket
            conn = self.redis.connection_pool.get_connection()
            loc.conn, loc.pid = conn, os.getpid()
            with self._held_lock:
                self._held.append(conn)
        return conn

    def _call(self, *args) -> Any:
        """One request on this thread's connection. A connection failure falls back to redis-py's
        own path (its reconnect + retry policy), as if we had called execute_command directly."""
        conn = self._conn()
        try:
            conn.send_command(*args)
            return conn.read_response()
        except ResponseError:
            raise                        # a reply was read: the connection is in step
        except (RedisConnectionError, RedisTimeoutError, OSError):
            conn.disconnect()
            return self.redis.execute_command(*args)
        except BaseException:
            conn.disconnect()            # a reply may be unread: never reuse this socket as is
            raise

    def __enter__(self) -> "ApiClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- driver -----------------------------------------------------------------------------
    def _stream(self, scripts, on_reply=None) -> list:
        conn = None
        sent: list[Script] = []
        out: list = []
        try:
            for s in scripts:
                if conn is None:
                    conn = self._conn()
                conn.send_command("EVALSHA", SCRIPTS[s.name][1], 0, *s.args)
                sent.append(s)
            for i in range(len(sent)):
                try:
                    r = conn.read_response()
                except ResponseError as e:   # drain every reply before handling errors
                    out.append(e)
                    continue
                out.append(r)
                if on_reply is not None:
                    on_reply(i, r)
        except BaseException:
            if conn is not None:
                conn.disconnect()   # replies may be left unread: never reuse this connection as is
            raise
        for i, r in enumerate(out):
            if isinstance(r, NoScriptError):
                out[i] = self._execute(sent[i])   # nothing ran: load the script and resend
            elif isinstance(r, Exception):
                raise r
        return out

    def _txn(self, commands: tuple) -> list:
        """MULTI, the commands, EXEC in one write on this thread's connection; EXEC's raw reply.
        (Read-only use: a broken connection is reconnected and the transaction sent once more.)"""
        cmds = (("MULTI",), *commands, ("EXEC",))
        for attempt in (0, 1):
            conn = self._conn()
            try:
                conn.send_packed_command(conn.pack_commands(cmds), check_health=False)
                replies, err = [], None
                for _ in cmds:   # drain every reply before raising: the connection stays in step
                    try:
                        replies.append(conn.read_response())
                    except ResponseError as e:
                        err = err or e
                        replies.append(e)
                break
            except (RedisConnectionError, RedisTimeoutError, OSError):
                conn.disconnect()
                if attempt:
                    raise
            except BaseException:
                conn.disconnect()
                raise
        if err is not None:
            raise err
        out = replies[-1]
        for r in out or ():
            if isinstance(r, Exception):
                raise r
        return out

    def _execute(self, req: Script | Command | Stream | Txn) -> Any:
        if isinstance(req, Txn):
            return self._txn(req.commands)
        if isinstance(req, Stream):
            return self._stream(req.scripts, req.on_reply)
        if isinstance(req, Command):
            if req.args[0] in _RAW_REPLY:
                return self._call(*req.args)
            return self.redis.execute_command(*req.args)
        src, sha = SCRIPTS[req.name]
        try:
            return self._call("EVALSHA", sha, 0, *req.args)
        except NoScriptError:  # first use, or Redis restarted and lost its script cache
            self.redis.script_load(src)
            return self._call("EVALSHA", sha, 0, *req.args)

    def _run(self, op: Op) -> Any:
        try:
            req = next(op)
            while True:
                req = op.send(self._execute(req))
        except StopIteration as stop:
            return stop.value

    # --- API: create, get, list, update, ... (store.API_OPS, added below from Store) -------------
    # watch(..., decode=fn) is supported (as AsyncApiClient.watch)
    WATCH_DECODE = True

    def watch(self, kind: str, resource_version: int, *, block_ms: int = 1000,
              count: int = 1000, send_initial_events: bool = False,
              resource_version_match: str | None = None,
              decode: Callable[[str, list], Any] | None = None) -> list[WatchEvent]:
        """Store.watch (``decode`` as there), or Store.watch_with_options for a watch-list."""
        if send_initial_events or resource_version_match is not None:   # watch-list (Store.watch_list)
            return self._run(self.store.watch_with_options(kind, resource_version, send_initial_events,
                                                           resource_version_match))
        return self._run(self.store.watch(kind, resource_version, block_ms=block_ms, count=count,
                                             decode=decode))

    def stream_key(self, kind: str) -> str:
        """The kind's watch stream (entry ID ``<rv>-0``; fields ``t``, ``o``) — for chaos tools."""
        return self.keys.stream(kind)


# one definition per operation for both clients: ApiClient.<op>(...) runs Store.<op>(...)
for _name in API_OPS:
    setattr(ApiClient, _name, sync_api_method(_name))
