"""The live engine (``--engine live``, ``ha.experiment.engine.live``): the run's parts as real
processes under wall-clock time — start them, observe them, stop them. Its common base is
``ha.experiment.engine.base.EngineBase``; its targets are :class:`ha.experiment.engine.live.targets.LiveTargets`.

Order of things (and of their undoing, in reverse, also on Ctrl-C / SIGTERM):

1. Redis: a private embedded ``redis-server`` on 127.0.0.1, unless ``--redis-url``.
2. The cluster's starting objects (priority classes, queues, nodes, ``initial``) through the API
   server client, under a key prefix of their own (several runs may share one Redis).
3. Ray: local on loopback (``ha.runtime.ray_local``), unless ``--ray-address``.
4. The chaos plumbing (a loopback proxy per instance a partition may hit, on a loop thread), the
   scheduler instances (Ray actors ``scheduler-1`` … ``scheduler-N``, spread over the Ray nodes:
   ``ha.runtime.placement``) and the cluster actor (kubelet, job controller, workload generator;
   on the driver's node, which a ``node-kill`` never takes); the nemesis over :class:`LiveTargets`.
5. ``observe()`` per tick (the driver calls it): every live instance's digest, stats, decisions and
   staleness samples in one Ray round trip each, bounded by the API server's RV before and after.
6. Stop: end the chaos (heal, resume), take the final stats, stop the actors and Ray, Redis.

It implements the driver's ``Engine`` protocol (``ha.experiment.driver``); what it observes goes to
the recorder, never into a metric.
"""
from __future__ import annotations

import logging
import os
import signal
import time
import uuid
from pathlib import Path
from typing import Any

from ha.errors import BadInput
from ha.experiment.config import Experiment
from ha.experiment.engine.base import EngineBase, InstanceSlot, instance_chaos_options, instance_kwargs, workload_config
from ha.experiment.engine.live.targets import LiveTargets
from ha.experiment.recorder import Observation, Recorder

__all__ = ["LiveEngine"]

log = logging.getLogger(__name__)

class LiveEngine(EngineBase):
    engine = "live"

    def __init__(self, exp: Experiment, out: Path, *, source: str,
                 instance_options: dict[str, Any] | None = None,
                 redis_url: str | None = None, ray_address: str | None = None):
        self.exp = exp
        self.out = out
        self.redis_url = redis_url
        self.ray_address = ray_address
        self.source = source
        self.instance_options = dict(instance_options or {})
        self.run_id = uuid.uuid4().hex[:6]
        self.prefix = f"ht-{exp.name}-{self.run_id}"
        self.redis = None            # EmbeddedRedis we started
        self.redis_embedded = False
        self.ray_handle = None
        self._ray_owned = False
        self.cluster_actor = None
        self.slots: dict[str, InstanceSlot] = {}
        self.t0_mono: float | None = None
        self.t0_wall: float | None = None
        self.leader: str | None = None
        self.cluster_stats: dict[str, Any] | None = None
        self.object_counts: dict[str, int] = {}
        self.recorder: Recorder | None = None
        from ha.runtime.apiserver import api_server_config
        # one API-server configuration for every client of the run (instances, cluster, driver)
        self.api_server = api_server_config(exp)
        self.api = None              # the driver's sync API client (truth export, lease, RV)
        # chaos plumbing: schedule, proxies + their loop thread, nemesis
        self.schedule = None
        self.loop_thread = None
        self.proxies: dict[str, Any] = {}
        self.nemesis = None
        self._chaos_ended = False
        # placement over Ray nodes: the driver's node, each instance's planned node (None =
        # SPREAD), nodes a node-kill took down (Ray lists them alive until its health check fails)
        self.driver_node: str | None = None
        self.planned: dict[str, str | None] = {}
        self.dead_nodes: set[str] = set()
        # implementation: volcano -- the front whose per-instance endpoints the vc-scheduler
        # processes talk to (their watch and API chaos act there), and the binary that runs
        self.front = None
        self.endpoints: dict[str, Any] = {}
        self.volcano = None
        self._identities: dict[str, set[str]] = {}
        self.external_tmp = ""       # the processes' dump and socket dirs (short paths: unix sockets)

    @property
    def external(self) -> bool:
        """The instances are real vc-scheduler processes (``schedulers.implementation: volcano``)."""
        return self.exp.schedulers.implementation == "volcano"

    # -- clock --------------------------------------------------------------------------------

    def now(self) -> float:
        return time.monotonic() - self.t0_mono if self.t0_mono is not None else 0.0

    def advance_to(self, t: float) -> None:
        """Let the world run until run time ``t`` (at most a quarter second at a time, so a
        Ctrl-C is answered promptly)."""
        time.sleep(max(0.0, min(t - self.now(), 0.25)))

    # -- start --------------------------------------------------------------------------------

    def start_redis(self) -> None:
        import redis as redis_lib
        if self.redis_url is None:
            from cluster_state.embedded import EmbeddedRedis
            # redis-restart must not lose the API server's state: AOF on
            from ha.runtime import ledger
            self.redis = EmbeddedRedis(persistence=self.has_fault("redis-restart"),
                                       on_start=lambda pid: ledger.add(pid, "redis-server")).start()
            self.redis_url = self.redis.url
            self.redis_embedded = True
        else:
            try:
                r = redis_lib.Redis.from_url(self.redis_url, socket_connect_timeout=5)
                r.ping()
                r.close()
            except (redis_lib.RedisError, ValueError, OSError) as e:
                raise BadInput(f"--redis-url {self.redis_url}: cannot connect: {e}") from None
        self.api = self.new_api()

    def new_api(self):
        return self.api_server.sync_client(self.redis_url, self.prefix)

    def start_ray(self) -> None:
        import ray
        from ha.runtime.ray_local import start_ray
        # a Ray that was already up (tests, notebooks) is left up; one we start or join is undone
        self._ray_owned = not ray.is_initialized()
        try:
            self.ray_handle = start_ray(self.ray_address)
        except ConnectionError as e:
            raise BadInput(f"--ray-address {self.ray_address}: cannot connect: {e}") from None

    def instance_config(self, name: str):
        if self.external:
            from ha.runtime.external.volcano import external_config
            ep = self.endpoints[name]
            return external_config(self.exp, name, binary=self.volcano, endpoint_url=ep.url,
                                   kubeconfig=str(self.out / "volcano" / f"kubeconfig-{name}"),
                                   out=self.out, redis_url=self.redis_url, prefix=self.prefix,
                                   api_server=self.api_server, tmp_root=self.external_tmp)
        from ha.runtime.instance import InstanceConfig
        kw = instance_kwargs(self.exp, name)
        kw.update(redis_url=self.redis_url, prefix=self.prefix, api_server=self.api_server,
                  # local Ray: the instance writes <out>/delivery/<name>.log in place (a killed
                  # instance's log survives it); on a cluster it keeps the log on its own node and
                  # the driver ships it back at the end (collect_delivery_logs)
                  delivery_log_dir=str(self.out) if self.ray_address is None else None)
        chaos = self.chaos_instance_options(name)
        kw.update(chaos)
        for k, v in self.instance_options.items():   # caller's options win, informer hooks merge
            kw[k] = {**v, **chaos[k]} if k == "informer_options" and k in chaos else v
        return InstanceConfig(**kw)

    def cluster_config(self):
        from ha.runtime.cluster import ClusterConfig
        return ClusterConfig(redis_url=self.redis_url, prefix=self.prefix, seed=self.exp.seed,
                             workload=workload_config(self.exp), api_server=self.api_server,
                             retry_outages_s=60.0 if self.has_fault("redis-restart") else 0.0)

    def start_parts(self, recorder: Recorder) -> None:
        """Proxies, instances, cluster actor, nemesis; run time 0 is when the workload starts and
        the instances start (model actors and vc-scheduler processes alike)."""
        import ray
        from ha.runtime.cluster import create_cluster_actor
        self.recorder = recorder
        self.start_proxies()
        if self.external:
            self.start_external_front()
        from ha.runtime import placement
        for name in self.exp.instance_names():
            self.slots[name] = InstanceSlot(name=name, config=self.instance_config(name))
        self.driver_node = placement.driver_node_id()
        self.planned = placement.plan(placement.ray_nodes(), list(self.slots), self.driver_node)
        for slot in self.slots.values():
            slot.actor = self.new_instance_actor(slot)
        # A scheduler runs its first session as soon as its cache has synced, so an instance
        # started before the world would schedule, evict and bind while no kubelet or job
        # controller runs -- for as long as the cluster actor takes to start (seconds of Ray worker
        # start-up), at negative run time, and a fixed workload's timeline would run ahead of the
        # chaos schedule. The actors are made ready here; the instances start at run time 0, as
        # on the sim engine.
        ray.get([s.actor.ping.remote() for s in self.slots.values()], timeout=120)
        self.cluster_actor = create_cluster_actor(self.cluster_config(), name=f"cluster-{self.run_id}",
                                                  max_restarts=0,
                                                  scheduling_strategy=placement.strategy(self.driver_node)
                                                  if self.driver_node else None)
        ray.get(self.cluster_actor.start.remote(), timeout=120)
        self.t0_mono = time.monotonic()
        self.t0_wall = time.time()
        recorder.t0_wall = self.t0_wall
        ray.get([s.actor.start.remote() for s in self.slots.values()], timeout=120)
        for slot in self.slots.values():
            slot.alive = True
            self.note_started(slot, event="start")
        self.start_nemesis()

    def start_external_front(self) -> None:
        """implementation: volcano -- the vc-scheduler binary (built if needed), and a front with
        one endpoint per instance carrying that instance's watch and API faults (its own and the
        ``leader`` API faults, as a model instance's chaos port carries them); each endpoint logs
        under ``<results>/kube-api/<instance>/``, each instance gets ``<results>/volcano/kubeconfig-<instance>``."""
        from chaos.faults import API_FAULTS, WATCH_FAULTS
        from ha.runtime.external.volcano import resolve_binary
        from kube_api.endpoint import EndpointChaos
        from kube_api.server import ThreadedFront, write_kubeconfig
        if self.ray_address is not None:
            raise BadInput("schedulers.implementation: volcano needs a local Ray (the vc-scheduler processes "
                           "reach their endpoints on 127.0.0.1 and write into the results folder); drop --ray-address")
        self.volcano = resolve_binary(self.exp.schedulers.volcano, log=lambda m: log.warning("%s", m))
        import tempfile
        self.external_tmp = tempfile.mkdtemp(prefix=f"ht-vc-{self.run_id}-")
        sched = self.chaos_schedule()
        self.front = ThreadedFront(self.redis_url, self.prefix, api_server=self.api_server,
                                   log_dir=self.out / "kube-api", keep_logs=False).start()
        leader = [sf for sf in sched if sf.targets == ("leader",) and sf.name in API_FAULTS]
        for name in self.exp.instance_names():
            faults = [sf for sf in sched.for_instance(name) if sf.name in WATCH_FAULTS or sf.name in API_FAULTS]
            ep = self.front.add_endpoint(name, chaos=EndpointChaos(name, faults + leader))
            write_kubeconfig(self.out / "volcano" / f"kubeconfig-{name}", ep.url)
            self.endpoints[name] = ep

    def new_instance_actor(self, slot: InstanceSlot):
        from ha.runtime.placement import strategy
        if self.external:
            from ha.runtime.external.supervisor import create_external_actor
            return create_external_actor(slot.config, namespace=f"ha-testbed-{self.run_id}",
                                         scheduling_strategy=strategy(self.planned.get(slot.name)))
        from ha.runtime.instance import create_instance_actor
        # a Ray namespace per run: several runs may share one Ray cluster (docker-compose)
        return create_instance_actor(slot.config, max_restarts=0, namespace=f"ha-testbed-{self.run_id}",
                                     scheduling_strategy=strategy(self.planned.get(slot.name)))

    def replan(self, slot: InstanceSlot) -> None:
        """A restart's node: the instance's own while it is alive, else the alive node with the
        fewest running instances of this run (``ha.runtime.placement.replacement``)."""
        from ha.runtime import placement
        occupied: dict[str, int] = {}
        for s in self.slots.values():
            node = s.placement.get("node_id")
            if s.alive and node:
                occupied[node] = occupied.get(node, 0) + 1
        own = slot.placement.get("node_id") or self.planned.get(slot.name)
        self.planned[slot.name] = placement.replacement(placement.ray_nodes(), own, occupied,
                                                        self.driver_node, exclude=self.dead_nodes)

    def note_started(self, slot: InstanceSlot, event: str) -> None:
        """Where the instance runs (its Ray node and host) goes into the history with its life."""
        import ray
        where = dict(ray.get(slot.actor.placement.remote(), timeout=30))
        where["strategy"] = "spread" if self.planned.get(slot.name) is None else "node-affinity"
        slot.pid = where.get("pid")
        slot.placement = where
        if self.external and slot.pid:
            from ha.runtime import ledger
            ledger.add(slot.pid, f"vc-scheduler {slot.name}")
        self.record_life(self.now(), slot.name, event, pid=slot.pid, node_id=where.get("node_id"),
                         host=where.get("host"))

    # -- chaos plumbing -----------------------------------------------------------------------

    def start_proxies(self) -> None:
        """A loopback proxy in front of Redis for each instance a partition may hit."""
        from chaos.injectors.proxy import ThreadedRedisProxy
        from chaos.loop import LoopThread
        sched = self.chaos_schedule()
        self.loop_thread = LoopThread(f"chaos-{self.run_id}").start()
        names: set[str] = set()
        for sf in sched:
            if sf.name == "partition":
                names.update(self.exp.instance_names() if sf.targets == ("leader",) else sf.targets)
        for n in sorted(names):
            self.proxies[n] = ThreadedRedisProxy(self.redis_url, name=n, loop_thread=self.loop_thread).start()

    def chaos_instance_options(self, name: str) -> dict[str, Any]:
        sched = self.chaos_schedule()
        kw: dict[str, Any] = {}
        if name in self.proxies:
            kw["redis_url"] = self.proxies[name].url
        if any(sf.name in ("partition", "redis-restart") for sf in sched):
            kw["retry_outages_s"] = 30.0
        kw.update(instance_chaos_options(sched, name,
                                         informer_options=self.instance_options.get("informer_options")))
        return kw

    def start_nemesis(self) -> None:
        import ray
        from chaos.faults import SELF_DRIVEN
        from chaos.nemesis import Nemesis
        # the instances' hooks run the schedule from the run's start (wall clock)
        ray.get([s.actor.chaos_set_epoch.remote(self.t0_wall) for s in self.slots.values()],
                timeout=60)
        for ep in self.endpoints.values():     # external instances: their chaos is at the endpoint
            self.front.run(ep.chaos.set_epoch(self.t0_wall))
        self.nemesis = Nemesis(self.run_schedule(), LiveTargets(self),
                               self_driven=SELF_DRIVEN)
        self.nemesis.t0 = self.t0_mono

    def fire_due(self) -> None:
        if self.nemesis is not None and self.nemesis.pending():
            self.loop_thread.run(self.nemesis.fire_due())
        if self.nemesis is not None and self.recorder is not None:
            self.recorder.faults(self.nemesis.records)

    def end_chaos(self) -> None:
        """Undo what is still on (heal, resume, restore clocks), once."""
        nem, lt = self.nemesis, self.loop_thread
        if nem is not None and lt is not None and not self._chaos_ended:
            self._chaos_ended = True
            try:
                lt.run(nem.stop(), timeout=120)
            except Exception as e:  # noqa: BLE001
                log.warning("ending chaos: %s", e)
            if self.recorder is not None:
                self.recorder.faults(nem.records)

    def resolve_leader(self) -> str | None:
        import ray
        live = [s for s in self.slots.values() if s.alive and not s.paused]
        refs = [s.actor.is_leader.remote() for s in live]
        try:
            answers = ray.get(refs, timeout=10)
        except Exception:  # noqa: BLE001
            answers = [False] * len(live)
        leaders = [s.name for s, yes in zip(live, answers) if yes]
        return leaders[0] if leaders else None

    # -- a tick -------------------------------------------------------------------------------

    def observe(self) -> list[Observation]:
        """Every instance once: one ``observe()`` round trip per live instance, in parallel."""
        import ray
        live = [s for s in self.slots.values() if s.alive and not s.paused]
        refs = {s.name: s.actor.observe.remote(self.recorder.decision_cursor.get((s.name, s.generation), 0))
                for s in live}
        timeout = max(2.0, self.exp.measure.every)
        flat = list(refs.values())
        ready, _ = ray.wait(flat, num_returns=len(flat), timeout=timeout) if flat else ([], [])
        ready_set = set(ready)
        out: list[Observation] = []
        for name, slot in self.slots.items():
            ref = refs.get(name)
            data = None
            if ref is not None and ref in ready_set:
                try:
                    data = ray.get(ref)
                except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError) as e:
                    if slot.alive:
                        log.info("instance %s is gone: %s", name, e)
                        slot.alive = False
                        self.record_life(self.now(), name, "crash", error=str(e)[:200],
                                         was_leader=self.leader == name)
            if data is not None:
                slot.last_stats = data.get("stats") or {}
                if self.external:
                    self._note_external(slot, slot.last_stats)
            out.append(Observation(name=name, generation=slot.generation,
                                   alive=data is not None, data=data))
        self.note_leaders(out)
        return out

    def _note_external(self, slot: InstanceSlot, stats: dict[str, Any]) -> None:
        """A vc-scheduler restarted by its supervisor runs under a new pid (the ledger learns it, a
        pause stops it); a Lease identity seen for the first time is written into the lives
        (``leading``): Volcano's holderIdentity is ``<hostname>_<uuid>``, so this is how a Lease
        holder maps back to an instance."""
        pid = stats.get("pid")
        if pid and pid != slot.pid:
            from ha.runtime import ledger
            ledger.add(pid, f"vc-scheduler {slot.name}")
            slot.pid = pid
            slot.placement = {**slot.placement, "pid": pid}
        seen = self._identities.setdefault(slot.name, set())
        for ident, life in (stats.get("identities") or {}).items():
            if ident not in seen:
                seen.add(ident)
                self.record_life(self.now(), slot.name, "leading", identity=ident, life=life, pid=pid)

    def stop_front(self) -> None:
        if self.external_tmp:
            import shutil
            shutil.rmtree(self.external_tmp, ignore_errors=True)
            self.external_tmp = ""
        if self.front is not None:
            try:
                self.front.stop()
            except Exception as e:  # noqa: BLE001
                log.warning("stopping the kube-api front: %s", e)
            self.front = None
            self.endpoints = {}

    # -- end ----------------------------------------------------------------------------------

    def final_stats(self) -> dict[str, Any]:
        """The parts' last words, before anything stops: per instance its final stats, the
        cluster actor's stats."""
        self.end_chaos()
        try:
            import ray
            if not ray.is_initialized():
                return {}
        except Exception:  # noqa: BLE001
            return {}
        self._resume_paused()
        for slot in self.slots.values():
            slot.ended_alive = slot.alive
            if slot.alive and slot.actor is not None:
                try:
                    slot.last_stats = ray.get(slot.actor.stats.remote(), timeout=10)
                except Exception:  # noqa: BLE001
                    pass
        if self.cluster_actor is not None:
            try:
                self.cluster_stats = ray.get(self.cluster_actor.stats.remote(), timeout=10)
            except Exception:  # noqa: BLE001
                self.cluster_stats = None
        return {"instances": {n: {**s.last_stats, "carried": s.carried, "generation": s.generation,
                                  "ended_alive": s.ended_alive, "placement": s.placement}
                              for n, s in self.slots.items()},
                "cluster": self.cluster_stats}

    def collect_delivery_logs(self) -> None:
        """Each instance's delivery log (every incarnation's part), shipped back through Ray in
        chunks: on a cluster the instance's node shares no disk with the driver. A local run's
        instances write theirs in place (a killed instance's log survives it)."""
        import ray
        if self.ray_address is None:
            return
        dest = self.out / "delivery"
        dest.mkdir(parents=True, exist_ok=True)
        chunk = 8 << 20
        for slot in self.slots.values():
            if not slot.alive or slot.actor is None:
                continue
            try:
                parts = ray.get(slot.actor.delivery_log_parts.remote(), timeout=30)
                for fname in parts:
                    mid = fname[len(slot.name) + 1:-4]
                    part = int(mid) if mid.isdigit() else None
                    with open(dest / fname, "wb") as f:
                        off = 0
                        while True:
                            blob = ray.get(slot.actor.delivery_log.remote(off, chunk, part), timeout=60)
                            if not blob:
                                break
                            f.write(blob)
                            off += len(blob)
            except Exception as e:  # noqa: BLE001 — gone: its log is lost with its node
                log.info("delivery log of %s: %s", slot.name, e)

    def _resume_paused(self) -> None:
        """SIGCONT every instance a pause left stopped: nothing ends the run frozen."""
        for slot in self.slots.values():
            if slot.paused and slot.pid:
                try:
                    os.kill(slot.pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
                slot.paused = False

    def cleanup(self) -> None:
        """Stop everything this run started, each by its own handle; never raises."""
        self.end_chaos()
        try:
            import ray
            ray_on = ray.is_initialized()
        except Exception:  # noqa: BLE001
            ray_on = False
        if ray_on:
            self._resume_paused()
            refs = []
            for slot in self.slots.values():
                if slot.alive and slot.actor is not None:
                    refs.append(slot.actor.stop.remote())
            if self.cluster_actor is not None:
                refs.append(self.cluster_actor.stop.remote())
            if refs:
                try:
                    ray.wait(refs, num_returns=len(refs), timeout=15)
                except Exception:  # noqa: BLE001
                    pass
            for actor in [s.actor for s in self.slots.values()] + [self.cluster_actor]:
                if actor is not None:
                    try:
                        ray.kill(actor, no_restart=True)
                    except Exception:  # noqa: BLE001
                        pass
            for slot in self.slots.values():
                slot.alive = False
        self.stop_front()
        for p in self.proxies.values():
            try:
                p.stop()
            except Exception:  # noqa: BLE001
                pass
        self.proxies = {}
        if self.loop_thread is not None:
            self.loop_thread.stop()
            self.loop_thread = None
        if ray_on and self._ray_owned:
            try:
                # local: ray.shutdown() stops the processes and our session folder goes;
                # --ray-address: disconnects from the cluster (which keeps running)
                from ha.runtime.ray_local import stop_ray
                stop_ray(self.ray_handle)
            except Exception as e:  # noqa: BLE001
                log.warning("stopping Ray: %s", e)
        self.ray_handle = None
        if self.api is not None:
            try:
                self.api.close()
            except Exception:  # noqa: BLE001
                pass
            self.api = None
        if self.redis is not None:
            self.redis.close()
            self.redis = None
        from ha.runtime import ledger
        ledger.end()   # stops what the teardown missed, removes this run's ledger
