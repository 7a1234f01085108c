"""cache_divergence: per instance, tasks whose (status, node) in its cache differ from what an
up-to-date cache under the same profile holds (the replay of the API server's events; judged
against the truth anywhere in the tick's sampling window: see oracles.CacheDivergence)."""
from ha.experiment.checkers import Absent
from ha.experiment.checkers._fold import reference_pass

NAME = "cache_divergence"


def check(h):
    rp = reference_pass(h)
    if rp.absent:
        return Absent(rp.absent)
    s = rp.divergence.summary()
    return s if s is not None else Absent("no instance with a synced cache was sampled")


def columns(h):
    rp = reference_pass(h)
    return {c: [{n: row[c] for n, row in tick.items()} for tick in rp.per_tick]
            for c in ("cache_divergence", "cache_divergence_persistent")}
