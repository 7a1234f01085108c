"""watch-reorder: watch events get a random hold in [0, window) and may overtake events *of other
objects*; one object's events never change order and a relist stays a barrier (the informer
contract, client-go shared_informer.go).

Injector: :class:`chaos.injectors.watch.WatchChaosHook`.
"""
from __future__ import annotations

from typing import Optional

from pydantic import Field

from chaos.faults.base import Draw, HookFault
from chaos.faults.fields import FaultParams, For, Kinds, Target, Window


class Params(FaultParams):
    target: Target
    for_: Optional[For] = Field(None, alias="for")
    kinds: Optional[Kinds] = None
    window: Window = 0.5


class WatchReorder(HookFault):
    name = "watch-reorder"
    doc = "watch events of different objects overtake each other (per-object order kept)"
    order = 30
    Params = Params
    injector = "watch"
    example = {"at": "5s", "for": "20s", "fault": "watch-reorder", "target": "all", "window": "200ms"}
    draw = Draw("span", "watch reorder", "khaki")


FAULT = WatchReorder()
