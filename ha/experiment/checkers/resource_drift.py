"""resource_drift: per instance, Σ over nodes of |Δ| of Idle/Pipelined/Releasing from the
up-to-date cache, as a fraction of cluster capacity (the worse of cpu and memory)."""
from ha.experiment.checkers._fold import reference_checker

NAME = "resource_drift"
HEADLINE = "max"
CONTRACT = True

check, columns = reference_checker("resource", "no cluster capacity (no nodes) or no synced instance",
                                   ("resource_drift",))
