"""clock-rate: an instance's lease clock runs at ``rate`` × real time for the window (lease
timing: a fast clock gives up leadership early, a slow one holds it too long), then 1.0 again.

Injector: the driver's ``set_clock_rate`` (the instance's election clock).
"""
from __future__ import annotations

from typing import Optional

from pydantic import Field

from chaos.faults.base import Draw, FaultPackage, per_instance
from chaos.faults.fields import ClockRate, FaultParams, For, Target


class Params(FaultParams):
    target: Target
    rate: ClockRate
    for_: Optional[For] = Field(None, alias="for")


class ClockRateFault(FaultPackage):
    name = "clock-rate"
    doc = "the instance's lease clock runs faster or slower than real time for the window"
    order = 110
    Params = Params
    injector = "clock"
    example = {"at": "0s", "for": "20s", "fault": "clock-rate", "target": "leader", "rate": 2.0}
    draw = Draw("span", "clock rate", "green")

    async def start(self, targets, sf, names):
        return await self._set(targets, names, sf.fault.rate)

    async def end(self, targets, sf, names):
        return await self._set(targets, names, 1.0)

    @staticmethod
    async def _set(targets, names, rate):
        await per_instance(targets, names, "set_clock_rate", rate)
        return f"clock rate {rate:g}"


FAULT = ClockRateFault()
