"""overcommit_violations: node-ticks where bound, non-terminated pods' requests exceed the node's
allocatable in the API server's truth (the fold of its events at each tick's RV)."""
from ha.experiment.checkers._fold import truth_checker
from ha.experiment.oracles import NodeUsage, OvercommitViolations

NAME = "overcommit_violations"


def _make():
    o = OvercommitViolations()
    o.usage = NodeUsage(o._req, o._allocatable)     # the truth's node usage, kept from pod changes
    return o


def _feed(o, st):
    o.observe_decisions(st.decisions)
    for old, new in st.pod_changes:
        o.usage.pod_changed(old, new)
    if st.nodes_changed or st.index == 0:
        o.usage.nodes_changed()
    return o.observe(st.truth.pods.values(), st.truth.nodes, st.t, over=o.usage.current(st.truth.nodes))


check, columns = truth_checker(NAME, _make, _feed, column="overcommit_nodes", none_reason="no tick")
