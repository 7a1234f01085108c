"""msgpack encoding of stored objects, laid out so Lua can splice without parsing msgpack.

Every stored value (and every watch event's ``o`` field) is ONE ordinary msgpack map::

    fixmap header | "status" | <status map> | ...other top-level fields... | "metadata" | <metadata
    map whose LAST entry is "resourceVersion": uint64 (0xcf + 8 bytes big-endian)>

So the Lua write script can (a) read/compare an object's resourceVersion as the last 8 bytes,
(b) stamp a new one by replacing them, and (c) swap the status (bytes 9 .. 8+S, S = the stored
status length) or everything but the status, which is how ``/status`` and plain updates ignore
each other's part in one round trip. Anyone may still ``msgpack.unpackb`` the bytes.
"""
from __future__ import annotations

from typing import Any

import msgpack

from .errors import CorruptObject

_unpackb = msgpack.unpackb
__all__ = ["encode", "decode", "rv_bytes", "rv_from_bytes", "PREFIX_LEN", "PLACEHOLDER_RV"]

PLACEHOLDER_RV = 2**63          # packs as 0xcf + 8 bytes; the server overwrites the 8 bytes
_STATUS_KEY = msgpack.packb("status")
PREFIX_LEN = 1 + len(_STATUS_KEY)   # fixmap header + "status" key = 8 bytes
_TAIL = b"\xcf"


def rv_bytes(rv: int) -> bytes:
    return int(rv).to_bytes(8, "big")


def rv_from_bytes(b: bytes) -> int:
    return int.from_bytes(b, "big")


def encode(obj: dict, rv: int | None = None) -> tuple[bytes, int]:
    """``(bytes, status_len)`` of a normalised object; resourceVersion = ``rv`` or a placeholder."""
    status = obj.get("status")
    status = {} if status is None else status
    md = obj["metadata"]
    try:
        if next(iter(obj)) == "status" and next(reversed(obj)) == "metadata" and obj["status"] is status:
            # already in stored order (normalise() and decode() produce it): pack as is, with the
            # placeholder swapped in for a moment
            had = "resourceVersion" in md
            if had and next(reversed(md)) != "resourceVersion":
                blob = _pack_reordered(obj, status, md)
            else:
                old = md.get("resourceVersion")
                md["resourceVersion"] = PLACEHOLDER_RV
                try:
                    blob = msgpack.packb(obj, use_bin_type=True)
                finally:
                    if had:
                        md["resourceVersion"] = old
                    else:
                        del md["resourceVersion"]
        else:
            blob = _pack_reordered(obj, status, md)
        status_len = len(msgpack.packb(status, use_bin_type=True))
    except (TypeError, ValueError, OverflowError) as e:
        from .errors import BadRequest
        from .objects import ref_of
        raise BadRequest(f"not encodable as msgpack: {e}", field="<object>", **ref_of(obj)) from None
    # the layout the Lua scripts rely on (fixmap of <= 15 entries, status first, rv last)
    if not (0x80 < blob[0] <= 0x8f and blob[1:PREFIX_LEN] == _STATUS_KEY and blob[-9:-8] == _TAIL):
        from .errors import BadRequest
        from .objects import ref_of
        raise BadRequest("object does not fit the stored layout (too many top-level fields?)",
                         field="<object>", **ref_of(obj))
    if rv is not None:
        blob = blob[:-8] + rv_bytes(rv)
    return blob, status_len


def _pack_reordered(obj: dict, status: dict, md: dict) -> bytes:
    md = {k: v for k, v in md.items() if k != "resourceVersion"}
    md["resourceVersion"] = PLACEHOLDER_RV
    ordered: dict[str, Any] = {"status": status}
    for k, v in obj.items():
        if k != "status" and k != "metadata":
            ordered[k] = v
    ordered["metadata"] = md
    return msgpack.packb(ordered, use_bin_type=True)


def decode(data: object, *, what: str = "object") -> dict:
    """Bytes from Redis -> object dict; anything else raises :class:`CorruptObject`."""
    if type(data) is not bytes and not isinstance(data, (bytes, bytearray, memoryview)):
        raise CorruptObject(f"{what}: expected bytes, got {type(data).__name__}")
    try:
        obj = _unpackb(data, raw=False, strict_map_key=False)
    except Exception as e:  # msgpack raises several types (ExtraData, ValueError, ...)
        raise CorruptObject(f"{what}: undecodable msgpack ({type(e).__name__}: {e})") from None
    if type(obj) is not dict or type(obj.get("metadata")) is not dict:
        raise CorruptObject(f"{what}: not an object map with metadata (got {type(obj).__name__})")
    return obj
