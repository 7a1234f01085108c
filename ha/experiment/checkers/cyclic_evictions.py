"""cyclic_evictions: evictions of a pod that re-creates (``<base>-r<n>``) a pod evicted before in
the run (one slot evicted, re-created, evicted again)."""
from ha.experiment.checkers import Absent
from ha.experiment.checkers._fold import per_alive, truth_absent, truth_pass
from ha.experiment.oracles import CyclicEvictions

NAME = "cyclic_evictions"


def _feed(o, st):
    o.observe_decisions(st.decisions, st.truth)
    return o.count


def _run(h):
    return truth_pass(h, NAME, CyclicEvictions, _feed)


def check(h):
    why = truth_absent(h)
    return Absent(why) if why else _run(h)[0].summary()


def columns(h):
    return {} if truth_absent(h) else {NAME: per_alive(h, _run(h)[1])}
