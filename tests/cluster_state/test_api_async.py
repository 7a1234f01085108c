"""AsyncApiClient over redis.asyncio: the same operations, the same semantics."""
from __future__ import annotations

import asyncio

import pytest

from cluster_state.aio import AsyncApiClient
from cluster_state.client import ApiClient
from cluster_state.errors import AlreadyExists, ApiError, Conflict, Gone, Invalid, NotFound

from .helpers import node, pod, queue


@pytest.fixture
async def aapi(redis_url, key_prefix):
    c = AsyncApiClient.from_url(redis_url, key_prefix)   # created on the running (session) loop
    yield c
    await c.close()


async def test_async_crud_and_watch(aapi):
    p = await aapi.create(pod("p1"))
    assert p["metadata"]["resourceVersion"] == 1
    with pytest.raises(AlreadyExists):
        await aapi.create(pod("p1"))
    assert await aapi.get("Pod", "p1", "default") == p
    p2 = await aapi.update(dict(p, spec=dict(p["spec"], priority=4)))
    assert p2["spec"]["priority"] == 4
    with pytest.raises(Conflict):
        await aapi.update(p)
    p3 = await aapi.update_status(dict(p2, status={"phase": "Pending", "nominatedNodeName": "n1"}))
    assert p3["status"]["nominatedNodeName"] == "n1" and p3["spec"]["priority"] == 4
    lr = await aapi.list("Pod")
    assert [x["metadata"]["name"] for x in lr.items] == ["p1"] and lr.resource_version == 3
    ev = await aapi.watch("Pod", 0)
    assert [(e.type, e.resource_version) for e in ev] == [("ADDED", 1), ("MODIFIED", 2), ("MODIFIED", 3)]
    await aapi.create(node("n1"))
    assert [e.type for e in await aapi.watch("Pod", 3, block_ms=30)] == ["BOOKMARK"]
    last = await aapi.delete("Pod", "p1", "default", grace_period_seconds=0)
    assert last["metadata"]["resourceVersion"] == 5
    with pytest.raises(NotFound):
        await aapi.get("Pod", "p1", "default")
    assert await aapi.current_resource_version() == 5


async def test_async_subresources(redis_url, key_prefix):
    c = AsyncApiClient.from_url(redis_url, key_prefix, clear_nnn_on_binding=True)
    try:
        for i in range(3):
            await c.create(pod(f"p{i}"))
        await c.update_status(dict(await c.get("Pod", "p0", "default"),
                                   status={"phase": "Pending", "nominatedNodeName": "n9"}))
        b = await c.bind("default", "p0", "n1")
        assert b["spec"]["nodeName"] == "n1" and b["status"]["nominatedNodeName"] == ""
        res = await c.bind_many([("default", "p1", "n1"), ("default", "p0", "n2"), ("default", "zz", "n1")])
        assert res[0]["spec"]["nodeName"] == "n1"
        assert isinstance(res[1], Conflict) and isinstance(res[2], NotFound)
        a = await c.patch_annotations("Pod", "p2", "default", {"x": "1"})
        assert a["metadata"]["annotations"]["x"] == "1"
        e = await c.evict("default", "p2", grace_period_seconds=1)
        assert e["metadata"]["deletionGracePeriodSeconds"] == 1
        assert await c.finalize_deletions(now=e["metadata"]["deletionTimestamp"] + 0.1) == 1
        with pytest.raises(Invalid):
            await c.create({"kind": "Queue", "metadata": {"name": "q"}, "spec": {"weight": "heavy"}})
    finally:
        await c.close()


async def test_async_gone_after_compact(aapi):
    for i in range(4):
        await aapi.create(queue(f"q{i}"))
    await aapi.compact("Queue", 3)
    with pytest.raises(Gone):
        await aapi.watch("Queue", 1)
    assert [e.resource_version for e in await aapi.watch("Queue", 3)] == [4]


async def test_async_blocking_watch_does_not_block_the_loop(aapi, redis_url, key_prefix):
    """A watch blocked in XREAD lets other coroutines run; a concurrent create wakes it."""
    other = AsyncApiClient.from_url(redis_url, key_prefix)

    async def later():
        await asyncio.sleep(0.1)
        return await other.create(pod("late"))

    ev, created = await asyncio.wait_for(asyncio.gather(aapi.watch("Pod", 0, block_ms=20_000), later()), 30)
    assert [e.object["metadata"]["name"] for e in ev] == ["late"]
    assert created["metadata"]["resourceVersion"] == 1
    await other.close()


async def test_async_racing_updates_one_winner(aapi, redis_url, key_prefix):
    base = await aapi.create(queue("q"))
    clients = [AsyncApiClient.from_url(redis_url, key_prefix) for _ in range(6)]
    res = await asyncio.gather(*[c.update(dict(base, spec={"weight": 10 + i})) for i, c in enumerate(clients)],
                               return_exceptions=True)
    assert sum(isinstance(r, dict) for r in res) == 1
    assert sum(isinstance(r, Conflict) for r in res) == 5
    for c in clients:
        await c.close()


async def test_sync_and_async_clients_see_the_same_store(aapi, redis_url, key_prefix):
    s = ApiClient.from_url(redis_url, key_prefix)
    created = s.create(node("n1"))
    assert await aapi.get("Node", "n1") == created
    a = await aapi.create(node("n2"))
    assert s.get("Node", "n2") == a
    assert isinstance(await aapi.bind_many([("default", "x", "n1")]), list)
    with pytest.raises(ApiError):
        await aapi.get("Node", "n3")
