"""What passes from the reflector to an informer's handlers, the hook that can hold it, and the log.

* ``Delivery``: one watch event (or one list/relist, a barrier item) on its way to the handlers.
* ``DeliveryHook``: sees every delivery after the FIFO and before the informer's store and handlers;
  it may hold, delay or reorder them (chaos plugs in here). ``PassThrough`` is the default;
  ``DelayHook`` delays each event by ``fn(delivery)`` seconds, keeping watch order unless told to
  reorder across objects (per-object order is part of the informer contract and is always kept).
* ``DeliveryLog``: one record per notification the handlers received, plus one per list/relist, as a
  msgpack stream in ``delivery/<instance>.log`` so a replay can rebuild the cache (tombstones too).
"""
from __future__ import annotations

import asyncio
import heapq
import os
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Protocol

import msgpack
from .timeouts import wait_for

# delivery types: watch event types, plus LIST (a list/relist barrier, RealFIFO) and REPLACED
# (DeltaFIFO's per-object delta from a list)
ADDED = "ADDED"
MODIFIED = "MODIFIED"
DELETED = "DELETED"
LIST = "LIST"
REPLACED = "REPLACED"

# Writers that want staleness measured put time.time() of the write here (the API server's objects
# carry no update timestamp of their own; see ``write_time_of``).
WRITE_TIME_ANNOTATION = "ha-testbed/write-time"

Key = tuple[str, str]  # (namespace or "", name)


def object_key(obj: dict) -> Key:
    md = obj["metadata"]
    return (md.get("namespace") or "", md["name"])


@dataclass(slots=True)
class Delivery:
    type: str                    # ADDED / MODIFIED / DELETED / LIST / REPLACED
    kind: str
    key: Key | None              # None for LIST: a barrier across all objects
    object: dict | None
    resource_version: int        # the event's RV (LIST: the list's RV)
    received: float              # the reflector's clock (time.monotonic() live) when it arrived
    initial: bool = False        # part of the informer's first list
    tombstone: bool = False      # a delete whose final state is unknown (computed on relist)
    items: list[dict] | None = None   # LIST only: the listed objects


def write_time_of(obj: dict | None) -> float | None:
    """Wall-clock time (unix seconds) of the write that produced this state, if known."""
    if obj is None:
        return None
    md = obj.get("metadata") or {}
    ann = md.get("annotations")
    if ann:
        v = ann.get(WRITE_TIME_ANNOTATION)
        if v is not None:
            try:
                return float(v)
            except (TypeError, ValueError):
                return None
    return None


# --------------------------------------------------------------------------------------------------
# hooks

Emit = Callable[[Delivery], None]


class DeliveryHook(Protocol):
    """Sits between an informer's FIFO and its store + handlers.

    ``start(emit)`` is called once before any ``submit``; ``emit(d)`` applies ``d`` to the store and
    the handlers (synchronously). ``submit`` is called for every delivery in FIFO order; it may call
    ``emit`` at once, later, or (reordering hooks) out of order -- but never reorder two deliveries
    with the same ``key``, and treat ``key is None`` (a list/relist) as a barrier: everything
    submitted before it is emitted before it, everything after it after it.
    """

    async def start(self, emit: Emit) -> None: ...
    async def submit(self, d: Delivery) -> None: ...
    def held(self) -> int: ...
    async def stop(self) -> None: ...


class PassThrough:
    """The default hook: deliver everything at once, in order."""

    def __init__(self) -> None:
        self._emit: Emit | None = None

    async def start(self, emit: Emit) -> None:
        self._emit = emit

    async def submit(self, d: Delivery) -> None:
        self._emit(d)  # type: ignore[misc]

    def held(self) -> int:
        return 0

    async def stop(self) -> None:
        pass


class DelayHook:
    """Delay each delivery by ``fn(d)`` seconds (from when it reaches the hook).

    By default watch order is kept (an event never overtakes an earlier one: a slow stream). With
    ``reorder_across_objects=True`` events of different objects may overtake each other, but an
    object's events stay in order and lists/relists stay barriers.
    """

    def __init__(self, fn: Callable[[Delivery], float], *, reorder_across_objects: bool = False,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.fn = fn
        self.reorder = reorder_across_objects
        self.clock = clock
        self._heap: list[tuple[float, int, Delivery]] = []
        self._seq = 0
        self._last_due_all = 0.0              # latest due time of anything (order-keeping mode)
        self._last_due: dict[Key, float] = {}  # per object (reorder mode)
        self._barrier_due = 0.0
        self._emit: Emit | None = None
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None
        self.emitted = 0

    async def start(self, emit: Emit) -> None:
        self._emit = emit
        self._task = asyncio.get_running_loop().create_task(self._run(), name="delay-hook")

    async def submit(self, d: Delivery) -> None:
        due = self.clock() + max(0.0, float(self.fn(d)))
        if not self.reorder:
            due = max(due, self._last_due_all)
        elif d.key is None:
            due = max(due, self._barrier_due, self._last_due_all)
            self._barrier_due = due
            self._last_due.clear()     # every per-key bound is now below the barrier
        else:
            due = max(due, self._barrier_due, self._last_due.get(d.key, 0.0))
            self._last_due[d.key] = due
        self._last_due_all = max(self._last_due_all, due)
        self._seq += 1
        heapq.heappush(self._heap, (due, self._seq, d))
        self._wake.set()

    def held(self) -> int:
        return len(self._heap)

    async def _run(self) -> None:
        heap = self._heap
        while True:
            if not heap:
                self._wake.clear()
                await self._wake.wait()
                continue
            wait = heap[0][0] - self.clock()
            if wait > 0:
                self._wake.clear()
                try:
                    # wake early if something with an earlier due time arrives
                    await wait_for(self._wake.wait(), wait)
                except asyncio.TimeoutError:
                    pass
                continue
            now = self.clock()
            while heap and heap[0][0] <= now:
                due, _seq, d = heapq.heappop(heap)
                # forget per-object bounds that are already in the past (keeps the dict small)
                if d.key is not None and self._last_due.get(d.key) == due:
                    del self._last_due[d.key]
                self.emitted += 1
                self._emit(d)  # type: ignore[misc]

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None


# --------------------------------------------------------------------------------------------------
# delivery log

LOG_FORMAT = "ha-testbed/delivery-log"
LOG_VERSION = 1


class DeliveryLog:
    """Append-only record of what an instance's informers delivered, optionally kept in memory and/or
    streamed to a file (msgpack stream: a header map, then one map per record).

    Record keys: seq, kind, type (ADDED/MODIFIED/DELETED = the handler called; LIST = a list or
    relist), ns, name, uid, rv, recv (monotonic), delivered (monotonic), wall (unix time at
    delivery), initial, tombstone, object (the full object; for MODIFIED the new state). LIST
    records carry rv = the list's RV, count, relist (bool). One log may be shared by the informers
    of one instance: seq orders the records across kinds.
    """

    def __init__(self, path: str | os.PathLike | None = None, *, instance: str = "",
                 keep: bool = True, flush_every: int = 512,
                 clock: Callable[[], float] = time.monotonic,
                 wall_clock: Callable[[], float] = time.time) -> None:
        """``clock`` / ``wall_clock``: the clocks the informers stamp with (the header's
        ``mono_to_wall``); a simulation gives its virtual ones."""
        self.instance = instance
        self.keep = keep
        self.records: list[dict] = []
        self.seq = 0
        self.path = os.fspath(path) if path is not None else None
        self._packer = msgpack.Packer(use_bin_type=True)
        self._buf: list[bytes] = []
        self._flush_every = flush_every
        self._fh = None
        if self.path is not None:
            d = os.path.dirname(self.path)
            if d:
                os.makedirs(d, exist_ok=True)
            self._fh = open(self.path, "wb")
            self._fh.write(self._packer.pack({
                "format": LOG_FORMAT, "version": LOG_VERSION, "instance": instance,
                # to convert monotonic stamps to wall time: wall ~= mono + mono_to_wall
                "mono_to_wall": wall_clock() - clock(),
            }))

    @classmethod
    def for_instance(cls, results_dir: str | os.PathLike, instance: str, **kw) -> "DeliveryLog":
        return cls(os.path.join(os.fspath(results_dir), "delivery", f"{instance}.log"),
                   instance=instance, **kw)

    def append(self, rec: dict) -> dict:
        self.seq += 1
        rec["seq"] = self.seq
        if self.keep:
            self.records.append(rec)
        if self._fh is not None:
            self._buf.append(self._packer.pack(rec))
            if len(self._buf) >= self._flush_every:
                self.flush()
        return rec

    def flush(self) -> None:
        if self._fh is not None and self._buf:
            self._fh.write(b"".join(self._buf))
            self._buf.clear()
            self._fh.flush()

    def close(self) -> None:
        if self._fh is not None:
            self.flush()
            self._fh.close()
            self._fh = None

    def __enter__(self) -> "DeliveryLog":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class DeliveryLogError(ValueError):
    """A delivery log file that is not one, or is truncated/corrupt (names the file)."""


def read_delivery_log(path: str | os.PathLike) -> tuple[dict, list[dict]]:
    """(header, records) of a delivery log file."""
    path = os.fspath(path)
    with open(path, "rb") as fh:
        unpacker = msgpack.Unpacker(fh, raw=False, strict_map_key=False)
        try:
            header = next(unpacker)
        except StopIteration:
            raise DeliveryLogError(f"{path}: empty file, not a delivery log") from None
        except Exception as e:  # msgpack raises several types on garbage
            raise DeliveryLogError(f"{path}: not a delivery log ({e})") from None
        if not isinstance(header, dict) or header.get("format") != LOG_FORMAT:
            raise DeliveryLogError(f"{path}: not a delivery log (header {str(header)[:80]!r})")
        if header.get("version") != LOG_VERSION:
            raise DeliveryLogError(f"{path}: unsupported delivery log version {header.get('version')!r}")
        records: list[dict] = []
        try:
            for rec in unpacker:
                if not isinstance(rec, dict) or "seq" not in rec:
                    raise DeliveryLogError(f"{path}: record {len(records) + 1} is not a record")
                records.append(rec)
        except DeliveryLogError:
            raise
        except Exception as e:
            raise DeliveryLogError(f"{path}: corrupt after record {len(records)} ({e})") from None
    return header, records


class ReplayHandler(Protocol):
    def on_add(self, obj: dict, is_initial_list: bool) -> Any: ...
    def on_update(self, old: dict, new: dict) -> Any: ...
    def on_delete(self, obj: dict, tombstone: bool = False) -> Any: ...


def replay(records: Iterator[dict] | list[dict], handlers: dict[str, ReplayHandler], *,
           until_rv: int | None = None) -> dict[str, dict[Key, dict]]:
    """Feed logged notifications, in seq order, to per-kind handlers; return the rebuilt stores.

    The log already holds the notifications a relist produced (tombstones included), so replay just
    re-issues them; LIST records only mark where lists happened. ``until_rv`` stops before the first
    record whose RV is beyond it.
    """
    stores: dict[str, dict[Key, dict]] = {}
    for rec in sorted(records, key=lambda r: r["seq"]):
        if until_rv is not None and rec.get("rv", 0) > until_rv:
            break
        typ = rec["type"]
        if typ == LIST:
            continue
        kind = rec["kind"]
        store = stores.setdefault(kind, {})
        key = (rec.get("ns") or "", rec["name"])
        obj = rec["object"]
        h = handlers.get(kind)
        if typ == ADDED:
            store[key] = obj
            if h is not None:
                h.on_add(obj, bool(rec.get("initial")))
        elif typ == MODIFIED:
            old = store.get(key)
            store[key] = obj
            if h is not None:
                h.on_update(old, obj)
        elif typ == DELETED:
            store.pop(key, None)
            if h is not None:
                h.on_delete(obj, bool(rec.get("tombstone")))
    return stores
