"""The recorder: turns what an engine observes at each measurement tick into the run's history
(``ha.experiment.history.HistoryWriter``; the format is docs/results-format.md).

It is engine-neutral: it talks to the API server through a sync client (``current_resource_version``,
``watch(kind, rv, block_ms=0)``, ``get``) — the Redis one in the live engine, the in-memory one in
the sim — and takes the instances' observations as the instance seam defines them
(``ha.runtime.external.protocol``: what ``observe()`` of any scheduler instance answers, model or
external process: digest, stats, decisions since a cursor, staleness samples, an external one's
/metrics scrape). It computes no metric: the checkers read the history afterwards.

The truth is exported tick by tick, not at the end, so a store whose history is trimmed during a
long run still leaves a complete event stream: at every tick the recorder reads the current RV R
and then every kind's watch stream up to R. Writes are atomic (the RV is bumped and the event
appended in one call), so every event at or below R exists when R is read, and the events of a
batch are exactly those with ``prev R < rv <= R``: in RV order across kinds and batches.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from ha.experiment.history import HistoryWriter
from ha.runtime.external.protocol import Observed

__all__ = ["Recorder", "Observation", "TRUTH_KINDS"]

log = logging.getLogger(__name__)

# every kind the API server serves, in a fixed order (the events are merged by RV anyway)
TRUTH_KINDS = ("PriorityClass", "Queue", "Node", "HyperNode", "PodGroup", "Pod", "Lease")
_WATCH_COUNT = 5000


@dataclass
class Observation:
    """One instance at one tick, as its engine saw it (None fields: not answered)."""
    name: str
    generation: int
    alive: bool
    data: Observed | None = None           # the instance's observe() answer


@dataclass
class Recorder:
    writer: HistoryWriter
    api: Any                                  # sync API client (ApiClient or the in-memory one)
    t0_wall: float                            # the engine's clock at run time 0 (decisions' t)
    lease: tuple[str, str] | None = None      # (name, namespace) of the election's Lease
    kinds: tuple[str, ...] = TRUTH_KINDS
    truth_rv: int = 0                         # events up to this RV are in the history
    truth_gaps: list[dict[str, Any]] = field(default_factory=list)
    decision_cursor: dict[tuple[str, int], int] = field(default_factory=dict)
    _cursors: dict[str, int] = field(default_factory=dict)
    _lease_seen: tuple | None = None
    last_lease: dict[str, Any] | None = None  # the Lease as last read (final.json's "lease")
    _fault_cursor: int = 0
    _incarnation: dict[str, Any] = field(default_factory=dict)

    # -- the truth ----------------------------------------------------------------------------

    def current_rv(self) -> int | None:
        try:
            return int(self.api.current_resource_version())
        except Exception as e:  # noqa: BLE001 — Redis away (partition, restart): no bound this tick
            log.debug("current RV: %s", e)
            return None

    def export_truth(self, up_to: int | None = None) -> int:
        """Append every API event with ``truth_rv < rv <= up_to`` (default: the current RV).
        Returns how many were written; an unreachable API server writes nothing (next tick)."""
        from cluster_state.errors import Gone
        if up_to is None:
            up_to = self.current_rv()
        if up_to is None or up_to <= self.truth_rv:
            return 0
        batch: list[dict[str, Any]] = []
        try:
            for kind in self.kinds:
                rv = self._cursors.get(kind, self.truth_rv)
                while rv < up_to:
                    try:
                        evs = self.api.watch(kind, rv, block_ms=0, count=_WATCH_COUNT)
                    except Gone as e:
                        # the store trimmed past our cursor: say so, never pretend it was complete
                        self.truth_gaps.append({"kind": kind, "from_rv": rv, "error": str(e)})
                        rv = up_to
                        break
                    real = [e for e in evs if e.type in ("ADDED", "MODIFIED", "DELETED")]
                    if not real:
                        break
                    for e in real:
                        if e.resource_version > up_to:
                            break
                        batch.append({"rv": e.resource_version, "type": e.type, "kind": e.kind,
                                      "object": e.object})
                    last = real[-1].resource_version
                    if last >= up_to or len(evs) < _WATCH_COUNT:
                        rv = min(last, up_to)
                        break
                    rv = last
                self._cursors[kind] = up_to
        except Exception as e:  # noqa: BLE001 — Redis away mid-read: keep cursors, retry next tick
            log.debug("exporting the truth: %s", e)
            self._cursors = {k: self.truth_rv for k in self.kinds}
            return 0
        batch.sort(key=lambda e: e["rv"])
        if batch:
            self.writer.events(batch)
        self.truth_rv = up_to
        return len(batch)

    # -- one tick -----------------------------------------------------------------------------

    def tick(self, t: float, rv_before: int | None, observations: Iterable[Observation],
             rv_after: int | None) -> dict[str, dict[str, Any]]:
        """Record one measurement tick; returns the per-instance digests recorded (for a progress
        line). Decisions and staleness samples go to their own files, stamped in run seconds."""
        instances: dict[str, dict[str, Any]] = {}
        for ob in observations:
            rec: dict[str, Any] = {"alive": 0, "generation": ob.generation}
            if ob.alive and ob.data is not None:
                d = ob.data
                digest = d.get("digest") or {}
                stats = d.get("stats") or {}
                rec = {**digest, "alive": 1, "generation": ob.generation, "stats": stats}
                self._note_incarnation(t, ob, stats, digest)
                ds = d.get("decisions") or []
                if ds:
                    key = (ob.name, ob.generation)
                    self.decision_cursor[key] = max(self.decision_cursor.get(key, 0),
                                                    max(int(x.get("seq") or 0) for x in ds))
                    self.writer.decisions([self._decision(x, ob) for x in ds])
                st = d.get("staleness_ms")
                if st:
                    self.writer.staleness(round(t, 4), ob.name, ob.generation, list(st))
                if d.get("scrape"):     # an external instance's /metrics
                    self.writer.scrape(round(t, 4), ob.name, ob.generation, d["scrape"])
            instances[ob.name] = rec
        self.writer.tick(round(t, 4), rv_before, rv_after, instances)
        if rv_after is not None:
            self.export_truth(rv_after)
        self.record_lease(t)
        return instances

    def _decision(self, d: Mapping[str, Any], ob: Observation) -> dict[str, Any]:
        out = dict(d)
        out["instance"] = out.get("instance") or ob.name
        out["generation"] = ob.generation
        w = out.get("t")
        if isinstance(w, (int, float)):
            out["wall"] = w
            out["t"] = round(w - self.t0_wall, 4)
        return out

    def _note_incarnation(self, t: float, ob: Observation, stats: Mapping, digest: Mapping) -> None:
        """An instance restarts itself (lost lease, modelled fatal error) without the engine
        killing it: the history records that life too."""
        inc = stats.get("incarnation", digest.get("incarnation"))
        key = (ob.name, ob.generation)
        prev = self._incarnation.get(key)
        self._incarnation[key] = inc
        if prev is not None and inc != prev:
            self.writer.life(round(t, 4), ob.name, "restart", ob.generation, internal=True,
                             incarnation=inc, restarts=stats.get("restarts"),
                             reason=stats.get("last_error"))

    def record_lease(self, t: float) -> None:
        if self.lease is None:
            return
        try:
            obj = self.api.get("Lease", self.lease[0], self.lease[1])
        except Exception:  # noqa: BLE001 — no lease yet (nobody elected) or Redis away
            return
        spec = obj.get("spec") or {}
        seen = (spec.get("holderIdentity") or "", int(spec.get("leaseTransitions") or 0))
        self.last_lease = {"holder": seen[0], "lease_transitions": seen[1],
                           "acquire_time": spec.get("acquireTime"),
                           "rv": (obj.get("metadata") or {}).get("resourceVersion")}
        if seen != self._lease_seen:
            self._lease_seen = seen
            self.writer.lease(round(t, 4), self.last_lease)

    # -- faults and lives ---------------------------------------------------------------------

    def faults(self, records: list) -> None:
        """The nemesis' records not written yet (its list only grows)."""
        new = records[self._fault_cursor:]
        self._fault_cursor = len(records)
        for r in new:
            self.writer.fault(r.to_json() if hasattr(r, "to_json") else dict(r))

    def life(self, t: float, instance: str, event: str, generation: int, **info: Any) -> None:
        self.writer.life(round(t, 4), instance, event, generation, **info)

