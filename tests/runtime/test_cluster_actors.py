"""The world around the schedulers: workload generator (pure, seeded), hollow kubelet and job
controller (against the real API server), and the cluster actor under Ray."""
from __future__ import annotations

import asyncio
import time

import pytest

from ha.errors import BadInput
from ha.runtime.controller import ControllerConfig, JobController, slot_of
from ha.runtime.kubelet import Kubelet, KubeletConfig, pod_requests
from ha.runtime.mirror import KindMirror
from ha.runtime.workload import (RUNTIME_ANNOTATION, WorkloadConfig, WorkloadGenerator, make_nodes,
                                 make_priority_class, make_queue)

WL = WorkloadConfig(rate_per_s=5.0, gang_size=(2, 6), runtime_s=(1.0, 3.0), queues=("q1", "q2"),
                    priority_classes={"high": 1000, "low": 10}, duration_s=20.0)


# ------------------------------------------------------------------------------ workload (pure)

def test_same_seed_same_plan_and_different_seed_differs():
    a = WorkloadGenerator(WL, seed=7).plan()
    b = WorkloadGenerator(WL, seed=7).plan()
    c = WorkloadGenerator(WL, seed=8).plan()
    assert a == b
    assert a != c
    assert len(a) > 20


def test_plan_respects_ranges_and_is_poisson_like():
    plan = WorkloadGenerator(WL, seed=3).plan()
    assert all(2 <= j.size <= 6 for j in plan)
    assert all(1000 <= j.runtime_ms <= 3000 for j in plan)
    assert {j.queue for j in plan} == {"q1", "q2"}
    assert {j.priority_class for j in plan} == {"high", "low"}
    times = [j.arrival_s for j in plan]
    assert times == sorted(times) and times[-1] <= WL.duration_s
    gaps = [b - a for a, b in zip([0.0] + times, times)]
    # exponential gaps: not all equal (constant arrivals would be), mean near 1/rate
    assert len(set(round(g, 6) for g in gaps)) > len(gaps) // 2
    assert 0.1 < sum(gaps) / len(gaps) < 0.4
    const = WorkloadGenerator(WorkloadConfig(rate_per_s=2.0, arrivals="constant", duration_s=5.0), 1).plan()
    assert [round(j.arrival_s, 6) for j in const] == [0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0]


def test_max_gangs_and_objects_shape():
    wl = WorkloadConfig(rate_per_s=100.0, gang_size=(3, 3), max_gangs=4, duration_s=100.0,
                        priority_classes={"high": 1000})
    gen = WorkloadGenerator(wl, seed=1)
    plan = gen.plan()
    assert len(plan) == 4
    pg, pods = gen.objects(plan[0])
    assert pg["kind"] == "PodGroup" and pg["spec"]["minMember"] == 3
    assert len(pods) == 3 and len({p["metadata"]["name"] for p in pods}) == 3
    p = pods[0]
    assert p["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == pg["metadata"]["name"]
    assert p["metadata"]["annotations"][RUNTIME_ANNOTATION] == str(plan[0].runtime_ms)
    assert p["spec"]["priority"] == 1000 and p["spec"]["priorityClassName"] == "high"
    assert pod_requests(p)["cpu"] == 1000 and pod_requests(p)["pods"] == 1


def test_bad_workload_config_is_rejected():
    with pytest.raises(BadInput, match="gang_size"):
        WorkloadConfig(gang_size=(3, 2))
    with pytest.raises(BadInput, match="rate"):
        WorkloadConfig(rate_per_s=0)
    with pytest.raises(BadInput, match="arrivals"):
        WorkloadConfig(arrivals="bursty")


def test_slot_of_names_and_annotations():
    assert slot_of({"metadata": {"name": "job-1-0"}}) == ("job-1-0", 0)
    assert slot_of({"metadata": {"name": "job-1-0-r3"}}) == ("job-1-0", 3)
    assert slot_of({"metadata": {"name": "x-r2", "annotations": {"ha-testbed/slot": "x",
                                                                 "ha-testbed/attempt": "2"}}}) == ("x", 2)


# ------------------------------------------------------------------------------ against the API server

async def _api(redis_url, prefix):
    from cluster_state.aio import AsyncApiClient
    return AsyncApiClient.from_url(redis_url, prefix=prefix)


async def _close(api):
    close = getattr(api, "close", None) or getattr(api, "aclose", None)
    if close is not None:
        res = close()
        if asyncio.iscoroutine(res):
            await res


async def _until(pred, step, timeout=30.0):
    """Call ``step()`` (an async tick) until ``pred()`` is true."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        await step()
        if pred():
            return True
        await asyncio.sleep(0.05)
    return pred()


async def _seed_cluster(api, n_nodes=2):
    for obj in make_nodes(n_nodes, cpu="4", memory="8Gi", pods=20):
        await api.create(obj)
    await api.create(make_queue("default"))
    await api.create(make_priority_class("high", 1000))


async def test_kubelet_runs_bound_pods_to_completion_and_finalizes_deletions(redis_url, key_prefix):
    api = await _api(redis_url, key_prefix)
    await _seed_cluster(api)
    wl = WorkloadConfig(rate_per_s=100.0, gang_size=(2, 2), runtime_s=(0.3, 0.3), max_gangs=1,
                        duration_s=10.0)
    gen = WorkloadGenerator(wl, seed=0)
    job = gen.plan()[0]
    pg, pods = gen.objects(job)
    await api.create(pg)
    for p in pods:
        await api.create(p)
    # a third pod without a runtime annotation: runs until deleted
    forever = dict(pods[0], metadata={**pods[0]["metadata"], "name": "forever",
                                      "annotations": {k: v for k, v in pods[0]["metadata"]["annotations"].items()
                                                      if k != RUNTIME_ANNOTATION}})
    await api.create(forever)
    mirror = KindMirror(api, "Pod")
    kubelet = Kubelet(api, KubeletConfig(startup_delay_s=0.2), pods=mirror)

    async def step():
        await mirror.sync(block_ms=20)
        await kubelet.tick()

    await step()
    assert all(p["status"]["phase"] == "Pending" for p in mirror.objects.values())
    # unbound pods never start
    await asyncio.sleep(0.3)
    await step()
    assert kubelet.stats.started == 0
    for p in pods:
        await api.bind(p["metadata"]["namespace"], p["metadata"]["name"], "node-1")
    await api.bind("default", "forever", "node-2")

    def phase(name):
        return mirror.objects[("default", name)]["status"]["phase"]

    assert await _until(lambda: all(phase(p["metadata"]["name"]) == "Succeeded" for p in pods), step)
    assert phase("forever") == "Running"
    assert kubelet.stats.started == 3 and kubelet.stats.succeeded == 2
    # graceful deletion: DELETED once the grace period is over
    await api.delete("Pod", "forever", "default", grace_period_seconds=1)
    await step()
    assert ("default", "forever") in mirror.objects          # still terminating
    assert await _until(lambda: ("default", "forever") not in mirror.objects, step)
    assert kubelet.stats.finalized >= 1
    await _close(api)


async def test_controller_recreates_evicted_pods_and_leaves_podgroup_status_to_the_scheduler(redis_url, key_prefix):
    api = await _api(redis_url, key_prefix)
    await _seed_cluster(api)
    wl = WorkloadConfig(rate_per_s=100.0, gang_size=(2, 2), runtime_s=(0.5, 0.5), max_gangs=1,
                        duration_s=10.0)
    gen = WorkloadGenerator(wl, seed=0)
    pg, pods = gen.objects(gen.plan()[0])
    await api.create(pg)
    for p in pods:
        await api.create(p)
    pmirror, gmirror = KindMirror(api, "Pod"), KindMirror(api, "PodGroup")
    kubelet = Kubelet(api, KubeletConfig(startup_delay_s=0.1), pods=pmirror)
    ctrl = JobController(api, ControllerConfig(), pods=pmirror, podgroups=gmirror)
    pgkey = ("default", pg["metadata"]["name"])

    async def step():
        await pmirror.sync(block_ms=20)
        await gmirror.sync(block_ms=5)
        await kubelet.tick()
        await ctrl.tick()

    await step()
    uids0 = {p["metadata"]["uid"] for p in pmirror.objects.values()}
    # the scheduler's enqueue would move it to Inqueue; the controller must not
    assert gmirror.objects[pgkey]["status"]["phase"] == "Pending"
    victim, other = pods[0]["metadata"]["name"], pods[1]["metadata"]["name"]
    await api.bind("default", victim, "node-1")
    assert await _until(lambda: pmirror.objects[("default", victim)]["status"]["phase"] == "Running", step)
    # evict the running pod: it terminates, disappears, and comes back as <name>-r1 with a new uid
    await api.evict("default", victim, grace_period_seconds=0)
    assert await _until(lambda: ("default", f"{victim}-r1") in pmirror.objects, step)
    new = pmirror.objects[("default", f"{victim}-r1")]
    assert new["metadata"]["uid"] not in uids0
    assert new["spec"]["nodeName"] == "" and new["status"]["phase"] == "Pending"
    assert slot_of(new) == (victim, 1)
    assert ctrl.stats.recreated == 1
    # a Failed pod is replaced too
    o = pmirror.objects[("default", other)]
    await api.update_status({**o, "status": {**o["status"], "phase": "Failed"}})
    assert await _until(lambda: ("default", f"{other}-r1") in pmirror.objects, step)
    assert ("default", other) not in pmirror.objects or pmirror.objects[("default", other)]["metadata"].get("deletionTimestamp")
    # bind both replacements: the job completes when both succeed; the PodGroup's status stays
    # as the scheduler last wrote it (here: never), and its resourceVersion never moves
    pg_rv = gmirror.objects[pgkey]["metadata"]["resourceVersion"]
    await api.bind("default", f"{victim}-r1", "node-1")
    await api.bind("default", f"{other}-r1", "node-2")
    assert await _until(lambda: ctrl.stats.completed_jobs == 1, step)
    assert all(p["status"]["phase"] == "Succeeded" for k, p in pmirror.objects.items()
               if k[1] in (f"{victim}-r1", f"{other}-r1"))
    got = await api.get("PodGroup", pgkey[1], "default")
    assert got["metadata"]["resourceVersion"] == pg_rv
    assert got["status"] == pg["status"] and got["status"]["phase"] == "Pending"
    recreated = ctrl.stats.recreated
    for _ in range(5):   # a completed job is not touched again
        await step()
    assert ctrl.stats.recreated == recreated == 2
    await _close(api)


# ------------------------------------------------------------------------------ under Ray (one Ray per module)

RAY_LEASE = dict(lease_duration=1.5, lease_renew_deadline=1.0, lease_retry=0.2)


@pytest.fixture(scope="module")
def ray_cluster():
    from ha.runtime.ray_local import start_ray, stop_ray
    handle = start_ray(num_cpus=2)
    yield handle
    stop_ray(handle)


def _sync_api(redis_url, prefix, n_nodes=4):
    from cluster_state.client import ApiClient
    api = ApiClient.from_url(redis_url, prefix=prefix)
    for obj in make_nodes(n_nodes, cpu="8", memory="32Gi", pods=110):
        api.create(obj)
    api.create(make_queue("default"))
    api.create(make_priority_class("high", 1000))
    api.create(make_priority_class("low", 10))
    return api


def _poll(pred, timeout=60.0, step=0.25):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(step)
    return pred()


def _stats(actors):
    import ray
    out = {}
    for name, a in actors.items():
        try:
            out[name] = ray.get(a.stats.remote(), timeout=30)
        except Exception:  # noqa: BLE001 — a dead (killed) actor
            out[name] = None
    return out


@pytest.mark.ray
def test_leader_killed_hands_over_and_every_pod_ends_placed(ray_cluster, redis_url, key_prefix):
    import ray
    from ha.runtime.cluster import ClusterConfig, create_cluster_actor
    from ha.runtime.instance import InstanceConfig, create_instance_actor
    api = _sync_api(redis_url, key_prefix)
    wl = WorkloadConfig(rate_per_s=3.0, gang_size=(1, 3), runtime_s=(1.0, 2.0), queues=("default",),
                        priority_classes={"high": 1000, "low": 10}, duration_s=8.0)
    cluster = create_cluster_actor(ClusterConfig(redis_url=redis_url, prefix=key_prefix, seed=11,
                                                 kubelet=KubeletConfig(startup_delay_s=0.2), workload=wl),
                                   name=f"cluster-{key_prefix}", max_restarts=0)
    actors = {}
    for i in (1, 2, 3):
        cfg = InstanceConfig(name=f"scheduler-{i}", redis_url=redis_url, prefix=key_prefix,
                             mode="leader-elected", standby="warm", period_s=0.3, seed=11, **RAY_LEASE)
        # scheduler-1..3 may restart once after a crash (fresh list)
        actors[cfg.name] = create_instance_actor(cfg, max_restarts=1, namespace=None)
    try:
        ray.get([a.start.remote() for a in actors.values()], timeout=120)
        ray.get(cluster.start.remote(), timeout=60)
        assert _poll(lambda: sum(bool(s and s["is_leader"]) for s in _stats(actors).values()) == 1)
        # let the leader bind something, then crash it (Ray restarts it: a fresh list, a standby)
        assert _poll(lambda: any(s and s["binds"] > 0 for s in _stats(actors).values()))
        st = _stats(actors)
        old = next(n for n, s in st.items() if s["is_leader"])
        old_pid = st[old]["pid"]
        killed_at = time.time()
        ray.kill(actors[old], no_restart=False)

        def new_leader():   # any instance, the restarted one included, in a new term
            s = _stats(actors)
            return next((n for n, v in s.items() if v and v["is_leader"] and v["pid"] != old_pid), None)
        assert _poll(lambda: new_leader() is not None, timeout=60)
        nl = new_leader()
        # its on_started_leading (which stamps became_leader_at) runs as a task after it leads
        assert _poll(lambda: (_stats({nl: actors[nl]})[nl] or {}).get("became_leader_at") is not None)
        s_new = _stats({nl: actors[nl]})[nl]
        took = s_new["became_leader_at"] - killed_at
        # not before the lease expired by the standby's own observation (the crashed leader
        # renewed at most one retry period before it died) ...
        assert took >= RAY_LEASE["lease_duration"] - RAY_LEASE["lease_retry"] - 0.1, took
        # ... and within the lease timing plus generous slack for a loaded 2-core machine
        assert took < RAY_LEASE["lease_duration"] + 15.0, took
        assert s_new["leader_transitions"] == 1 and s_new["lease_transitions"] >= 1
        assert s_new["observed_leader"] == s_new["identity"] and s_new["identity"].startswith(nl + "_")
        # the crashed leader came back (Ray max_restarts) as a standby with a fresh cache
        assert _poll(lambda: (_stats({old: actors[old]})[old] or {}).get("synced"), timeout=60), \
            {k: v for k, v in (_stats({old: actors[old]})[old] or {}).items()
             if k in ("pid", "restarts", "incarnation", "synced", "last_error", "errors", "informers")}
        s_old = _stats({old: actors[old]})[old]
        assert s_old["pid"] != old_pid and s_old["restarts"] == 1
        # the workload finishes arriving; every pod ends bound (Running/Succeeded)
        assert ray.get(cluster.wait_workload_done.remote(60), timeout=90)

        def all_placed():
            pods = api.list("Pod").items
            return pods and all(p["spec"].get("nodeName") for p in pods)
        assert _poll(all_placed, timeout=90)
        cst = ray.get(cluster.stats.remote(), timeout=30)
        assert cst["created_pods"] == len(api.list("Pod").items) and cst["create_errors"] == 0
        final = _stats(actors)
        assert final[nl]["binds"] > 0 and final[nl]["first_bind_after_leading_at"] is not None
        assert sum(s["bind_conflicts"] for s in final.values() if s) == 0
        assert all(s["fatal_cache_errors"] == 0 and s["errors"] == 0 for s in final.values() if s)
        # the restarted instance's fresh cache agrees with another instance's on placements
        other = next(n for n in actors if n != old)

        def caches_agree():
            a = ray.get(actors[other].digest.remote(), timeout=30)["tasks"]
            b = ray.get(actors[old].digest.remote(), timeout=30)["tasks"]
            return a and {u: v[1] for u, v in a.items()} == {u: v[1] for u, v in b.items()}
        assert _poll(caches_agree, timeout=30)
    finally:
        for a in list(actors.values()) + [cluster]:
            try:
                ray.get(a.stop.remote(), timeout=30)
            except Exception:  # noqa: BLE001
                pass
            ray.kill(a)
        api.close()


def _delay_pod_watch():
    """A factory (built inside the actor): watch events of Pods arrive 30 s late; lists do not."""
    from cluster_state.delivery import DelayHook
    return DelayHook(lambda d: 0.0 if d.type in ("LIST", "REPLACED") or d.initial else 30.0)


@pytest.mark.ray
def test_active_active_conflicts_are_counted_under_ray(ray_cluster, redis_url, key_prefix, tmp_path):
    import ray
    from ha.runtime.instance import InstanceConfig, create_instance_actor
    api = _sync_api(redis_url, key_prefix, n_nodes=3)
    gen = WorkloadGenerator(WorkloadConfig(rate_per_s=100.0, gang_size=(2, 2), runtime_s=(60, 60),
                                           max_gangs=3, duration_s=100.0), 5)
    n = 0
    for job in gen.plan():
        pg, pods = gen.objects(job)
        api.create(pg)
        for p in pods:
            api.create(p)
            n += 1
    actors = {}
    for i in (1, 2):
        opts = {"hook_factories": {"Pod": _delay_pod_watch}} if i == 2 else {}
        cfg = InstanceConfig(name=f"aa-{key_prefix}-{i}", redis_url=redis_url, prefix=key_prefix,
                             mode="active-active", period_s=3600.0, informer_options=opts)
        actors[i] = create_instance_actor(cfg, max_restarts=0)
    try:
        ray.get([a.start.remote() for a in actors.values()], timeout=120)
        assert all(ray.get([a.wait_synced.remote(60) for a in actors.values()], timeout=90))
        r1 = ray.get(actors[1].run_session_now.remote(), timeout=60)
        # instance 2 has not seen instance 1's binds (its Pod watch is 30 s behind)
        r2 = ray.get(actors[2].run_session_now.remote(), timeout=60)
        assert r1["bind_count"] == n and r2["bind_count"] == n
        s1, s2 = ray.get(actors[1].stats.remote()), ray.get(actors[2].stats.remote())
        assert s1["binds"] == n and s1["bind_conflicts"] == 0
        assert s2["binds"] == 0 and s2["bind_conflicts"] == n
        assert s2["errors"] == 0 and s2["fatal_cache_errors"] == 0
        assert ray.get(actors[2].ping.remote()) == f"aa-{key_prefix}-2"   # alive, not crashed
        assert all(p["spec"]["nodeName"] for p in api.list("Pod").items)
        # what a driver records, through Ray: one observe() per tick, the log's bytes, placement
        obs = ray.get(actors[1].observe.remote(0), timeout=30)
        assert sum(1 for d in obs["decisions"] if d["op"] == "bind" and d["ok"]) == n
        assert obs["stats"]["binds"] == n and obs["digest"]["name"] == f"aa-{key_prefix}-1"
        assert obs["incarnation"] == 0 and isinstance(obs["generation"], str)
        pl = ray.get(actors[1].placement.remote(), timeout=30)
        assert pl["node_id"] == ray.get_runtime_context().get_node_id() and pl["pid"] == s1["pid"]
        from cluster_state.delivery import read_delivery_log
        log_file = tmp_path / "aa-1.log"
        log_file.write_bytes(ray.get(actors[1].delivery_log.remote(), timeout=30))
        header, recs = read_delivery_log(log_file)
        assert header["instance"] == f"aa-{key_prefix}-1"
        assert sum(1 for r in recs if r["kind"] == "Pod") >= n
    finally:
        for a in actors.values():
            try:
                ray.get(a.stop.remote(), timeout=30)
            except Exception:  # noqa: BLE001
                pass
            ray.kill(a)
        api.close()


async def test_kubelet_removes_a_terminating_pod_at_its_deletion_timestamp(redis_url, key_prefix):
    """deletionTimestamp already is the end of the grace period (Kubernetes semantics): the
    kubelet must not wait a second grace period on top of it."""
    api = await _api(redis_url, key_prefix)
    await _seed_cluster(api)
    gen = WorkloadGenerator(WorkloadConfig(rate_per_s=100.0, gang_size=(1, 1), runtime_s=(60, 60),
                                           max_gangs=1, duration_s=10.0), seed=0)
    pg, pods = gen.objects(gen.plan()[0])
    await api.create(pg)
    await api.create(pods[0])
    name, ns = pods[0]["metadata"]["name"], pods[0]["metadata"]["namespace"]
    await api.bind(ns, name, "node-1")
    fake_wall = [0.0]
    mirror = KindMirror(api, "Pod")
    kubelet = Kubelet(api, KubeletConfig(startup_delay_s=0.0, use_finalize=False), pods=mirror,
                      wall=lambda: fake_wall[0])
    await api.delete("Pod", name, ns, grace_period_seconds=30)
    await mirror.sync(block_ms=20)
    ts = float(mirror.objects[(ns, name)]["metadata"]["deletionTimestamp"])
    fake_wall[0] = ts - 1.0
    await kubelet.tick()
    await mirror.sync(block_ms=20)
    assert (ns, name) in mirror.objects            # still inside its grace period
    fake_wall[0] = ts + 0.01
    await kubelet.tick()
    await mirror.sync(block_ms=20)
    assert (ns, name) not in mirror.objects        # gone at deletionTimestamp, not 30 s later
    await _close(api)


def test_workload_until_stops_arrivals_early_and_keeps_the_plan_prefix(tmp_path):
    from ha.experiment.config import load_experiment
    p = tmp_path / "x.yaml"
    p.write_text("name: x\nduration: 60s\nworkload: {rate: 5/s, until: 20s}\n")
    wl = WorkloadConfig.from_experiment(load_experiment(p).workload, duration_s=60.0)
    assert wl.duration_s == 20.0
    full = WorkloadGenerator(WorkloadConfig.from_experiment(
        load_experiment(p).workload.model_copy(update={"until": None}), duration_s=60.0), seed=1).plan()
    early = WorkloadGenerator(wl, seed=1).plan()
    assert early and early[-1].arrival_s <= 20.0 < full[-1].arrival_s
    assert early == full[:len(early)]          # the same arrivals, just none after `until`
