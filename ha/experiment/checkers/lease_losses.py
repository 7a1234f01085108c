"""lease_losses (extension): leader terms ended by the renew deadline, over all instances."""
from ha.experiment.checkers import Absent
from ha.experiment.checkers._run import counter_totals, counters_seen, mode

NAME = "lease_losses"
HEADLINE = None
CONTRACT = False


def check(h):
    if mode(h) == "active-active":
        return Absent("active-active: no leader election")
    if not counters_seen(h):
        return Absent("no instance counters recorded")
    return sum(counter_totals(h, "elections_lost").values())
