"""partial_gang_binds: binds committed for a job in one session while fewer than minMember of its
tasks were placed (see oracles.PartialGangBinds)."""
from ha.experiment.checkers import Absent
from ha.experiment.checkers._fold import per_alive, truth_absent, truth_pass
from ha.experiment.oracles import PartialGangBinds

NAME = "partial_gang_binds"


def _feed(o, st):
    o.observe(st.decisions, st.truth)
    return o.count


def _run(h):
    return truth_pass(h, NAME, PartialGangBinds, _feed)


def check(h):
    why = truth_absent(h)
    return Absent(why) if why else _run(h)[0].summary()


def columns(h):
    return {} if truth_absent(h) else {NAME: per_alive(h, _run(h)[1])}
