"""Watch events, list results, and turning raw stream entries into events (never raising)."""
from __future__ import annotations

from dataclasses import dataclass, field

import msgpack

from .codec import decode
from .errors import CorruptObject

__all__ = ["WatchEvent", "ListResult", "EVENT_TYPES", "event_from_entry", "events_from_entries"]

EVENT_TYPES = ("ADDED", "MODIFIED", "DELETED")
_TYPES = {t.encode(): t for t in EVENT_TYPES}


@dataclass(slots=True)   # one per event on the hot path: slots make it cheaper to build
class WatchEvent:
    type: str                   # ADDED / MODIFIED / DELETED / BOOKMARK / CORRUPT
    kind: str
    object: dict | None         # None for BOOKMARK and CORRUPT
    resource_version: int
    error: str | None = None    # why a CORRUPT entry could not be decoded


@dataclass
class ListResult:
    items: list[dict]
    resource_version: int
    # stored values that did not decode: (key, error). Skipped, never raised, so one bad object
    # cannot stop an informer from syncing.
    corrupt: list[tuple[str, str]] = field(default_factory=list)
    # paged lists (limit / continue): the token for the next page while more follow, and how
    # many items follow (Kubernetes' metadata.continue / metadata.remainingItemCount)
    continue_: str | None = None
    remaining_item_count: int | None = None


def _rv_of_id(entry_id: bytes) -> int:
    try:
        return int(entry_id.split(b"-", 1)[0])
    except (ValueError, AttributeError):
        return -1


def event_from_entry(kind: str, entry: list) -> WatchEvent:
    """A stream entry ``[id, [field, value, ...]]`` -> event; anything odd becomes CORRUPT."""
    try:
        entry_id, fields = entry[0], entry[1]
    except (TypeError, IndexError, KeyError):
        return WatchEvent("CORRUPT", kind, None, -1, f"malformed stream entry {entry!r:.80}")
    rv = _rv_of_id(entry_id)
    typ = obj_bytes = None
    try:
        # our writer lays fields out as t, <type>, o, <object>
        if len(fields) == 4 and fields[0] == b"t" and fields[2] == b"o":
            typ, obj_bytes = fields[1], fields[3]
        else:
            d = dict(zip(fields[::2], fields[1::2]))
            typ, obj_bytes = d.get(b"t"), d.get(b"o")
    except TypeError:
        pass
    t = _TYPES.get(typ) if isinstance(typ, bytes) else None
    if t is None:
        return WatchEvent("CORRUPT", kind, None, rv, f"entry {entry_id!r}: bad or missing event type {typ!r:.40}")
    try:
        obj = decode(obj_bytes, what=f"{kind} watch event {entry_id!r}")
    except CorruptObject as e:
        return WatchEvent("CORRUPT", kind, None, rv, e.message)
    return WatchEvent(t, kind, obj, rv)


def events_from_entries(kind: str, entries: list) -> list[WatchEvent]:
    """``event_from_entry`` for a whole XRANGE reply, with the checks of the common case (our own
    writer's ``t, <type>, o, <object>`` entries) inlined; anything else takes the careful path."""
    unpackb = msgpack.unpackb
    types = _TYPES
    out = []
    append = out.append
    for e in entries:
        try:
            eid, f = e
            if len(f) == 4 and f[0] == b"t" and f[2] == b"o":
                t = types.get(f[1])
                obj = unpackb(f[3], raw=False, strict_map_key=False)
                if t is not None and type(obj) is dict and type(obj.get("metadata")) is dict:
                    append(WatchEvent(t, kind, obj, int(eid.split(b"-", 1)[0])))
                    continue
        except Exception:  # noqa: BLE001 -- undecodable or odd: event_from_entry says why
            pass
        append(event_from_entry(kind, e))
    return out
