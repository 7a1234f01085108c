"""fatal_cache_errors (extension): modelled klog.Fatalf crashes (each restarts its instance)."""
from ha.experiment.checkers import Absent
from ha.experiment.checkers._run import counter_totals, counters_seen

NAME = "fatal_cache_errors"
HEADLINE = None
CONTRACT = False


def check(h):
    if not counters_seen(h):
        return Absent("no instance counters recorded")
    return sum(counter_totals(h, "fatal_cache_errors").values())
