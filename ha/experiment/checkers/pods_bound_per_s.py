"""pods_bound_per_s: binds of every instance (every life) per second of the run."""
from ha.experiment.checkers import Absent
from ha.experiment.checkers._run import counter_totals, counters_seen, experiment, seconds

NAME = "pods_bound_per_s"
HEADLINE = None
CONTRACT = True


def check(h):
    if not counters_seen(h):
        return Absent("no instance counters recorded")
    dur = h.duration() or seconds(experiment(h).get("duration"), 0.0)
    if not dur:
        return None
    return round(sum(counter_totals(h, "binds").values()) / dur, 3)
