"""watch: order, event types, DELETED last state, 410 Gone after trim/compaction, BOOKMARK, CORRUPT."""
from __future__ import annotations

import threading
import time

import pytest
import redis

from cluster_state.client import ApiClient
from cluster_state.errors import BadRequest, Gone

from .helpers import api, node, pod, queue  # noqa: F401


def _types(events):
    return [(e.type, e.resource_version) for e in events]


def test_watch_delivers_ordered_events_after_rv(api):
    p = api.create(pod("p1"))
    api.create(node("n1"))
    p = api.update(dict(p, spec=dict(p["spec"], priority=3)))
    api.delete("Pod", "p1", "default", grace_period_seconds=0)
    ev = api.watch("Pod", 0)
    assert _types(ev) == [("ADDED", 1), ("MODIFIED", 3), ("DELETED", 4)]
    assert ev[1].object["spec"]["priority"] == 3
    # DELETED carries the last state, stamped with the deletion RV
    assert ev[2].object["spec"]["priority"] == 3 and ev[2].object["metadata"]["resourceVersion"] == 4
    assert all(e.kind == "Pod" for e in ev)
    assert _types(api.watch("Pod", 1)) == [("MODIFIED", 3), ("DELETED", 4)]
    assert _types(api.watch("Node", 0)) == [("ADDED", 2)]
    # count limits one call; the next call continues
    assert _types(api.watch("Pod", 0, count=2)) == [("ADDED", 1), ("MODIFIED", 3)]


def test_list_then_watch_misses_nothing(api):
    for i in range(5):
        api.create(pod(f"p{i}"))
    lr = api.list("Pod")
    api.create(pod("late"))
    ev = api.watch("Pod", lr.resource_version)
    assert [e.object["metadata"]["name"] for e in ev] == ["late"]


def test_bookmark_when_idle_never_skips_an_event(api):
    api.create(pod("p1"))                   # rv 1
    api.create(node("n1"))                  # rv 2 (another kind)
    ev = api.watch("Pod", 1, block_ms=50)
    assert _types(ev) == [("BOOKMARK", 2)] and ev[0].object is None
    # caught up: a bookmark is only sent when the global RV moved on
    assert api.watch("Pod", 2, block_ms=50) == []
    assert api.watch("Pod", 2, block_ms=0) == []
    # a bookmark RV is always >= every event of the kind: resuming from it loses nothing
    api.create(pod("p2"))                   # rv 3
    api.create(queue("q"))                  # rv 4
    assert _types(api.watch("Pod", 2, block_ms=0)) == [("ADDED", 3)]
    assert _types(api.watch("Pod", 3, block_ms=0)) == [("BOOKMARK", 4)]


def test_bookmarks_under_concurrent_writes_never_skip_events(redis_url, key_prefix):
    """A watcher that follows events and bookmarks sees every Pod event while another thread
    interleaves Pod and Node writes."""
    w = ApiClient.from_url(redis_url, key_prefix)
    writer = ApiClient.from_url(redis_url, key_prefix)
    n = 300
    done = threading.Event()

    def write():
        for i in range(n):
            writer.create(pod(f"p{i}"))
            writer.create(node(f"n{i}"))
        done.set()

    t = threading.Thread(target=write)
    t.start()
    rv, seen, bookmarks = 0, [], 0
    deadline = time.monotonic() + 60
    while (len(seen) < n) and time.monotonic() < deadline:
        for e in w.watch("Pod", rv, block_ms=20, count=7):
            assert e.resource_version > rv
            rv = e.resource_version
            if e.type == "BOOKMARK":
                bookmarks += 1
            else:
                seen.append(e.object["metadata"]["name"])
    t.join()
    assert seen == [f"p{i}" for i in range(n)]
    assert rv <= w.current_resource_version()


def test_watch_blocks_until_an_event_arrives(api, redis_url, key_prefix):
    other = ApiClient.from_url(redis_url, key_prefix)
    timer = threading.Timer(0.2, lambda: other.create(pod("late")))
    timer.start()
    t0 = time.monotonic()
    ev = api.watch("Pod", 0, block_ms=20_000)
    assert time.monotonic() - t0 < 15
    timer.join()
    assert _types(ev) == [("ADDED", 1)]


def test_gone_after_history_trim(redis_url, key_prefix):
    api = ApiClient.from_url(redis_url, key_prefix, history=5)
    for i in range(20):
        api.create(queue(f"q{i}"))
    with pytest.raises(Gone) as ei:
        api.watch("Queue", 0)
    assert ei.value.code == 410 and ei.value.reason == "Expired" and ei.value.kind == "Queue"
    c = ei.value.details["compacted"]
    assert 0 < c < 20
    # from the compacted point on, the kept history is complete and contiguous
    ev = api.watch("Queue", c)
    assert [e.resource_version for e in ev] == list(range(c + 1, 21))
    assert len(ev) >= 5
    # other kinds keep their own history
    api.create(pod("p"))
    assert _types(api.watch("Pod", 0, block_ms=0)) == [("ADDED", 21)]


def test_gone_after_compact_and_relist_recovers(api):
    for i in range(6):
        api.create(pod(f"p{i}"))
    api.create(node("n"))
    api.compact("Pod", 4)
    with pytest.raises(Gone):
        api.watch("Pod", 3)
    assert _types(api.watch("Pod", 4)) == [("ADDED", 5), ("ADDED", 6)]
    # compaction never moves back, and is capped at the current RV
    api.compact("Pod", 2)
    with pytest.raises(Gone):
        api.watch("Pod", 3)
    api.compact("Node", 10**9)
    with pytest.raises(Gone):
        api.watch("Node", 6)
    assert api.watch("Node", 7, block_ms=0) == []
    # the informer's recovery: relist, then watch from the list RV
    lr = api.list("Pod")
    assert len(lr.items) == 6
    api.create(pod("after"))
    assert [e.object["metadata"]["name"] for e in api.watch("Pod", lr.resource_version)] == ["after"]


def test_corrupt_stream_entries_come_back_as_corrupt_events(api, redis_url, key_prefix):
    api.create(pod("p1"))                                   # rv 1
    r = redis.Redis.from_url(redis_url)
    skey = api.stream_key("Pod")
    r.incr(f"{key_prefix}:rv")                              # rv 2 taken by the injected entries
    r.xadd(skey, {"t": "ADDED", "o": b"\xc1\xc1garbage"}, id="2-0")
    r.incr(f"{key_prefix}:rv")
    r.xadd(skey, {"t": "WHATEVER", "o": b"\x80"}, id="3-0")
    r.incr(f"{key_prefix}:rv")
    r.xadd(skey, {"x": "y"}, id="4-0")
    r.incr(f"{key_prefix}:rv")
    r.xadd(skey, {"t": "MODIFIED", "o": b"\x93\x01\x02\x03"}, id="5-0")  # msgpack, not a map
    api.create(pod("p2"))                                   # rv 6
    ev = api.watch("Pod", 0)
    assert _types(ev) == [("ADDED", 1), ("CORRUPT", 2), ("CORRUPT", 3), ("CORRUPT", 4),
                          ("CORRUPT", 5), ("ADDED", 6)]
    assert all(e.error for e in ev if e.type == "CORRUPT")
    assert all(e.object is None for e in ev if e.type == "CORRUPT")
    assert ev[-1].object["metadata"]["name"] == "p2"


def test_watch_bad_arguments(api):
    with pytest.raises(BadRequest):
        api.watch("Pod", -1)
    with pytest.raises(BadRequest):
        api.watch("Pod", "12")
    with pytest.raises(BadRequest) as ei:
        api.watch("Dog", 0)
    assert ei.value.field == "kind"
