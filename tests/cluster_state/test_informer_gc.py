"""Informer(gc_threshold=...) applies the process's GC thresholds at start (and only then)."""
from __future__ import annotations

import asyncio
import gc

from cluster_state.aio import AsyncApiClient
from cluster_state.informer import INSTANCE_GC_THRESHOLD, Informer

from .helpers import pod


def test_gc_threshold_option(redis_url, key_prefix):
    saved = gc.get_threshold()

    async def main():
        c = AsyncApiClient.from_url(redis_url, key_prefix)
        await c.create(pod("p1"))
        inf = Informer(c, "Pod", gc_threshold=(12_345, 11, 12), block_ms=100)
        assert gc.get_threshold() == saved          # nothing happens before start()
        await inf.start()
        try:
            assert await inf.wait_for_sync(30)
            assert gc.get_threshold() == (12_345, 11, 12)
            assert [o["metadata"]["name"] for o in inf.store.list()] == ["p1"]
        finally:
            await inf.stop()
            await c.close()

    try:
        asyncio.run(main())
    finally:
        gc.set_threshold(*saved)
    assert len(INSTANCE_GC_THRESHOLD) == 3 and INSTANCE_GC_THRESHOLD[0] > saved[0]
