"""cluster_state.gcpause: overlapping pauses nest; the collector's own setting comes back."""
from __future__ import annotations

import gc
import threading

from cluster_state.gcpause import gc_paused, paused_depth


def test_the_collector_comes_back_only_when_the_last_overlapping_pause_ends():
    assert gc.isenabled() and paused_depth() == 0
    entered, release = threading.Event(), threading.Event()
    seen: list[bool] = []

    def other() -> None:               # e.g. the informer applying a page on the loop thread
        with gc_paused():
            entered.set()
            release.wait(10)
        seen.append(gc.isenabled())

    with gc_paused():                  # e.g. a session on the session worker
        assert not gc.isenabled()
        th = threading.Thread(target=other)
        th.start()
        assert entered.wait(10)
        assert paused_depth() == 2
    # the session's block ended first: the other block still holds the collector off
    assert not gc.isenabled() and paused_depth() == 1
    release.set()
    th.join(10)
    assert seen == [True] and gc.isenabled() and paused_depth() == 0


def test_a_collector_the_process_turned_off_stays_off():
    gc.disable()
    try:
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_an_exception_in_the_block_still_ends_the_pause():
    try:
        with gc_paused():
            raise ValueError("boom")
    except ValueError:
        pass
    assert gc.isenabled() and paused_depth() == 0
