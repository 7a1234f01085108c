"""A loopback TCP proxy between one scheduler instance and Redis: ``partition`` and link latency.

Give the instance ``proxy.url`` instead of the Redis URL; then

* ``partition()`` cuts every open connection (both sides aborted: the client sees a reset) and
  answers new connections by closing them at once, until ``heal()``. The instance's clients see
  ``redis.ConnectionError``: the informers' reflectors back off and retry (then resume their watch
  or relist on 410), writes retry through :class:`ha.runtime.retry.RetryingApiClient` (tenacity).
* ``set_latency(seconds | Distribution, rng)`` delays every chunk in both directions, keeping byte
  order (a slow link, Toxiproxy's ``latency``); ``None`` removes it.

Listens on 127.0.0.1 only. ``RedisProxy`` is asyncio (start it on the loop that will run it);
``ThreadedRedisProxy`` runs one on a private loop thread for synchronous drivers (the runner).
"""
from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any, Callable
from urllib.parse import urlparse, urlunparse

from chaos.loop import LoopThread
from cluster_state.timeouts import wait_for

__all__ = ["RedisProxy", "ThreadedRedisProxy", "ProxyStats"]

log = logging.getLogger("chaos.proxy")


@dataclass
class ProxyStats:
    accepted: int = 0
    refused: int = 0            # connections closed at once because of a partition
    cut: int = 0                # open connections aborted by partition()
    partitions: int = 0
    bytes_up: int = 0           # client -> Redis
    bytes_down: int = 0         # Redis -> client
    delayed_chunks: int = 0

    def as_dict(self) -> dict:
        return dict(self.__dict__)


class _Pair:
    def __init__(self, cw: asyncio.StreamWriter, sw: asyncio.StreamWriter) -> None:
        self.cw, self.sw = cw, sw
        self.tasks: list[asyncio.Task] = []

    def abort(self) -> None:
        for w in (self.cw, self.sw):
            try:
                w.transport.abort()
            except Exception:  # noqa: BLE001
                pass
        for t in self.tasks:
            t.cancel()


class RedisProxy:
    def __init__(self, upstream_url: str, *, name: str = "", listen_port: int = 0) -> None:
        u = urlparse(upstream_url)
        if u.scheme not in ("redis", "") or not u.hostname:
            raise ValueError(f"proxy {name}: upstream must be redis://host:port[/db], got {upstream_url!r}")
        self.upstream_url = upstream_url
        self.upstream = (u.hostname, u.port or 6379)
        self._url_parts = u
        self.name = name
        self.listen_port = listen_port
        self.stats = ProxyStats()
        self.partitioned = False
        self._latency: Callable[[], float] | None = None
        self._server: asyncio.base_events.Server | None = None
        self._pairs: set[_Pair] = set()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError(f"proxy {self.name}: not started")
        return self._server.sockets[0].getsockname()[1]

    @property
    def url(self) -> str:
        """The upstream URL with host:port replaced by the proxy's (db, user, password kept)."""
        u = self._url_parts
        netloc = f"127.0.0.1:{self.port}"
        if u.username or u.password:
            netloc = f"{u.username or ''}{':' + u.password if u.password else ''}@{netloc}"
        return urlunparse(u._replace(scheme="redis", netloc=netloc))

    async def start(self) -> "RedisProxy":
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.listen_port)
        return self

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            for p in list(self._pairs):
                p.abort()
            self._pairs.clear()
            try:
                await wait_for(self._server.wait_closed(), 5)
            except (asyncio.TimeoutError, Exception):  # noqa: BLE001
                pass
            self._server = None

    # ------------------------------------------------------------------------------ faults
    def partition(self) -> int:
        """Cut the instance off Redis; returns how many open connections were cut."""
        self.partitioned = True
        self.stats.partitions += 1
        pairs = list(self._pairs)
        for p in pairs:
            p.abort()
        self._pairs.clear()
        self.stats.cut += len(pairs)
        return len(pairs)

    def heal(self) -> None:
        self.partitioned = False

    def set_latency(self, latency: float | Any | None, rng: Any = None) -> None:
        """Fixed seconds, a chaos.faults.Distribution (with a numpy Generator), or None."""
        if latency is None:
            self._latency = None
        elif isinstance(latency, (int, float)):
            x = float(latency)
            self._latency = (lambda: x) if x > 0 else None
        else:
            if rng is None:
                raise ValueError("a latency distribution needs an rng")
            self._latency = lambda: latency.sample(rng)

    # ------------------------------------------------------------------------------ plumbing
    async def _accept(self, cr: asyncio.StreamReader, cw: asyncio.StreamWriter) -> None:
        if self.partitioned:
            self.stats.refused += 1
            cw.transport.abort()
            return
        try:
            sr, sw = await asyncio.open_connection(*self.upstream)
        except OSError as e:
            log.info("proxy %s: upstream %s:%d unreachable: %s", self.name, *self.upstream, e)
            cw.transport.abort()
            return
        if self.partitioned:   # cut while we connected
            sw.transport.abort()
            cw.transport.abort()
            self.stats.refused += 1
            return
        self.stats.accepted += 1
        pair = _Pair(cw, sw)
        self._pairs.add(pair)
        loop = asyncio.get_running_loop()
        pair.tasks = [loop.create_task(self._pump(cr, sw, pair, up=True)),
                      loop.create_task(self._pump(sr, cw, pair, up=False))]

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, pair: _Pair,
                    *, up: bool) -> None:
        last_due = 0.0
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                lat = self._latency
                if lat is not None:
                    # keep byte order: a chunk never leaves before the previous one
                    due = max(time.monotonic() + max(0.0, lat()), last_due)
                    last_due = due
                    self.stats.delayed_chunks += 1
                    wait = due - time.monotonic()
                    if wait > 0:
                        await asyncio.sleep(wait)
                if up:
                    self.stats.bytes_up += len(data)
                else:
                    self.stats.bytes_down += len(data)
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            return
        finally:
            # one side closed: close both (as a TCP proxy does)
            if pair in self._pairs:
                self._pairs.discard(pair)
                for w in (pair.cw, pair.sw):
                    try:
                        w.close()
                    except Exception:  # noqa: BLE001
                        pass
                for t in pair.tasks:
                    if t is not asyncio.current_task():
                        t.cancel()


class ThreadedRedisProxy:
    """A RedisProxy on a private event-loop thread (for synchronous drivers); same controls."""

    def __init__(self, upstream_url: str, *, name: str = "", loop_thread: LoopThread | None = None) -> None:
        self._own_loop = loop_thread is None
        self.loop = loop_thread or LoopThread(f"proxy-{name}")
        self.proxy = RedisProxy(upstream_url, name=name)

    def start(self) -> "ThreadedRedisProxy":
        self.loop.start()
        self.loop.run(self.proxy.start(), timeout=10)
        return self

    @property
    def url(self) -> str:
        return self.proxy.url

    @property
    def stats(self) -> ProxyStats:
        return self.proxy.stats

    @property
    def partitioned(self) -> bool:
        return self.proxy.partitioned

    def partition(self) -> int:
        return self.loop.call(self.proxy.partition)

    def heal(self) -> None:
        self.loop.call(self.proxy.heal)

    def set_latency(self, latency, rng=None) -> None:
        self.loop.call(self.proxy.set_latency, latency, rng)

    def stop(self) -> None:
        try:
            self.loop.run(self.proxy.stop(), timeout=10)
        finally:
            if self._own_loop:
                self.loop.stop()
