"""cyclic_evictions: evictions of a pod that re-creates (``<base>-r<n>``) a pod evicted before in
the run (one slot evicted, re-created, evicted again)."""
from ha.experiment.checkers._fold import truth_checker
from ha.experiment.oracles import CyclicEvictions

NAME = "cyclic_evictions"


def _feed(o, st):
    o.observe_decisions(st.decisions, st.truth)
    return o.count


check, columns = truth_checker(NAME, CyclicEvictions, _feed)
