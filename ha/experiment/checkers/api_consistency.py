"""api_consistency (extension): the API server's final state equals the replay of its own event
stream. final.json's ``api_state`` is a list taken at the end, ``{"rv": list RV, "kinds": {kind:
{key: resourceVersion}}}``; the events up to that RV are folded and compared per kind.
``lost_writes``: listed objects whose listed state the stream never delivered (absent and not
deleted after the list, or older); ``phantoms``: folded objects the list does not hold that were not
created after it."""
from ha.experiment.checkers import Absent
from ha.experiment.checkers._fold import EventFold, _events_sorted

NAME = "api_consistency"
HEADLINE = "ok"
CONTRACT = False


def check(h):
    state = (h.final or {}).get("api_state")
    if not isinstance(state, dict) or not isinstance(state.get("kinds"), dict) or state.get("rv") is None:
        return Absent("final.json holds no api_state (the run did not end normally, or did not list)")
    lrv = int(state["rv"])
    fold = EventFold(_events_sorted(h))
    fold.advance(lrv)
    events_rv = max((int(e["rv"]) for e in h.events()), default=0)
    caught = bool(state.get("caught_up", events_rv >= lrv or fold.i == len(h.events())))
    kinds = {}
    for kind in sorted(state["kinds"]):
        listed = {k: int(v) for k, v in state["kinds"][kind].items()}
        stored = {k: int((o.get("metadata") or {}).get("resourceVersion") or 0)
                  for k, o in fold.store.get(kind, {}).items()}
        deleted = fold.deleted.get(kind, {})
        lost = sorted(k for k, rv in listed.items()
                      if (k not in stored and deleted.get(k, 0) <= lrv) or (k in stored and stored[k] < rv))
        phantoms = sorted(k for k, rv in stored.items() if k not in listed and rv <= lrv)
        kinds[kind] = {"caught_up": caught, "list_rv": lrv, "listed": len(listed), "stored": len(stored),
                       "lost": lost[:10], "lost_n": len(lost), "phantoms": phantoms[:10],
                       "phantoms_n": len(phantoms)}
    lost_n = sum(v["lost_n"] for v in kinds.values())
    ph_n = sum(v["phantoms_n"] for v in kinds.values())
    return {"ok": caught and lost_n == 0 and ph_n == 0, "caught_up": caught, "lost_writes": lost_n,
            "phantoms": ph_n, "kinds": kinds}
