"""``ha-testbed bench scale``: three scheduler instances (Ray actors) over 5,000 nodes and 100,000 pods
while the living cluster runs at a steady arrival rate.

Set-up (an embedded Redis, one API server): 5,000 nodes (32 cpu, 256Gi, 110 pods), one queue;
99,000 *bound* pods (Running, 1.5 cpu each, ~20 per node, so the nodes are nearly full; PodGroups of
10, Running) and 1,000 *pending* pods (100 gangs of 10, 4 cpu each: they fit nowhere, so every
session works on all of them). The pending gangs' PodGroups are created only after the baseline
session window below, so that the same instances first measure a session without them.

Then, in one run, each figure beside its baseline:

* **initial sync** — three instances (``create_instance_actor``, leader-elected, warm standbys) list
  and watch every kind from scratch, concurrently; the figure is, per instance, actor start → its
  informers synced. Baseline: a raw list + decode of the same objects in this process (``HGETALL``
  of each kind's hash + the codec's msgpack decode, no informer, no cache).
* **RSS** — each instance's resident set after sync and at the end (the max is reported). Baseline:
  the RSS of an instance actor of the same class that was never started (the process floor: Python,
  Ray's core worker, the imported code).
* **session p50 / p99** — the leader's session durations (every session, from the instance's own
  records), while the 1,000 pending tasks exist and the living cluster runs (``ha.runtime.cluster``:
  kubelet, job controller, workload generator at a steady rate of small gangs that do fit; the
  window opens once it has listed the pods and acted on them once, the pending PodGroups created
  then).
  Baseline: the same leader's sessions before the pending PodGroups existed (same nodes, same
  bound pods, no pending work), but for its first: that one, the cold start (every node and job
  cloned for the first time), is a figure of its own beside the warm baseline's p50.
* **staleness p99** — write → applied to each instance's cache for the pods the workload created
  during the window (the instances' own measure). Baseline: a raw ``watch`` of the Pod stream in
  this process (API server watch + decode, no informer), same events, same stamps.
* **pods bound per second** — binds by the instances during the window. Baseline: pods the
  workload created per second in the same window (the offered load; ratio 1 = keeping up).

Targets (issue: scale): the three instances ≤ 8 GiB RSS together, initial sync ≤ 30 s, session
p99 ≤ 1 s with 1,000 pending tasks at 5,000 nodes. The anchor is KWOK's published figure: 1,000
nodes / 100,000 pods per controller on one machine.
"""
from __future__ import annotations

import os
import sys
import threading
import time
import uuid
from dataclasses import asdict

from ha.bench import BenchResult
from ha.bench.scale_cluster import (ARRIVAL_REQUEST, FULL, NODE, NS, QUICK, Sizes,  # noqa: F401
                                    pending_job as _pending_job,
                                    setup, start_arrival_cluster, stop_actors)

VERBOSE = bool(os.environ.get("HA_BENCH_VERBOSE"))
GIB = 1024 ** 3


def _note(msg: str) -> None:
    if VERBOSE:
        print(f"scale: {msg}", file=sys.stderr, flush=True)


def raw_list_decode(url: str, prefix: str) -> tuple[float, int]:
    """Baseline of the initial sync: HGETALL of every kind an instance lists, each object decoded
    with the API server's codec. Returns (seconds, objects)."""
    import redis
    from cluster_state.codec import decode
    from cluster_state.store import keys_for
    from ha.runtime.instance import KINDS
    keys = keys_for(prefix)
    r = redis.Redis.from_url(url)
    try:
        t0 = time.perf_counter()
        n = 0
        for kind in KINDS:
            for field, raw in r.hgetall(keys.obj(kind)).items():
                if field.startswith(b"\0"):
                    continue
                decode(raw)
                n += 1
        return time.perf_counter() - t0, n
    finally:
        r.close()


# ------------------------------------------------------------------------------------ watchers
class RawWatch(threading.Thread):
    """Baseline of staleness: the API server's watch of Pods (no informer, no cache), the
    write-time stamp of every ADDED pod against the time its event was decoded here."""

    def __init__(self, url: str, prefix: str, from_rv: int):
        super().__init__(daemon=True, name="scale-raw-watch")
        from cluster_state.client import ApiClient
        self.api = ApiClient.from_url(url, prefix=prefix)
        self.rv = from_rv
        self.samples: list[float] = []
        self.error: str | None = None
        self._halt = threading.Event()

    def run(self) -> None:
        from cluster_state.delivery import write_time_of
        try:
            while not self._halt.is_set():
                for ev in self.api.watch("Pod", self.rv, block_ms=200):
                    now = time.time()
                    self.rv = max(self.rv, ev.resource_version)
                    if ev.type == "ADDED" and ev.object is not None:
                        wt = write_time_of(ev.object)
                        if wt is not None:
                            self.samples.append((now - wt) * 1000.0)
        except Exception as e:  # noqa: BLE001 - reported in the result
            self.error = repr(e)

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=10)
        self.api.close()


class SessionSampler:
    """The leader's sessions, each one: every instance keeps a record of its sessions
    (``sessions_since``), read here twice a second -- a light call, where polling the whole of
    ``stats()`` four times a second to catch each session had cost the instances' event loops
    CPU beside the sessions being measured. ``poll()`` (the full stats: counters, errors) runs at
    the window's ends; the RSS is read from here (psutil) at each look."""

    def __init__(self, actors: dict):
        self.actors = actors
        self.seen: dict[str, int] = {}       # instance -> sessions read so far
        self.samples: list[float] = []
        # beside each sample: the session thread's CPU and its process's CPU meanwhile (ms)
        self.cpu: list[tuple[float | None, float | None]] = []
        self.phases: list[dict | None] = []    # and its phases: name -> [wall ms, thread CPU ms]
        self.skipped = 0                       # sessions whose record was gone when read
        self.rss_max: dict[str, int] = {}
        self.pids: dict[str, int] = {}
        self.stats: dict[str, dict] = {}

    def _note_rss(self) -> None:
        import psutil
        for name, pid in self.pids.items():
            try:
                self.rss_max[name] = max(self.rss_max.get(name, 0), _rss(pid))
            except psutil.NoSuchProcess:
                pass

    def poll(self, mark: bool = True) -> None:
        """The full stats of every instance; ``mark``: the sessions so far are not samples (the
        next look takes the ones after this)."""
        import ray
        names = list(self.actors)
        got = ray.get([self.actors[n].stats.remote() for n in names], timeout=60)
        for name, st in zip(names, got):
            self.stats[name] = st
            self.pids[name] = st["pid"]
            if mark or name not in self.seen:
                self.seen[name] = int(st.get("sessions") or 0)
        self._note_rss()

    def look(self) -> None:
        """Take the leader's sessions recorded since the last look."""
        import ray
        names = list(self.actors)
        got = ray.get([self.actors[n].sessions_since.remote(self.seen.get(n, 0)) for n in names],
                      timeout=60)
        for name, recs in zip(names, got):
            if not recs:
                continue
            self.skipped += max(0, recs[0]["n"] - self.seen.get(name, 0) - 1)
            self.seen[name] = recs[-1]["n"]
            for r in recs:
                if not r["leader"] or r["ms"] is None:
                    continue
                self.samples.append(float(r["ms"]))
                self.cpu.append((r.get("cpu_ms"), r.get("process_cpu_ms")))
                self.phases.append(r.get("phases_ms"))

    def window(self, seconds: float, min_sessions: int = 0, max_s: float | None = None,
               every_s: float = 0.5) -> None:
        """Look for ``seconds``, and on until ``min_sessions`` samples (at most ``max_s``)."""
        start = time.monotonic()
        while True:
            self.look()
            self._note_rss()
            el = time.monotonic() - start
            if el >= seconds and (len(self.samples) >= min_sessions or
                                  (max_s is not None and el >= max_s)):
                return
            time.sleep(every_s)

    def take_first(self) -> float | None:
        """Remove the first sample (and its CPU and phases); return it (None: no samples)."""
        if not self.samples:
            return None
        self.cpu.pop(0)
        self.phases.pop(0)
        return self.samples.pop(0)

    def reset_samples(self) -> None:
        self.samples, self.cpu, self.phases, self.skipped = [], [], [], 0


def _pct(xs: list[float], which: str) -> float | None:
    """``which`` ("p50" | "p99") of ``xs`` as the instances compute theirs."""
    from ha.runtime.instance import percentiles
    d = percentiles(xs)
    return None if d is None else d[which]


def _rss(pid: int) -> int:
    import psutil
    return psutil.Process(pid).memory_info().rss


# ------------------------------------------------------------------------------------ the run
def measure(sz: Sizes, *, url: str | None = None) -> dict:
    """The whole benchmark at sizes ``sz``; every figure and its baseline as a dict."""
    from cluster_state.embedded import EmbeddedRedis
    server = None
    if url is None:
        server = EmbeddedRedis().start()
        url = server.url
    try:
        return _measure(url, sz)
    finally:
        if server is not None:
            server.close()


def _measure(url: str, sz: Sizes) -> dict:
    import ray
    from cluster_state.client import ApiClient
    from ha.runtime.instance import InstanceConfig, create_instance_actor
    from ha.runtime.ray_local import start_ray, stop_ray
    from ha.scheduler.conf import default_conf

    prefix = f"bench-scale-{uuid.uuid4().hex[:6]}"
    out: dict = {"sizes": asdict(sz)}
    out["setup_s"] = setup(url, prefix, sz)
    _note(f"set up {sz.nodes} nodes, {sz.bound + sz.pending} pods in {out['setup_s']:.1f}s")
    out["raw_list_s"], out["raw_list_objects"] = raw_list_decode(url, prefix)
    _note(f"raw list+decode {out['raw_list_objects']} objects in {out['raw_list_s']:.2f}s")

    owned = not ray.is_initialized()
    handle = start_ray(num_cpus=2, object_store_memory=200 * 1024 * 1024)
    ns = f"bench-scale-{uuid.uuid4().hex[:6]}"
    actors: dict = {}
    idle = cluster = None
    raw = None
    try:
        base = default_conf()
        conf = {"actions": list(sz.actions),
                "tiers": [[{"name": p.name} for p in t.plugins] for t in base.tiers]}

        def cfg(name: str) -> InstanceConfig:
            return InstanceConfig(name=name, redis_url=url, prefix=prefix, mode="leader-elected",
                                  standby="warm", period_s=sz.period_s, profile="v1.14",
                                  lease_duration=15.0, lease_renew_deadline=10.0, lease_retry=2.0,
                                  sync_timeout_s=600.0, scheduler_conf=conf)
        # the process floor: an instance actor of the same class, never started
        idle = create_instance_actor(cfg("scale-idle"), max_restarts=0, namespace=ns)
        idle_pid = ray.get(idle.pid.remote(), timeout=120)
        out["rss_floor_bytes"] = _rss(idle_pid)

        names = [f"scheduler-{i}" for i in range(1, sz.instances + 1)]
        for n in names:
            actors[n] = create_instance_actor(cfg(n), max_restarts=0, namespace=ns)
        ray.get([a.ping.remote() for a in actors.values()], timeout=180)   # processes up
        # start() returns once the informers have listed and synced (warm standbys too)
        t0 = time.monotonic()
        starts = {actors[n].start.remote(): n for n in names}
        sync_s: dict[str, float] = {}
        pending = list(starts)
        while pending:
            done, pending = ray.wait(pending, num_returns=1, timeout=900)
            if not done:
                raise RuntimeError("the instances did not start within 900 s")
            for ref in done:
                ray.get(ref)
                sync_s[starts[ref]] = time.monotonic() - t0
        synced = ray.get([actors[n].wait_synced.remote(60.0) for n in names], timeout=120)
        if not all(synced):
            raise RuntimeError(f"instances not synced after start: {dict(zip(names, synced))}")
        out["sync_s"] = sync_s
        _note(f"synced: {sync_s}")

        sampler = SessionSampler(actors)
        sampler.seen = {n: 0 for n in names}     # every session from the first one
        sampler.poll(mark=False)
        out["rss_after_sync_bytes"] = {n: _rss(sampler.pids[n]) for n in names}
        # baseline sessions: the same leader, no pending work yet; its first session (every node
        # and job cloned for the first time, the fast path's arrays built) is the cold start,
        # reported on its own and not part of the baseline
        sampler.window(sz.baseline_window_s, sz.min_sessions + 1, sz.max_window_s)
        out["first_session_ms"] = sampler.take_first()
        out["baseline_sessions_ms"] = list(sampler.samples)
        out["baseline_sessions_cpu_ms"] = list(sampler.cpu)
        out["baseline_sessions_phases_ms"] = list(sampler.phases)
        out["baseline_sessions_skipped"] = sampler.skipped
        _note(f"baseline sessions: {len(sampler.samples)}, p99 {_pct(sampler.samples, 'p99')}")

        # the living cluster starts, and the window waits until it has listed the 100,000 pods
        # and acted on them once (seconds of its CPU): the window is its steady state
        cluster = start_arrival_cluster(url, prefix, sz, f"scale-cluster-{uuid.uuid4().hex[:6]}")
        # the 1,000 pending tasks become schedulable work; the window's samples are the sessions
        # from here on (the first one that meets them included)
        sampler.poll()
        sampler.reset_samples()
        api = ApiClient.from_url(url, prefix=prefix)
        for j in range(sz.pending // sz.gang):
            api.create(_pending_job(j, sz)[0])
        rv0 = api.current_resource_version()
        api.close()
        _note(f"the living cluster is up; {sz.pending // sz.gang} pending PodGroups created")
        raw = RawWatch(url, prefix, rv0)
        raw.start()
        ray.get([a.stats.remote(staleness_window="scale") for a in actors.values()], timeout=60)
        sampler.poll(mark=False)
        binds0 = {n: int(st.get("binds") or 0) for n, st in sampler.stats.items()}
        writes0 = {n: {k: int(st.get(k) or 0) for k in ("status_writes", "pod_group_writes")}
                   for n, st in sampler.stats.items()}
        c0 = ray.get(cluster.stats.remote(), timeout=120)
        w0 = time.monotonic()
        sampler.window(sz.window_s, sz.min_sessions, sz.max_window_s)
        c1 = ray.get(cluster.stats.remote(), timeout=120)
        window = time.monotonic() - w0
        sampler.poll(mark=False)
        stale = ray.get([a.stats.remote(staleness_window="scale") for a in actors.values()], timeout=60)
        raw.stop()
        out["window_s"] = window
        out["sessions_ms"] = list(sampler.samples)
        out["sessions_cpu_ms"] = list(sampler.cpu)
        out["sessions_phases_ms"] = list(sampler.phases)
        out["sessions_skipped"] = sampler.skipped
        out["binds"] = sum(int(sampler.stats[n].get("binds") or 0) - binds0[n] for n in names)
        # the leader's write-back during the window (pod conditions, PodGroup statuses)
        out["writes"] = {k: sum(int(sampler.stats[n].get(k) or 0) - writes0[n][k] for n in names)
                         for k in ("status_writes", "pod_group_writes")}
        out["created"] = int(c1["created_pods"]) - int(c0["created_pods"])
        out["staleness_ms"] = {n: st.get("staleness_window_ms") for n, st in zip(names, stale)}
        out["raw_staleness_ms"] = list(raw.samples)
        out["raw_watch_error"] = raw.error
        out["rss_max_bytes"] = dict(sampler.rss_max)
        out["errors"] = {n: {k: sampler.stats[n].get(k) for k in ("errors", "session_errors",
                                                                 "recent_session_errors",
                                                                 "fatal_cache_errors", "last_error")}
                         for n in names}
        out["leader"] = next((n for n in names if sampler.stats[n].get("is_leader")), None)
        out["node_clones"] = {n: sampler.stats[n].get("node_clones") for n in names}
        out["job_clones"] = {n: sampler.stats[n].get("job_clones") for n in names}
        out["cluster"] = {k: c1.get(k) for k in ("created_pods", "create_errors", "bound_pods", "pods")}
        return out
    finally:
        if raw is not None and raw.is_alive():
            raw.stop()
        stop_actors(cluster, list(actors.values()), [idle])
        if owned:
            stop_ray(handle)


# ------------------------------------------------------------------------------------ figures
def _row(name: str, value, unit: str, baseline, what: str, **params) -> dict:
    ratio = (value / baseline) if (value is not None and baseline) else None
    return {"name": name, "value": value, "unit": unit, "baseline": baseline, "ratio": ratio,
            "params": {"what": what, **params}}


def _cpu_pairs(pairs: list | None) -> list | None:
    if pairs is None:        # a measurement from before the CPU figures
        return None
    return [[None if x is None else round(x) for x in pair] for pair in pairs]


def _phase_rows(rows: list | None) -> list | None:
    if rows is None:         # a measurement from before the phase figures
        return None
    return [None if r is None else {k: [round(x) for x in v] for k, v in r.items()} for r in rows]


def result_from(m: dict, quick: bool) -> BenchResult:
    sz = m["sizes"]
    mib = 1024 * 1024
    names = sorted(m["sync_s"])
    rss = {n: m["rss_max_bytes"].get(n, 0) for n in names}
    rss_total = sum(rss.values())
    floor = m["rss_floor_bytes"]
    sync_max = max(m["sync_s"].values())
    p50, p99 = _pct(m["sessions_ms"], "p50"), _pct(m["sessions_ms"], "p99")
    b50, b99 = _pct(m["baseline_sessions_ms"], "p50"), _pct(m["baseline_sessions_ms"], "p99")
    st99 = [s["p99"] for s in m["staleness_ms"].values() if s]
    stale_p99 = max(st99) if st99 else None
    raw99 = _pct(m["raw_staleness_ms"], "p99")
    bound_per_s = m["binds"] / m["window_s"]
    offered = m["created"] / m["window_s"]
    pods = sz["bound"] + sz["pending"]
    targets = {"rss_total_le_8GiB": rss_total <= 8 * GIB, "sync_le_30s": sync_max <= 30.0,
               "session_p99_le_1s": p99 is not None and p99 <= 1000.0}
    params = {"quick": quick, "nodes": sz["nodes"], "pods": pods, "bound": sz["bound"],
              "pending": sz["pending"], "instances": sz["instances"], "mode": "leader-elected, warm",
              "period_s": sz["period_s"], "window_s": round(m["window_s"], 1),
              "arrivals_gangs_per_s": sz["rate_gangs_per_s"], "leader": m["leader"],
              "actions": list(sz["actions"]), "tiers": "Volcano's default plugins, every enabled* on",
              "sessions": len(m["sessions_ms"]), "sessions_skipped": m["sessions_skipped"],
              # every sampled session in order (a p99 over a few sessions is their max)
              "sessions_ms_in_order": [round(x) for x in m["sessions_ms"]],
              "writes_in_window": m.get("writes"),
              # snapshot reuse over the whole run, per instance: node and job clones reused / cloned
              "node_clones": m.get("node_clones"), "job_clones": m.get("job_clones"),
              # (session thread CPU, its process's CPU) in ms, in the same order: wall minus the
              # thread's CPU is waiting for the interpreter or a core
              "sessions_cpu_ms_in_order": _cpu_pairs(m.get("sessions_cpu_ms")),
              "baseline_sessions_cpu_ms_in_order": _cpu_pairs(m.get("baseline_sessions_cpu_ms")),
              # each sampled session's phases in the same order: {phase: [wall ms, thread CPU ms]}
              "sessions_phases_ms_in_order": _phase_rows(m.get("sessions_phases_ms")),
              "baseline_sessions_phases_ms_in_order": _phase_rows(m.get("baseline_sessions_phases_ms")),
              "baseline_sessions_ms_in_order": [round(x) for x in m["baseline_sessions_ms"]],
              "sync_s": {n: round(v, 2) for n, v in m["sync_s"].items()},
              "rss_mib": {n: round(v / mib) for n, v in rss.items()},
              "rss_after_sync_mib": {n: round(v / mib) for n, v in m["rss_after_sync_bytes"].items()},
              "setup_s": round(m["setup_s"], 1), "errors": m["errors"], "cluster": m["cluster"],
              "targets": {"rss_total_GiB": 8, "sync_s": 30, "session_p99_ms": 1000},
              "targets_met": targets,
              "anchor": "KWOK: 1,000 nodes / 100,000 pods per controller on one machine"}
    extra = [
        _row("scale-session-p50", p50, "ms", b50, "leader's session p50 with the pending tasks vs without",
             baseline_sessions=len(m["baseline_sessions_ms"])),
        _row("scale-first-session", m.get("first_session_ms"), "ms", b50,
             "the leader's first session (cold: every node and job cloned for the first time) vs "
             "its warm sessions' p50 before the pending tasks"),
        _row("scale-sync", sync_max, "s", m["raw_list_s"],
             f"initial list + sync of {pods} pods and {sz['nodes']} nodes (slowest of the instances) vs "
             f"raw HGETALL + decode of the same {m['raw_list_objects']} objects"),
        _row("scale-rss-total", rss_total / mib, "MiB", sz["instances"] * floor / mib,
             "the instances' RSS together (max seen) vs as many never-started instance actors"),
    ] + [
        _row(f"scale-rss-{n}", rss[n] / mib, "MiB", floor / mib, "RSS of one instance vs the process floor")
        for n in names
    ] + [
        _row("scale-staleness-p99", stale_p99, "ms", raw99,
             "write -> applied to the cache, worst instance's p99 over the window vs a raw watch of the same pods",
             samples={n: (s or {}).get("n") for n, s in m["staleness_ms"].items()},
             raw_samples=len(m["raw_staleness_ms"]), raw_watch_error=m["raw_watch_error"]),
        _row("scale-bound-per-s", bound_per_s, "pods/s", offered,
             "pods bound per second during the window vs pods created per second (offered load)",
             binds=m["binds"], created=m["created"]),
    ]
    return BenchResult(name="scale", value=p99, unit="ms", baseline=b99,
                       ratio=(p99 / b99) if (p99 is not None and b99) else None,
                       params={"what": "leader's session p99 with the pending tasks vs without", **params},
                       extra=extra)


def run(quick: bool, where: str = "actors", sessions: str = "5", rate: str = "",
        implementation: str = "model", volcano: str = "v1.14.1", volcano_source: str = "",
        model: str = "on") -> BenchResult:
    """``where``: ``actors`` (the benchmark above) or ``model`` (the same cluster in one scheduler
    cache in this process, the session timed phase by phase: ha/bench/scale_model.py);
    ``sessions``: how many sessions the model samples per window; ``rate``: the living cluster's
    arrivals in gangs per second (default: the sizes' own, 8 at full size).
    ``implementation``: ``model`` (the instances are the model's actors) or ``volcano`` (three
    vc-scheduler processes of ``volcano`` -- a version -- or ``volcano_source`` -- a checkout --
    through the API front, ha/bench/scale_volcano.py; ``model``: ``on`` runs the model's
    benchmark at the same sizes after it, for the baselines, ``off`` leaves it out)."""
    from dataclasses import replace
    from ha.errors import BadInput
    if implementation not in ("model", "volcano"):
        raise BadInput(f"bench scale: implementation: 'model' or 'volcano', got {implementation!r}")
    if model not in ("on", "off"):
        raise BadInput(f"bench scale: model: 'on' or 'off', got {model!r}")
    if implementation == "model" and (volcano_source or volcano != "v1.14.1"):
        raise BadInput("bench scale: volcano / volcano_source need implementation=volcano")
    sz = QUICK if quick else FULL
    if rate != "":
        try:
            r = float(rate)
        except ValueError:
            r = -1.0
        if not r > 0:
            raise BadInput(f"bench scale: rate: gangs per second, a positive number, got {rate!r}")
        sz = replace(sz, rate_gangs_per_s=r)
    if where == "model":
        from ha.bench import scale_model
        try:
            n = int(sessions)
        except ValueError:
            n = 0
        if n < 1:
            raise BadInput(f"bench scale: sessions: a positive integer, got {sessions!r}")
        return scale_model.result_from(scale_model.measure(sz, n), sz, quick)
    if where != "actors":
        raise BadInput(f"bench scale: where: 'actors' or 'model', got {where!r}")
    if implementation == "volcano":
        from ha.bench import scale_volcano
        binary = _volcano_binary(volcano, volcano_source)
        real = scale_volcano.measure(sz, binary)
        return scale_volcano.result_from(real, measure(sz) if model == "on" else None, quick)
    m = measure(sz)
    return result_from(m, quick)


def _volcano_binary(version: str, source: str):
    """The vc-scheduler to run (built when missing, as ``ha-testbed run`` builds it); BadInput
    naming why it cannot be had."""
    from ha.experiment.config import VolcanoSpec
    from ha.runtime.external.volcano import resolve_binary
    try:
        spec = VolcanoSpec(**({"source": source} if source else {"version": version}))
    except ValueError as e:
        from ha.errors import BadInput
        raise BadInput(f"bench scale: volcano: {e}") from None
    return resolve_binary(spec, log=lambda m: print(f"bench scale: {m}", file=sys.stderr, flush=True))
