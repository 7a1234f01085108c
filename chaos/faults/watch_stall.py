"""watch-stall: every watch event that reaches an instance inside the window is held until the
window ends, then released in order (an informer that hangs, then catches up).

Injector: :class:`chaos.injectors.watch.WatchChaosHook`.
"""
from __future__ import annotations

from typing import Optional

from pydantic import Field

from chaos.faults.base import Draw, HookFault
from chaos.faults.fields import FaultParams, For, Kinds, Target


class Params(FaultParams):
    target: Target
    for_: For = Field(alias="for")
    kinds: Optional[Kinds] = None


class WatchStall(HookFault):
    name = "watch-stall"
    doc = "watch events are held for the whole window, then released in order"
    order = 20
    Params = Params
    injector = "watch"
    example = {"at": "12s", "for": "5s", "fault": "watch-stall", "target": "scheduler-2"}
    draw = Draw("span", "watch stall", "goldenrod")


FAULT = WatchStall()
