"""convergence (extension): after the last fault ends, every live instance's cache_divergence
(its persistent part) back to 0 for good within ``measure.converge_within`` and quiet long enough;
plus the API server = replay of its event stream (see oracles.convergence for the verdict)."""
from ha.experiment.checkers import Absent, api_consistency
from ha.experiment.checkers._fold import reference_pass
from ha.experiment.checkers._run import experiment, last_fault_end, seconds
from ha.experiment.oracles import CONVERGENCE_WITHIN_S, convergence

NAME = "convergence"


def rows(h):
    """The timeseries rows convergence judges: t, instance, alive and the divergence columns."""
    rp = reference_pass(h)
    out = []
    for tk, per in zip(h.ticks(), rp.per_tick):
        for name, rec in tk["instances"].items():
            r = {"t": float(tk["t"]), "instance": name, "alive": int(bool(rec.get("alive")))}
            if name in per:
                r["cache_divergence"] = per[name]["cache_divergence"]
                r["cache_divergence_persistent"] = per[name]["cache_divergence_persistent"]
            out.append(r)
    return out


def check(h):
    rp = reference_pass(h)
    if rp.absent:
        return Absent(rp.absent)
    within = seconds((experiment(h).get("measure") or {}).get("converge_within"), CONVERGENCE_WITHIN_S)
    cons = api_consistency.check(h)
    return convergence(rows(h), last_fault_end(h), within_s=within,
                       api_consistency=None if isinstance(cons, Absent) else cons)
