"""Asyncio API client (redis.asyncio): the same operations as :class:`ApiClient`, driven by
awaiting each request. Create it on the event loop that will use it."""
from __future__ import annotations

from typing import Any

import redis.asyncio as aredis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from .client import _check_client
from .store import SCRIPTS, Command, Op, Script, Store, Stream, Txn, keys_for
from .watch import ListResult, WatchEvent

__all__ = ["AsyncApiClient"]


class AsyncApiClient:
    def __init__(self, redis_client: "aredis.Redis", prefix: str = "ht", *, history: int = 100_000,
                 clear_nnn_on_binding: bool = False):
        _check_client(redis_client)
        self.redis = redis_client
        self.store = Store(prefix, history=history, clear_nnn_on_binding=clear_nnn_on_binding)
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

    # --- API (see Store for semantics) -----------------------------------------------------
    async def create(self, obj: dict | bytes) -> dict:
        return await self._run(self.store.create(obj))

    async def get(self, kind: str, name: str, namespace: str | None = None) -> dict:
        return await self._run(self.store.get(kind, name, namespace))

    async def list(self, kind: str, namespace: str | None = None) -> ListResult:
        return await self._run(self.store.list(kind, namespace))

    async def update(self, obj: dict | bytes) -> dict:
        return await self._run(self.store.update(obj))

    async def update_status(self, obj: dict | bytes) -> dict:
        return await self._run(self.store.update_status(obj))

    async def patch_annotations(self, kind: str, name: str, namespace: str | None,
                                patch: dict[str, str | None]) -> dict:
        return await self._run(self.store.patch_annotations(kind, name, namespace, patch))

    async def bind(self, namespace: str, name: str, node_name: str, *, uid: str | None = None) -> dict:
        return await self._run(self.store.bind(namespace, name, node_name, uid=uid))

    async def bind_many(self, bindings: list[tuple[str, str, str]], *,
                  uids: list[str | None] | None = None) -> list:
        """Per binding the bound pod or an ApiError; ``uids[i]`` (if given and not None) is a
        uid precondition for binding i (Conflict if the stored pod's uid differs)."""
        return await self._run(self.store.bind_many(bindings, uids=uids))

    async def delete(self, kind: str, name: str, namespace: str | None = None, *,
                     grace_period_seconds: int | None = None, resource_version: int | None = None,
                     now: float | None = None) -> dict | None:
        return await self._run(self.store.delete(kind, name, namespace,
                                                 grace_period_seconds=grace_period_seconds,
                                                 resource_version=resource_version, now=now))

    async def evict(self, namespace: str, name: str, *, grace_period_seconds: int | None = None) -> dict:
        return await self._run(self.store.evict(namespace, name, grace_period_seconds=grace_period_seconds))

    async def finalize_deletions(self, now: float | None = None) -> int:
        return await self._run(self.store.finalize_deletions(now))

    async def watch(self, kind: str, resource_version: int, *, block_ms: int = 1000,
                    count: int = 1000) -> list[WatchEvent]:
        return await self._run(self.store.watch(kind, resource_version, block_ms=block_ms, count=count))

    async def current_resource_version(self) -> int:
        return await self._run(self.store.current_resource_version())

    async def compact(self, kind: str, up_to_rv: int) -> None:
        return await self._run(self.store.compact(kind, up_to_rv))

    def stream_key(self, kind: str) -> str:
        return self.keys.stream(kind)
