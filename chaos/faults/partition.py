"""partition: an instance loses Redis — its proxy cuts every connection and refuses new ones
until the window ends (reflectors back off and resume or relist; writes retry).

Injector: :class:`chaos.injectors.proxy.RedisProxy` in front of the instance.
"""
from __future__ import annotations

from pydantic import Field

from chaos.faults.base import Draw, FaultPackage, each
from chaos.faults.fields import FaultParams, For, Target


class Params(FaultParams):
    target: Target
    for_: For = Field(alias="for")


class Partition(FaultPackage):
    name = "partition"
    doc = "the instance loses its connection to Redis (the API server) for the window"
    order = 50
    Params = Params
    injector = "proxy"
    example = {"at": "20s", "for": "10s", "fault": "partition", "target": "leader"}
    draw = Draw("span", "partition", "red")

    async def start(self, targets, sf, names):
        return await each(targets, names, "proxy", lambda p: f"cut {p.partition()} connections")

    async def end(self, targets, sf, names):
        def heal(p):
            p.heal()
            return "healed"
        return await each(targets, names, "proxy", heal)


FAULT = Partition()
