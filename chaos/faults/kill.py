"""kill: an instance crashes (SIGKILL: its lease is not released); with ``restart_after`` a new
incarnation of it starts that long after, running the same chaos schedule.

Injector: the driver's process control (``Targets.kill`` / ``Targets.restart``).
"""
from __future__ import annotations

from typing import Optional

from chaos.faults.base import Draw, FaultPackage, per_instance
from chaos.faults.fields import FaultParams, RestartAfter, Target


class Params(FaultParams):
    target: Target
    restart_after: Optional[RestartAfter] = None


class Kill(FaultPackage):
    name = "kill"
    doc = "the instance crashes (SIGKILL); restart_after starts a new incarnation"
    order = 60
    Params = Params
    targets = ("instance", "leader")
    windowed = False
    injector = "process"
    example = {"at": "20s", "fault": "kill", "target": "leader", "restart_after": "5s"}
    draw = Draw("point", "kill", "black")

    def actions(self, fault):
        acts = super().actions(fault)
        if fault.restart_after is not None:
            acts.append((fault.at + fault.restart_after, "restart"))
        return acts

    async def fire(self, targets, sf, names):
        return await per_instance(targets, names, "kill")

    async def restart(self, targets, sf, names):
        await per_instance(targets, names, "restart")
        return f"restarted {', '.join(names)}"


FAULT = Kill()
