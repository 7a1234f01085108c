"""InstanceConfig.gc_tuning: a scheduler instance's informers run with
cluster_state.informer.instance_gc_options() in a Ray actor (its own process) and with CPython's
defaults in-process, unless the config says otherwise; stopping the instance unfreezes the heap."""
from __future__ import annotations

import asyncio
import gc

import pytest

from cluster_state.informer import instance_gc_options
from ha.errors import BadInput
from ha.runtime.instance import SchedulerInstance

from .instance_helpers import instance_config, wait_for


def test_an_unknown_gc_tuning_is_rejected():
    with pytest.raises(BadInput, match="scheduler-1: gc_tuning must be auto, instance or default"):
        instance_config("scheduler-1", "redis://127.0.0.1:1", "p", gc_tuning="fast")


@pytest.mark.parametrize("tuning,own_process,tuned", [
    ("auto", False, False), ("auto", True, True), ("instance", False, True), ("default", True, False)])
def test_gc_tuning_reaches_the_informers(redis_url, key_prefix, tuning, own_process, tuned):
    cls = type("Instance", (SchedulerInstance,), {"own_process": own_process})
    saved = gc.get_threshold()
    opts = instance_gc_options()

    async def main():
        inst = cls(instance_config("scheduler-1", redis_url, key_prefix, gc_tuning=tuning,
                                   mode="active-active"))
        await inst.start()
        try:
            infs = list(inst.informers.values())
            assert infs and await wait_for(lambda: all(i.has_synced() for i in infs))
            for i in infs:
                assert i.freeze_gc_on_sync is tuned
                assert (i.gc_refreeze_every == opts["gc_refreeze_every"]) is tuned
                assert (i.gc_threshold == tuple(opts["gc_threshold"])) is tuned
            assert (gc.get_freeze_count() > 0) is tuned
            assert (await inst.stats())["gc_tuning"] == ("instance" if tuned else "default")
        finally:
            await inst.stop()
        assert gc.get_freeze_count() == 0

    gc.unfreeze()
    try:
        asyncio.run(main())
    finally:
        gc.set_threshold(*saved)
        gc.unfreeze()
