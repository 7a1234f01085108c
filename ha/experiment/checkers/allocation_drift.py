"""allocation_drift (seed 000): pods bound to a node other than the one they were last
nominated/pipelined to (by a committed decision or by status.nominatedNodeName in the API server);
count and rate per nominated pod that got bound."""
from ha.experiment.checkers import Absent
from ha.experiment.checkers._fold import per_alive, truth_absent, truth_pass
from ha.experiment.oracles import AllocationDrift

NAME = "allocation_drift"


def _feed(o, st):
    o.observe_decisions(st.decisions)
    o.observe_events(st.events)
    return o.count


def _run(h):
    return truth_pass(h, NAME, AllocationDrift, _feed)


def check(h):
    why = truth_absent(h)
    return Absent(why) if why else _run(h)[0].summary()


def columns(h):
    return {} if truth_absent(h) else {NAME: per_alive(h, _run(h)[1])}
