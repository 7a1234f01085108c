"""pause: an instance's process stops dead (SIGSTOP: no cleanup, lease renewals stop — Jepsen's
:pause) and continues (SIGCONT) when the window ends.

Injector: the driver's process control (``Targets.pause`` / ``Targets.resume``).
"""
from __future__ import annotations

from pydantic import Field

from chaos.faults.base import Draw, FaultPackage, per_instance
from chaos.faults.fields import FaultParams, For, Target


class Params(FaultParams):
    target: Target
    for_: For = Field(alias="for")


class Pause(FaultPackage):
    name = "pause"
    doc = "the instance's process is stopped (SIGSTOP) for the window, then continued"
    order = 70
    Params = Params
    targets = ("instance", "leader")
    injector = "process"
    example = {"at": "25s", "for": "20s", "fault": "pause", "target": "leader"}
    draw = Draw("span", "pause", "gray")

    async def start(self, targets, sf, names):
        return await per_instance(targets, names, "pause")

    async def end(self, targets, sf, names):
        return await per_instance(targets, names, "resume")


FAULT = Pause()
