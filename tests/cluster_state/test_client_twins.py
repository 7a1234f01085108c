"""The sync and async clients expose the same operations, each defined once in Store."""
from __future__ import annotations

import inspect

from cluster_state.aio import AsyncApiClient
from cluster_state.client import ApiClient
from cluster_state.store import API_OPS, Store


def test_both_clients_expose_every_store_operation_with_its_signature():
    for name in API_OPS:
        want = inspect.signature(getattr(Store, name))
        for cls in (ApiClient, AsyncApiClient):
            method = getattr(cls, name)
            assert inspect.signature(method) == want, (cls.__name__, name)
            assert method.__doc__ == getattr(Store, name).__doc__
        assert inspect.iscoroutinefunction(getattr(AsyncApiClient, name)), name
        assert not inspect.iscoroutinefunction(getattr(ApiClient, name)), name
    # watch is written out in each client (its read path is tuned there), with the same options
    assert inspect.signature(ApiClient.watch) == inspect.signature(AsyncApiClient.watch)


async def test_the_generated_methods_forward_positional_and_keyword_arguments(redis_url, key_prefix):
    from .helpers import pod
    s = ApiClient.from_url(redis_url, key_prefix)
    a = AsyncApiClient.from_url(redis_url, key_prefix)
    try:
        s.create(pod("p1", ns="x"))
        await a.create(pod("p2", ns="y"))
        assert [o["metadata"]["name"] for o in (await a.list("Pod", "x")).items] == ["p1"]
        assert [o["metadata"]["name"] for o in s.list("Pod", namespace="y").items] == ["p2"]
        gone = await a.delete("Pod", "p1", "x", grace_period_seconds=0)
        assert gone["metadata"]["name"] == "p1" and s.current_resource_version() == 3
    finally:
        s.close()
        await a.close()
