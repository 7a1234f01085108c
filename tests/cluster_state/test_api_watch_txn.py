"""The watch read (MULTI/EXEC of compaction marker + XRANGE + current RV): under concurrent writers
a watcher that follows events and bookmarks never skips an event, and Gone is still raised."""
from __future__ import annotations

import threading
import time

import pytest
import redis
from redis.exceptions import ResponseError

from cluster_state.client import ApiClient
from cluster_state.errors import Gone

from .helpers import node, pod


def _writer(url: str, prefix: str, tag: str, n: int, errors: list, history: int = 100_000) -> None:
    api = ApiClient.from_url(url, prefix, history=history)   # writers trim the history
    try:
        for i in range(n):
            api.create(pod(f"{tag}-{i}"))
            if i % 3 == 0:
                api.create(node(f"{tag}-n{i}"))          # other kinds move the global RV too
            if i % 2 == 0:
                api.patch_annotations("Pod", f"{tag}-{i}", "default", {"k": str(i)})
    except Exception as e:  # noqa: BLE001
        errors.append(e)
    finally:
        api.close()


def test_watch_under_concurrent_writers_never_skips(redis_url, key_prefix):
    watcher = ApiClient.from_url(redis_url, key_prefix)
    errors: list = []
    writers = [threading.Thread(target=_writer, args=(redis_url, key_prefix, f"w{k}", 60, errors))
               for k in range(3)]
    for t in writers:
        t.start()
    seen: list[int] = []
    bookmarks: list[tuple[int, int]] = []   # (rv before, bookmark rv)
    rv = 0
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        evs = watcher.watch("Pod", rv, block_ms=50, count=7)   # small pages: many reads mid-write
        for e in evs:
            assert e.resource_version > rv
            if e.type == "BOOKMARK":
                bookmarks.append((rv, e.resource_version))
            else:
                assert e.type in ("ADDED", "MODIFIED") and e.object["metadata"]["resourceVersion"] == e.resource_version
                seen.append(e.resource_version)
            rv = e.resource_version
        if not any(t.is_alive() for t in writers) and not evs:
            break
    for t in writers:
        t.join()
    assert not errors
    # drain
    while True:
        evs = watcher.watch("Pod", rv, block_ms=0)
        if not evs:
            break
        for e in evs:
            if e.type != "BOOKMARK":
                seen.append(e.resource_version)
            rv = e.resource_version
    r = redis.Redis.from_url(redis_url)
    all_pod_rvs = [int(i.split(b"-")[0]) for i, _ in r.xrange(watcher.stream_key("Pod"))]
    r.close()
    assert seen == all_pod_rvs and len(seen) == 3 * (60 + 30)   # every event, in order, once
    # no bookmark ever jumped over a Pod event
    for before, bm in bookmarks:
        assert not [x for x in all_pod_rvs if before < x <= bm]
    watcher.close()


def test_watch_gone_while_writers_run(redis_url, key_prefix):
    api = ApiClient.from_url(redis_url, key_prefix, history=20)
    errors: list = []
    t = threading.Thread(target=_writer, args=(redis_url, key_prefix, "g", 80, errors, 20))
    t.start()
    t.join()
    assert not errors
    # history of 20 with ~2x as many Pod events: old RVs are Gone, recent ones are not
    with pytest.raises(Gone) as ei:
        api.watch("Pod", 1, block_ms=0)
    c = ei.value.details["compacted"]
    evs = api.watch("Pod", c, block_ms=0, count=10_000)
    assert evs and evs[0].resource_version > c
    # an explicit compaction past a watcher's RV: Gone on its next read, even with block_ms
    last = evs[-1].resource_version
    api.compact("Pod", last)
    with pytest.raises(Gone):
        api.watch("Pod", last - 1, block_ms=200)
    assert all(e.type == "BOOKMARK" for e in api.watch("Pod", last, block_ms=0))
    api.close()


def test_watch_error_reply_keeps_the_connection_usable(redis_url, key_prefix):
    api = ApiClient.from_url(redis_url, key_prefix)
    api.create(pod("p"))
    r = redis.Redis.from_url(redis_url)
    r.delete(api.stream_key("Pod"))
    r.set(api.stream_key("Pod"), b"not a stream")      # XRANGE inside EXEC -> WRONGTYPE
    with pytest.raises(ResponseError):
        api.watch("Pod", 0, block_ms=0)
    r.delete(api.stream_key("Pod"))
    r.close()
    # the same (held) connection still answers in step
    assert api.get("Pod", "p", "default")["metadata"]["name"] == "p"
    assert api.watch("Pod", 0, block_ms=0)[0].type == "BOOKMARK"
    api.close()


def test_async_watch_txn_and_gone(redis_url, key_prefix):
    import asyncio

    from cluster_state.aio import AsyncApiClient

    async def main():
        c = AsyncApiClient.from_url(redis_url, key_prefix)
        try:
            for i in range(5):
                await c.create(pod(f"p{i}"))
            evs = await c.watch("Pod", 2, block_ms=0)
            await c.compact("Pod", 4)
            try:
                await c.watch("Pod", 3, block_ms=0)
                gone = False
            except Gone:
                gone = True
            return [e.resource_version for e in evs], gone
        finally:
            await c.close()

    rvs, gone = asyncio.run(main())
    assert rvs == [3, 4, 5] and gone
