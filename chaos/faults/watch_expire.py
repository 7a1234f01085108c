"""watch-expire: the instance's informers relist as if their watch got 410 Gone (backoff, relist,
tombstones for what vanished) — at one moment, so a point fault.

Injector: :class:`chaos.injectors.watch.WatchChaosHook` (``expire_now``).
"""
from __future__ import annotations

from typing import Optional

from chaos.faults.base import Draw, FaultPackage, call, each
from chaos.faults.fields import FaultParams, Kinds, Target


class Params(FaultParams):
    target: Target
    kinds: Optional[Kinds] = None


class WatchExpire(FaultPackage):
    name = "watch-expire"
    doc = "the instance's informers relist as after 410 Gone"
    order = 40
    Params = Params
    windowed = False
    injector = "watch"
    self_driven = True
    example = {"at": "30s", "fault": "watch-expire", "target": "scheduler-1", "kinds": ["Pod"]}
    draw = Draw("point", "watch expire", "purple")

    async def fire(self, targets, sf, names):
        kinds = sf.fault.kinds

        async def relist(w) -> str:
            # a hook's expire is a plain call on the live engine and a coroutine on the sim's
            return f"relist {','.join(await call(w.expire, kinds)) or 'none'}"
        return await each(targets, names, "watch", relist)


FAULT = WatchExpire()
