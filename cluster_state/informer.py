"""A shared informer for one kind: reflector -> FIFO -> delivery hook -> store + handlers.

The contract (client-go's shared_informer.go) this keeps:
* handlers are called sequentially, in FIFO order: watch order with the default RealFIFO; with
  ``fifo="delta"`` all pending deltas of one object come together (pre-1.33 DeltaFIFO);
* an object's notifications are always in order (a delivery hook may reorder across objects only);
* the store is updated before the handlers of the same event run;
* a list/relist is diffed against the store when delivered: new objects -> ``on_add``, changed ->
  ``on_update``, same name with a new uid -> ``on_delete(old, tombstone=True)`` then ``on_add``,
  missing -> ``on_delete(last_known, tombstone=True)`` (DeletedFinalStateUnknown);
* handler exceptions are counted and logged, never stop the informer;
* ``has_synced()`` is true once the first list has been delivered to the handlers;
* a handler added while running first gets ``on_add(obj, True)`` for everything in the store.

Handlers: any object with ``on_add(obj, is_initial_list)``, ``on_update(old, new)``,
``on_delete(obj, tombstone=False)`` (missing methods are skipped), or ``FuncHandler(...)``.
Handlers are synchronous (the scheduler cache is); they run on the informer's event loop.
"""
from __future__ import annotations

import asyncio
import gc
import logging
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from cluster_state import gcpause
from cluster_state.delivery import (ADDED, DELETED, LIST, MODIFIED, REPLACED,
                                    WRITE_TIME_ANNOTATION, Delivery, DeliveryHook, DeliveryLog, Key,
                                    PassThrough, object_key, write_time_of)
from cluster_state.fifo import DeltaFIFO, RealFIFO
from cluster_state.reflector import Backoff, InformerStats, Reflector, page_events
from cluster_state.timeouts import wait_for

# GC settings for a long-lived scheduler-instance process that holds informer caches (measured in
# `bench informer`, see BENCHMARKS.md): a collection's pause grows with the objects it walks, and
# the cache keeps every object it receives. So: gen-0 every 2,000 net allocations (fewer, still
# short collections); with freeze_gc_on_sync the heap is frozen once synced, then watch pages
# are applied in chunks of 128 events, each frozen after it (young generations collected before
# it, automatic GC paused during it), and queued deliveries refreeze every 128 events: a kept
# object is walked at most once, and a full collection only walks what arrived since a freeze.
INSTANCE_GC_THRESHOLD = (2_000, 10, 10)
INSTANCE_GC_REFREEZE_EVERY = 128


def instance_gc_options() -> dict:
    """Informer keyword arguments for a long-lived scheduler-instance process (process-wide GC)."""
    return {"gc_threshold": INSTANCE_GC_THRESHOLD, "freeze_gc_on_sync": True,
            "gc_refreeze_every": INSTANCE_GC_REFREEZE_EVERY}


log = logging.getLogger("cluster_state.informer")


@dataclass
class FuncHandler:
    on_add: Callable[[dict, bool], Any] | None = None
    on_update: Callable[[dict, dict], Any] | None = None
    on_delete: Callable[..., Any] | None = None


class _Bound:
    """A handler's three callables, looked up once."""

    __slots__ = ("add", "update", "delete", "handler")

    def __init__(self, h: Any) -> None:
        self.handler = h
        self.add = getattr(h, "on_add", None)
        self.update = getattr(h, "on_update", None)
        self.delete = getattr(h, "on_delete", None)


class Store:
    """The informer's local cache (client-go's indexer, without indexes): key -> latest object."""

    def __init__(self) -> None:
        self._items: dict[Key, dict] = {}

    def get(self, name: str, namespace: str | None = None) -> dict | None:
        return self._items.get((namespace or "", name))

    def get_by_key(self, key: Key) -> dict | None:
        return self._items.get(key)

    def list(self) -> list[dict]:
        return list(self._items.values())

    def keys(self) -> list[Key]:
        return list(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: Key) -> bool:
        return key in self._items


def _uid(obj: dict | None) -> str | None:
    if obj is None:
        return None
    return (obj.get("metadata") or {}).get("uid")


def _rv(obj: dict | None) -> int | None:
    if obj is None:
        return None
    return (obj.get("metadata") or {}).get("resourceVersion")


class Informer:
    """One kind's shared informer on an ``AsyncApiClient`` (asyncio).

    Options (``informer_options`` in the runtime's InstanceConfig are passed through):
      namespace        only this namespace (None: all)
      fifo             "real" (default, watch order) or "delta" (pre-1.33 per-key coalescing)
      hook             a DeliveryHook (default PassThrough)
      log              a DeliveryLog to record every notification and list (None: no log)
      backoff          reflector Backoff (default client-go's 800 ms .. 30 s), or a zero-argument
                       factory of one (options shared by several informers: each gets its own)
      block_ms         watch block time per call; watch_count: max events per watch call
      start_rv         skip the initial list and watch from this RV (replaying history, benches)
      watch_list       (re)list with a watch-list (sendInitialEvents + the initial-events-end
                       bookmark: client-go's WatchListClient) instead of a list; a plain list
                       whenever it fails (docs/api-server.md)
      resync_unchanged relists also call on_update for objects whose RV did not change (client-go's
                       Sync/Replaced deltas do; off by default: they are no-ops for our caches)
      clock, wall_clock the monotonic clock (delivery stamps, the default backoff) and the unix one
                       (log records' wall time, staleness); a simulation gives its virtual ones
      staleness_samples how many staleness samples (ms) to keep
      write_time       fn(obj) -> unix time of the write that produced obj, or None
      freeze_gc_on_sync gc.collect() + gc.freeze() (process-wide!) once the first list is delivered;
                       the automatic GC paused from start() until then (cluster_state/gcpause.py)
      gc_threshold     gc.set_threshold(*gc_threshold) (process-wide!) at start(), e.g.
                       INSTANCE_GC_THRESHOLD; None leaves the process's setting alone
      gc_refreeze_every with freeze_gc_on_sync (process-wide!): watch pages the reflector
                       applies at once go in chunks of this many events -- gc.collect(1) before a
                       chunk, the automatic GC paused during it, gc.freeze() after it (see
                       _apply_page) -- and deliveries through the FIFO refreeze (gc.collect(1) +
                       gc.freeze()) after every this many; so the objects received since the
                       last freeze -- all a full collection would walk -- stay few
                       (INSTANCE_GC_REFREEZE_EVERY); None: freeze once. Neither happens while
                       another holder has the automatic GC paused (cluster_state/gcpause.py)
    """

    def __init__(self, client: Any, kind: str, *, namespace: str | None = None,
                 fifo: str = "real", hook: DeliveryHook | None = None,
                 log: DeliveryLog | None = None,
                 backoff: Backoff | Callable[[], Backoff] | None = None,
                 block_ms: int = 1000, watch_count: int = 1000, start_rv: int | None = None,
                 resync_unchanged: bool = False, staleness_samples: int = 100_000,
                 write_time: Callable[[dict | None], float | None] = write_time_of,
                 name: str | None = None, freeze_gc_on_sync: bool = False,
                 gc_threshold: tuple[int, ...] | None = None,
                 gc_refreeze_every: int | None = None, watch_list: bool = False,
                 clock: Callable[[], float] = time.monotonic,
                 wall_clock: Callable[[], float] = time.time) -> None:
        self.client = client
        self.clock = clock
        self.wall_clock = wall_clock
        self.gc_refreeze_every = gc_refreeze_every if freeze_gc_on_sync else None
        self._since_freeze = 0
        # a larger gen-0 threshold: every watch batch allocates ~15 container objects per event
        # that the store keeps, so with the default 700 a collection runs every ~50 events and
        # objects are re-scanned as they age (bench informer: up to 3x the decode cost)
        self.gc_threshold = tuple(gc_threshold) if gc_threshold is not None else None
        # gc.freeze() once synced: a full collection walks every cached object; with ~10k pods it
        # stalled delivery for ~1 s in `bench informer` (staleness p99 929 ms -> 66 ms frozen)
        self.freeze_gc_on_sync = freeze_gc_on_sync
        self.kind = kind
        self.name = name or kind
        self.stats = InformerStats()
        self.store = Store()
        if fifo == "real":
            self.fifo: RealFIFO | DeltaFIFO = RealFIFO(max_batch=max(1, watch_count))
        elif fifo == "delta":
            self.fifo = DeltaFIFO(self.store.keys, self.store.get_by_key)
        else:
            raise ValueError(f"informer {kind}: fifo must be 'real' or 'delta', not {fifo!r}")
        self.hook: DeliveryHook = hook or PassThrough()
        self.log = log
        self.resync_unchanged = resync_unchanged
        self.write_time = write_time
        self.staleness_ms: deque[float] = deque(maxlen=staleness_samples)
        if backoff is not None and not isinstance(backoff, Backoff):
            backoff = backoff()   # a factory: each informer its own (seeded) backoff
        self.reflector = Reflector(client, kind, self.fifo, namespace=namespace, backoff=backoff,
                                   block_ms=block_ms, watch_count=watch_count, start_rv=start_rv,
                                   stats=self.stats, watch_list=watch_list, clock=clock)
        # watch pages are applied by the reflector at once (decode, store, handlers, entry by
        # entry) when nothing could come between: watch-order FIFO, pass-through hook, FIFO empty
        if type(self.fifo) is RealFIFO and type(self.hook) is PassThrough:
            self.reflector.apply_page = self._apply_page
        self._handlers: list[_Bound] = []
        self._tasks: list[asyncio.Task] = []
        self._synced_event: asyncio.Event | None = None
        self.delivered_rv = 0      # RV of the latest delivery applied to store + handlers
        self._handler_error_logged = 0
        self._gc_paused = False    # this informer holds a gcpause (its first list: until synced)

    # ---------------------------------------------------------------------------------- handlers
    def add_event_handler(self, handler: Any = None, *, on_add=None, on_update=None,
                          on_delete=None) -> Any:
        if handler is None:
            handler = FuncHandler(on_add, on_update, on_delete)
        b = _Bound(handler)
        if self._tasks and b.add is not None:
            # late handler: a startup batch from the store, as client-go does
            for obj in self.store.list():
                self._call(b.add, obj, True)
        self._handlers.append(b)
        return handler

    def remove_event_handler(self, handler: Any) -> None:
        self._handlers = [b for b in self._handlers if b.handler is not handler]

    # ---------------------------------------------------------------------------------- lifecycle
    async def start(self) -> None:
        """Start the reflector and the processor as tasks on the running loop."""
        if self._tasks:
            return
        loop = asyncio.get_running_loop()
        if self.gc_threshold is not None:
            gc.set_threshold(*self.gc_threshold)
        if self.freeze_gc_on_sync and not self.has_synced() and self.reflector.start_rv is None:
            gcpause.begin()   # (a start_rv: no first list to wait for)
            self._gc_paused = True
        if self.reflector.start_rv is not None:
            # nothing to list: synced from the start (the reflector marks the same when it
            # runs, but a waiter may come first, and the event is only set here or by the list)
            self.fifo.populated = True
        self._synced_event = asyncio.Event()
        await self.hook.start(self._deliver)
        self._tasks = [loop.create_task(self.reflector.run(), name=f"reflector-{self.name}"),
                       loop.create_task(self._process(), name=f"informer-{self.name}")]
        if self.has_synced():
            self._synced_event.set()

    def tasks(self) -> list[asyncio.Task]:
        """The tasks this informer started (reflector, processor): its owner may re-cancel them
        while ``stop()`` waits (a cancel swallowed inside a blocking Redis read)."""
        return list(self._tasks)

    async def stop(self) -> None:
        tasks, self._tasks = self._tasks, []
        for t in tasks:
            t.cancel()
        for t in tasks:
            try:
                await t
            except asyncio.CancelledError:
                pass
            except Exception:  # noqa: BLE001
                log.exception("informer %s: task ended with an error", self.name)
        await self.hook.stop()
        if self.log is not None:
            self.log.flush()
        self._end_gc_pause()
        if self.freeze_gc_on_sync:
            # what was frozen goes back to the oldest generation: the cache this informer fed,
            # cyclic garbage once its owner drops it (an instance's in-process restart), is then
            # reclaimed by the next full collection (the next sync's) instead of kept for good
            gc.unfreeze()

    async def __aenter__(self) -> "Informer":
        await self.start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.stop()

    def has_synced(self) -> bool:
        return self.fifo.populated and self.fifo.initial_pending == 0

    async def wait_for_sync(self, timeout: float | None = None) -> bool:
        if self.has_synced():
            return True
        if self._synced_event is None:
            raise RuntimeError(f"informer {self.name}: wait_for_sync before start")
        try:
            await wait_for(self._synced_event.wait(), timeout)
        except asyncio.TimeoutError:
            return False
        return True

    @property
    def last_synced_rv(self) -> int:
        """The reflector's RV: the newest event, bookmark or list it has seen."""
        return self.reflector.last_synced_rv

    def request_relist(self) -> None:
        self.reflector.request_relist()

    def pending(self) -> int:
        """Deliveries not yet applied (in the FIFO or held by the hook)."""
        return len(self.fifo) + self.hook.held()

    # ---------------------------------------------------------------------------------- processing
    async def _process(self) -> None:
        fifo, hook = self.fifo, self.hook
        direct = type(hook) is PassThrough
        deliver = self._deliver
        refreeze = self.gc_refreeze_every
        while True:
            batch = await fifo.pop()
            if direct:
                for d in batch:
                    deliver(d)
            else:
                for d in batch:
                    await hook.submit(d)
            if refreeze:
                self._count_for_refreeze(len(batch))

    def _count_for_refreeze(self, n: int) -> None:
        self._since_freeze += n
        if self._since_freeze >= self.gc_refreeze_every and self.has_synced() \
                and gcpause.paused_depth() == 0:   # (not while another holds a pause: _apply_page)
            self._since_freeze = 0
            self._refreeze()

    def _apply_page(self, entries: list, received: float) -> int | None:
        """The reflector's fast path for a page of watch entries: each entry is decoded and at
        once applied to the store and the handlers -- exactly what queueing the page as
        deliveries and the processor popping them would do (same order, same notifications,
        same stats), without the queue, and while the freshly decoded object is still in the CPU
        cache. Only when nothing can come between: watch-order FIFO, pass-through hook (both
        checked at construction), nothing queued (a list, or a page the processor has not
        taken yet). Returns the page's RV, or None (queue it).

        With ``gc_refreeze_every`` (the instance GC settings) the page goes in chunks of that many
        entries: before each chunk the young generations are collected, during it the automatic
        GC is paused, after it the heap is frozen. So what a chunk decodes and keeps is frozen
        without being walked at all -- the objects are acyclic and freed by reference counting,
        frozen or not -- instead of being walked, cold, by every young collection until a
        refreeze (in `bench informer` that walking cost ~3-7 us per event). Trade-off (on top of
        the refreeze's): cyclic garbage that another thread of the process makes *and drops*
        during a chunk (a few ms) is frozen with it and never collected."""
        if len(self.fifo):
            return None
        step = self.gc_refreeze_every
        if not step:
            return self._apply_entries(entries, received)
        rv = self.reflector.last_synced_rv
        # before sync: freeze_gc_on_sync's collect + freeze comes first. While another holder has
        # the GC paused (a scheduling session, whose clones are all young then), a collection
        # would walk that holder's objects -- hundreds of thousands at bench-scale size, with
        # the GIL held -- and the freeze would keep them, and their cycles, for good: the page
        # goes under the pause as it is, and what it decoded is frozen after the next page.
        freeze = self.has_synced() and gcpause.paused_depth() == 0
        for i in range(0, len(entries), step):
            if freeze:
                self._collect_young()
            gcpause.begin()
            try:
                got = self._apply_entries(entries[i:i + step] if len(entries) > step else entries,
                                          received, rv)
            finally:
                if freeze:
                    self._freeze()
                gcpause.end()
            if got > rv:
                rv = got
        return rv

    def _apply_entries(self, entries: list, received: float, rv: int | None = None) -> int:
        """``_apply_page``'s work for some entries (see there); returns their RV."""
        kind, stats = self.kind, self.stats
        ns = self.reflector.namespace
        items = self.store._items
        log_on = self.log is not None
        default_stamp = self.write_time is write_time_of
        seen = [self.reflector.last_synced_rv if rv is None else rv]
        n = 0
        try:
            for typ, key, obj, md, erv in page_events(kind, entries, stats, ns, seen):
                n += 1
                if log_on:
                    self._deliver(Delivery(typ, kind, key, obj, erv, received))
                    continue
                # _deliver for a watch event, inlined
                if typ == DELETED:
                    items.pop(key, None)
                    self._notify_delete(obj, None, False)   # type: ignore[arg-type]
                else:
                    old = items.get(key)
                    items[key] = obj
                    if old is None:
                        self._notify_add(obj, None, False)   # type: ignore[arg-type]
                    elif old["metadata"].get("uid") != md.get("uid"):
                        self._notify_delete(old, None, True)   # type: ignore[arg-type]
                        self._notify_add(obj, None, False)   # type: ignore[arg-type]
                    else:   # _notify_update, inlined (the commonest event)
                        stats.delivered += 1
                        for b in self._handlers:
                            f = b.update
                            if f is not None:
                                try:
                                    f(old, obj)
                                except Exception:  # noqa: BLE001
                                    self._handler_failed(f)
                        if not default_stamp:
                            self._staleness(obj)
                        else:
                            ann = md.get("annotations")
                            if ann and WRITE_TIME_ANNOTATION in ann:
                                self._staleness(obj)
                if erv > self.delivered_rv:
                    self.delivered_rv = erv
        finally:
            stats.events += n
            rv = seen[0]
            # what was applied stays applied: should anything raise mid-page (handler errors do
            # not), the reflector's retry resumes after the entry it was at, never re-delivers
            if rv > self.reflector.last_synced_rv:
                self.reflector.last_synced_rv = rv
        return rv

    @staticmethod
    def _refreeze() -> None:
        # the young generations are collected first (cheap: they are small), so only cyclic
        # garbage that already reached the oldest generation is kept alive by the freeze
        gc.collect(1)
        gc.freeze()

    @staticmethod
    def _collect_young() -> None:
        gc.collect(1)

    @staticmethod
    def _freeze() -> None:
        gc.freeze()

    def _call(self, fn: Callable, *args) -> None:
        try:
            fn(*args)
        except Exception:  # noqa: BLE001 -- a handler bug must not stop the informer
            self._handler_failed(fn)

    def _handler_failed(self, fn: Callable) -> None:
        self.stats.handler_errors += 1
        n = self.stats.handler_errors
        if n <= 10 or n % 1000 == 0:
            log.exception("informer %s: handler %s raised (error #%d)", self.name,
                          getattr(fn, "__qualname__", fn), n)

    def _deliver(self, d: Delivery) -> None:
        """Apply one delivery to the store, then notify the handlers (the hook's ``emit``)."""
        typ = d.type
        if typ == LIST:
            self._apply_list(d)
        elif typ == DELETED:
            old = self.store._items.pop(d.key, None)  # type: ignore[arg-type]
            obj = d.object
            if d.tombstone and old is not None:
                obj = old   # the freshest state we knew
            self._notify_delete(obj, d, d.tombstone)
        else:  # ADDED, MODIFIED, REPLACED
            new = d.object
            items = self.store._items
            old = items.get(d.key)  # type: ignore[arg-type]
            items[d.key] = new      # type: ignore[index]
            if old is None:
                self._notify_add(new, d, d.initial)
            elif old["metadata"].get("uid") != new["metadata"].get("uid"):
                # deleted and re-created under the same name while we did not look
                self._notify_delete(old, d, True)
                self._notify_add(new, d, False)
            elif typ == REPLACED and not self.resync_unchanged and _rv(old) == _rv(new):
                pass
            else:
                self._notify_update(old, new, d)
            if d.initial:
                self._initial_done()
        if d.resource_version > self.delivered_rv:
            self.delivered_rv = d.resource_version

    def _initial_done(self) -> None:
        f = self.fifo
        f.initial_pending -= 1
        if f.initial_pending == 0 and f.populated and self._synced_event is not None:
            self._synced_event.set()
            if self.freeze_gc_on_sync:
                gc.collect()
                gc.freeze()
            self._end_gc_pause()

    def _end_gc_pause(self) -> None:
        if self._gc_paused:
            self._gc_paused = False
            gcpause.end()

    def _apply_list(self, d: Delivery) -> None:
        """Diff a (re)list against the store (RealFIFO): adds, updates, uid changes, tombstones."""
        items = self.store._items
        listed: dict[Key, dict] = {}
        for obj in d.items or ():
            listed[object_key(obj)] = obj
        if self.log is not None:
            self.log.append({"kind": self.kind, "type": LIST, "rv": d.resource_version,
                             "count": len(listed), "relist": not d.initial, "initial": d.initial,
                             "recv": d.received, "delivered": self.clock(),
                             "wall": self.wall_clock()})
        # vanished objects first: a relist's tombstones describe state older than its adds
        for key in [k for k in items if k not in listed]:
            old = items.pop(key)
            self._notify_delete(old, d, True)
        for key, new in listed.items():
            old = items.get(key)
            items[key] = new
            if old is None:
                self._notify_add(new, d, d.initial)
            elif _uid(old) != _uid(new):
                self._notify_delete(old, d, True)
                self._notify_add(new, d, False)
            elif self.resync_unchanged or _rv(old) != _rv(new):
                self._notify_update(old, new, d)
        if d.initial:
            self._initial_done()

    # notifications: log record, then each handler, then the staleness sample (write -> applied)
    def _record(self, typ: str, obj: dict, d: Delivery, *, initial: bool = False,
                tombstone: bool = False) -> None:
        self.stats.delivered += 1
        if self.log is not None:
            self._log_record(typ, obj, d, initial, tombstone)

    def _log_record(self, typ: str, obj: dict, d: Delivery, initial: bool,
                    tombstone: bool) -> None:
        md = obj.get("metadata") or {}
        relist = d.type in (LIST, REPLACED)
        self.log.append({"kind": self.kind, "type": typ, "ns": md.get("namespace") or "",  # type: ignore[union-attr]
                         "name": md.get("name"), "uid": md.get("uid"),
                         # a relist's objects (and tombstones) carry their own RV, not an event's
                         "rv": md.get("resourceVersion") if relist or tombstone
                         else d.resource_version,
                         "recv": d.received, "delivered": self.clock(), "wall": self.wall_clock(),
                         "initial": initial, "tombstone": tombstone, "relist": relist,
                         "object": obj})

    def _staleness(self, obj: dict) -> None:
        if self.write_time is write_time_of:   # the default, inlined (once per event)
            md = obj.get("metadata")
            ann = md.get("annotations") if type(md) is dict else None
            if not ann:
                return
            v = ann.get(WRITE_TIME_ANNOTATION)
            if v is None:
                return
            try:
                wt = float(v)
            except (TypeError, ValueError):
                return
        else:
            wt = self.write_time(obj)
            if wt is None:
                return
        self.staleness_ms.append((self.wall_clock() - wt) * 1000.0)

    # (the two hot paths below inline _call and _record: they run once per event)
    def _notify_add(self, obj: dict, d: Delivery, initial: bool) -> None:
        self.stats.delivered += 1
        if self.log is not None:
            self._log_record(ADDED, obj, d, initial, False)
        for b in self._handlers:
            f = b.add
            if f is not None:
                try:
                    f(obj, initial)
                except Exception:  # noqa: BLE001
                    self._handler_failed(f)
        if not initial:
            self._staleness(obj)
        elif self.write_time is not write_time_of:
            # a stateful write_time (e.g. "only stamps new for this object") must see the listed
            # state too, or the object's first later event would be measured against its creation
            self.write_time(obj)

    def _notify_update(self, old: dict, new: dict, d: Delivery) -> None:
        self.stats.delivered += 1
        if self.log is not None:
            self._log_record(MODIFIED, new, d, False, False)
        for b in self._handlers:
            f = b.update
            if f is not None:
                try:
                    f(old, new)
                except Exception:  # noqa: BLE001
                    self._handler_failed(f)
        self._staleness(new)

    def _notify_delete(self, obj: dict | None, d: Delivery, tombstone: bool) -> None:
        if obj is None:
            return
        if tombstone:
            self.stats.tombstones += 1
        self._record(DELETED, obj, d, tombstone=tombstone)
        for b in self._handlers:
            if b.delete is not None:
                if tombstone:
                    self._call(b.delete, obj, True)
                else:
                    self._call(b.delete, obj)
        # no sample: a deleted object's last state carries the write time of an older write


class ThreadedInformer:
    """An Informer on a private event loop in a daemon thread, for synchronous callers.

    ``client_factory()`` is called inside that loop (an AsyncApiClient must be created on the loop
    that uses it). Handlers run in the informer's thread.
    """

    def __init__(self, client_factory: Callable[[], Any], kind: str, **options: Any) -> None:
        self._factory = client_factory
        self._kind = kind
        self._options = options
        self._handlers: list[Any] = []
        self.informer: Informer | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()

    def add_event_handler(self, handler: Any) -> None:
        if self.informer is not None:
            raise RuntimeError("add handlers before start()")
        self._handlers.append(handler)

    def start(self) -> None:
        def main() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)

            async def boot() -> None:
                self.informer = Informer(self._factory(), self._kind, **self._options)
                for h in self._handlers:
                    self.informer.add_event_handler(h)
                await self.informer.start()
                self._ready.set()

            loop.run_until_complete(boot())
            loop.run_forever()
            loop.close()

        self._thread = threading.Thread(target=main, name=f"informer-{self._kind}", daemon=True)
        self._thread.start()
        self._ready.wait()

    def _run(self, coro, timeout: float | None = None):
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)  # type: ignore[arg-type]

    def wait_for_sync(self, timeout: float | None = None) -> bool:
        return self._run(self.informer.wait_for_sync(timeout))  # type: ignore[union-attr]

    def has_synced(self) -> bool:
        return self.informer is not None and self.informer.has_synced()

    def stop(self) -> None:
        if self._loop is None:
            return
        inf = self.informer

        async def down() -> None:
            if inf is not None:
                await inf.stop()
                close = getattr(inf.client, "aclose", None) or getattr(inf.client, "close", None)
                if close is not None:
                    r = close()
                    if asyncio.iscoroutine(r):
                        await r

        self._run(down(), 30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(30)  # type: ignore[union-attr]
        self._loop = None


__all__ = ["Informer", "ThreadedInformer", "FuncHandler", "Store", "InformerStats", "Backoff",
           "INSTANCE_GC_THRESHOLD", "INSTANCE_GC_REFREEZE_EVERY", "instance_gc_options"]
