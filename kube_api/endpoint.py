"""One listener of the front (``Endpoint``): its store client, its chaos, its logs.

A front serves one endpoint per scheduler instance (named after it) plus an ``observer``. What a
fault does to an instance acts in one place whatever the client is:

* watch chaos -- every HTTP watch stream of the endpoint passes its events through a
  ``chaos.injectors.watch.WatchChaosHook`` (delay, stall, reorder, expire), each event wrapped as a
  ``cluster_state.delivery.Delivery`` and bookmarks as barriers (``key None``), so a bookmark never
  overtakes a held event;
* API chaos -- every store operation goes through :meth:`Endpoint.call`, wrapped by
  ``chaos.injectors.api.AsyncChaosApiClient`` (api-latency, api-conflict) when the endpoint has
  API chaos;
* partition -- an endpoint built with a ``chaos.injectors.proxy.RedisProxy`` between it and Redis
  (``Endpoint.proxy``): ``partition()`` cuts its store connections (requests answer 503, watches
  end), ``heal()`` ends it.

:class:`EndpointChaos` is the nemesis's door, with the calls of ``ChaosPort``
(``set_epoch``, ``activate``, ``deactivate``, ``expire_now``, ``stats``, ``call``): faults given to
it reach the watch streams open now and those opened later (a new stream starts with the
activations in force, a watch-expire that already fired does not fire again).

Logs (both optional files under ``log_dir``; also kept in memory):

* delivery log -- ``cluster_state.delivery.DeliveryLog`` records of what the watches delivered
  and when (the stored object; plus a ``watch`` id), and a LIST record per list answered;
* request log -- one JSON line per request: ``t`` (unix time), ``endpoint``, ``verb``, ``group``,
  ``version``, ``resource``, ``namespace``, ``name``, ``subresource``, ``code``, ``ms`` and extras.
"""
from __future__ import annotations

import contextvars
import itertools
import logging
import math
import os
import time
from typing import Any, Callable, Iterable

import orjson

from cluster_state.delivery import DeliveryLog
from kube_api.resources import Resource

__all__ = ["Endpoint", "EndpointChaos", "PassThroughHook"]

log = logging.getLogger("kube_api.endpoint")

# set by the server around each request; log_request marks it, so a request that a handler
# logged itself (the write path) is not logged twice
_REQUEST_LOGGED: contextvars.ContextVar[list | None] = contextvars.ContextVar("kube_api_request_logged",
                                                                             default=None)


def _no_crash(point: str) -> None:
    log.warning("crash-point %s reached on a front endpoint: ignored (an endpoint is not a process)", point)


class PassThroughHook:
    """The hook of a watch without chaos: deliver at once, in order."""

    def __init__(self) -> None:
        self._emit = None

    async def start(self, emit) -> None:
        self._emit = emit

    async def submit(self, d) -> None:
        self._emit(d)

    def held(self) -> int:
        return 0

    async def stop(self) -> None:
        pass


class _KindHooks:
    """The live watch hooks of one kind on one endpoint, with ChaosPort's hook calls."""

    def __init__(self, door: "EndpointChaos", kind: str):
        self.door = door
        self.kind = kind
        self.live: set = set()
        from chaos.injectors.watch import WatchStats
        self.done = WatchStats()     # the counters of hooks whose streams have ended

    def set_epoch(self, t0: float) -> None:
        for h in list(self.live):
            h.set_epoch(t0)

    def activate(self, sf, **kw) -> int:
        return sum(1 for h in list(self.live) if h.activate(sf, **kw))

    def deactivate(self, index: int) -> None:
        for h in list(self.live):
            h.deactivate(index)

    def expire_now(self) -> int:
        return sum(1 for h in list(self.live) if h.expire_now())

    @property
    def stats(self):
        from chaos.injectors.watch import WatchStats
        total = WatchStats(**self.done.as_dict())
        for h in self.live:
            for k, v in h.stats.as_dict().items():
                if k == "max_hold_s":
                    total.max_hold_s = max(total.max_hold_s, v)
                else:
                    setattr(total, k, getattr(total, k) + v)
        return total

    def retire(self, hook) -> None:
        if hook in self.live:
            self.live.discard(hook)
            for k, v in hook.stats.as_dict().items():
                if k == "max_hold_s":
                    self.done.max_hold_s = max(self.done.max_hold_s, v)
                else:
                    setattr(self.done, k, getattr(self.done, k) + v)


class EndpointChaos:
    """The chaos of one endpoint: its watch faults (a ``WatchChaosHook`` per open watch stream)
    and its API faults (one ``ApiChaos``). ``faults``: the endpoint's scheduled faults
    (``chaos.schedule.ScheduledFault``; they act once ``set_epoch`` is given)."""

    def __init__(self, instance: str, faults: Iterable[Any] = (), *, clock: Callable[[], float] = time.time):
        from chaos.injectors.api import ApiChaos
        self.instance = instance
        self.faults = list(faults)
        self.clock = clock
        self.epoch: float | None = None
        self.api_chaos = ApiChaos(instance, self.faults, clock=clock, crash=_no_crash)
        self.hooks: dict[str, _KindHooks] = {}
        # nemesis activations: index -> [sf, start, end], replayed on streams opened later
        self._activations: dict[int, list] = {}

    # -- streams ----------------------------------------------------------------------------
    def _kind(self, kind: str) -> _KindHooks:
        kh = self.hooks.get(kind)
        if kh is None:
            kh = self.hooks[kind] = _KindHooks(self, kind)
        return kh

    def new_hook(self, kind: str):
        """A fresh ``WatchChaosHook`` for a new watch stream of ``kind``, with the faults in force."""
        from chaos.injectors.watch import WatchChaosHook
        h = WatchChaosHook(self.instance, kind, self.faults, epoch=self.epoch, clock=self.clock)
        now = self.clock()
        for a in h.activations.values():   # an expire that fired before this stream opened is past
            if a.sf.name == "watch-expire" and a.start <= now:
                a.expired = True
        for sf, start, end in self._activations.values():
            if sf.name == "watch-expire":
                continue
            h.activate(sf, start=start, end=end)
        self._kind(kind).live.add(h)
        return h

    def retire(self, kind: str, hook) -> None:
        kh = self.hooks.get(kind)
        if kh is not None:
            kh.retire(hook)

    # -- ChaosPort's typed calls -------------------------------------------------------------
    def _kinds(self, kinds: Iterable[str] | None):
        ks = None if kinds is None else set(kinds)
        return [(k, h) for k, h in self.hooks.items() if ks is None or k in ks]

    async def set_epoch(self, t0_wall: float) -> dict[str, Any]:
        self.epoch = float(t0_wall)
        for kh in self.hooks.values():
            kh.set_epoch(self.epoch)
        self.api_chaos.set_epoch(self.epoch)
        return {"api": None, **{k: None for k in self.hooks}}

    async def activate(self, sf: Any, *, watch: bool = True, api: bool = True,
                       kinds: Iterable[str] | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if watch and getattr(sf, "is_watch", False):
            now = self.clock()
            end = math.inf if sf.fault.duration is None else now + sf.fault.duration
            if kinds is None:
                self._activations[sf.index] = [sf, now, end]
            for k, kh in self._kinds(kinds):
                out[k] = kh.activate(sf, start=now, end=end)
        if api:
            out["api"] = self.api_chaos.activate(sf)
        return out

    async def deactivate(self, index: int, *, watch: bool = True, api: bool = True,
                         kinds: Iterable[str] | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if watch:
            a = self._activations.get(index)
            if a is not None and kinds is None:
                a[2] = min(a[2], self.clock())
            for k, kh in self._kinds(kinds):
                out[k] = kh.deactivate(index)
        if api:
            out["api"] = self.api_chaos.deactivate(index)
        return out

    async def expire_now(self, kinds: Iterable[str] | None = None) -> dict[str, Any]:
        """watch-expire now: every open watch stream (of ``kinds``) ends with a 410 Expired ERROR
        event, so its client relists."""
        return {k: kh.expire_now() for k, kh in self._kinds(kinds)}

    def stats(self) -> dict[str, Any]:
        out: dict[str, Any] = {k: kh.stats.as_dict() for k, kh in self.hooks.items()}
        out["api"] = dict(self.api_chaos.stats)
        return out

    async def call(self, method: str, *args, kinds: list | None = None, api: bool = True) -> dict:
        if method == "set_epoch" and args:
            return await self.set_epoch(args[0])
        if method in ("activate", "deactivate"):
            return await getattr(self, method)(*args, watch=kinds is None or bool(kinds), api=api, kinds=kinds)
        if method == "expire_now":
            return await self.expire_now(kinds)
        raise ValueError(f"unknown chaos call {method!r}")

    @property
    def api_active(self) -> bool:
        return bool(self.api_chaos.activations)


class Endpoint:
    """One listener of the front. ``api``: its own ``cluster_state.aio.AsyncApiClient`` (built on
    ``proxy.url`` when a partition proxy is given). ``chaos``: an :class:`EndpointChaos` (or None)."""

    def __init__(self, name: str, api, *, chaos: EndpointChaos | None = None, proxy: Any = None,
                 log_dir: str | os.PathLike | None = None, keep_logs: bool = True,
                 bookmark_interval: float = 10.0, watch_block_ms: int = 1000):
        self.name = name
        self.api = api
        self.chaos = chaos
        self.proxy = proxy
        self.bookmark_interval = float(bookmark_interval)
        self.watch_block_ms = int(watch_block_ms)
        self.url: str | None = None          # set when the server listens
        self.port: int | None = None
        self.log_dir = os.fspath(log_dir) if log_dir is not None else None
        self.keep_logs = keep_logs
        self.requests: list[dict] = []
        self._req_fh = None
        dl_path = None
        if self.log_dir is not None:
            os.makedirs(self.log_dir, exist_ok=True)
            dl_path = os.path.join(self.log_dir, "delivery.log")
            # unbuffered: each request's line reaches the file at once (one append each). An
            # external instance's decisions are read from this file while the run goes on; a
            # buffer held the last few kilobytes of requests back -- a run's last binds were
            # never observed (they reached the file only when the endpoint closed)
            self._req_fh = open(os.path.join(self.log_dir, "requests.jsonl"), "ab", buffering=0)
        self.delivery_log = DeliveryLog(dl_path, instance=name, keep=keep_logs)
        # False: the delivery log keeps nothing (no file, nothing in memory): skip building records
        self.logs_deliveries = bool(keep_logs or dl_path)
        self._watch_ids = itertools.count(1)
        self.open_watches: set = set()
        self._chaos_client = None

    # -- store operations ----------------------------------------------------------------------
    def _client(self):
        if self.chaos is None or not self.chaos.api_active:
            return self.api
        if self._chaos_client is None:
            from chaos.injectors.api import AsyncChaosApiClient
            self._chaos_client = AsyncChaosApiClient(self.api, self.chaos.api_chaos)
        return self._chaos_client

    async def call(self, op: str, *args, **kwargs):
        """``api.<op>(*args, **kwargs)`` through the endpoint's API chaos (latency, conflicts)."""
        return await getattr(self._client(), op)(*args, **kwargs)

    # -- logs ---------------------------------------------------------------------------------
    def next_watch_id(self) -> int:
        return next(self._watch_ids)

    def log_request(self, verb: str, resource: Resource | None, namespace: str | None, name: str | None,
                    subresource: str | None, code: int, **extra) -> None:
        rec = {"t": time.time(), "endpoint": self.name, "verb": verb,
               "group": resource.group if resource is not None else None,
               "version": resource.version if resource is not None else None,
               "resource": resource.plural if resource is not None else None,
               "namespace": namespace, "name": name, "subresource": subresource, "code": int(code)}
        rec.update(extra)
        if self.keep_logs:
            self.requests.append(rec)
        if self._req_fh is not None:
            self._req_fh.write(orjson.dumps(rec, default=str) + b"\n")
        mark = _REQUEST_LOGGED.get()
        if mark is not None:
            mark.append(True)

    def log_delivery(self, rec: dict) -> None:
        if self.logs_deliveries:
            self.delivery_log.append(rec)

    def flush(self) -> None:
        self.delivery_log.flush()
        if self._req_fh is not None:
            self._req_fh.flush()

    async def close(self) -> None:
        self.flush()
        self.delivery_log.close()
        if self._req_fh is not None:
            self._req_fh.close()
            self._req_fh = None
        try:
            await self.api.close()
        except Exception:  # noqa: BLE001 -- closing a client whose Redis is gone
            pass
        if self.proxy is not None:
            stop = getattr(self.proxy, "stop", None)
            if stop is not None:
                r = stop()
                if hasattr(r, "__await__"):
                    await r

    # -- partition ----------------------------------------------------------------------------
    def partition(self) -> int:
        if self.proxy is None:
            raise RuntimeError(f"endpoint {self.name} has no partition proxy")
        return self.proxy.partition()

    def heal(self) -> None:
        if self.proxy is None:
            raise RuntimeError(f"endpoint {self.name} has no partition proxy")
        self.proxy.heal()
