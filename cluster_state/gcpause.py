"""Pausing the automatic garbage collector around a burst of short-lived allocations.

``with gc_paused(): ...`` turns the cyclic GC's automatic collections off for the block and back
on when the last overlapping block ends, if it was on when the first began (``begin``/``end`` for
a pause that spans calls). Process-wide: an informer's first list and its page application (event
loop thread) and a scheduling session (session worker thread) overlap, so a plain
``gc.disable()``/``gc.enable()`` pair in each would let one turn the collector back on in the
middle of the other's block; the count here makes them nest.

Why: a first list decodes and keeps every object of its kind, so collections during it only walk
objects that all survive (~2 s of full collections per instance at bench-scale size); a session clones the whole cache (at 5,000 nodes / 100,000 pods, millions of objects that
all die when it ends), and with automatic collections on, the generations fill and are walked
over and over while it allocates — measured, that doubled ``open_session`` (3.9 s vs 1.7 s).
Pausing changes no result, only when unreachable cycles are freed: at the next automatic
collection after the block.
"""
from __future__ import annotations

import gc
import threading
from contextlib import contextmanager
from typing import Iterator

__all__ = ["gc_paused", "begin", "end", "paused_depth"]

_lock = threading.Lock()
_depth = 0
_was_enabled = False


def begin() -> None:
    """Open a pause (``end`` closes it): for a pause that spans calls, e.g. an informer's first
    list, from ``start()`` until its delivery."""
    global _depth, _was_enabled
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1


def end() -> None:
    global _depth, _was_enabled
    with _lock:
        if _depth <= 0:
            raise RuntimeError("gcpause.end() without a matching begin()")
        _depth -= 1
        if _depth == 0 and _was_enabled:
            _was_enabled = False
            gc.enable()


@contextmanager
def gc_paused() -> Iterator[None]:
    begin()
    try:
        yield
    finally:
        end()


def paused_depth() -> int:
    """How many blocks are open (0: the collector is as the process set it)."""
    return _depth
