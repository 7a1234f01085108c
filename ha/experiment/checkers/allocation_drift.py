"""allocation_drift (seed 000): pods bound to a node other than the one they were last
nominated/pipelined to (by a committed decision or by status.nominatedNodeName in the API server);
count and rate per nominated pod that got bound."""
from ha.experiment.checkers._fold import truth_checker
from ha.experiment.oracles import AllocationDrift

NAME = "allocation_drift"


def _feed(o, st):
    o.observe_decisions(st.decisions)
    o.observe_events(st.events)
    return o.count


check, columns = truth_checker(NAME, AllocationDrift, _feed)
