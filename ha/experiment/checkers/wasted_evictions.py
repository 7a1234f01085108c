"""wasted_evictions: evictions whose preemptor did not end on the freed node (see
oracles.WastedEvictions for the classification)."""
from ha.experiment.checkers import Absent
from ha.experiment.checkers._fold import per_alive, truth_absent, truth_pass
from ha.experiment.oracles import WastedEvictions

NAME = "wasted_evictions"


def _feed(o, st):
    o.observe_decisions(st.decisions)
    o.observe_events(st.events)
    return o.summary(final=False)["count"]


def _run(h):
    return truth_pass(h, NAME, WastedEvictions, _feed)


def check(h):
    why = truth_absent(h)
    return Absent(why) if why else _run(h)[0].summary(final=True)


def columns(h):
    return {} if truth_absent(h) else {NAME: per_alive(h, _run(h)[1])}
