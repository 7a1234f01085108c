"""``ha-testbed bench e2e``: pending → bound pods per second through the whole system.

A scheduler instance (the same class the Ray actor wraps, run in-process here so that Ray's own
processes do not compete for the 2 cores) with its informers and sessions, against the API server on
an embedded Redis, with 1,000 nodes. Gangs of pods are created while the instance runs; the figure
is pods / (last successful bind − first create). Everything is on the path: API writes, watch
streams, informers, the cache, sessions (enqueue, allocate, …), binds.

Baseline, same run, same Redis: the API server's raw bind throughput — ``bind_many`` of the same
pods onto the same nodes in batches, no scheduler. The ratio says how much of the API server's bind
capacity the whole scheduling loop achieves. Target: ≥ 1,000 pods/s.
"""
from __future__ import annotations

import asyncio
import os
import sys
import multiprocessing
import time
import uuid

from ha.bench import BenchResult
from cluster_state.timeouts import wait_for

N_NODES = 1000
GANG = 10
BIND_BATCH = 100
VERBOSE = bool(os.environ.get("HA_BENCH_VERBOSE"))


def _nodes(n: int) -> list[dict]:
    from ha.experiment.objects import cluster_node
    return [cluster_node(f"node-{i}", {"cpu": 32, "memory": "128Gi", "pods": 110}, {})
            for i in range(1, n + 1)]


def _gangs(n_pods: int, gang: int) -> list[tuple[dict, list[dict]]]:
    from ha.runtime.workload import pod_object, podgroup_object
    out = []
    for j in range(n_pods // gang):
        name = f"job-{j:05d}"
        pg = podgroup_object(name, "default", min_member=gang, queue="default")
        pods = [pod_object(f"{name}-{k}", "default", job=name,
                           request={"cpu": "100m", "memory": "128Mi"}, runtime_ms=600_000)
                for k in range(gang)]
        out.append((pg, pods))
    return out


def _setup(api, n_nodes: int) -> None:
    from ha.experiment.objects import queue
    api.create(queue("default"))
    for node in _nodes(n_nodes):
        api.create(node)


def _create_all(url: str, prefix: str, gangs: list, conn) -> None:
    """Workload process: create every PodGroup and pod; report start/end times (system-wide
    monotonic clock) or the error through ``conn``."""
    from cluster_state.client import ApiClient
    c = ApiClient.from_url(url, prefix=prefix)
    try:
        conn.send(("t0", time.monotonic()))
        for pg, pods in gangs:
            c.create(pg)
            for p in pods:
                c.create(p)
        conn.send(("t1", time.monotonic()))
    except Exception as e:  # noqa: BLE001 - reported to the parent
        conn.send(("error", repr(e)))
    finally:
        c.close()
        conn.close()


def raw_bind_throughput(url: str, n_nodes: int, n_pods: int, gang: int = GANG) -> float:
    """Pods bound per second by ``bind_many`` alone (the API server's ceiling)."""
    from cluster_state.client import ApiClient
    api = ApiClient.from_url(url, prefix=f"bench-e2e-raw-{uuid.uuid4().hex[:6]}")
    try:
        _setup(api, n_nodes)
        keys = []
        for pg, pods in _gangs(n_pods, gang):
            api.create(pg)
            for p in pods:
                api.create(p)
                keys.append(p["metadata"]["name"])
        bindings = [("default", name, f"node-{i % n_nodes + 1}") for i, name in enumerate(keys)]
        t0 = time.perf_counter()
        for i in range(0, len(bindings), BIND_BATCH):
            results = api.bind_many(bindings[i:i + BIND_BATCH])
            bad = [r for r in results if isinstance(r, Exception)]
            if bad:
                raise RuntimeError(f"raw bind failed: {bad[0]}")
        return len(bindings) / (time.perf_counter() - t0)
    finally:
        api.close()


async def _e2e(url: str, n_nodes: int, n_pods: int, gang: int, timeout_s: float) -> dict:
    from cluster_state.client import ApiClient
    from ha.runtime.instance import InstanceConfig, SchedulerInstance
    prefix = f"bench-e2e-{uuid.uuid4().hex[:6]}"
    api = ApiClient.from_url(url, prefix=prefix)
    _setup(api, n_nodes)
    inst = SchedulerInstance(InstanceConfig(name="scheduler-1", redis_url=url, prefix=prefix,
                                            mode="active-active", period_s=0.05, profile="v1.14"))
    await inst.start()
    try:
        deadline = time.monotonic() + timeout_s
        while len((await inst.digest()).get("nodes") or {}) < n_nodes:
            if time.monotonic() > deadline:
                raise RuntimeError("the instance did not see the nodes in time")
            await asyncio.sleep(0.05)
        gangs = _gangs(n_pods, gang)
        # the workload comes from another process, as the workload generator does in a run: a
        # thread here would share the GIL with the scheduler and cap the figure at its own rate
        ctx = multiprocessing.get_context("spawn")
        parent_end, child_end = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_create_all, args=(url, prefix, gangs, child_end), daemon=True)
        proc.start()
        created = {"t0": None, "t1": None, "error": None}

        def poll_creator() -> None:
            while parent_end.poll():
                key, value = parent_end.recv()
                created[key] = value

        while created["t0"] is None and created["error"] is None:
            poll_creator()
            if time.monotonic() > deadline:
                raise RuntimeError("the workload process did not start in time")
            await asyncio.sleep(0.001)
        binds = 0
        next_note = 0.0
        while True:
            st = await inst.stats()
            binds = int(st.get("binds") or 0)
            if VERBOSE and time.monotonic() >= next_note:
                next_note = time.monotonic() + 1.0
                print(f"e2e: {binds}/{n_pods} bound, sessions {st.get('sessions')}, last session "
                      f"{st.get('last_session_ms')} ms, errors {st.get('errors')} {st.get('last_error')}",
                      file=sys.stderr, flush=True)
            if binds >= n_pods:
                t_end = time.monotonic()
                break
            poll_creator()
            if created["error"] is not None:
                raise RuntimeError(f"creating pods: {created['error']}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {binds}/{n_pods} pods bound within {timeout_s:g}s")
            await asyncio.sleep(0.01)
        proc.join(timeout=30)
        poll_creator()
        # the API server's truth agrees
        bound = sum(1 for p in api.list("Pod").items if (p.get("spec") or {}).get("nodeName"))
        if bound != n_pods:
            raise RuntimeError(f"instance reports {binds} binds but the API server has {bound} bound pods")
        elapsed = t_end - created["t0"]
        return {"pods_per_s": n_pods / elapsed, "elapsed_s": elapsed,
                "create_per_s": n_pods / (created["t1"] - created["t0"]),
                "sessions": st.get("sessions"), "bind_conflicts": st.get("bind_conflicts"),
                "last_session_ms": st.get("last_session_ms")}
    finally:
        try:
            await wait_for(inst.stop(), 30)
        except asyncio.TimeoutError:   # a stuck stop must not hang the benchmark
            print("e2e: the instance did not stop within 30 s", file=sys.stderr)
        api.close()


def run(quick: bool) -> BenchResult:
    from cluster_state.embedded import EmbeddedRedis
    n_pods = 1000 if quick else 5000
    with EmbeddedRedis() as server:
        baseline = raw_bind_throughput(server.url, N_NODES, n_pods)
        e2e = asyncio.run(_e2e(server.url, N_NODES, n_pods, GANG, timeout_s=300.0))
    value = e2e["pods_per_s"]
    params = {"nodes": N_NODES, "pods": n_pods, "gang_size": GANG, "bind_batch_baseline": BIND_BATCH,
              "profile": "v1.14", "mode": "active-active (1 instance, in-process)", "period_s": 0.05,
              "elapsed_s": round(e2e["elapsed_s"], 3), "sessions": e2e["sessions"],
              "last_session_ms": e2e["last_session_ms"], "bind_conflicts": e2e["bind_conflicts"],
              "target_pods_per_s": 1000}
    extra = [{"name": "e2e-create", "value": e2e["create_per_s"], "unit": "pods/s", "baseline": None,
              "ratio": None, "params": {"what": "pod + podgroup creates while the scheduler runs"}}]
    return BenchResult(name="e2e", value=value, unit="pods/s", baseline=baseline,
                       ratio=value / baseline if baseline else None, params=params, extra=extra)
