"""When each of vc-scheduler's sessions started, read from its own log.

The request log says what an instance wrote but not in which session. vc-scheduler's session loop
(``runOnce``, in its ``scheduler.go``) logs ``Start scheduling ...`` at klog level 4 as a session
begins; the testbed starts it with ``--vmodule=scheduler=4`` (``process.py``), which turns level 4
on for files named ``scheduler.go`` and leaves the rest at ``-v``. A write then belongs to the last
session that started at or before it -- writes a session queued (binds, evictions, the statuses
its close writes) come before the next session starts, because ``wait.Until`` waits a whole
schedule period after one session ends before it runs the next.

Without those lines (a binary given another ``--vmodule``) the extractor falls back to inferring
sessions from gaps between writes (``request_log.py``), which splits a session that paused for
longer than the gap: under load, a session's evictions and its preemptors' nominations (written
at its close, a second later) fell into two inferred sessions, and the evictions were counted as
having no preemptor.

* :func:`klog_wall` -- the wall-clock time of a klog line's header (``I1128 04:59:08.602896``),
  in the local time zone vc-scheduler logs in.
* :class:`SessionLog` -- follows the instance's log file (every life appended to it) and returns
  the start times of the sessions logged since the last call.
"""
from __future__ import annotations

import datetime as _dt
import os
import re
import time
from typing import Callable

from ha.runtime.external.observe.tail import complete_lines

__all__ = ["SessionLog", "klog_wall", "SESSION_START", "VMODULE_FLAG"]

SESSION_START = "Start scheduling ..."
VMODULE_FLAG = "--vmodule=scheduler=4"
_KLOG = re.compile(r"^[IWEF](\d{2})(\d{2}) (\d{2}):(\d{2}):(\d{2})\.(\d{6})\s")


def klog_wall(line: str, now: Callable[[], float] = time.time) -> float | None:
    """The epoch time of a klog header, or None when the line has none. klog leaves the year out:
    it is the current one, or the year before for a line dated after now (a run over New Year)."""
    m = _KLOG.match(line)
    if m is None:
        return None
    mo, d, hh, mm, ss, us = (int(x) for x in m.groups())
    today = _dt.datetime.fromtimestamp(now())
    try:
        t = _dt.datetime(today.year, mo, d, hh, mm, ss, us).timestamp()
        if t > now() + 86400:
            t = _dt.datetime(today.year - 1, mo, d, hh, mm, ss, us).timestamp()
    except ValueError:            # 29 February in the wrong year, a mangled header
        return None
    return t


class SessionLog:
    """The session starts in one instance's vc-scheduler log, read incrementally (a half-written
    last line waits for the next call)."""

    def __init__(self, path: str | os.PathLike, *, now: Callable[[], float] = time.time):
        self.path = str(path)
        self.offset = 0
        self._now = now

    def read_new(self, max_bytes: int = 64 << 20) -> list[float]:
        lines, self.offset = complete_lines(self.path, self.offset, max_bytes)
        starts = []
        for raw in lines:
            if SESSION_START.encode() not in raw:
                continue
            t = klog_wall(raw.decode("utf-8", "replace"), self._now)
            if t is not None:
                starts.append(t)
        return starts
