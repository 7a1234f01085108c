"""Asyncio API client (redis.asyncio): the same operations as :class:`ApiClient`, driven by
awaiting each request. Create it on the event loop that will use it."""
from __future__ import annotations

import asyncio
from typing import Any, Callable

import redis.asyncio as aredis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from .client import _check_client
from .store import API_OPS, SCRIPTS, Command, Op, Script, Store, Stream, Txn, async_api_method, keys_for
from .watch import ListResult, WatchEvent

__all__ = ["AsyncApiClient", "shielded"]


def _consume(fut: asyncio.Future) -> None:
    if not fut.cancelled():
        fut.exception()  # mark retrieved: a call orphaned by a cancel may fail quietly


def shielded(coro):
    """Run a Redis call so that cancelling the caller does not cancel the call itself.

    redis-py 8.1's asyncio client can swallow a CancelledError that lands in a read and leave the
    connection waiting forever (reproduced: cancel a task looping XREAD BLOCK 100 + GET; within a
    few hundred tries it hangs; a test cancelling a lease candidate mid-GET hung the same way).
    Shielded, the call finishes (within its block time) and returns its connection to the pool
    cleanly, while the cancelled caller (a reflector, a lease candidate, a ``wait_for`` that timed
    out) goes on at once. Whatever the call did still happened: a caller that gave up on a write
    may find it applied."""
    fut = asyncio.ensure_future(coro)
    fut.add_done_callback(_consume)
    return asyncio.shield(fut)

class AsyncApiClient:
    def __init__(self, redis_client: "aredis.Redis", prefix: str = "ht", *, history: int = 100_000,
                 clear_nnn_on_binding: bool = False, **store_options: Any):
        """``store_options``: Store's clock / new_uid / new_snapshot_id (default: wall clock and
        random ids)."""
        _check_client(redis_client)
        self.redis = redis_client
        self.store = Store(prefix, history=history, clear_nnn_on_binding=clear_nnn_on_binding,
                           **store_options)
        self.keys = keys_for(prefix)

    @classmethod
    def from_url(cls, url: str, prefix: str = "ht", **kw) -> "AsyncApiClient":
        return cls(aredis.Redis.from_url(url, decode_responses=False), prefix, **kw)

    @property
    def prefix(self) -> str:
        return self.store.prefix

    async def close(self) -> None:
        await self.redis.aclose()

    async def __aenter__(self) -> "AsyncApiClient":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    # --- driver -----------------------------------------------------------------------------
    async def _stream(self, scripts, on_reply=None) -> list:
        pool = self.redis.connection_pool
        conn = None
        sent: list[Script] = []
        out: list = []
        try:
            for s in scripts:
                if conn is None:
                    conn = await pool.get_connection()
                await conn.send_command("EVALSHA", SCRIPTS[s.name][1], 0, *s.args)
                sent.append(s)
            for i in range(len(sent)):
                try:
                    r = await conn.read_response()
                except ResponseError as e:   # drain every reply before handling errors
                    out.append(e)
                    continue
                out.append(r)
                if on_reply is not None:
                    on_reply(i, r)
        except BaseException:
            if conn is not None:
                await conn.disconnect()   # replies may be left unread: never reuse this connection
            raise
        finally:
            if conn is not None:
                await pool.release(conn)
        for i, r in enumerate(out):
            if isinstance(r, NoScriptError):
                out[i] = await self._execute(sent[i])   # nothing ran: load the script and resend
            elif isinstance(r, Exception):
                raise r
        return out

    async def _txn(self, commands: tuple) -> list:
        """MULTI, the commands, EXEC in one write; EXEC's raw reply (no response callbacks).
        (Read-only use: a broken connection is reconnected and the transaction sent once more.)"""
        cmds = (("MULTI",), *commands, ("EXEC",))
        pool = self.redis.connection_pool
        for attempt in (0, 1):
            conn = await pool.get_connection()
            try:
                await conn.send_packed_command(conn.pack_commands(cmds), check_health=False)
                replies, err = [], None
                for _ in cmds:   # drain every reply before raising: the connection stays in step
                    try:
                        replies.append(await conn.read_response())
                    except ResponseError as e:
                        err = err or e
                        replies.append(e)
                break
            except (RedisConnectionError, RedisTimeoutError, OSError):
                await conn.disconnect()
                if attempt:
                    raise
            except BaseException:
                await conn.disconnect()
                raise
            finally:
                await pool.release(conn)
        if err is not None:
            raise err
        out = replies[-1]
        for r in out or ():
            if isinstance(r, Exception):
                raise r
        return out

    async def _execute(self, req: Script | Command | Stream | Txn) -> Any:
        if isinstance(req, Txn):
            return await self._txn(req.commands)
        if isinstance(req, Stream):
            return await self._stream(req.scripts, req.on_reply)
        if isinstance(req, Command):
            return await self.redis.execute_command(*req.args)
        src, sha = SCRIPTS[req.name]
        try:
            return await self.redis.execute_command("EVALSHA", sha, 0, *req.args)
        except NoScriptError:
            await self.redis.script_load(src)
            return await self.redis.execute_command("EVALSHA", sha, 0, *req.args)

    async def _run(self, op: Op) -> Any:
        try:
            req = next(op)
            while True:
                req = op.send(await self._execute(req))
        except StopIteration as stop:
            return stop.value

    # --- API: create, get, list, update, ... (store.API_OPS, added below from Store) -------------
    # watch(..., decode=fn) is supported (the informer's reflector checks this flag)
    WATCH_DECODE = True

    async def watch(self, kind: str, resource_version: int, *, block_ms: int = 1000,
                    count: int = 1000, send_initial_events: bool = False,
                    resource_version_match: str | None = None,
                    decode: Callable[[str, list], Any] | None = None) -> list[WatchEvent]:
        """Store.watch (``decode`` as there), or Store.watch_with_options for a watch-list."""
        if send_initial_events or resource_version_match is not None:   # watch-list (Store.watch_list)
            return await self._run(self.store.watch_with_options(kind, resource_version, send_initial_events,
                                                                 resource_version_match))
        return await self._run(self.store.watch(kind, resource_version, block_ms=block_ms, count=count,
                                             decode=decode))

    def stream_key(self, kind: str) -> str:
        return self.keys.stream(kind)


# one definition per operation for both clients: AsyncApiClient.<op>(...) awaits Store.<op>(...)
for _name in API_OPS:
    setattr(AsyncApiClient, _name, async_api_method(_name))
