"""A minimal list+watch mirror of one kind, for the cluster actors (kubelet, job controller).

These actors are the *world*, not schedulers under test: they need an up-to-date view, no chaos
hooks, no delivery log, so they use this small loop (list, then watch from the list's RV; 410 Gone
→ relist) instead of the informer. Corrupt stream entries are counted and skipped.

Each reader of a mirror subscribes to its changes (``changes()``: the keys an event touched since
that reader last drained them; a relist reports every key it replaced or listed), as a client-go
controller's work queue holds the keys its handlers saw: the kubelet and the job controller then
look at what changed, not at all 100,000 pods every tick. ``in_order`` gives any subset of keys in the order a
walk of ``objects`` would meet them, so what they write comes out in the order a full walk wrote it.
"""
from __future__ import annotations

import logging

__all__ = ["Changes", "KindMirror", "obj_key"]

log = logging.getLogger(__name__)


def obj_key(obj: dict) -> tuple[str, str]:
    md = obj.get("metadata") or {}
    return (md.get("namespace") or "", md.get("name") or "")


class Changes:
    """The keys of one mirror touched since the last ``drain()``, for one reader: a new
    subscription starts with every key the mirror holds (the reader has seen none of them), a
    relist adds every key it replaced or listed."""

    def __init__(self, keys=()) -> None:
        self.keys: dict[tuple[str, str], None] = dict.fromkeys(keys)

    def drain(self) -> list[tuple[str, str]]:
        out = list(self.keys)
        self.keys = {}
        return out


class KindMirror:
    def __init__(self, api, kind: str, *, block_ms: int = 200, count: int = 2000):
        self.api = api
        self.kind = kind
        self.block_ms = block_ms
        self.count = count
        self.objects: dict[tuple[str, str], dict] = {}
        self.rv: int | None = None
        self.relists = 0
        self.corrupt = 0
        # a key's place in the walk of ``objects``: dicts keep insertion order, a key keeps its
        # place while it stays, a key added (again) goes last
        self._place: dict[tuple[str, str], int] = {}
        self._next_place = 0
        self._readers: list[Changes] = []

    def changes(self) -> Changes:
        """A new reader's subscription to this mirror's changes."""
        ch = Changes(self.objects)
        self._readers.append(ch)
        return ch

    def in_order(self, keys) -> list[tuple[str, str]]:
        """The keys among ``keys`` that are in the mirror, in the order of ``objects``."""
        place = self._place
        return sorted((k for k in keys if k in place), key=place.__getitem__)

    async def relist(self) -> None:
        res = await self.api.list(self.kind)
        fresh = {obj_key(o): o for o in res.items}
        old, self.objects = self.objects, fresh
        self._place = {k: i for i, k in enumerate(fresh)}
        self._next_place = len(fresh)
        self.rv = int(res.resource_version)
        self.relists += 1
        for ch in self._readers:   # gone, changed or new: what was there and what is
            ch.keys.update(dict.fromkeys(old))
            ch.keys.update(dict.fromkeys(fresh))

    async def sync(self, block_ms: int | None = None) -> int:
        """Apply the events available now (waiting up to ``block_ms``); returns how many."""
        from cluster_state.errors import Gone
        if self.rv is None:
            await self.relist()
            return len(self.objects)
        try:
            events = await self.api.watch(self.kind, self.rv,
                                          block_ms=self.block_ms if block_ms is None else block_ms,
                                          count=self.count)
        except Gone:
            await self.relist()
            return len(self.objects)
        n = 0
        objects, place, readers = self.objects, self._place, self._readers
        for ev in events:
            if ev.resource_version:
                self.rv = max(self.rv, int(ev.resource_version))
            if ev.type == "BOOKMARK":
                continue
            if ev.type == "CORRUPT" or ev.object is None:
                self.corrupt += 1
                continue
            k = obj_key(ev.object)
            if ev.type == "DELETED":
                objects.pop(k, None)
                place.pop(k, None)
            else:
                if k not in objects:
                    place[k] = self._next_place
                    self._next_place += 1
                objects[k] = ev.object
            for ch in readers:
                ch.keys[k] = None
            n += 1
        return n
