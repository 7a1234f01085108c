"""A minimal list+watch mirror of one kind, for the cluster actors (kubelet, job controller).

These actors are the *world*, not schedulers under test: they need an up-to-date view, no chaos
hooks, no delivery log, so they use this small loop (list, then watch from the list's RV; 410 Gone
→ relist) instead of the informer. Corrupt stream entries are counted and skipped.
"""
from __future__ import annotations

import logging

__all__ = ["KindMirror", "obj_key"]

log = logging.getLogger(__name__)


def obj_key(obj: dict) -> tuple[str, str]:
    md = obj.get("metadata") or {}
    return (md.get("namespace") or "", md.get("name") or "")


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
        self.deleted: list[dict] = []   # DELETED objects since the last drain_deleted()

    async def relist(self) -> None:
        res = await self.api.list(self.kind)
        fresh = {obj_key(o): o for o in res.items}
        for k, o in self.objects.items():
            if k not in fresh:
                self.deleted.append(o)
        self.objects = fresh
        self.rv = int(res.resource_version)
        self.relists += 1

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
                old = self.objects.pop(k, None)
                self.deleted.append(ev.object if ev.object else old)
            else:
                self.objects[k] = ev.object
            n += 1
        return n

    def drain_deleted(self) -> list[dict]:
        out, self.deleted = self.deleted, []
        return out
