"""An instance's chaos port: the one door through which the nemesis reaches the faults that act
inside a scheduler instance — the watch hooks of its informers (``chaos.injectors.watch``: delay,
stall, reorder, expire) and the chaos on its own API writes (``chaos.injectors.api``: latency,
conflicts).

The watch hooks belong to an incarnation (a restart builds fresh ones, :meth:`attach`); the API
chaos and the run's epoch outlive incarnations, so a new incarnation's hooks get the epoch the
port was last given and keep the schedule.

Typed calls (each returns ``{kind or "api": result}`` over the parts that answer it):

* ``set_epoch(t0_wall)`` — the run's start; remembered for later incarnations;
* ``activate(sf, watch=True, api=True, kinds=None)`` / ``deactivate(index, watch=True, api=True,
  kinds=None)`` — a scheduled fault (``chaos.schedule.ScheduledFault``) on the watch hooks (of
  ``kinds``, default all) and/or the API chaos;
* ``expire_now(kinds=None)`` — watch-expire: the informers of ``kinds`` relist as after 410 Gone;
* ``stats()`` — each part's counters (plus the retrying client's, when there is one).

The instance seam's typed chaos door (``SchedulerInstance.chaos_set_epoch`` …,
``ha.runtime.external.protocol``) is these calls; there is no other."""
from __future__ import annotations

import asyncio
from typing import Any, Iterable

__all__ = ["ChaosPort"]


async def _result(r):
    return await r if asyncio.iscoroutine(r) else r


class ChaosPort:
    def __init__(self, instance: str):
        self.instance = instance
        self.hooks: dict[str, Any] = {}     # kind -> the current incarnation's watch hook
        self.api_chaos: Any = None          # chaos.injectors.api.ApiChaos, survives restarts
        self.retry_stats: Any = None        # callable -> the retrying client's stats, or None
        self.epoch: float | None = None

    # -- wiring ----------------------------------------------------------------------------
    def attach(self, hooks: dict[str, Any]) -> None:
        """A new incarnation's watch hooks; they get the remembered epoch."""
        self.hooks = dict(hooks)
        if self.epoch is not None:
            for h in self.hooks.values():
                fn = getattr(h, "set_epoch", None)
                if callable(fn):
                    fn(self.epoch)

    def set_api_chaos(self, api_chaos: Any) -> None:
        self.api_chaos = api_chaos
        if self.epoch is not None and api_chaos is not None:
            api_chaos.set_epoch(self.epoch)

    # -- typed calls -----------------------------------------------------------------------
    def _hooks(self, kinds: Iterable[str] | None):
        ks = None if kinds is None else set(kinds)
        return [(k, h) for k, h in self.hooks.items() if ks is None or k in ks]

    async def _each(self, method: str, args: tuple, *, watch: bool, api: bool,
                    kinds: Iterable[str] | None) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if watch:
            for k, h in self._hooks(kinds):
                fn = getattr(h, method, None)
                if callable(fn):
                    out[k] = await _result(fn(*args))
        if api and self.api_chaos is not None:
            fn = getattr(self.api_chaos, method, None)
            if callable(fn):
                out["api"] = fn(*args)
        return out

    async def set_epoch(self, t0_wall: float) -> dict[str, Any]:
        self.epoch = float(t0_wall)
        return await self._each("set_epoch", (self.epoch,), watch=True, api=True, kinds=None)

    async def activate(self, sf: Any, *, watch: bool = True, api: bool = True,
                       kinds: Iterable[str] | None = None) -> dict[str, Any]:
        return await self._each("activate", (sf,), watch=watch, api=api, kinds=kinds)

    async def deactivate(self, index: int, *, watch: bool = True, api: bool = True,
                         kinds: Iterable[str] | None = None) -> dict[str, Any]:
        return await self._each("deactivate", (index,), watch=watch, api=api, kinds=kinds)

    async def expire_now(self, kinds: Iterable[str] | None = None) -> dict[str, Any]:
        return await self._each("expire_now", (), watch=True, api=False, kinds=kinds)

    def stats(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, h in self.hooks.items():
            st = getattr(h, "stats", None)
            if st is not None and hasattr(st, "as_dict"):
                out[k] = st.as_dict()
        if self.api_chaos is not None:
            out["api"] = dict(self.api_chaos.stats)
        rs = self.retry_stats() if self.retry_stats is not None else None
        if rs is not None:
            out["retry"] = rs.as_dict()
        return out
