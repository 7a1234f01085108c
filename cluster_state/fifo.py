"""The queue between the reflector and the informer's processor: two ordering modes.

* ``RealFIFO`` (default; client-go's ``InOrderInformers``, GA in 1.36): every notification from the
  reflector is passed on in watch order, several per object. A list or relist is one atomic item
  (client-go's ``AtomicFIFO``); the informer diffs it against its store when it is delivered, so the
  tombstones it produces are exact even when a delivery hook holds earlier events.
* ``DeltaFIFO`` (pre-1.33 behaviour): a map key -> pending deltas plus a FIFO of keys. A key keeps
  its place while more deltas pile up on it, so all pending deltas of one object are popped together
  and cross-object order is *not* watch order. Consecutive deletes are collapsed. ``replace`` emits
  ``REPLACED`` deltas for the listed objects and tombstone deletes (DeletedFinalStateUnknown) for
  known keys missing from the list, computed at push time against the store and the queue, as
  client-go does.
"""
from __future__ import annotations

import asyncio
from collections import deque
from typing import Callable, Iterable

from cluster_state.delivery import (DELETED, LIST, REPLACED, Delivery, Key, object_key)


class _Signal:
    """A wake-up flag for one consumer (cheaper than asyncio.Queue for bulk appends)."""

    __slots__ = ("_event",)

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def set(self) -> None:
        self._event.set()

    async def wait(self) -> None:
        await self._event.wait()
        self._event.clear()


class RealFIFO:
    """Watch order, every event, lists as single barrier items."""

    mode = "real"

    def __init__(self, *, max_batch: int = 1000) -> None:
        self._q: deque[Delivery] = deque()
        self._signal = _Signal()
        self.max_batch = max_batch
        # has_synced bookkeeping: set by the first replace(initial=True), counted down by the
        # informer as initial deliveries reach the handlers.
        self.populated = False
        self.initial_pending = 0

    def __len__(self) -> int:
        return len(self._q)

    def add(self, d: Delivery) -> None:
        self._q.append(d)
        self._signal.set()

    def add_many(self, ds: Iterable[Delivery]) -> None:
        self._q.extend(ds)
        self._signal.set()

    def replace(self, items: list[dict], kind: str, resource_version: int, received: float,
                *, initial: bool) -> None:
        self._q.append(Delivery(LIST, kind, None, None, resource_version, received,
                                initial=initial, items=items))
        if initial:
            self.populated = True
            self.initial_pending += 1
        self._signal.set()

    async def pop(self) -> list[Delivery]:
        """The next batch of deliveries in watch order (at least one)."""
        while not self._q:
            await self._signal.wait()
        q = self._q
        if len(q) <= self.max_batch:
            batch = list(q)
            q.clear()
            return batch
        return [q.popleft() for _ in range(self.max_batch)]


class DeltaFIFO:
    """Per-key coalescing queue (client-go before InOrderInformers)."""

    mode = "delta"

    def __init__(self, known_keys: Callable[[], Iterable[Key]],
                 known_object: Callable[[Key], dict | None]) -> None:
        self._items: dict[Key, list[Delivery]] = {}
        self._keys: deque[Key] = deque()
        self._signal = _Signal()
        self._known_keys = known_keys
        self._known_object = known_object
        self.populated = False
        self.initial_pending = 0

    def __len__(self) -> int:
        return len(self._keys)

    def add(self, d: Delivery) -> None:
        key = d.key
        deltas = self._items.get(key)
        if deltas is None:
            self._items[key] = [d]
            self._keys.append(key)
        else:
            last = deltas[-1]
            if d.type == DELETED and last.type == DELETED:
                # collapse consecutive deletes, keeping the one that knows the final state
                if last.tombstone and not d.tombstone:
                    deltas[-1] = d
            else:
                deltas.append(d)
        self._signal.set()

    def add_many(self, ds: Iterable[Delivery]) -> None:
        for d in ds:
            self.add(d)

    def replace(self, items: list[dict], kind: str, resource_version: int, received: float,
                *, initial: bool) -> None:
        listed: set[Key] = set()
        n = 0
        for obj in items:
            key = object_key(obj)
            listed.add(key)
            self.add(Delivery(REPLACED, kind, key, obj, resource_version, received, initial=initial))
            n += 1
        # Tombstones for what we know (store + queued, not already being deleted) but the list lacks.
        candidates = set(self._known_keys())
        for key, deltas in self._items.items():
            if deltas[-1].type != DELETED:
                candidates.add(key)
        for key in candidates - listed:
            deltas = self._items.get(key)
            last = deltas[-1].object if deltas and deltas[-1].object is not None else None
            if last is None:
                last = self._known_object(key)
            self.add(Delivery(DELETED, kind, key, last, resource_version, received, tombstone=True))
        if initial:
            self.populated = True
            self.initial_pending += n
        self._signal.set()

    async def pop(self) -> list[Delivery]:
        """All pending deltas of the oldest key, in the order they arrived."""
        while not self._keys:
            await self._signal.wait()
        key = self._keys.popleft()
        return self._items.pop(key)


__all__ = ["RealFIFO", "DeltaFIFO", "LIST"]
