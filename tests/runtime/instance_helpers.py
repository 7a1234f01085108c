"""Helpers of the in-process scheduler-instance tests (test_instance*.py)."""
from __future__ import annotations

import asyncio
import time

from ha.runtime.instance import InstanceConfig
from ha.runtime.workload import WorkloadConfig, WorkloadGenerator

LEASE = dict(lease_duration=1.5, lease_renew_deadline=1.0, lease_retry=0.2)  # short terms


def instance_config(name, redis_url, prefix, **kw) -> InstanceConfig:
    base = dict(name=name, redis_url=redis_url, prefix=prefix, period_s=0.3, **LEASE)
    base.update(kw)
    return InstanceConfig(**base)


async def wait_for(pred, timeout=60.0, step=0.05) -> bool:
    """Poll ``pred`` (sync or async) until it is truthy; False after ``timeout`` (generous: the
    machine is loaded)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = pred()
        if asyncio.iscoroutine(r):
            r = await r
        if r:
            return True
        await asyncio.sleep(step)
    return False


def create_jobs(api, n_jobs=3, size=2, seed=0, prefix="job") -> list[str]:
    """``n_jobs`` gangs of ``size`` pods (PodGroups and Pods); the pod names."""
    wl = WorkloadConfig(rate_per_s=100.0, gang_size=(size, size), runtime_s=(60, 60), max_gangs=n_jobs,
                        duration_s=100.0, name_prefix=prefix)
    gen = WorkloadGenerator(wl, seed)
    names = []
    for job in gen.plan():
        pg, pods = gen.objects(job)
        api.create(pg)
        for p in pods:
            api.create(p)
            names.append(p["metadata"]["name"])
    return names


def bound_nodes(api) -> dict[str, str | None]:
    """pod name -> the node the API server has it bound to (None: not bound)."""
    return {p["metadata"]["name"]: p["spec"].get("nodeName") for p in api.list("Pod").items}
