"""redis-restart: the embedded Redis (the API server's storage) stops, stays down ``for`` (default
0 s) and starts again with its data (AOF); every instance sees connection errors meanwhile. A point
fault: it fires once (and takes ``for`` to return).

Injector: the driver's ``redis_restart`` (present only when the testbed owns Redis).
"""
from __future__ import annotations

from typing import Optional

from pydantic import Field

from chaos.faults.base import Draw, FaultPackage, in_thread_if_blocking, method
from chaos.faults.fields import FaultParams, For


class Params(FaultParams):
    for_: Optional[For] = Field(None, alias="for", description="how long Redis stays down (default 0s)")


class RedisRestart(FaultPackage):
    name = "redis-restart"
    doc = "the API server's Redis stops, stays down `for`, and starts again with its data"
    order = 100
    Params = Params
    targets = ()
    windowed = False
    injector = "redis"
    example = {"at": "30s", "for": "2s", "fault": "redis-restart"}
    draw = Draw("point", "redis restart", "darkred")

    async def fire(self, targets, sf, names):
        fn = method(targets, "redis_restart")
        down = sf.fault.duration or 0.0
        await in_thread_if_blocking(fn, down)
        return f"redis restarted (down {down:g}s)"


FAULT = RedisRestart()
