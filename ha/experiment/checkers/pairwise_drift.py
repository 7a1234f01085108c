"""pairwise_drift: per pair of instances, tasks whose (status, node) differ between their caches,
at every tick where both were sampled with synced informers (a cold standby holds no cache)."""
from ha.experiment.checkers import Absent
from ha.experiment.oracles import PairwiseDrift, task_diff

NAME = "pairwise_drift"


def _pass(h):
    if "pairwise" in h.memo:
        return h.memo["pairwise"]
    pw = PairwiseDrift()
    cols = {"pairwise_drift_max": [], "drift_to_leader": []}
    for _tk, states in h.digests():
        cached = {n: s["tasks"] for n, s in states.items() if s.get("alive") and s.get("synced", 1)}
        changed = {n: states[n].get("changed_tasks") for n in cached}
        drifts = pw.observe(cached, changed) if len(cached) >= 2 else {}
        leaders = [n for n, s in states.items() if s.get("alive") and s.get("is_leader")]
        lead = leaders[0] if len(leaders) == 1 else None
        mx, tl = {}, {}
        for name in states:
            mine = [v for (a, b), v in drifts.items() if name in (a, b)]
            if mine:
                mx[name] = max(mine)
            if lead and name != lead and name in cached and lead in cached:
                tl[name] = drifts.get(tuple(sorted((name, lead))), task_diff(cached[name], cached[lead]))
        cols["pairwise_drift_max"].append(mx)
        cols["drift_to_leader"].append(tl)
    h.memo["pairwise"] = (pw, cols)
    return pw, cols


def check(h):
    s = _pass(h)[0].summary()
    return s if s is not None else Absent("never two instances with synced caches in one tick")


def columns(h):
    return _pass(h)[1]
