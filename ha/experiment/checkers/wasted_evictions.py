"""wasted_evictions: evictions whose preemptor did not end on the freed node (see
oracles.WastedEvictions for the classification; unresolved groups are judged at the run's end)."""
from ha.experiment.checkers._fold import truth_checker
from ha.experiment.oracles import WastedEvictions

NAME = "wasted_evictions"


def _feed(o, st):
    o.observe_decisions(st.decisions)
    o.observe_events(st.events)
    return o.summary(final=False)["count"]


check, columns = truth_checker(NAME, WastedEvictions, _feed, summary=lambda o: o.summary(final=True))
