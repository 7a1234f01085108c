"""A session's result carries measurements beside its decisions: the wall time, the CPU its own
thread used, the CPU of the whole process meanwhile (other threads: informers, the bind worker)."""
from __future__ import annotations

import threading
import time

import pytest

from ha.scheduler.scheduler import run_session

from .fw_helpers import GANG_ALL, PREDICATES, conf, make_cache, node, pod, podgroup

ALLOC = conf(["allocate"], [[GANG_ALL, PREDICATES]])


def _cache():
    return make_cache("v1.14", nodes=[node("n1", 4000)], podgroups=[podgroup("pg", 1)],
                      pods=[pod("p1", "pg", 1000)])[0]


@pytest.fixture(autouse=True, scope="module")
def _warm():
    """The first session in a process imports the actions and plugins: CPU no test means."""
    run_session(_cache(), ALLOC, seed=0)


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


def test_each_phase_carries_its_own_wall_time_and_cpu(monkeypatch):
    cache = _cache()
    inner = cache.snapshot

    def slow_snapshot(**kw):      # the cache's lock held by an informer: waiting, no CPU
        time.sleep(0.15)
        return inner(**kw)
    cache.snapshot = slow_snapshot
    import ha.scheduler.actions.allocate as allocate
    execute = allocate.AllocateAction.execute

    def busy_execute(self, ssn):  # an allocate that works hard
        _burn(0.12)
        return execute(self, ssn)
    monkeypatch.setattr(allocate.AllocateAction, "execute", busy_execute)
    res = run_session(cache, ALLOC, seed=1)
    ph = res.phases_ms
    assert list(ph) == ["snapshot", "open", "allocate", "close"]
    assert ph["snapshot"][0] >= 150 and ph["snapshot"][1] < 100
    assert ph["allocate"][1] >= 120 and ph["allocate"][0] >= ph["allocate"][1] - 1
    assert ph["open"][0] < 100 and ph["close"][0] < 100
    # the phases are the session, less what lies between them (the hook, collecting results)
    assert sum(w for w, _ in ph.values()) <= res.duration_s * 1000.0 + 1
    assert res.to_dict()["phases_ms"] == {k: list(v) for k, v in ph.items()}
    assert res.binds == {"ns/p1": "n1"}


def test_an_action_configured_twice_is_one_phase_summed(monkeypatch):
    import ha.scheduler.actions.allocate as allocate
    execute = allocate.AllocateAction.execute

    def busy_execute(self, ssn):
        _burn(0.06)
        return execute(self, ssn)
    monkeypatch.setattr(allocate.AllocateAction, "execute", busy_execute)
    res = run_session(_cache(), conf(["allocate", "backfill", "allocate"], [[GANG_ALL, PREDICATES]]), seed=1)
    assert list(res.phases_ms) == ["snapshot", "open", "allocate", "backfill", "close"]
    assert res.phases_ms["allocate"][1] >= 120
