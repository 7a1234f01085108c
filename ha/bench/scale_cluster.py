"""The cluster ``bench scale`` measures, in one place for its two forms (the living cluster,
``scale.py``; the model alone in one process, ``scale_model.py``): its sizes, the node shape, the
requests and the bound and pending jobs; creating them (``setup``), the window's arrivals
(``start_arrival_cluster``) and the teardown (``stop_actors``), shared with the vc-scheduler form
(``scale_volcano.py``)."""
from __future__ import annotations

import multiprocessing as mp
import time
from dataclasses import dataclass

__all__ = ["setup", "start_arrival_cluster", "stop_actors", "Sizes", "FULL", "QUICK", "NS", "NODE", "BOUND_REQUEST", "PENDING_REQUEST", "ARRIVAL_REQUEST",
           "bound_job", "pending_job"]

NS = "default"


@dataclass(frozen=True)
class Sizes:
    nodes: int
    bound: int                 # bound (Running) pods at the start
    pending: int               # pending pods (gangs of ``gang``) that fit nowhere
    gang: int = 10
    instances: int = 3
    baseline_window_s: float = 15.0
    window_s: float = 60.0
    rate_gangs_per_s: float = 8.0    # the living cluster's arrivals: gangs of 1-4 small pods
    period_s: float = 1.0
    creators: int = 2               # processes creating the starting objects
    min_sessions: int = 3           # a window lasts until the leader ran this many sessions ...
    max_window_s: float = 240.0     # ... or this long
    # Volcano's own default (util.go DefaultSchedulerConf), not the testbed's experiment default
    # (which adds preempt and reclaim: see BENCHMARKS.md for why they are left out here)
    actions: tuple[str, ...] = ("enqueue", "allocate", "backfill")


FULL = Sizes(nodes=5000, bound=99_000, pending=1000)
QUICK = Sizes(nodes=100, bound=1900, pending=100, baseline_window_s=3.0, window_s=6.0,
              rate_gangs_per_s=4.0, min_sessions=2, max_window_s=60.0)

NODE = {"cpu": 32, "memory": "256Gi", "pods": 110}
BOUND_REQUEST = {"cpu": "1500m", "memory": "4Gi"}
PENDING_REQUEST = {"cpu": "4", "memory": "4Gi"}
ARRIVAL_REQUEST = {"cpu": "250m", "memory": "512Mi"}


def bound_job(j: int, sz: Sizes) -> tuple[dict, list[dict]]:
    """Job ``j`` of the bound (Running) pods: a Running PodGroup and its pods, each on a node."""
    from ha.runtime.workload import RUNTIME_ANNOTATION, pod_object, podgroup_object
    name = f"run-{j:05d}"
    pg = podgroup_object(name, NS, min_member=sz.gang, queue="default")
    pg["status"].update({"phase": "Running", "running": sz.gang})
    pods = []
    for k in range(sz.gang):
        i = j * sz.gang + k
        if i >= sz.bound:
            break
        p = pod_object(f"{name}-{k}", NS, job=name, request=BOUND_REQUEST, runtime_ms=0)
        del p["metadata"]["annotations"][RUNTIME_ANNOTATION]   # runs until deleted
        p["spec"]["nodeName"] = f"node-{i % sz.nodes + 1}"
        p["status"]["phase"] = "Running"
        pods.append(p)
    return pg, pods


def pending_job(j: int, sz: Sizes) -> tuple[dict, list[dict]]:
    """Pending gang ``j``: a PodGroup of ``sz.gang`` pods that fit nowhere."""
    from ha.runtime.workload import pod_object, podgroup_object
    name = f"pend-{j:04d}"
    pg = podgroup_object(name, NS, min_member=sz.gang, queue="default")
    pods = [pod_object(f"{name}-{k}", NS, job=name, request=PENDING_REQUEST, runtime_ms=60_000)
            for k in range(sz.gang)]
    return pg, pods


def start_arrival_cluster(url: str, prefix: str, sz: Sizes, name: str) -> object:
    """The living cluster of the window (kubelet, job controller, and small gangs arriving at the
    size's rate, which fit), started as a Ray actor named ``name``; returns once it has listed the
    pods and acted on them once (its steady state), or raises after 300 s."""
    import ray

    from ha.runtime.cluster import ClusterConfig, create_cluster_actor
    from ha.runtime.controller import ControllerConfig
    from ha.runtime.kubelet import KubeletConfig
    from ha.runtime.workload import WorkloadConfig
    wl = WorkloadConfig(rate_per_s=sz.rate_gangs_per_s, arrivals="poisson", gang_size=(1, 4),
                        runtime_s=(5.0, 20.0), queues=("default",), request=ARRIVAL_REQUEST,
                        duration_s=sz.max_window_s + 360.0, name_prefix="arrival")
    cluster = create_cluster_actor(
        ClusterConfig(redis_url=url, prefix=prefix, seed=1, workload=wl,
                      kubelet=KubeletConfig(tick_s=1.0), controller=ControllerConfig(tick_s=1.0)),
        name=name, max_restarts=0)
    ray.get(cluster.start.remote(), timeout=300)
    if not ray.get(cluster.wait_world_ready.remote(300.0), timeout=330):
        raise RuntimeError("the living cluster did not list and act on the pods within 300 s")
    return cluster


def stop_actors(cluster: object | None, instances: list, others: list) -> None:
    """Tears a scale run's actors down: the cluster actor stopped first (no more arrivals), then
    every instance asked to stop together, then all of them killed (an actor that is already gone
    is no error while tearing down)."""
    import ray
    if cluster is not None:
        try:
            ray.get(cluster.stop.remote(), timeout=60)
        except Exception:  # noqa: BLE001 - tearing down
            pass
    stops = [a.stop.remote() for a in instances]
    if stops:
        ray.wait(stops, num_returns=len(stops), timeout=60)
    for a in list(instances) + list(others) + [cluster]:
        if a is not None:
            try:
                ray.kill(a, no_restart=True)
            except Exception:  # noqa: BLE001
                pass


def _create_slice(url: str, prefix: str, sz: Sizes, part: int, parts: int, conn) -> None:
    """Creator process: nodes, bound jobs and pending pods whose index falls in this part."""
    from cluster_state.client import ApiClient
    from ha.experiment.objects import cluster_node
    api = ApiClient.from_url(url, prefix=prefix)
    try:
        for i in range(part, sz.nodes, parts):
            api.create(cluster_node(f"node-{i + 1}", NODE, {}))
        for j in range(part, -(-sz.bound // sz.gang), parts):
            pg, pods = bound_job(j, sz)
            api.create(pg)
            for p in pods:
                api.create(p)
        for j in range(part, sz.pending // sz.gang, parts):
            for p in pending_job(j, sz)[1]:      # PodGroups later (after the baseline window)
                api.create(p)
        conn.send(("ok", None))
    except Exception as e:  # noqa: BLE001 - reported to the parent
        conn.send(("error", repr(e)))
    finally:
        api.close()
        conn.close()


def setup(url: str, prefix: str, sz: Sizes) -> float:
    """Create the starting objects (in ``sz.creators`` processes); returns the seconds it took."""
    from cluster_state.client import ApiClient
    from ha.experiment.objects import queue
    api = ApiClient.from_url(url, prefix=prefix)
    api.create(queue("default"))
    api.close()
    t0 = time.perf_counter()
    ctx = mp.get_context("spawn")
    procs = []
    for part in range(sz.creators):
        parent, child = ctx.Pipe(duplex=False)
        p = ctx.Process(target=_create_slice, args=(url, prefix, sz, part, sz.creators, child),
                        daemon=True)
        p.start()
        procs.append((p, parent))
    errors = []
    for p, parent in procs:
        status, err = parent.recv()
        p.join(timeout=60)
        if status != "ok":
            errors.append(err)
    if errors:
        raise RuntimeError(f"creating the starting objects: {errors[0]}")
    return time.perf_counter() - t0
