"""bind_conflicts: 409s on binding, summed over every instance and every life of it."""
from ha.experiment.checkers import Absent
from ha.experiment.checkers._run import counter_totals, counters_seen

NAME = "bind_conflicts"
HEADLINE = None
CONTRACT = True


def check(h):
    if not counters_seen(h):
        return Absent("no instance counters recorded")
    return sum(counter_totals(h, "bind_conflicts").values())
