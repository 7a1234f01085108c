"""``ha-testbed bench scale --param implementation=volcano [--param volcano=VERSION | --param
volcano_source=PATH]``: the scale benchmark's run shape with three real ``vc-scheduler`` processes
as the instances, beside the model's figures from the same command.

The cluster is ``ha.bench.scale``'s (``scale_cluster.py``: 5,000 nodes, 99,000 bound pods, 1,000
pending pods in gangs of 10 that fit nowhere; ``--quick``: 100 nodes, 2,000 pods), created in an
embedded Redis; a Kubernetes API front (``kube_api``) runs in a process of its own with one
endpoint per instance; each instance is a vc-scheduler process (leader-elected, lease 60 s / 45 s /
2 s -- ``LEASE`` says why not the model's 15 / 10 / 2 --, period 1 s, Volcano's own default actions ``enqueue, allocate, backfill`` with its default
plugins, every flag at Volcano's default) under its supervisor (``ha.runtime.external``, a Ray
actor), talking to its own endpoint. Then, as in the model's run: a baseline window without the
pending PodGroups, the living cluster (kubelet, job controller, workload at the same rate), the
pending PodGroups created, the window.

Figures, each read from the processes themselves:

* **initial sync** -- the leader's klog lines ``successfully acquired lease`` -> ``Scheduler
  completes Initialization and start to run`` (logged once ``WaitForCacheSync`` returned: every
  informer listed, 100,000 pods and 5,000 nodes in its cache). vc-scheduler's standbys are cold
  (informers start only once an instance leads), so one instance lists, where the model's three
  warm instances list at once; the model's figure is actor start -> informers synced, slowest of
  the three. Also reported: process spawn -> synced (election included).
* **session p50 / p99** -- from the leader's own ``/metrics``
  (``volcano_e2e_scheduling_latency_milliseconds``, one observation per session, OpenSession to
  CloseSession). The page is read four times a second; when its count went up by one, the sum's
  increase is that session's exact duration (by k: k sessions of the mean, counted in
  ``sessions_merged``). The histogram's own p99 (``histogram_quantile`` over its buckets, 5 ms
  doubling to 2.56 s) is reported beside it. The leader's first session (the cold one) is a figure
  of its own, as in the model's run.
* **RSS** -- ``VmRSS`` of ``/proc/<pid>/status`` of each vc-scheduler process (the processes' own
  PIDs, not their supervisors'), the max over the run, and after the leader's sync.
* **pods bound per second** -- the leader endpoint's ``binding`` requests answered 201 during the
  window (its request log), beside pods created per second.

Staleness is not measured: write -> applied to the cache happens inside the process
(``ha.runtime.external.observe.STALENESS_UNOBSERVED``).

:func:`result_from` turns a measurement (and the model's, ``ha.bench.scale.measure`` at the same
sizes, run after it in the same command unless ``model=off``) into the report.
"""
from __future__ import annotations

import json
import multiprocessing as mp
import os
import re
import sys
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from ha.bench import BenchResult
from ha.bench.scale_cluster import Sizes, pending_job, setup, start_arrival_cluster, stop_actors
from ha.runtime.external.supervisor import LEASE_ACQUIRED

__all__ = ["measure", "result_from", "SessionMeter", "klog_time", "vm_rss", "sync_from_log", "last_life",
           "INSTANCES", "SYNCED_LINE"]

INSTANCES = ("scheduler-1", "scheduler-2", "scheduler-3")
SYNCED_LINE = "Scheduler completes Initialization and start to run"
_KLOG = re.compile(r"^[IWEF](\d{2})(\d{2}) (\d{2}):(\d{2}):(\d{2})\.(\d{6})\s")
MIB = 1024 * 1024
# Lease duration, renew deadline, retry (s). Longer than the model's 15 / 10 / 2: the leader renews
# through its endpoint of the front, one Python event loop that decodes the 100,000 pods of the
# leader's first list without yielding; at 10 s the renewal timed out meanwhile on the loaded
# machine and the leader exited before its cache had synced (the front's limit, not Volcano's)
LEASE = (60.0, 45.0, 2.0)


# ------------------------------------------------------------------------------------ readers
def _note(msg: str) -> None:
    if os.environ.get("HA_BENCH_VERBOSE"):
        print(f"scale (volcano): {msg}", file=sys.stderr, flush=True)


def klog_time(line: str, *, year: int | None = None) -> float | None:
    """The wall-clock time (unix seconds) of a klog line's header (``I1127 22:23:02.269388``), read
    as local time as klog writes it; None for a line without one."""
    m = _KLOG.match(line)
    if not m:
        return None
    mo, d, h, mi, s, us = (int(x) for x in m.groups())
    y = year if year is not None else datetime.now().year
    return datetime(y, mo, d, h, mi, s, us).timestamp()


def sync_from_log(text: str) -> dict[str, float] | None:
    """From one life's log: the wall times of the Lease won and of the cache synced
    (``{"acquired": t, "synced": t}``), None until both lines are there."""
    acquired = synced = None
    for line in text.splitlines():
        if acquired is None and LEASE_ACQUIRED.search(line):
            acquired = klog_time(line)
        elif acquired is not None and SYNCED_LINE in line:
            synced = klog_time(line)
            break
    if acquired is None or synced is None:
        return None
    return {"acquired": acquired, "synced": synced}


def last_life(text: str, instance: str) -> tuple[int, str]:
    """The number and the log of the last life of ``instance`` in its log (the supervisor writes
    ``=== <instance> life N at`` before each)."""
    marks = list(re.finditer(rf"^=== {re.escape(instance)} life (\d+) at", text, re.M))
    if not marks:
        return 0, text
    return int(marks[-1].group(1)), text[marks[-1].start():]


def vm_rss(pid: int) -> int | None:
    """The process's resident set in bytes (``VmRSS`` of /proc/<pid>/status); None once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


@dataclass
class SessionMeter:
    """Each session's duration from successive reads of one process's e2e latency histogram
    (count, sum): a read whose count went up by one gives that session exactly; by k, k sessions
    of the mean (``merged`` counts them). A count that went down is a new process life: the
    reading starts again from it."""
    count: float = 0.0                # read from before the first session: it starts at none
    total: float = 0.0
    samples: list[float] = field(default_factory=list)
    merged: int = 0
    buckets: list | None = None       # the last read's cumulative buckets

    def read(self, e2e: dict[str, Any] | None) -> list[float]:
        """Take one read (``volcano_figures(...)["e2e_scheduling_latency_ms"]``); returns the
        sessions it adds."""
        if not e2e or e2e.get("count") is None:
            return []
        c, s = float(e2e["count"]), float(e2e.get("sum") or 0.0)
        self.buckets = e2e.get("buckets")
        if c < self.count:                 # a new life: its sessions so far, at their mean
            self.count, self.total = 0.0, 0.0
        dc, ds = c - self.count, s - self.total
        self.count, self.total = c, s
        if dc <= 0:
            return []
        n = int(round(dc))
        new = [ds / n] * n
        if n > 1:
            self.merged += n
        self.samples.extend(new)
        return new

    def take(self) -> list[float]:
        out, self.samples = self.samples, []
        return out


# ------------------------------------------------------------------------------------ the front
def _front_main(url: str, prefix: str, log_dir: str, q, stop) -> None:
    """The front's process: one endpoint per instance (request logs under ``log_dir``)."""
    from ha.bench.kube_api import front_main
    front_main(url, prefix, q, stop, instances=INSTANCES, observer=False, log_dir=log_dir)


def _action_totals(scraper: Any) -> dict[str, tuple[float, float]]:
    """{action: (count, sum ms)} of ``volcano_action_scheduling_latency_milliseconds`` ({} when
    the page cannot be read)."""
    from ha.runtime.external.observe.metrics import MetricsUnavailable
    try:
        rec = scraper.scrape()
    except MetricsUnavailable:
        return {}
    return {a: (float(h.get("count") or 0), float(h.get("sum") or 0.0))
            for a, h in (rec.get("action_latency_ms") or {}).items()}


def _binds_between(request_log: Path, t0: float, t1: float) -> int:
    n = 0
    try:
        with open(request_log, "rb") as f:
            for ln in f:
                if b'"binding"' not in ln:
                    continue
                r = json.loads(ln)
                if r.get("subresource") == "binding" and r.get("code") == 201 and t0 <= r["t"] <= t1:
                    n += 1
    except OSError:
        return 0
    return n


# ------------------------------------------------------------------------------------ the run
def measure(sz: Sizes, binary: Any, *, url: str | None = None) -> dict:
    """The run shape of ``ha.bench.scale`` with vc-scheduler instances (``binary``: a
    ``ha.runtime.external.volcano.VolcanoBinary``); every figure as a dict."""
    from cluster_state.embedded import EmbeddedRedis
    server = None
    if url is None:
        server = EmbeddedRedis().start()
        url = server.url
    try:
        return _measure(url, sz, binary)
    finally:
        if server is not None:
            server.close()


def _conf_yaml(sz: Sizes) -> str:
    from ha.scheduler.conf import SchedulerConf, default_conf
    from ha.scheduler.volcano_conf import volcano_yaml
    base = default_conf()
    # the plugin names only: every flag left to Volcano's own defaults (ApplyPluginConfDefaults)
    conf = SchedulerConf.from_dict({"actions": list(sz.actions),
                                    "tiers": [[{"name": p.name} for p in t.plugins] for t in base.tiers]},
                                   source="bench scale")
    return volcano_yaml(conf)


def _measure(url: str, sz: Sizes, binary: Any) -> dict:
    import ray
    from cluster_state.client import ApiClient
    from ha.runtime.external.observe.metrics import MetricsScraper, MetricsUnavailable
    from ha.runtime.external.process import ExternalConfig
    from ha.runtime.external.supervisor import create_external_actor
    from ha.runtime.ray_local import start_ray, stop_ray
    from kube_api.server import write_kubeconfig

    prefix = f"bench-scale-vc-{uuid.uuid4().hex[:6]}"
    out: dict = {"sizes": asdict(sz), "scheduler": binary.record()}
    out["setup_s"] = setup(url, prefix, sz)
    _note(f"set up {sz.nodes} nodes, {sz.bound + sz.pending} pods in {out['setup_s']:.1f}s")
    work = Path(tempfile.mkdtemp(prefix="ht-bench-scale-vc-"))
    tmp_root = tempfile.mkdtemp(prefix="ht-bsv-")        # short: unix-socket paths live under it
    ctx = mp.get_context("spawn")
    q, stop = ctx.Queue(), ctx.Event()
    front = ctx.Process(target=_front_main, args=(url, prefix, str(work / "kube-api"), q, stop), daemon=True)
    front.start()
    owned = not ray.is_initialized()
    handle = None
    actors: dict = {}
    cluster = None
    try:
        urls = q.get(timeout=120)
        handle = start_ray(num_cpus=2, object_store_memory=200 * 1024 * 1024)
        ns = f"bench-scale-vc-{uuid.uuid4().hex[:6]}"
        conf_yaml = _conf_yaml(sz)
        for name in INSTANCES[:sz.instances]:
            kc = write_kubeconfig(work / "volcano" / f"kubeconfig-{name}", urls[name])
            cfg = ExternalConfig(
                name=name, binary=binary.path, version=binary.version, endpoint_url=urls[name],
                kubeconfig=str(kc), workdir=str(work / "volcano" / name),
                log_path=str(work / "volcano" / f"{name}.log"),
                request_log=str(work / "kube-api" / name / "requests.jsonl"),
                delivery_log=str(work / "kube-api" / name / "delivery.log"),
                scheduler_conf_yaml=conf_yaml, redis_url=url, prefix=prefix, leader_elect=True,
                lease_duration=LEASE[0], lease_renew_deadline=LEASE[1], lease_retry=LEASE[2], period_s=sz.period_s,
                verbosity=2, restart_delay_s=1.0, tmp_root=tmp_root)
            actors[name] = create_external_actor(cfg, namespace=ns)
        ray.get([a.ping.remote() for a in actors.values()], timeout=180)
        t_spawn = time.time()
        ray.get([a.start.remote() for a in actors.values()], timeout=120)
        handles = {n: ray.get(a.handle.remote(), timeout=30) for n, a in actors.items()}
        pids = {n: h["pid"] for n, h in handles.items()}
        rss_max: dict[str, int] = {n: 0 for n in pids}

        def note_rss() -> None:
            for n, pid in pids.items():
                v = vm_rss(pid)
                if v is not None:
                    rss_max[n] = max(rss_max[n], v)

        # the leader, and its cache synced (its log says when), its /metrics read from the start.
        # A life that lost the Lease before it synced exits and is started again: the leader is
        # the instance whose current life has won the Lease and synced, its lives before counted
        deadline = time.monotonic() + 1200
        leader = None
        meter = SessionMeter()
        scraper = None
        sync = None
        while sync is None:
            if time.monotonic() > deadline:
                raise RuntimeError("bench scale (volcano): no instance led and synced within 1,200 s")
            note_rss()
            for n in actors:
                life, part = last_life(Path(handles[n]["log_path"]).read_text(errors="replace"), n)
                got = sync_from_log(part)
                if LEASE_ACQUIRED.search(part) and leader != (n, life):
                    # a new leading life: read its /metrics from before its first session (seen
                    # only once synced: its sessions so far are taken at their mean)
                    h = ray.get(actors[n].handle.remote(), timeout=30)
                    if h["life"] == life:
                        handles[n] = h
                        pids[n] = h["pid"]
                        rss_max.setdefault(n, 0)
                        leader = (n, life)
                        scraper = MetricsScraper(h["metrics_url"], timeout_s=5.0)
                        meter = SessionMeter()
                if got is not None and leader == (n, life):
                    sync = got
            if scraper is not None:
                try:
                    meter.read(scraper.scrape().get("e2e_scheduling_latency_ms"))
                except MetricsUnavailable:
                    pass
            if sync is None:
                time.sleep(0.25)
        leader, leader_life = leader
        out["lives_before_sync"] = leader_life
        t_spawn = handles[leader]["started_at"] if leader_life else t_spawn
        _note(f"{leader} leads and synced: {sync['synced'] - sync['acquired']:.1f}s after winning the Lease")
        out["leader"] = leader
        out["sync"] = {"acquired_to_synced_s": sync["synced"] - sync["acquired"],
                       "spawn_to_synced_s": sync["synced"] - t_spawn,
                       "spawn_to_acquired_s": sync["acquired"] - t_spawn}
        for n in actors:            # the current life of each (a standby may have restarted too)
            h = ray.get(actors[n].handle.remote(), timeout=30)
            handles[n], pids[n] = h, h["pid"]
        note_rss()
        out["rss_after_sync_bytes"] = {n: vm_rss(p) or 0 for n, p in pids.items()}

        def window(seconds: float, min_sessions: int) -> float:
            start = time.monotonic()
            got = 0
            while True:
                try:
                    got += len(meter.read(scraper.scrape().get("e2e_scheduling_latency_ms")))
                except MetricsUnavailable:
                    pass
                note_rss()
                el = time.monotonic() - start
                if el >= seconds and (got >= min_sessions or el >= sz.max_window_s):
                    return el
                time.sleep(0.25)

        window(sz.baseline_window_s, sz.min_sessions + 1)
        base = meter.take()
        out["first_session_ms"] = base[0] if base else None
        out["baseline_sessions_ms"] = base[1:]
        out["baseline_merged"] = meter.merged
        _note(f"baseline sessions: {len(base)} (first {out['first_session_ms']} ms)")

        cluster = start_arrival_cluster(url, prefix, sz, f"scale-vc-cluster-{uuid.uuid4().hex[:6]}")
        try:
            meter.read(scraper.scrape().get("e2e_scheduling_latency_ms"))
        except MetricsUnavailable:
            pass
        meter.take()
        merged0 = meter.merged
        _note("the living cluster is up; creating the pending PodGroups")
        api = ApiClient.from_url(url, prefix=prefix)
        for j in range(sz.pending // sz.gang):
            api.create(pending_job(j, sz)[0])
        api.close()
        c0 = ray.get(cluster.stats.remote(), timeout=120)
        a0 = _action_totals(scraper)
        w0 = time.time()
        out["window_s"] = window(sz.window_s, sz.min_sessions)
        w1 = time.time()
        a1 = _action_totals(scraper)
        # where the window's sessions went: each action's mean per session (its own histogram)
        out["actions_ms"] = {a: {"runs": round(c - a0.get(a, (0, 0.0))[0]),
                                 "mean_ms": round((t - a0.get(a, (0, 0.0))[1]) / (c - a0.get(a, (0, 0.0))[0]), 1)}
                             for a, (c, t) in a1.items() if c > a0.get(a, (0, 0.0))[0]}
        c1 = ray.get(cluster.stats.remote(), timeout=120)
        out["sessions_ms"] = meter.take()
        _note(f"window: {len(out['sessions_ms'])} sessions in {out['window_s']:.0f}s")
        out["sessions_merged"] = meter.merged - merged0
        out["histogram_buckets"] = meter.buckets
        out["created"] = int(c1["created_pods"]) - int(c0["created_pods"])
        out["binds"] = _binds_between(work / "kube-api" / leader / "requests.jsonl", w0, w1)
        out["rss_max_bytes"] = dict(rss_max)
        stats = ray.get([actors[n].stats.remote() for n in actors], timeout=60)
        out["restarts"] = {s["name"]: s.get("restarts") for s in stats}
        out["exits"] = {s["name"]: s.get("exits") for s in stats if s.get("exits")}
        out["cluster"] = {k: c1.get(k) for k in ("created_pods", "create_errors", "bound_pods", "pods")}
        return out
    finally:
        stop_actors(cluster, list(actors.values()), [])
        if owned and handle is not None:
            stop_ray(handle)
        stop.set()
        front.join(timeout=30)
        if front.is_alive():
            front.kill()
        import shutil
        shutil.rmtree(tmp_root, ignore_errors=True)
        if not os.environ.get("HA_BENCH_KEEP"):
            shutil.rmtree(work, ignore_errors=True)


# ------------------------------------------------------------------------------------ figures
def _pct(xs: list[float], which: str) -> float | None:
    from ha.runtime.instance import percentiles
    d = percentiles(xs)
    return None if d is None else d[which]


def _row(name: str, value, unit: str, baseline, what: str, **params) -> dict:
    ratio = (value / baseline) if (value is not None and baseline) else None
    return {"name": name, "value": value, "unit": unit, "baseline": baseline, "ratio": ratio,
            "params": {"what": what, **params}}


def result_from(m: dict, model: dict | None, quick: bool) -> BenchResult:
    """The report: the vc-scheduler run's figures, each beside the model's of the same sizes
    (``model``: ``ha.bench.scale.measure``'s dict; None: not run, no baselines)."""
    from ha.runtime.external.observe.metrics import histogram_quantile
    sz = m["sizes"]
    names = sorted(m["rss_max_bytes"])
    p50, p99 = _pct(m["sessions_ms"], "p50"), _pct(m["sessions_ms"], "p99")
    hist99 = histogram_quantile(0.99, m["histogram_buckets"]) if m.get("histogram_buckets") else None
    rss_total = sum(m["rss_max_bytes"].values())
    sync = m["sync"]["acquired_to_synced_s"]
    mp50 = mp99 = msync = mrss = mfirst = None
    if model is not None:
        mp50, mp99 = _pct(model["sessions_ms"], "p50"), _pct(model["sessions_ms"], "p99")
        msync = max(model["sync_s"].values())
        mrss = sum(model["rss_max_bytes"].values()) / MIB
        mfirst = model.get("first_session_ms")
    pods = sz["bound"] + sz["pending"]
    bound_per_s = m["binds"] / m["window_s"] if m["window_s"] else None
    params = {"quick": quick, "implementation": "volcano", "scheduler": m["scheduler"],
              "nodes": sz["nodes"], "pods": pods, "bound": sz["bound"], "pending": sz["pending"],
              "instances": sz["instances"], "mode": "leader-elected, cold standbys (Volcano's)",
              "period_s": sz["period_s"], "window_s": round(m["window_s"], 1), "leader": m["leader"],
              "actions": list(sz["actions"]), "tiers": "Volcano's default plugins, every flag at its default",
              "sessions": len(m["sessions_ms"]), "sessions_merged": m["sessions_merged"],
              "sessions_ms_in_order": [round(x, 1) for x in m["sessions_ms"]],
              "baseline_sessions_ms_in_order": [round(x, 1) for x in m["baseline_sessions_ms"]],
              "session_p99_from_histogram_ms": None if hist99 is None else round(hist99, 1),
              "sync_s": {k: round(v, 2) for k, v in m["sync"].items()},
              "rss_mib": {n: round(v / MIB) for n, v in m["rss_max_bytes"].items()},
              "rss_after_sync_mib": {n: round(v / MIB) for n, v in m["rss_after_sync_bytes"].items()},
              "setup_s": round(m["setup_s"], 1), "restarts": m.get("restarts"), "exits": m.get("exits"),
              "lease_s": list(LEASE), "leader_lives_before_sync": m.get("lives_before_sync"),
              "cluster": m.get("cluster"), "binds": m["binds"], "created": m["created"],
              "actions_ms_in_window": m.get("actions_ms"),
              "model": None if model is None else {
                  "sessions_ms_in_order": [round(x) for x in model["sessions_ms"]],
                  "sync_s": {n: round(v, 2) for n, v in model["sync_s"].items()},
                  "rss_mib": {n: round(v / MIB) for n, v in model["rss_max_bytes"].items()},
                  "leader": model.get("leader")},
              "baselines": "the model's figures (Ray-actor instances, warm standbys) at the same sizes, "
                           "measured after the vc-scheduler run in the same command"}
    extra = [
        _row("scale-volcano-session-p50", p50, "ms", mp50, "vc-scheduler leader's session p50 vs the model's"),
        _row("scale-volcano-first-session", m.get("first_session_ms"), "ms", mfirst,
             "the leader's first session after its cache synced vs the model leader's first"),
        _row("scale-volcano-baseline-p99", _pct(m["baseline_sessions_ms"], "p99"), "ms",
             None if model is None else _pct(model["baseline_sessions_ms"], "p99"),
             "session p99 before the pending PodGroups existed, vc-scheduler vs the model"),
        _row("scale-volcano-sync", sync, "s", msync,
             f"the leader: Lease won -> cache synced ({pods} pods, {sz['nodes']} nodes through its endpoint; "
             "one instance lists, the standbys are cold) vs the model: actor start -> informers synced, "
             "slowest of three warm instances"),
        _row("scale-volcano-rss-total", rss_total / MIB, "MiB", mrss,
             "VmRSS of the three vc-scheduler processes together (max seen) vs the model's three instance actors"),
    ] + [
        _row(f"scale-volcano-rss-{n}", m["rss_max_bytes"][n] / MIB, "MiB",
             None if model is None else model["rss_max_bytes"].get(n, 0) / MIB,
             "VmRSS of one vc-scheduler process (max seen) vs the model's instance of the same name")
        for n in names
    ] + [
        _row("scale-volcano-bound-per-s", bound_per_s, "pods/s", m["created"] / m["window_s"] if m["window_s"] else None,
             "pods the leader bound per second during the window vs pods created per second (offered load)"),
    ]
    return BenchResult(name="scale (vc-scheduler)", value=p99, unit="ms", baseline=mp99,
                       ratio=(p99 / mp99) if (p99 is not None and mp99) else None,
                       params={"what": "vc-scheduler leader's session p99 with the pending tasks (its /metrics) "
                                       "vs the model leader's at the same sizes", **params},
                       extra=extra)
