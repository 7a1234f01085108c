"""watch-delay: each watch event an instance's informer receives waits a delay drawn from a
distribution before it reaches the cache (a slow informer); watch order is kept.

Injector: :class:`chaos.injectors.watch.WatchChaosHook` (per instance and kind, seeded per fault).
"""
from __future__ import annotations

from typing import Optional

from pydantic import Field

from chaos.faults.base import Draw, HookFault
from chaos.faults.fields import Delay, FaultParams, For, Kinds, Target


class Params(FaultParams):
    target: Target
    delay: Delay = Field(description="the delay of each event")
    for_: Optional[For] = Field(None, alias="for")
    kinds: Optional[Kinds] = None


class WatchDelay(HookFault):
    name = "watch-delay"
    doc = "every watch event an instance receives waits a delay drawn from a distribution (order kept)"
    order = 10
    Params = Params
    injector = "watch"
    example = {"at": "10s", "for": "30s", "fault": "watch-delay", "target": "scheduler-1",
               "kinds": ["Pod"], "delay": {"dist": "exponential", "mean": "500ms"}}
    draw = Draw("span", "watch delay", "orange")


FAULT = WatchDelay()
