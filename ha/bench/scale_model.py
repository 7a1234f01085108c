"""``ha-testbed bench scale --param where=model``: the scale benchmark's cluster in one scheduler
cache in this process -- no Ray, no Redis, no informer -- and the leader's session timed phase by
phase, to see where a session's time goes at 5,000 nodes / 100,000 pods without the contention of
three instances, the living cluster and Redis on the same cores.

The objects are ``ha.bench.scale``'s (same sizes, same requests): 99,000 bound Running pods in
PodGroups of 10, 1,000 pending pods in gangs of 10 that fit nowhere, one queue, fed to a
``SchedulerCache`` through its informer handlers as an initial list would. Sessions run as the
instance runs them (``run_session`` with the configured actions, Volcano's default plugins, the
automatic GC paused around each); the PodGroup status writes of a session are fed back into the
cache as the watch would deliver them, so the next session sees its own writes.

Figures: the session p50 / p99 with the pending gangs, beside the same cache's sessions before
their PodGroups existed (the baseline, as in the actor run), and beside the same sessions with
snapshot reuse off (every node and job cloned afresh; ha/scheduler/snapshot_reuse.py); each phase's median (snapshot, the
plugins' ``on_session_open`` besides the snapshot, the actions, ``close_session``); the cache
build (initial list) time. The first session of each window is not sampled: it fills the per-task
caches a running instance filled long before (``TaskInfo.k8s_requests``).
"""
from __future__ import annotations

import time
from typing import Any

from ha.bench import BenchResult

__all__ = ["measure", "result_from"]


def _build(sz: Any) -> tuple[Any, dict, Any]:
    from ha.bench.scale_cluster import NODE, bound_job as _bound_job
    from ha.experiment.objects import cluster_node, queue
    from ha.scheduler.wiring import build_cache
    cache, handlers = build_cache(profile="v1.14")
    rv = [0]

    def listed(o: dict) -> dict:
        rv[0] += 1
        md = o["metadata"]
        md.setdefault("uid", f"{md.get('namespace', '')}/{md['name']}")
        md["resourceVersion"] = rv[0]
        md.setdefault("creationTimestamp", float(rv[0]))
        return o

    handlers["Queue"].on_add(listed(queue("default")))
    for i in range(sz.nodes):
        handlers["Node"].on_add(listed(cluster_node(f"node-{i + 1}", NODE, {})))
    for j in range(-(-sz.bound // sz.gang)):
        pg, pods = _bound_job(j, sz)
        handlers["PodGroup"].on_add(listed(pg))
        for p in pods:
            handlers["Pod"].on_add(listed(p))
    return cache, handlers, listed


class _Phases:
    """Times the phases of the sessions of one cache: its ``snapshot`` is wrapped on the instance
    (``close`` takes the wrapper off) to split the snapshot from the plugins' opening."""

    def __init__(self, cache: Any) -> None:
        self.cache = cache
        self.cur: dict[str, float] = {}
        inner = cache.snapshot

        def snapshot(**kw: Any) -> Any:
            t = time.perf_counter()
            try:
                return inner(**kw)
            finally:
                self.cur["snapshot"] = time.perf_counter() - t

        cache.snapshot = snapshot

    def run(self, conf: Any, seed: int) -> tuple[float, dict[str, float]]:
        from cluster_state.gcpause import gc_paused
        from ha.scheduler.actions import get_action
        from ha.scheduler.framework.session import close_session, open_session
        self.cur = {}
        with gc_paused():
            t0 = time.perf_counter()
            ssn = open_session(self.cache, conf, seed=seed)
            t1 = time.perf_counter()
            for name in conf.actions:
                action = get_action(name)
                action.initialize()
                action.execute(ssn)
                action.uninitialize()
            t2 = time.perf_counter()
            close_session(ssn)
            t3 = time.perf_counter()
            release = getattr(ssn, "release", None)   # (a tree before Session.release)
            if release is not None:
                release()
        snap = self.cur.get("snapshot", 0.0)
        return t3 - t0, {"snapshot": snap, "plugins_open": t1 - t0 - snap, "actions": t2 - t1,
                         "close": t3 - t2}

    def close(self) -> None:
        del self.cache.snapshot   # the class's method again


def measure(sz: Any, sessions: int = 5) -> dict:
    from ha.bench.scale_cluster import pending_job as _pending_job
    from ha.scheduler.conf import SchedulerConf, default_conf
    t0 = time.perf_counter()
    cache, handlers, listed = _build(sz)
    out: dict = {"build_s": time.perf_counter() - t0, "sessions": sessions}
    base = default_conf()
    conf = SchedulerConf(actions=list(sz.actions), tiers=base.tiers, configurations=[],
                         source="<bench scale model>")
    io = cache.status_updater
    fed = [0]

    def feed_back() -> None:
        # the session's PodGroup writes, as the watch would deliver them
        for _key, pg in io.pod_group_writes[fed[0]:]:
            pg = dict(pg)
            pg["metadata"] = dict(pg["metadata"])
            handlers["PodGroup"].on_update(None, listed(pg))
        fed[0] = len(io.pod_group_writes)

    phases = _Phases(cache)
    try:
        def window(n: int) -> tuple[list[float], list[dict]]:
            secs, parts = [], []
            for k in range(n + 1):
                s, p = phases.run(conf, seed=k)
                feed_back()
                if k:               # the first one warms the per-task caches
                    secs.append(s)
                    parts.append(p)
            return secs, parts

        out["baseline_s"], out["baseline_phases"] = window(sessions)
        for j in range(sz.pending // sz.gang):
            pg, pods = _pending_job(j, sz)
            handlers["PodGroup"].on_add(listed(pg))
            for p in pods:
                handlers["Pod"].on_add(listed(p))
        pools = {"node_clones": cache.node_clones, "job_clones": cache.job_clones}
        st0 = {k: dict(p.stats) for k, p in pools.items()}
        out["session_s"], out["phases"] = window(sessions)
        for k, p in pools.items():
            out[k] = {s: v - st0[k][s] for s, v in p.stats.items()}
        # the same sessions with every node and job cloned afresh (snapshot reuse off): its baseline
        for p in pools.values():
            p.enabled = False
        try:
            out["no_reuse_s"], out["no_reuse_phases"] = window(sessions)
        finally:
            for p in pools.values():
                p.enabled = True
    finally:
        phases.close()
    return out


def result_from(m: dict, sz: Any, quick: bool) -> BenchResult:
    from ha.runtime.incarnation import percentiles
    ms = [s * 1000.0 for s in m["session_s"]]
    base = [s * 1000.0 for s in m["baseline_s"]]
    p, b = percentiles(ms), percentiles(base)

    def med(parts: list[dict], key: str) -> float:
        xs = sorted(x[key] * 1000.0 for x in parts)
        return xs[len(xs) // 2]

    extra = [{"name": "scale-model-session-p50", "value": p["p50"], "unit": "ms", "baseline": b["p50"],
              "ratio": p["p50"] / b["p50"] if b["p50"] else None,
              "params": {"what": "session p50 with the pending gangs vs without"}}]
    for key in ("snapshot", "plugins_open", "actions", "close"):
        v, bv = med(m["phases"], key), med(m["baseline_phases"], key)
        extra.append({"name": f"scale-model-{key}", "value": v, "unit": "ms", "baseline": bv,
                      "ratio": v / bv if bv else None,
                      "params": {"what": f"median {key} per session with the pending gangs vs without"}})
    if m.get("no_reuse_s"):
        nr = percentiles([s * 1000.0 for s in m["no_reuse_s"]])
        extra.append({"name": "scale-model-snapshot-reuse", "value": p["p99"], "unit": "ms",
                      "baseline": nr["p99"], "ratio": p["p99"] / nr["p99"] if nr["p99"] else None,
                      "params": {"what": "session p99 with the pending gangs: node and job clones reused "
                                         "between sessions vs every one cloned afresh (HA_SNAPSHOT_REUSE=0)",
                                 "p50": p["p50"], "baseline_p50": nr["p50"],
                                 "snapshot_ms": med(m["phases"], "snapshot"),
                                 "baseline_snapshot_ms": med(m["no_reuse_phases"], "snapshot"),
                                 "plugins_open_ms": med(m["phases"], "plugins_open"),
                                 "baseline_plugins_open_ms": med(m["no_reuse_phases"], "plugins_open"),
                                 "node_clones": m.get("node_clones"), "job_clones": m.get("job_clones")}})
    return BenchResult(
        name="scale-model", value=p["p99"], unit="ms", baseline=b["p99"],
        ratio=(p["p99"] / b["p99"]) if b["p99"] else None,
        params={"what": "session p99 in one process (no Ray, Redis, informer) with the pending gangs "
                        "vs without", "quick": quick, "where": "model", "nodes": sz.nodes,
                "bound": sz.bound, "pending": sz.pending, "actions": list(sz.actions),
                "sessions_sampled": len(ms), "cache_build_s": round(m["build_s"], 2),
                "target_session_p99_ms": 1000, "session_p99_le_1s": p["p99"] <= 1000.0},
        extra=extra)
