"""partial_gang_binds: binds committed for a job in one session while fewer than minMember of its
tasks were placed (see oracles.PartialGangBinds)."""
from ha.experiment.checkers._fold import truth_checker
from ha.experiment.oracles import PartialGangBinds

NAME = "partial_gang_binds"


def _feed(o, st):
    o.observe(st.decisions, st.truth)
    return o.count


check, columns = truth_checker(NAME, PartialGangBinds, _feed)
