"""Shared derivations of a history for the checkers (not a checker itself).

* :class:`EventFold` applies the API server's events (``history/events.msgpack``) in RV order up to
  a given RV: the truth (every object per kind), the pod events (nominated / bound / deleted, in
  API-server order) and, optionally, a reference cache fed through the same handler mapping as an
  instance's (``ha.scheduler.wiring``: the one wiring).
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
                                   object_key, pod_events_of)

__all__ = ["EventFold", "Step", "steps", "reference_pass", "ReferencePass", "key_of", "tick_rvs",
           "per_alive", "truth_pass", "truth_absent", "ReferenceDigest", "truth_checker",
           "reference_checker",
           "DIVERGENCE_EXAMPLES"]

DIVERGENCE_EXAMPLES = 25   # divergence.jsonl lines per instance and tick
_KINDS = ("PriorityClass", "Queue", "Node", "HyperNode", "PodGroup", "Pod")


key_of = object_key


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
            # the one wiring (ha.scheduler.wiring); errors are counted and swallowed, as the
            # live informer does (a fatal one would have restarted an instance)
            from ha.scheduler.wiring import CacheEventHandler
            errs = self.handler_errors
            self.handlers = {k: CacheEventHandler(cache, k, on_fatal=lambda e: errs.append(f"fatal: {e}"),
                                                  on_error=lambda e: errs.append(f"{type(e).__name__}: {e}"))
                             for k in _KINDS}
        self.truth = Truth(pods=self.store["Pod"], nodes=self.store["Node"], pod_groups=self.store["PodGroup"])
        self.nodes_changed = True
        self.listener = None       # on_event(kind, type, old, new) after the cache applied it
        self.pod_key: dict[str, str] = {}   # uid -> "ns/name" of the pods the truth holds
        self.pod_changes: list[tuple[dict | None, dict | None]] = []   # (old, new) since cleared

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
                    self.pod_key[(obj.get("metadata") or {}).get("uid")] = k
                    self.pod_changes.append((old, obj))
                if self.listener is not None:
                    self.listener(kind, typ, old, obj)
            elif typ == "DELETED":
                old = store.pop(k, None)
                self.deleted.setdefault(kind, {})[k] = int(e["rv"])
                if h is not None:
                    h.on_delete(old if old is not None else obj)
                if self.listener is not None:
                    self.listener(kind, typ, old, obj)
                if kind == "Pod":
                    uid = (obj.get("metadata") or {}).get("uid")
                    out.append(PodEvent(et, "deleted", k, uid))
                    self.pod_key.pop(uid, None)
                    self.pod_changes.append((old, None))
        return out


@dataclass
class Step:
    index: int
    tick: dict
    t: float
    truth: Truth                     # the fold's live state: valid during this step only
    events: list[PodEvent]
    decisions: list[dict]
    pod_changes: list[tuple[dict | None, dict | None]] = field(default_factory=list)  # (old, new)
    nodes_changed: bool = False


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
        fold.pod_changes, fold.nodes_changed = [], False
        evs = fold.advance(rvs[i], t)
        yield Step(i, tk, t, fold.truth, evs, by_tick[i], fold.pod_changes, fold.nodes_changed)


class ReferenceDigest:
    """The reference cache's digest, kept up to date incrementally: after pod events only the
    touched tasks and the nodes they were or are on are re-read from the cache; any other event
    that may move tasks (a Node, Queue or PriorityClass event, a PodGroup deletion) takes a full
    ``cache.digest()``. Equal to ``cache.digest()`` at every step (tests/experiment/
    test_reference_digest.py checks it on random histories); every returned digest is a new
    snapshot, never changed afterwards."""

    _SAFE = {("PodGroup", "ADDED"), ("PodGroup", "MODIFIED")}

    def __init__(self, cache):
        self.cache = cache
        self.tasks: dict[str, Any] | None = None
        self.nodes: dict[str, Any] | None = None
        self._full = True
        self._pods: list[tuple[dict | None, dict | None]] = []
        self.log: list[set[str] | None] = []     # per changing digest: the uids touched (None: full)

    def on_event(self, kind, typ, old, new) -> None:
        if kind == "Pod":
            self._pods.append((old, new))
        elif kind in _KINDS and (kind, typ) not in self._SAFE:   # a Lease never reaches the cache
            self._full = True

    def digest(self) -> dict[str, dict]:
        if self._full or self.tasks is None:
            d = self.cache.digest()
            self.tasks, self.nodes = d["tasks"], d["nodes"]
            self._full, self._pods = False, []
            self.log.append(None)
        elif self._pods:
            self.log.append(self._apply())
        return {"tasks": self.tasks, "nodes": self.nodes}

    def changed_since(self, mark: int) -> set[str] | None:
        """The uids touched by the digests after position ``mark`` of the log (None: a full
        digest came in between, anything may have changed)."""
        out: set[str] = set()
        for s in self.log[mark:]:
            if s is None:
                return None
            out |= s
        return out

    def _apply(self) -> set[str]:
        cache = self.cache
        tasks, nodes = dict(self.tasks), dict(self.nodes)
        touched: dict[str, tuple[str, str, str, set[str]]] = {}
        for pair in self._pods:
            for obj in pair:
                if obj is None:
                    continue
                md = obj.get("metadata") or {}
                ns, name = md.get("namespace", ""), md.get("name", "")
                gn = (md.get("annotations") or {}).get("scheduling.k8s.io/group-name")
                uid = md.get("uid") or f"{ns}-{name}"
                job_id = f"{ns}/{gn}" if gn else ""
                _, _, _, near = touched.setdefault(uid, (job_id, ns, name, set()))
                for n in ((obj.get("spec") or {}).get("nodeName"), (obj.get("status") or {}).get("nominatedNodeName")):
                    if n:
                        near.add(n)
        self._pods = []
        affected: set[str] = set()
        for uid, (job_id, ns, name, near) in touched.items():
            prev = tasks.get(uid)
            if prev is not None and len(prev) > 1 and prev[1]:
                near.add(prev[1])
            job = cache.jobs.get(job_id)
            t = job.tasks.get(uid) if job is not None else None
            if t is None:
                for n in sorted(near):
                    ni = cache.nodes.get(n)
                    cand = ni.tasks.get(f"{ns}/{name}") if ni is not None else None
                    if cand is not None and cand.uid == uid:
                        t = cand
                        break
            if t is None:
                tasks.pop(uid, None)
            else:
                tasks[uid] = [str(t.status), t.node_name]
                if t.node_name:
                    near.add(t.node_name)
            affected |= near
        for n in affected:
            ni = cache.nodes.get(n)
            if ni is None:
                nodes.pop(n, None)
            else:
                nodes[n] = ni.to_dict()
        self.tasks, self.nodes = tasks, nodes
        return set(touched)


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
    from ha.experiment.replay import build_replay_cache
    hd = h.header
    return build_replay_cache(profile=hd.get("profile") or "v1.14", switches=hd.get("switches") or None,
                              scheduler_name=hd.get("scheduler_name") or "volcano",
                              default_queue=hd.get("default_queue") or "default")


def reference_pass(h, *, exact: bool = False) -> ReferencePass:
    """Replay the truth into a cache built under the run's profile and switches; at every tick
    take its digest at ``rv_before`` and at ``rv_after`` and judge each synced instance's digest
    against the truth anywhere in that window (oracles.CacheDivergence / ResourceDrift). Between
    consecutive ticks only the tasks that changed (in the instance's delta or the reference's
    touched uids) are re-judged; ``exact`` re-judges every task every tick (the same result:
    tests/experiment/test_reference_digest.py)."""
    memo_key = "reference_exact" if exact else "reference"
    if memo_key in h.memo:
        return h.memo[memo_key]
    rp = ReferencePass(CacheDivergence(), ResourceDrift())
    ticks = h.ticks()
    if not ticks:
        rp.absent = "no measurement tick in the history"
    elif not h.events():
        rp.absent = "no API-server events in the history (events.msgpack empty or missing)"
    elif all(tk.get("rv_after") is None and tk.get("rv_before") is None for tk in ticks):
        rp.absent = "the ticks carry no resourceVersion (rv_before/rv_after): cannot align the truth"
    if rp.absent:
        h.memo[memo_key] = rp
        return rp
    cache = _build_cache(h)
    fold = EventFold(_events_sorted(h), cache=cache)
    incremental = ReferenceDigest(cache)
    fold.listener = incremental.on_event
    capacity: dict[str, float] = {}

    def digest_at(rv):
        fold.advance(rv)
        return incremental.digest()

    rvs = tick_rvs(h)
    observed: dict[str, int] = {}          # instance -> the last tick it was judged at
    prev_mark: int | None = None           # the reference log position before the previous tick
    prev_had_before = False
    for k, ((tk, states), rv_after) in enumerate(zip(h.digests(), rvs)):
        t = float(tk["t"])
        mark = len(incremental.log)
        before = digest_at(tk["rv_before"]) if tk.get("rv_before") is not None else None
        ref = digest_at(rv_after)
        # what may have changed in the reference (after and before) since the previous tick
        ref_changed = None
        if exact is False and prev_mark is not None and prev_had_before == (before is not None):
            ref_changed = incremental.changed_since(prev_mark)
        prev_mark, prev_had_before = mark, before is not None
        if fold.nodes_changed:
            capacity = cluster_capacity(fold.store["Node"].values())
            fold.nodes_changed = False
        rows: dict[str, dict[str, Any]] = {}
        worst = None
        for name in sorted(states):
            st = states[name]
            if not st.get("alive") or not st.get("synced", 1):
                continue
            changed = None
            if ref_changed is not None and observed.get(name) == k - 1 and st.get("changed_tasks") is not None:
                changed = ref_changed | st["changed_tasks"]
            observed[name] = k
            v = rp.divergence.observe(name, st["tasks"], ref["tasks"], before["tasks"] if before else None,
                                      changed=changed)
            r = rp.resource.observe(name, st["nodes"], ref["nodes"], capacity, before["nodes"] if before else None)
            rows[name] = {"cache_divergence": v, "resource_drift": r,
                          "cache_divergence_persistent": rp.divergence.last_persistent.get(name, 0)}
            worst = v if worst is None else max(worst, v)
            uids = sorted(rp.divergence.last_counted.get(name) or ())
            names = fold.pod_key
            for uid in uids[:DIVERGENCE_EXAMPLES]:
                rp.examples.append({"t": round(t, 3), "instance": name, "pod": names.get(uid), "uid": uid,
                                    "instance_state": st["tasks"].get(uid), "reference": ref["tasks"].get(uid),
                                    "reference_before": before["tasks"].get(uid) if before is not None else "n/a",
                                    "of": len(uids)})
        if worst is not None:
            rp.divergence_t.append((round(t, 3), worst))
        rp.per_tick.append(rows)
    rp.handler_errors = len(fold.handler_errors)
    h.memo[memo_key] = rp
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


def truth_checker(name: str, make, feed, *, summary=None, column: str | None = None, none_reason: str = ""):
    """(check, columns) of a checker that feeds one truth-driven oracle tick by tick: ``make()``
    builds the oracle, ``feed(oracle, step)`` feeds a step and returns the step's column value,
    ``summary(oracle)`` (default ``oracle.summary()``) is the metric (None: absent with
    ``none_reason``); ``column`` names the per-tick column (default: the metric's name)."""
    def check(h):
        why = truth_absent(h)
        if why:
            from ha.experiment.checkers import Absent
            return Absent(why)
        o = truth_pass(h, name, make, feed)[0]
        v = summary(o) if summary is not None else o.summary()
        if v is None:
            from ha.experiment.checkers import Absent
            return Absent(none_reason or "not computable")
        return v

    def columns(h):
        if truth_absent(h):
            return {}
        return {column or name: per_alive(h, truth_pass(h, name, make, feed)[1])}
    return check, columns


def reference_checker(attr: str, none_reason: str, column_names: tuple[str, ...]):
    """(check, columns) of a checker over the reference pass: ``attr`` names the pass's oracle
    (``divergence`` / ``resource``); the columns are taken from its per-tick rows."""
    def check(h):
        from ha.experiment.checkers import Absent
        from ha.experiment.checkers._unobserved import absent_reason, with_unobserved
        rp = reference_pass(h)
        if rp.absent:
            return Absent(rp.absent)
        s = getattr(rp, attr).summary()
        return with_unobserved(h, "cache", s) if s is not None else Absent(absent_reason(h, "cache", none_reason))

    def columns(h):
        rp = reference_pass(h)
        return {c: [{n: row[c] for n, row in tick.items()} for tick in rp.per_tick] for c in column_names}
    return check, columns
