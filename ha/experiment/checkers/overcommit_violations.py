"""overcommit_violations: node-ticks where bound, non-terminated pods' requests exceed the node's
allocatable in the API server's truth (the fold of its events at each tick's RV)."""
from ha.experiment.checkers._fold import truth_checker
from ha.experiment.oracles import OvercommitViolations

NAME = "overcommit_violations"


def _feed(o, st):
    o.observe_decisions(st.decisions)
    return o.observe(st.truth.pods.values(), st.truth.nodes, st.t)


check, columns = truth_checker(NAME, OvercommitViolations, _feed, column="overcommit_nodes", none_reason="no tick")
