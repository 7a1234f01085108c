"""Reading what a process appended to a file since the last look, complete lines only (a
half-written last line waits for the next look). Shared by the request log and the scheduler's log."""
from __future__ import annotations

import os

__all__ = ["complete_lines"]


def complete_lines(path: str | os.PathLike, offset: int, max_bytes: int = 64 << 20) -> tuple[list[bytes], int]:
    """The complete lines of ``path`` from byte ``offset`` (at most ``max_bytes`` read) and the
    offset after the last of them; none yet when the file does not exist."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read(max_bytes)
    except FileNotFoundError:
        return [], offset
    end = data.rfind(b"\n")
    if end < 0:
        return [], offset
    return data[:end].split(b"\n"), offset + end + 1
