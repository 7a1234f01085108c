"""Optimistic concurrency under real races: many writers, one RV, exactly one winner."""
from __future__ import annotations

import multiprocessing as mp
import threading

from cluster_state.client import ApiClient
from cluster_state.errors import Conflict

from .helpers import pod, queue


def test_threads_racing_with_the_same_rv_exactly_one_wins(redis_url, key_prefix):
    ApiClient.from_url(redis_url, key_prefix).create(queue("q"))
    for round_ in range(5):
        base = ApiClient.from_url(redis_url, key_prefix).get("Queue", "q")
        n = 8
        barrier = threading.Barrier(n)
        outcome: list = [None] * n

        def writer(i: int) -> None:
            c = ApiClient.from_url(redis_url, key_prefix)
            obj = dict(base, spec=dict(base["spec"], weight=100 + i))
            barrier.wait()
            try:
                outcome[i] = c.update(obj)
            except Conflict as e:
                outcome[i] = e

        threads = [threading.Thread(target=writer, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wins = [o for o in outcome if isinstance(o, dict)]
        assert len(wins) == 1, f"round {round_}: {outcome}"
        assert sum(isinstance(o, Conflict) for o in outcome) == n - 1
        stored = ApiClient.from_url(redis_url, key_prefix).get("Queue", "q")
        assert stored == wins[0]


def _proc_writer(url: str, prefix: str, base: dict, i: int, start, out) -> None:
    c = ApiClient.from_url(url, prefix)
    obj = dict(base, spec=dict(base["spec"], priority=i))
    start.wait()
    try:
        c.update(obj)
        out.put(("won", i))
    except Conflict:
        out.put(("conflict", i))


def test_processes_racing_with_the_same_rv_exactly_one_wins(redis_url, key_prefix):
    api = ApiClient.from_url(redis_url, key_prefix)
    base = api.create(pod("p"))
    ctx = mp.get_context("spawn")
    start, out = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_proc_writer, args=(redis_url, key_prefix, base, i, start, out))
             for i in range(4)]
    for p in procs:
        p.start()
    start.set()
    results = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    won = [i for r, i in results if r == "won"]
    assert len(won) == 1 and sum(r == "conflict" for r, _ in results) == 3
    stored = api.get("Pod", "p", "default")
    assert stored["spec"]["priority"] == won[0] and stored["metadata"]["resourceVersion"] == 2


def test_concurrent_creates_of_one_name_exactly_one_wins(redis_url, key_prefix):
    from cluster_state.errors import AlreadyExists
    n = 8
    barrier = threading.Barrier(n)
    outcome: list = [None] * n

    def creator(i: int) -> None:
        c = ApiClient.from_url(redis_url, key_prefix)
        barrier.wait()
        try:
            outcome[i] = c.create(pod("same", cpu=str(i + 1)))
        except AlreadyExists as e:
            outcome[i] = e

    threads = [threading.Thread(target=creator, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(isinstance(o, dict) for o in outcome) == 1
    assert sum(isinstance(o, AlreadyExists) for o in outcome) == n - 1
