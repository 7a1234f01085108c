"""overcommit_violations: node-ticks where bound, non-terminated pods' requests exceed the node's
allocatable in the API server's truth (the fold of its events at each tick's RV)."""
from ha.experiment.checkers import Absent
from ha.experiment.checkers._fold import per_alive, truth_absent, truth_pass
from ha.experiment.oracles import OvercommitViolations

NAME = "overcommit_violations"


def _feed(o, st):
    o.observe_decisions(st.decisions)
    return o.observe(st.truth.pods.values(), st.truth.nodes, st.t)


def _run(h):
    return truth_pass(h, NAME, OvercommitViolations, _feed)


def check(h):
    why = truth_absent(h)
    if why:
        return Absent(why)
    s = _run(h)[0].summary()
    return s if s is not None else Absent("no tick")


def columns(h):
    return {} if truth_absent(h) else {"overcommit_nodes": per_alive(h, _run(h)[1])}
