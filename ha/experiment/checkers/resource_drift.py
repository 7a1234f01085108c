"""resource_drift: per instance, Σ over nodes of |Δ| of Idle/Pipelined/Releasing from the
up-to-date cache, as a fraction of cluster capacity (the worse of cpu and memory)."""
from ha.experiment.checkers import Absent
from ha.experiment.checkers._fold import reference_pass

NAME = "resource_drift"


def check(h):
    rp = reference_pass(h)
    if rp.absent:
        return Absent(rp.absent)
    s = rp.resource.summary()
    return s if s is not None else Absent("no cluster capacity (no nodes) or no synced instance")


def columns(h):
    rp = reference_pass(h)
    return {"resource_drift": [{n: row["resource_drift"] for n, row in tick.items()} for tick in rp.per_tick]}
