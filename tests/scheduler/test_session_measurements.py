"""A session's result carries measurements beside its decisions: the wall time, the CPU its own
thread used, the CPU of the whole process meanwhile (other threads: informers, the bind worker)."""
from __future__ import annotations

import threading
import time

from ha.scheduler.scheduler import run_session

from .fw_helpers import GANG_ALL, PREDICATES, conf, make_cache, node, pod, podgroup

ALLOC = conf(["allocate"], [[GANG_ALL, PREDICATES]])


def _cache():
    return make_cache("v1.14", nodes=[node("n1", 4000)], podgroups=[podgroup("pg", 1)],
                      pods=[pod("p1", "pg", 1000)])[0]


def _burn(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_waiting_counts_in_the_wall_time_not_in_the_cpu():
    res = run_session(_cache(), ALLOC, seed=1, session_hook=lambda ssn: time.sleep(0.2))
    assert res.duration_s >= 0.2
    assert res.cpu_s < 0.1 < res.duration_s


def test_the_sessions_cpu_and_another_threads_cpu_meanwhile():
    stop = threading.Event()

    def other() -> None:          # an informer busy while the session runs
        while not stop.is_set():
            _burn(0.01)
    res = None
    t = threading.Thread(target=other)
    t.start()
    try:
        res = run_session(_cache(), ALLOC, seed=1, session_hook=lambda ssn: _burn(0.15))
    finally:
        stop.set()
        t.join()
    assert res.cpu_s >= 0.15
    # the other thread ran meanwhile (the interpreter switches every 5 ms): its CPU is the
    # process's, not the session's
    assert res.process_cpu_s > res.cpu_s + 0.02
    assert res.duration_s >= res.cpu_s
    d = res.to_dict()
    assert d["cpu_s"] == res.cpu_s and d["process_cpu_s"] == res.process_cpu_s
