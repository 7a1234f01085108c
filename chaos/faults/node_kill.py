"""node-kill: the whole node an instance runs on crashes — its raylet and every process on it, so
every instance placed there dies with it (each a ``kill`` life: their leases are not released)
and the run fails over. A dead node stays dead; the head node (the driver's) is refused, as is a
node of another machine (its processes are out of the driver's reach).

Injector: the driver's process control (``Targets.kill_node``; the live engine's kills the node's
raylet by PID, found through the port Ray's GCS lists for it).
"""
from __future__ import annotations

from chaos.faults.base import Draw, FaultPackage, per_instance
from chaos.faults.fields import FaultParams, Target


class Params(FaultParams):
    target: Target


class NodeKill(FaultPackage):
    name = "node-kill"
    doc = "the Ray node the instance runs on crashes (raylet and all its processes), with every instance on it"
    order = 120
    Params = Params
    targets = ("instance", "leader")
    windowed = False
    injector = "process"
    example = {"at": "20s", "fault": "node-kill", "target": "leader"}
    draw = Draw("point", "node-kill", "darkred")

    async def fire(self, targets, sf, names):
        return await per_instance(targets, names, "kill_node")


FAULT = NodeKill()
