"""The "cluster" actor: the world the schedulers act on — a hollow kubelet for all nodes, the job
controller and the workload generator, as asyncio tasks sharing one API client and one Pod mirror.

Why one actor (and not three, nor the driver): they are cheap I/O loops that need the same view of
Pods, so one process with one list+watch is the least load on a 2-core machine (≈ 70 MiB per Ray
worker process); keeping them out of the driver leaves the driver free to measure and inject chaos
on its own schedule, and a slow measurement tick cannot stall pod lifecycles. The same class runs
in-process (``ClusterSim``) for tests and for drivers that prefer it.
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import asdict, dataclass, field
from typing import Any

from cluster_state.apiserver import ApiServerConfig
from ha.runtime.controller import ControllerConfig, JobController
from ha.runtime.kubelet import Kubelet, KubeletConfig
from ha.runtime.mirror import KindMirror
from ha.runtime.tasks import cancel_and_wait
from ha.runtime.workload import WorkloadConfig, WorkloadGenerator
from cluster_state.timeouts import wait_for

__all__ = ["ClusterConfig", "ClusterSim", "create_cluster_actor"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ClusterConfig:
    redis_url: str
    prefix: str = "ht"
    seed: int = 0
    kubelet: KubeletConfig = field(default_factory=KubeletConfig)
    controller: ControllerConfig = field(default_factory=ControllerConfig)
    workload: WorkloadConfig | None = None
    stamp_write_time: bool = True     # put the wall time into ha-testbed/write-time on creates
    retry_outages_s: float = 0.0      # > 0: API calls retry across Redis outages (redis-restart)
    # the run's API server configuration (ha.runtime.apiserver.api_server_config(exp)): the
    # kubelet, controller and workload share one client built under it
    api_server: ApiServerConfig = field(default_factory=ApiServerConfig)


class ClusterSim:
    """``env`` (``ha.runtime.environment``): the world's clock and API client (default live: the
    wall clock at rate 1 — the clock-rate fault acts on schedulers, not on the world)."""

    def __init__(self, config: ClusterConfig, *, api=None, env=None):
        from ha.runtime.environment import LiveEnvironment
        self.config = config
        self.env = env if env is not None else LiveEnvironment()
        self.clock = self.env.clock
        self._api = api
        self._own_api = api is None
        self.kubelet: Kubelet | None = None
        self.controller: JobController | None = None
        self._tasks: list[asyncio.Task] = []
        self._stopping = False
        self.created_jobs = 0
        self.created_pods = 0
        self.create_errors = 0
        self.workload_done: asyncio.Event | None = None  # created on the running loop in start()
        self.world_ready: asyncio.Event | None = None    # the first pass of the world loop is done
        self._t0: float | None = None

    async def _client(self):
        if self._api is None:
            self._api = self.env.api_clients(self.config.api_server, self.config.redis_url,
                                             self.config.prefix)[0]
            if self.config.retry_outages_s > 0:
                from ha.runtime.retry import AsyncRetryingApiClient
                self._api = AsyncRetryingApiClient(self._api, deadline_s=self.config.retry_outages_s)
        return self._api

    async def start(self) -> None:
        if self._tasks:
            return
        self._stopping = False
        api = await self._client()
        self.workload_done = asyncio.Event()
        self.world_ready = asyncio.Event()
        pods = KindMirror(api, "Pod")
        pgs = KindMirror(api, "PodGroup")
        nodes = KindMirror(api, "Node")
        self._pods, self._pgs, self._nodes = pods, pgs, nodes
        self.kubelet = Kubelet(api, self.config.kubelet, pods=pods, nodes=nodes,
                               now=self.clock.monotonic, wall=self.clock.now)
        self.controller = JobController(api, self.config.controller, pods=pods, podgroups=pgs,
                                        wall=self.clock.now)
        self._t0 = self.clock.monotonic()
        self._tasks = [asyncio.create_task(self._world_loop(), name="cluster-world")]
        if self.config.workload is not None:
            self._tasks.append(asyncio.create_task(self._workload_loop(), name="cluster-workload"))
        else:
            self.workload_done.set()

    async def stop(self, timeout: float = 30.0) -> None:
        """Cancel the loops and wait for them. A cancel can be swallowed (Python 3.11: one landing
        while redis.asyncio's blocking read times out comes back as a TimeoutError, which the world
        loop would count and go on from), so the loops also stop at a flag and the cancel is
        repeated each second until ``timeout``."""
        self._stopping = True
        tasks, self._tasks = self._tasks, []
        stuck = await cancel_and_wait(tasks, timeout, what="cluster task")
        if stuck:
            log.warning("cluster: %s still running after %.0fs; left behind",
                        ", ".join(t.get_name() for t in stuck), timeout)
        if self._own_api and self._api is not None:
            close = getattr(self._api, "close", None) or getattr(self._api, "aclose", None)
            if close is not None:
                res = close()
                if asyncio.iscoroutine(res):
                    await res
            self._api = None

    async def _world_loop(self) -> None:
        """One shared watch pass, then the kubelet's and the controller's ticks."""
        kcfg, ccfg = self.config.kubelet, self.config.controller
        tick = min(kcfg.tick_s, ccfg.tick_s)
        last_ctrl = 0.0
        while not self._stopping:
            try:
                await self._pods.sync(block_ms=int(tick * 1000))
                await self._pgs.sync(block_ms=1)
                if kcfg.admission:
                    await self._nodes.sync(block_ms=1)
                await self.kubelet.tick()
                now = self.clock.monotonic()
                if now - last_ctrl >= ccfg.tick_s:
                    last_ctrl = now
                    await self.controller.tick()
                self.world_ready.set()
            except asyncio.CancelledError:
                raise
            except Exception as e:  # keep the world turning; count it
                self.kubelet.stats.errors += 1
                log.warning("cluster world tick failed: %r", e)
                await self.clock.sleep(tick)

    async def _workload_loop(self) -> None:
        from cluster_state.delivery import WRITE_TIME_ANNOTATION
        from cluster_state.errors import AlreadyExists, ApiError
        cfg = self.config.workload
        gen = WorkloadGenerator(cfg, self.config.seed)
        api = self._api
        try:
            for job in gen.jobs():
                if self._stopping:
                    break
                delay = self._t0 + job.arrival_s - self.clock.monotonic()
                if delay > 0:
                    await self.clock.sleep(delay)
                pg, pods = gen.objects(job)
                try:
                    await api.create(self._stamp(pg, WRITE_TIME_ANNOTATION))
                except AlreadyExists:  # an actor restart replays the plan: skip what exists
                    continue
                except ApiError as e:
                    self.create_errors += 1
                    log.warning("create podgroup %s failed: %r", job.name, e)
                    continue
                self.created_jobs += 1
                for pod in pods:
                    try:
                        await api.create(self._stamp(pod, WRITE_TIME_ANNOTATION))
                        self.created_pods += 1
                    except AlreadyExists:
                        pass
                    except ApiError as e:
                        self.create_errors += 1
                        log.warning("create pod %s failed: %r", pod["metadata"]["name"], e)
        finally:
            self.workload_done.set()

    def _stamp(self, obj: dict, key: str) -> dict:
        if self.config.stamp_write_time:
            obj["metadata"].setdefault("annotations", {})[key] = repr(self.clock.now())
        return obj

    # -- queries -----------------------------------------------------------------------------
    async def stats(self) -> dict:
        k = self.kubelet.stats if self.kubelet else None
        c = self.controller.stats if self.controller else None
        phases: dict[str, int] = {}
        bound = 0
        for pod in (self._pods.objects.values() if self.kubelet else ()):
            ph = (pod.get("status") or {}).get("phase") or "Pending"
            phases[ph] = phases.get(ph, 0) + 1
            if (pod.get("spec") or {}).get("nodeName"):
                bound += 1
        return {"created_jobs": self.created_jobs, "created_pods": self.created_pods,
                "create_errors": self.create_errors,
                "workload_done": bool(self.workload_done and self.workload_done.is_set()),
                "pods": sum(phases.values()), "pod_phases": phases, "bound_pods": bound,
                "kubelet": asdict(k) if k else {}, "controller": asdict(c) if c else {}}

    async def jobs(self) -> dict:
        return self.controller.jobs() if self.controller else {}

    async def wait_world_ready(self, timeout: float | None = None) -> bool:
        """True once the world has listed what exists and the kubelet and the job controller have
        acted on it once: from then on it works on changes (a large cluster's first list and
        first pass over every pod take seconds of the actor's CPU)."""
        if self.world_ready is None:
            return False
        try:
            await wait_for(self.world_ready.wait(), timeout)
            return True
        except asyncio.TimeoutError:
            return False

    async def wait_workload_done(self, timeout: float | None = None) -> bool:
        try:
            await wait_for(self.workload_done.wait(), timeout)
            return True
        except asyncio.TimeoutError:
            return False


def create_cluster_actor(config: ClusterConfig, *, name: str = "cluster", max_restarts: int = 3,
                         scheduling_strategy: Any = None):
    """The cluster as a named async Ray actor (``start``/``stop``/``stats``/``jobs`` via ``.remote()``).
    After a Ray restart it starts itself again (mirrors relist; the workload skips jobs that exist).
    ``scheduling_strategy``: where Ray places it (``ha.runtime.placement.strategy``)."""
    import ray

    @ray.remote(max_restarts=max_restarts, max_task_retries=0, max_concurrency=64)
    class ClusterActor(ClusterSim):
        def __init__(self, cfg):
            super().__init__(cfg)
            if ray.get_runtime_context().was_current_actor_reconstructed:
                ray.get_runtime_context().current_actor.start.remote()

        async def pid(self) -> int:
            import os
            return os.getpid()

    opts: dict[str, Any] = {"name": name, "get_if_exists": False}
    if scheduling_strategy is not None:
        opts["scheduling_strategy"] = scheduling_strategy
    return ClusterActor.options(**opts).remote(config)
