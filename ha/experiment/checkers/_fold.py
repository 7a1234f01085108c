"""Shared derivations of a history for the checkers (not a checker itself).

* :class:`EventFold` applies the API server's events (``history/events.msgpack``) in RV order up to
  a given RV: the truth (every object per kind), the pod events (nominated / bound / deleted, in
  API-server order) and, optionally, a reference cache fed through the same handler mapping as an
  instance's (``chaos.replay.build_replay_cache`` + ``CacheReplayHandler``: the one wiring).
* :func:`steps` walks the ticks: per tick the truth at its ``rv_after``, the pod events and the
  decisions since the previous tick (decisions first, as an instance decides before the API server
  reports the effect).
* :func:`reference_pass` is the reference comparison (cache_divergence, resource_drift and the
  divergence examples), computed once per History and memoized in ``h.memo``.

Time of a pod event: an event record's own ``t`` when it has one, else the ``t`` of the first tick
whose ``rv_after`` covers it (an upper bound: the write happened inside that tick's window).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator

from ha.experiment.oracles import (CacheDivergence, PodEvent, ResourceDrift, Truth, cluster_capacity,
                                   pod_events_of)

__all__ = ["EventFold", "Step", "steps", "reference_pass", "ReferencePass", "key_of", "tick_rvs",
           "per_alive", "truth_pass", "truth_absent",
           "DIVERGENCE_EXAMPLES"]

DIVERGENCE_EXAMPLES = 25   # divergence.jsonl lines per instance and tick
_KINDS = ("PriorityClass", "Queue", "Node", "PodGroup", "Pod")


def key_of(obj: dict) -> str:
    md = obj.get("metadata") or {}
    ns = md.get("namespace")
    return f"{ns}/{md.get('name')}" if ns else str(md.get("name"))


def _events_sorted(h) -> list[dict]:
    memo = h.memo
    if "events_sorted" not in memo:
        evs = h.events()
        memo["events_sorted"] = evs if all(evs[i]["rv"] <= evs[i + 1]["rv"] for i in range(len(evs) - 1)) \
            else sorted(evs, key=lambda e: e["rv"])
    return memo["events_sorted"]


def tick_rvs(h) -> list[int | None]:
    """Each tick's ``rv_after`` (else ``rv_before``), carried forward when a tick lacks both."""
    out: list[int | None] = []
    last = None
    for tk in h.ticks():
        rv = tk.get("rv_after") if tk.get("rv_after") is not None else tk.get("rv_before")
        if rv is not None:
            last = rv if last is None else max(last, int(rv))
        out.append(last)
    return out


class EventFold:
    """The API server's state, rebuilt from its own event stream."""

    def __init__(self, events: list[dict], *, cache=None):
        self.events = events
        self.i = 0
        self.rv = 0
        self.store: dict[str, dict[str, dict]] = {k: {} for k in _KINDS}
        self.deleted: dict[str, dict[str, int]] = {k: {} for k in _KINDS}   # kind -> key -> RV
        self.cache = cache
        self.handlers: dict[str, Any] = {}
        self.handler_errors: list[str] = []
        if cache is not None:
            from chaos.replay import CacheReplayHandler
            self.handlers = {k: CacheReplayHandler(cache, k, self.handler_errors) for k in _KINDS}
        self.truth = Truth(pods=self.store["Pod"], nodes=self.store["Node"], pod_groups=self.store["PodGroup"])
        self.nodes_changed = True

    def advance(self, rv: int | None, t: float = 0.0) -> list[PodEvent]:
        """Apply every event with RV <= ``rv``; returns the pod events they make."""
        out: list[PodEvent] = []
        if rv is None:
            return out
        evs = self.events
        while self.i < len(evs) and evs[self.i]["rv"] <= rv:
            e = evs[self.i]
            self.i += 1
            self.rv = e["rv"]
            kind, typ, obj = e.get("kind"), e.get("type"), e.get("object") or {}
            store = self.store.setdefault(kind, {})
            k = key_of(obj)
            h = self.handlers.get(kind)
            et = float(e["t"]) if e.get("t") is not None else t
            if kind == "Node":
                self.nodes_changed = True
            if typ == "ADDED" or typ == "MODIFIED":
                old = store.get(k)
                store[k] = obj
                if h is not None:
                    if old is None:
                        h.on_add(obj)
                    else:
                        h.on_update(old, obj)
                if kind == "Pod":
                    out.extend(pod_events_of(old, obj, et))
            elif typ == "DELETED":
                old = store.pop(k, None)
                self.deleted.setdefault(kind, {})[k] = int(e["rv"])
                if h is not None:
                    h.on_delete(old if old is not None else obj)
                if kind == "Pod":
                    out.append(PodEvent(et, "deleted", k, (obj.get("metadata") or {}).get("uid")))
        return out


@dataclass
class Step:
    index: int
    tick: dict
    t: float
    truth: Truth                     # the fold's live state: valid during this step only
    events: list[PodEvent]
    decisions: list[dict]


def _decisions_by_tick(h) -> list[list[dict]]:
    memo = h.memo
    if "decisions_by_tick" in memo:
        return memo["decisions_by_tick"]
    ticks = h.ticks()
    out: list[list[dict]] = [[] for _ in ticks]
    if ticks:
        ds = sorted(h.decisions(), key=lambda d: (float(d.get("t") or 0.0), str(d.get("instance")),
                                                   int(d.get("generation") or 0), int(d.get("seq") or 0)))
        j = 0
        for d in ds:
            t = float(d.get("t") or 0.0)
            while j < len(ticks) - 1 and float(ticks[j]["t"]) < t:
                j += 1
            out[j].append(d)     # decisions after the last tick belong to the last tick
    memo["decisions_by_tick"] = out
    return out


def steps(h, *, cache=None) -> Iterator[Step]:
    """Per tick: the truth at its RV, the pod events and decisions since the previous tick."""
    fold = EventFold(_events_sorted(h), cache=cache)
    rvs = tick_rvs(h)
    by_tick = _decisions_by_tick(h)
    for i, tk in enumerate(h.ticks()):
        t = float(tk["t"])
        evs = fold.advance(rvs[i], t)
        yield Step(i, tk, t, fold.truth, evs, by_tick[i])


# -------------------------------------------------------------------------- the reference


@dataclass
class ReferencePass:
    """What the reference comparison found, per tick (index) and instance."""
    divergence: CacheDivergence
    resource: ResourceDrift
    per_tick: list[dict[str, dict[str, Any]]] = field(default_factory=list)   # {inst: {column: v}}
    examples: list[dict[str, Any]] = field(default_factory=list)              # divergence.jsonl lines
    divergence_t: list[tuple[float, int]] = field(default_factory=list)
    handler_errors: int = 0
    absent: str | None = None


def _build_cache(h):
    from chaos.replay import build_replay_cache
    hd = h.header
    return build_replay_cache(profile=hd.get("profile") or "v1.14", switches=hd.get("switches") or None,
                              scheduler_name=hd.get("scheduler_name") or "volcano",
                              default_queue=hd.get("default_queue") or "default")


def reference_pass(h) -> ReferencePass:
    """Replay the truth into a cache built under the run's profile and switches; at every tick
    take its digest at ``rv_before`` and at ``rv_after`` and judge each synced instance's digest
    against the truth anywhere in that window (oracles.CacheDivergence / ResourceDrift)."""
    if "reference" in h.memo:
        return h.memo["reference"]
    rp = ReferencePass(CacheDivergence(), ResourceDrift())
    ticks = h.ticks()
    if not ticks:
        rp.absent = "no measurement tick in the history"
    elif not h.events():
        rp.absent = "no API-server events in the history (events.msgpack empty or missing)"
    elif all(tk.get("rv_after") is None and tk.get("rv_before") is None for tk in ticks):
        rp.absent = "the ticks carry no resourceVersion (rv_before/rv_after): cannot align the truth"
    if rp.absent:
        h.memo["reference"] = rp
        return rp
    cache = _build_cache(h)
    fold = EventFold(_events_sorted(h), cache=cache)
    capacity: dict[str, float] = {}
    last_digest: tuple[int, dict] | None = None

    def digest_at(rv):
        nonlocal last_digest
        fold.advance(rv)
        if last_digest is None or last_digest[0] != fold.i:
            d = cache.digest()
            last_digest = (fold.i, {"tasks": d["tasks"], "nodes": d["nodes"]})
        return last_digest[1]

    rvs = tick_rvs(h)
    for (tk, states), rv_after in zip(h.digests(), rvs):
        t = float(tk["t"])
        before = digest_at(tk["rv_before"]) if tk.get("rv_before") is not None else None
        ref = digest_at(rv_after)
        if fold.nodes_changed:
            capacity = cluster_capacity(fold.store["Node"].values())
            fold.nodes_changed = False
        rows: dict[str, dict[str, Any]] = {}
        worst = None
        names = {(p.get("metadata") or {}).get("uid"): k for k, p in fold.store["Pod"].items()}
        for name in sorted(states):
            st = states[name]
            if not st.get("alive") or not st.get("synced", 1):
                continue
            v = rp.divergence.observe(name, st["tasks"], ref["tasks"], before["tasks"] if before else None)
            r = rp.resource.observe(name, st["nodes"], ref["nodes"], capacity, before["nodes"] if before else None)
            rows[name] = {"cache_divergence": v, "resource_drift": r,
                          "cache_divergence_persistent": rp.divergence.last_persistent.get(name, 0)}
            worst = v if worst is None else max(worst, v)
            uids = sorted(rp.divergence.last_counted.get(name) or ())
            for uid in uids[:DIVERGENCE_EXAMPLES]:
                rp.examples.append({"t": round(t, 3), "instance": name, "pod": names.get(uid), "uid": uid,
                                    "instance_state": st["tasks"].get(uid), "reference": ref["tasks"].get(uid),
                                    "reference_before": before["tasks"].get(uid) if before is not None else "n/a",
                                    "of": len(uids)})
        if worst is not None:
            rp.divergence_t.append((round(t, 3), worst))
        rp.per_tick.append(rows)
    rp.handler_errors = len(fold.handler_errors)
    h.memo["reference"] = rp
    return rp


def per_alive(h, values: list[Any]) -> list[dict[str, Any]]:
    """A run-wide value per tick as a column: the same value for every instance sampled then."""
    return [{n: v for n, rec in tk["instances"].items() if rec.get("alive")}
            for tk, v in zip(h.ticks(), values)]


def truth_pass(h, key: str, make, feed) -> tuple[Any, list[Any]]:
    """Run one truth-driven oracle over the steps once (memoized under ``key``): ``make()`` builds
    it, ``feed(oracle, step)`` feeds one tick and returns that tick's column value."""
    if key not in h.memo:
        o = make()
        col = [feed(o, st) for st in steps(h)]
        h.memo[key] = (o, col)
    return h.memo[key]


def truth_absent(h) -> str | None:
    """Why the truth-driven metrics cannot be computed from this history (None: they can)."""
    if not h.ticks():
        return "no measurement tick in the history"
    if not h.events():
        return "no API-server events in the history (events.msgpack empty or missing)"
    if all(rv is None for rv in tick_rvs(h)):
        return "the ticks carry no resourceVersion (rv_before/rv_after): cannot align the truth"
    return None
