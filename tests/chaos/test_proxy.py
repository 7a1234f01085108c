"""partition through a real loopback TCP proxy in front of the real redis-server."""
from __future__ import annotations

import asyncio
import time

import pytest
import redis

from chaos.injectors.proxy import RedisProxy, ThreadedRedisProxy
from ha.runtime.retry import AsyncRetryingApiClient, RetryingApiClient
from cluster_state.aio import AsyncApiClient
from cluster_state.client import ApiClient

from .helpers import (NS, Recorder, api, caught_up, compact_history, eventually, informer,  # noqa: F401
                      informer_state, make_pod, server_state)


async def test_partitioned_informer_stops_receiving_then_catches_up(api, redis_url, key_prefix):
    proxy = await RedisProxy(redis_url, name="scheduler-1").start()
    assert proxy.url.startswith("redis://127.0.0.1:") and str(proxy.port) in proxy.url
    aapi = AsyncApiClient.from_url(proxy.url, prefix=key_prefix)
    inf = informer(aapi)
    try:
        async with inf:
            assert await inf.wait_for_sync(60)
            api.create(make_pod("before"))
            await caught_up(inf, api)
            cut = proxy.partition()
            assert cut >= 1
            for i in range(3):
                api.create(make_pod(f"during{i}"))
            # it keeps trying (watch errors, backoff) and receives nothing
            await eventually(lambda: inf.stats.watch_errors >= 2, 60, "failed watch attempts")
            await asyncio.sleep(0.3)
            assert inf.store.get("during0", NS) is None
            assert proxy.stats.refused >= 1
            proxy.heal()
            await caught_up(inf, api)
        assert informer_state(inf) == server_state(api)
        assert inf.stats.relists == 0          # history still had its RV: the watch resumed
    finally:
        await aapi.close()
        await proxy.stop()


async def test_partition_longer_than_history_relists_with_tombstones(api, redis_url, key_prefix):
    proxy = await RedisProxy(redis_url).start()
    aapi = AsyncApiClient.from_url(proxy.url, prefix=key_prefix)
    for i in range(3):
        api.create(make_pod(f"p{i}"))
    rec = Recorder()
    inf = informer(aapi)
    inf.add_event_handler(rec)
    try:
        async with inf:
            assert await inf.wait_for_sync(60)
            proxy.partition()
            api.delete("Pod", "p0", NS, grace_period_seconds=0)
            api.create(make_pod("new"))
            compact_history(api, ["Pod"])
            await eventually(lambda: inf.stats.watch_errors >= 1, 60, "a failed watch")
            proxy.heal()
            await eventually(lambda: inf.stats.relists >= 1, 60, "the relist")
            await caught_up(inf, api)
        assert inf.stats.gone >= 1
        assert [c[1][1] for c in rec.calls if c[0] == "delete" and c[4]] == ["p0"]
        assert informer_state(inf) == server_state(api)
    finally:
        await aapi.close()
        await proxy.stop()


def test_clients_retry_with_tenacity_through_a_partition(api, redis_url, key_prefix):
    proxy = ThreadedRedisProxy(redis_url, name="scheduler-1").start()
    raw = ApiClient.from_url(proxy.url, prefix=key_prefix)
    client = RetryingApiClient(raw, deadline_s=60, initial_s=0.02, max_wait_s=0.2)
    try:
        client.create(make_pod("a"))
        proxy.partition()
        # without retries the call fails at once ...
        with pytest.raises(redis.ConnectionError):
            raw.get("Pod", "a", NS)
        # ... with them it waits out the partition and succeeds once healed
        import threading
        threading.Timer(1.0, proxy.heal).start()
        t0 = time.monotonic()
        created = client.create(make_pod("b"))
        assert created["metadata"]["name"] == "b"
        assert time.monotonic() - t0 >= 0.9
        assert client.retry_stats.retries >= 1 and client.retry_stats.gave_up == 0
        assert api.get("Pod", "b", NS)["metadata"]["uid"] == created["metadata"]["uid"]
        # API errors are answers, not outages: never retried
        from cluster_state.errors import AlreadyExists
        n = client.retry_stats.retries
        with pytest.raises(AlreadyExists):
            client.create(make_pod("b"))
        assert client.retry_stats.retries == n
    finally:
        raw.close()
        proxy.stop()


def test_retry_gives_up_after_its_deadline(redis_url, key_prefix):
    proxy = ThreadedRedisProxy(redis_url).start()
    raw = ApiClient.from_url(proxy.url, prefix=key_prefix)
    client = RetryingApiClient(raw, deadline_s=0.5, initial_s=0.02, max_wait_s=0.1)
    try:
        proxy.partition()
        with pytest.raises(redis.ConnectionError):
            client.current_resource_version()
        assert client.retry_stats.gave_up == 1 and client.retry_stats.retries >= 1
    finally:
        raw.close()
        proxy.stop()


async def test_async_client_retries_and_proxy_latency(api, redis_url, key_prefix):
    proxy = await RedisProxy(redis_url).start()
    raw = AsyncApiClient.from_url(proxy.url, prefix=key_prefix)
    client = AsyncRetryingApiClient(raw, deadline_s=60, initial_s=0.02, max_wait_s=0.2)
    try:
        api.create(make_pod("x"))
        proxy.set_latency(0.15)
        t0 = time.monotonic()
        got = await client.get("Pod", "x", NS)
        assert got["metadata"]["name"] == "x"
        assert time.monotonic() - t0 >= 0.15 * 2 - 0.01     # request and reply each delayed
        assert proxy.stats.delayed_chunks >= 2
        proxy.set_latency(None)
        proxy.partition()
        asyncio.get_running_loop().call_later(0.8, proxy.heal)
        assert (await client.get("Pod", "x", NS))["metadata"]["name"] == "x"
        assert client.retry_stats.retries >= 1
    finally:
        await raw.close()
        await proxy.stop()


def test_proxy_rejects_non_redis_upstreams():
    with pytest.raises(ValueError, match="upstream"):
        RedisProxy("http://example.com")
