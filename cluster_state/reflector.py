"""The reflector: list, then watch from the list's resourceVersion, feeding a FIFO.

client-go semantics (tools/cache/reflector.go) kept here:
* the last-synced RV advances on every event, bookmarks included;
* a watch that fails with 410 Gone closes; after a backoff the reflector relists (a Replace into the
  FIFO, which yields tombstones for objects that vanished) and watches again from the new list RV;
* other failures of list or watch back off too (800 ms initial, x2, cap 30 s, jitter 1.0, reset
  after 2 min without failures) and then retry -- the watch from the last synced RV, so nothing is
  lost unless the history has moved on (then the retry gets Gone and relists).
Corrupt stream entries (WatchEvent type CORRUPT) are counted and skipped.
"""
from __future__ import annotations

import asyncio
import logging
import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import msgpack

from cluster_state.aio import shielded as _shielded
from cluster_state.delivery import ADDED, DELETED, MODIFIED, Delivery, object_key
from cluster_state.errors import Gone, Invalid
from cluster_state.store import INITIAL_EVENTS_END
from cluster_state.watch import event_from_entry

log = logging.getLogger("cluster_state.reflector")

WATCH_TYPES = (ADDED, MODIFIED, DELETED)
_TYPES = {t.encode(): t for t in WATCH_TYPES}


class RawPage:
    """A watch read's stream entries, not decoded yet: what ``client.watch(..., decode=raw_page)``
    returns when the read found events (a client that supports ``decode`` says so with a true
    ``WATCH_DECODE`` attribute). The reflector decodes them itself, straight into deliveries."""

    __slots__ = ("entries",)

    def __init__(self, entries: list) -> None:
        self.entries = entries


def raw_page(kind: str, entries: list) -> RawPage:
    return RawPage(entries)


def decode_entry(kind: str, e: Any) -> tuple[str, dict | None, int, str | None]:
    """``(type, object, rv, error)`` of one stream entry, never raising: the entries our own
    writer lays out (``t, <type>, o, <object>``) take the inlined checks of
    ``watch.events_from_entries``; anything else asks ``watch.event_from_entry`` (CORRUPT, with
    the reason, when it does not decode to an object map with metadata)."""
    try:
        eid, f = e
        if len(f) == 4 and f[0] == b"t" and f[2] == b"o":
            t = _TYPES.get(f[1])
            obj = msgpack.unpackb(f[3], raw=False, strict_map_key=False)
            if t is not None and type(obj) is dict and type(obj.get("metadata")) is dict:
                return t, obj, int(eid.split(b"-", 1)[0]), None
    except Exception:  # noqa: BLE001 -- undecodable or odd: event_from_entry says why
        pass
    ev = event_from_entry(kind, e)
    return ev.type, ev.object, ev.resource_version, ev.error


def page_events(kind: str, entries: list, stats: "InformerStats", namespace: str | None, rv: list):
    """The watch events of a page of stream entries, as ``(type, key, object, metadata, rv)``,
    decoded one at a time so the consumer applies each while it is still hot in the CPU cache.
    ``rv`` is a one-item list holding the highest RV seen, advanced for every entry (skipped ones
    too); CORRUPT entries and objects of other namespaces are counted in ``stats`` and skipped."""
    unpackb = msgpack.unpackb
    types = _TYPES
    for e in entries:
        try:   # decode_entry's common case, inlined (once per event)
            eid, f = e
            if len(f) == 4 and f[0] == b"t" and f[2] == b"o":
                typ = types.get(f[1])
                obj = unpackb(f[3], raw=False, strict_map_key=False)
                md = obj.get("metadata") if type(obj) is dict else None
                if typ is None or type(md) is not dict:
                    raise ValueError
                erv = int(eid.split(b"-", 1)[0])
            else:
                raise ValueError
        except Exception:  # noqa: BLE001 -- the careful path says what is wrong
            typ, obj, erv, err = decode_entry(kind, e)
            if erv > rv[0]:
                rv[0] = erv
            if typ not in WATCH_TYPES:
                stats.corrupt += 1
                log.debug("%s: skipping %s entry at rv %s: %s", kind, typ, erv, err)
                continue
            md = obj["metadata"]
        if erv > rv[0]:
            rv[0] = erv
        try:
            key = (md.get("namespace") or "", md["name"])
        except KeyError:
            stats.corrupt += 1
            continue
        if namespace is not None and key[0] != namespace:
            stats.filtered += 1
            continue
        yield typ, key, obj, md, erv


class ForcedExpiry(Exception):
    """Raised inside the watch loop by ``request_relist``: handled exactly like 410 Gone."""


@dataclass
class Backoff:
    """client-go's exponential backoff manager for ListAndWatch (reflector.go lines 60-67)."""

    initial: float = 0.8
    cap: float = 30.0
    factor: float = 2.0
    jitter: float = 1.0           # wait = d * (1 + jitter * U[0,1))
    reset_after: float = 120.0    # a failure after this long healthy starts again from `initial`
    rng: random.Random = field(default_factory=random.Random)
    clock: Callable[[], float] = time.monotonic
    _current: float = 0.0
    _last: float | None = None

    def next(self) -> float:
        now = self.clock()
        if self._last is None or now - self._last > self.reset_after or self._current == 0.0:
            self._current = self.initial
        else:
            self._current = min(self._current * self.factor, self.cap)
        self._last = now
        d = self._current
        if self.jitter > 0:
            d += d * self.jitter * self.rng.random()
        return d

    @classmethod
    def fast(cls, seed: int | None = None) -> "Backoff":
        """Small delays for tests."""
        return cls(initial=0.01, cap=0.1, rng=random.Random(seed))


@dataclass
class InformerStats:
    events: int = 0            # ADDED/MODIFIED/DELETED received from watches
    bookmarks: int = 0
    corrupt: int = 0           # undecodable stream entries skipped
    lists: int = 0             # successful lists, the first one included
    relists: int = 0           # lists after the first
    gone: int = 0              # 410s from watch (or a forced expiry)
    watch_errors: int = 0      # other list/watch failures (connection errors...)
    delivered: int = 0         # handler notifications issued (add/update/delete)
    tombstones: int = 0        # deletes with unknown final state, from relists
    handler_errors: int = 0    # exceptions raised by handlers (counted, logged, swallowed)
    filtered: int = 0          # events outside the informer's namespace
    watch_lists: int = 0       # (re)lists done as a watch-list (sendInitialEvents; lists counts them too)
    watch_list_fallbacks: int = 0   # watch-lists that failed and were redone as a plain list

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


class Reflector:
    """Keeps ``fifo`` fed from ``client.list``/``client.watch`` of one kind until cancelled."""

    def __init__(self, client: Any, kind: str, fifo: Any, *, namespace: str | None = None,
                 backoff: Backoff | None = None, block_ms: int = 1000, watch_count: int = 1000,
                 start_rv: int | None = None, stats: InformerStats | None = None,
                 watch_list: bool = False, clock: Callable[[], float] = time.monotonic) -> None:
        """``clock``: the monotonic clock that stamps what arrives (``Delivery.received``), and the
        default backoff's (a simulation gives its virtual one)."""
        self.client = client
        self.clock = clock
        # client-go's WatchListClient: (re)list with a watch that sends the initial state as
        # ADDED events and ends it with an initial-events-end bookmark; a plain list if it fails
        # (for good once the server rejects the options: it has no watch-list)
        self.watch_list = watch_list
        self.kind = kind
        self.fifo = fifo
        self.namespace = namespace
        self.backoff = backoff or Backoff(clock=clock)
        self.block_ms = block_ms
        self.watch_count = watch_count
        self.start_rv = start_rv
        self.stats = stats or InformerStats()
        self.last_synced_rv = 0
        self._force_relist = False
        self._started = False
        self._listed = False
        # the informer's fast path for a page of stream entries: fn(entries, received) -> the
        # page's RV after decoding and applying every entry at once, or None to queue them
        self.apply_page: Callable[[list, float], int | None] | None = None
        # undecoded pages from clients that can hand them over (AsyncApiClient): the reflector
        # builds deliveries straight from the entries (no WatchEvent in between)
        self._watch_kw = {"decode": raw_page} if getattr(client, "WATCH_DECODE", False) is True else {}

    def request_relist(self) -> None:
        """Make the running watch behave as if it got 410 Gone (chaos ``watch-expire``)."""
        self._force_relist = True

    @staticmethod
    def _is_gone(e: BaseException) -> bool:
        return isinstance(e, (Gone, ForcedExpiry))

    async def _list(self, initial: bool) -> int:
        if self.watch_list:
            try:
                return await self._watch_list(initial)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 -- 410, 504, a server without it: list instead
                self.stats.watch_list_fallbacks += 1
                if isinstance(e, Invalid):
                    self.watch_list = False
                log.info("%s watch-list from rv %d failed (%r); listing instead", self.kind,
                         self.last_synced_rv, e)
        res = await _shielded(self.client.list(self.kind, self.namespace))
        received = self.clock()
        items = list(res.items)
        rv = int(res.resource_version)
        bad = getattr(res, "corrupt", None)   # stored values that did not decode: skipped
        if bad:
            self.stats.corrupt += len(bad)
            log.warning("%s list at rv %d skipped %d corrupt objects, e.g. %s", self.kind, rv,
                        len(bad), bad[0])
        self.fifo.replace(items, self.kind, rv, received, initial=initial)
        self.stats.lists += 1
        if not initial:
            self.stats.relists += 1
        self.last_synced_rv = rv
        return rv

    async def _watch_list(self, initial: bool) -> int:
        """The (re)list as a watch-list: the ADDED objects are collected (their RVs are their own,
        not ordered: ``last_synced_rv`` does not move with them) and replace the store at the
        initial-events-end bookmark's RV, as a list at that RV would; the watch goes on from it.
        A relist asks for a state not older than what was synced (client-go's
        ResourceVersionMatch=NotOlderThan), the first for the most recent."""
        events = await _shielded(self.client.watch(self.kind, self.last_synced_rv or None,
                                                   send_initial_events=True,
                                                   resource_version_match="NotOlderThan"))
        received = self.clock()
        ns, stats = self.namespace, self.stats
        items: list[dict] = []
        end_rv = None
        corrupt = filtered = 0
        for ev in events:
            if ev.type == ADDED:
                obj = ev.object
                md = obj.get("metadata") if type(obj) is dict else None
                if type(md) is not dict or not md.get("name"):
                    corrupt += 1
                elif ns is not None and (md.get("namespace") or "") != ns:
                    filtered += 1
                else:
                    items.append(obj)
            elif ev.type == "BOOKMARK":
                md = (ev.object or {}).get("metadata") or {}
                if (md.get("annotations") or {}).get(INITIAL_EVENTS_END) == "true":
                    end_rv = int(ev.resource_version)
            else:   # CORRUPT: a stored value that did not decode
                corrupt += 1
        if end_rv is None:
            raise RuntimeError(f"{self.kind}: watch-list reply without the initial-events-end bookmark")
        if corrupt:
            stats.corrupt += corrupt
            log.warning("%s watch-list at rv %d skipped %d corrupt objects", self.kind, end_rv, corrupt)
        stats.filtered += filtered
        self.fifo.replace(items, self.kind, end_rv, received, initial=initial)
        stats.lists += 1
        stats.watch_lists += 1
        if not initial:
            stats.relists += 1
        self.last_synced_rv = end_rv
        return end_rv

    async def run(self) -> None:
        """List (once) and watch until cancelled. Run again after a cancel, it resumes the watch
        from the last synced RV (a broken connection, not a new informer): Gone then relists."""
        if self.start_rv is not None and not self._started:
            self.last_synced_rv = int(self.start_rv)
            self.fifo.populated = True                # nothing to list: synced from the start
            self._listed = True
        need_list = not self._listed
        self._started = True
        while True:
            try:
                if need_list:
                    await self._list(initial=self.stats.lists == 0)
                    need_list = False
                    self._listed = True
                await self._watch()
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 -- any failure: back off and retry
                if self._is_gone(e):
                    self.stats.gone += 1
                    need_list = True
                    log.info("%s watch from rv %d expired (%s); relisting", self.kind,
                             self.last_synced_rv, e)
                else:
                    self.stats.watch_errors += 1
                    log.warning("%s %s failed: %r", self.kind, "list" if need_list else "watch", e)
            await asyncio.sleep(self.backoff.next())

    async def _watch(self) -> None:
        client, kind, fifo, stats = self.client, self.kind, self.fifo, self.stats
        ns = self.namespace
        watch_kw = self._watch_kw
        while True:
            if self._force_relist:
                self._force_relist = False
                raise ForcedExpiry(f"{kind}: watch expiry forced at rv {self.last_synced_rv}")
            events = await _shielded(client.watch(kind, self.last_synced_rv, block_ms=self.block_ms,
                                                  count=self.watch_count, **watch_kw))
            if not events:
                continue
            received = self.clock()
            if type(events) is RawPage:
                apply = self.apply_page
                rv = apply(events.entries, received) if apply is not None else None
                if rv is None:
                    rv = self._queue_entries(events.entries, received)
                if rv > self.last_synced_rv:
                    self.last_synced_rv = rv
                continue
            batch = []
            append = batch.append
            rv = self.last_synced_rv
            n_events = 0
            for ev in events:
                typ = ev.type
                erv = ev.resource_version
                if erv > rv:
                    rv = erv
                if typ in WATCH_TYPES:
                    obj = ev.object
                    try:   # object_key(obj), inlined: once per event
                        md = obj["metadata"]
                        key = (md.get("namespace") or "", md["name"])
                    except (KeyError, TypeError, AttributeError):
                        stats.corrupt += 1
                        continue
                    if ns is not None and key[0] != ns:
                        stats.filtered += 1
                        continue
                    n_events += 1
                    append(Delivery(typ, kind, key, obj, erv, received))
                elif typ == "BOOKMARK":
                    stats.bookmarks += 1
                else:  # CORRUPT, or a type we do not know
                    stats.corrupt += 1
                    log.debug("%s: skipping %s entry at rv %s: %s", kind, typ, erv,
                              getattr(ev, "error", None))
            stats.events += n_events
            if batch:
                fifo.add_many(batch)
            self.last_synced_rv = rv

    def _queue_entries(self, entries: list, received: float) -> int:
        """A page of stream entries -> deliveries into the FIFO (what the event path above does,
        without building WatchEvents first); returns the page's RV."""
        kind, stats = self.kind, self.stats
        batch = []
        append = batch.append
        rv = [self.last_synced_rv]
        n_events = 0
        for typ, key, obj, _md, erv in page_events(kind, entries, stats, self.namespace, rv):
            n_events += 1
            append(Delivery(typ, kind, key, obj, erv, received))
        rv = rv[0]
        stats.events += n_events
        if batch:
            self.fifo.add_many(batch)
        return rv
