"""``ha-testbed bench informer``: informer throughput and staleness beside raw Redis, same run.

1. Throughput. N Pod events (create + 2 annotation patches per pod) are written through the API
   server first. Then three processes replay that history at once, twice over:
   * baseline: raw ``XREAD COUNT 1000`` of the Pod stream (redis.asyncio, hiredis) + msgpack decode
     of every entry;
   * figure: an ``Informer`` (asyncio, RealFIFO, pass-through hook) watching the same history from
     the same RV (``start_rv``), every pod event applied to a Volcano ``SchedulerCache``
     (add_pod / update_pod), after the cache was synced with Nodes, Queues and PodGroups. Every
     event is fully decoded too (no lazy decoding): the reflector takes each watch page undecoded
     (``watch(..., decode=...)``) and decodes entry by entry straight into the store and handlers.
   Value = events/s per informer (mean of the three); ratio = value / raw events/s per reader.
2. Staleness. Three informers list + watch live while the parent creates pods paced at
   1,000 events/s, each stamping ``time.time()`` in ``ha-testbed/write-time``; staleness = the time
   the cache has applied the event - that stamp (ms), pooled over the three informers.
Targets: ratio >= 0.5, staleness p99 <= 5 ms. Processes are separate (one per scheduler instance,
as the Ray actors are), started with ``spawn``; everything runs on one private redis-server.
"""
from __future__ import annotations

import asyncio
import multiprocessing as mp
import os
import statistics
import tempfile
import time

from ha.bench import BenchResult

READERS = 3
PREFIX = "bench-informer"
NS = "bench"


# ------------------------------------------------------------------------------------------------ objects
def _node(i: int) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"n{i}"},
            "spec": {"unschedulable": False},
            "status": {"allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"},
                       "capacity": {"cpu": "32", "memory": "128Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def _queue() -> dict:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
            "metadata": {"name": "default"}, "spec": {"weight": 1}, "status": {"state": "Open"}}


def _pg(i: int) -> dict:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": f"pg{i}", "namespace": NS},
            "spec": {"minMember": 4, "queue": "default"}, "status": {"phase": "Inqueue"}}


def _pod(i: int) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"p{i}", "namespace": NS,
                         "labels": {"app": "bench", "job": f"pg{i // 4}"},
                         "annotations": {"scheduling.k8s.io/group-name": f"pg{i // 4}",
                                         "volcano.sh/task-spec": "worker"}},
            "spec": {"schedulerName": "volcano", "nodeName": "", "priority": 10,
                     "containers": [{"name": "main", "image": "busybox",
                                     "resources": {"requests": {"cpu": "500m", "memory": "1Gi"},
                                                   "limits": {"cpu": "1", "memory": "2Gi"}}},
                                    {"name": "sidecar", "image": "envoy",
                                     "resources": {"requests": {"cpu": "100m",
                                                                "memory": "128Mi"}}}],
                     "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]},
            "status": {"phase": "Pending",
                       "conditions": [{"type": "PodScheduled", "status": "False",
                                       "reason": "Unschedulable", "message": "waiting"}]}}


# ------------------------------------------------------------------------------------------------ cache
def _make_cache():
    """The scheduler cache the informers feed, wired as every instance wires its own."""
    from ha.scheduler.wiring import build_cache
    return build_cache(), "SchedulerCache"


class _DictStore:
    """The "dict" reader's handlers: the objects by name, no cache (the informer's own cost)."""

    def __init__(self, store: dict) -> None:
        self.store = store

    def on_add(self, obj, initial):
        self.store[obj["metadata"]["name"]] = obj

    def on_update(self, old, new):
        self.store[new["metadata"]["name"]] = new

    def on_delete(self, obj, tombstone=False):
        self.store.pop(obj["metadata"]["name"], None)


def _handler(wiring, kind: str, store: dict):
    return wiring.handlers[kind] if wiring is not None else _DictStore(store)


# ------------------------------------------------------------------------------------------------ children
def _child_raw(url: str, stream: str, start_rv: int, end_rv: int, ready, go, out) -> None:
    import msgpack
    import redis.asyncio as aredis

    async def main() -> None:
        r = aredis.Redis.from_url(url, decode_responses=False)
        await r.ping()
        ready.put(os.getpid())
        await asyncio.get_running_loop().run_in_executor(None, go.wait)
        unpackb = msgpack.unpackb
        n = 0
        last = f"{start_rv}-0"
        c0 = time.process_time()
        t0 = time.perf_counter()
        done = False
        while not done:
            res = await r.xread({stream: last}, count=1000, block=1000)
            for _name, entries in res:
                for eid, fields in entries:
                    obj = unpackb(fields[b"o"], raw=False, strict_map_key=False)
                    if fields[b"t"] and obj["metadata"]:
                        n += 1
                    last = eid
                if int(last.split(b"-")[0]) >= end_rv:
                    done = True
        out.put(("raw", n, time.perf_counter() - t0, time.process_time() - c0))
        await r.aclose()

    asyncio.run(main())


async def _sync_cluster_informers(aapi, wiring, store, gc_opts: dict | None = None) -> list:
    from cluster_state.informer import Informer
    infs = []
    for kind in ("Node", "Queue", "PodGroup"):
        inf = Informer(aapi, kind, block_ms=1000, **(gc_opts or {}))
        inf.add_event_handler(_handler(wiring, kind, store))
        await inf.start()
        infs.append(inf)
    for inf in infs:
        if not await inf.wait_for_sync(60):
            raise RuntimeError(f"bench: {inf.kind} informer did not sync")
    return infs


def _child_informer(url: str, start_rv: int, end_rv: int, mode: str, log_path: str | None,
                    tuned: bool, ready, go, out) -> None:
    """mode "cache": Informer -> SchedulerCache; "dict": Informer -> a dict per key;
    "watch": the informer's watch read (AsyncApiClient.watch(decode=raw_page), MULTI/EXEC XRANGE)
    in a loop, each entry decoded and dropped, no informer (the read path beside raw XREAD).
    tuned: the process runs with the scheduler instance's GC settings
    (cluster_state.informer.instance_gc_options()), else CPython's defaults."""
    from cluster_state.aio import AsyncApiClient
    from cluster_state.delivery import DeliveryLog
    from cluster_state.informer import Informer, instance_gc_options
    from cluster_state.reflector import decode_entry, raw_page

    gc_opts = instance_gc_options() if tuned else {}

    async def main() -> None:
        aapi = AsyncApiClient.from_url(url, prefix=PREFIX)
        if mode == "watch":
            ready.put(os.getpid())
            await asyncio.get_running_loop().run_in_executor(None, go.wait)
            c0 = time.process_time()
            t0 = time.perf_counter()
            rv, n = start_rv, 0
            while rv < end_rv:
                # the informer's read: undecoded pages, each entry decoded (and dropped here)
                page = await aapi.watch("Pod", rv, count=1000, decode=raw_page)
                for e in page.entries:
                    typ, obj, erv, _err = decode_entry("Pod", e)
                    if obj is not None:
                        n += 1
                    rv = erv
            out.put(("watch", n, time.perf_counter() - t0, 0, 0, time.process_time() - c0))
            await aapi.close()
            return
        wiring, _ = _make_cache()
        if mode == "dict":
            wiring = None
        cache = wiring.cache if wiring is not None else None
        store: dict = {}
        others = await _sync_cluster_informers(aapi, wiring, store, gc_opts)
        log = DeliveryLog(log_path, keep=False) if log_path else None
        inf = Informer(aapi, "Pod", start_rv=start_rv, block_ms=1000, log=log, **gc_opts)
        inf.add_event_handler(_handler(wiring, "Pod", store))
        ready.put(os.getpid())
        await asyncio.get_running_loop().run_in_executor(None, go.wait)
        c0 = time.process_time()
        t0 = time.perf_counter()
        await inf.start()
        while inf.delivered_rv < end_rv:
            await asyncio.sleep(0.002)
        dt = time.perf_counter() - t0
        cpu = time.process_time() - c0
        n_tasks = sum(len(j.tasks) for j in cache.jobs.values()) if cache is not None else len(store)
        out.put(("informer", inf.stats.delivered, dt, n_tasks, inf.stats.handler_errors, cpu))
        for i in [inf, *others]:
            await i.stop()
        if log is not None:
            log.close()
        await aapi.close()

    asyncio.run(main())


class _GcPauses:
    """Longest garbage-collector pauses (a full collection over a big cache stalls delivery)."""

    def __init__(self) -> None:
        import gc
        self.t0 = 0.0
        self.max_ms = {0: 0.0, 1: 0.0, 2: 0.0}
        gc.callbacks.append(self)

    def __call__(self, phase, info) -> None:
        if phase == "start":
            self.t0 = time.perf_counter()
        else:
            g = info.get("generation", 2)
            self.max_ms[g] = max(self.max_ms[g], (time.perf_counter() - self.t0) * 1000.0)


def _child_live(url: str, tuned: bool, ready, stop, out) -> None:
    from cluster_state.aio import AsyncApiClient
    from cluster_state.informer import Informer, instance_gc_options

    pauses = _GcPauses()
    # tuned: the scheduler instance's GC settings (instance_gc_options(): a larger gen-0
    # threshold; the synced cache, and every 2,000 events what arrived since, gc.freeze()d)
    gc_opts = instance_gc_options() if tuned else {}

    async def main() -> None:
        aapi = AsyncApiClient.from_url(url, prefix=PREFIX)
        wiring, _ = _make_cache()
        cache = wiring.cache
        store: dict = {}
        others = await _sync_cluster_informers(aapi, wiring, store, gc_opts)
        inf = Informer(aapi, "Pod", block_ms=1000, **gc_opts)
        inf.add_event_handler(_handler(wiring, "Pod", store))
        await inf.start()
        await inf.wait_for_sync(120)
        pauses.max_ms = {0: 0.0, 1: 0.0, 2: 0.0}
        ready.put(os.getpid())
        await asyncio.get_running_loop().run_in_executor(None, stop.wait)
        # the writer is done; let the last events arrive
        deadline = time.monotonic() + 10
        while inf.pending() and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)
        out.put(("live", list(inf.staleness_ms), inf.stats.handler_errors, pauses.max_ms[2]))
        for i in [inf, *others]:
            await i.stop()
        await aapi.close()

    asyncio.run(main())


# ------------------------------------------------------------------------------------------------ driver
def _spawn(ctx, target, args, n):
    procs = [ctx.Process(target=target, args=args, daemon=True) for _ in range(n)]
    for p in procs:
        p.start()
    return procs


def _collect(q, n: int, timeout: float, what: str) -> list:
    res = []
    for _ in range(n):
        try:
            res.append(q.get(timeout=timeout))
        except Exception:  # queue.Empty
            raise RuntimeError(f"bench informer: {what} did not report within {timeout:.0f}s") from None
    return res


def _join(procs) -> None:
    for p in procs:
        p.join(30)
        if p.is_alive():  # our own child, by its PID
            p.kill()
            p.join(5)


def _round(ctx, target, args_tail: tuple, what: str) -> list:
    ready, out, go = ctx.Queue(), ctx.Queue(), ctx.Event()
    procs = _spawn(ctx, target, (*args_tail, ready, go, out), READERS)
    try:
        _collect(ready, READERS, 180, f"{what} readers (start-up)")
        go.set()
        return _collect(out, READERS, 600, what)
    finally:
        _join(procs)


def _staleness_round(ctx, api, url: str, first: int, paced_s: float, rate: float,
                     tuned: bool) -> dict:
    """Three live informers; the parent creates pods paced at ``rate``, stamping the write time."""
    from cluster_state.delivery import WRITE_TIME_ANNOTATION
    ready, out, stop = ctx.Queue(), ctx.Queue(), ctx.Event()
    procs = _spawn(ctx, _child_live, (url, tuned, ready, stop, out), READERS)
    try:
        _collect(ready, READERS, 180, "live informers (start-up)")
        n_writes = int(paced_s * rate)
        t_start = time.perf_counter()
        for i in range(n_writes):
            due = t_start + i / rate
            ahead = due - time.perf_counter()
            if ahead > 0.0005:
                time.sleep(ahead)
            # creates: one round trip each (a patch is a GET + a write)
            pod = _pod(first + i)
            pod["metadata"]["annotations"][WRITE_TIME_ANNOTATION] = repr(time.time())
            api.create(pod)
        achieved = n_writes / (time.perf_counter() - t_start)
        stop.set()
        live = _collect(out, READERS, 120, "live informers")
    finally:
        _join(procs)
    samples = [x for _, xs, _, _ in live for x in xs]
    return {"samples": samples, "achieved": achieved, "errors": sum(e for _, _, e, _ in live),
            "gc2_max_ms": max(g for _, _, _, g in live), "expected": READERS * n_writes}


def _refreeze_every() -> int:
    from cluster_state.informer import instance_gc_options
    return instance_gc_options()["gc_refreeze_every"]


def _pct(xs: list[float], p: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    k = min(len(xs) - 1, max(0, int(round(p / 100.0 * (len(xs) - 1)))))
    return xs[k]


def run(quick: bool = False) -> BenchResult:
    from cluster_state.client import ApiClient
    from cluster_state.embedded import EmbeddedRedis

    n_pods = 2_000 if quick else 10_000
    rounds = 1 if quick else 2
    paced_s = 2.0 if quick else 6.0
    rate = 1000.0
    ctx = mp.get_context("spawn")
    load_start = os.getloadavg()[0]
    with EmbeddedRedis() as server:
        url = server.url
        api = ApiClient.from_url(url, prefix=PREFIX)
        for i in range(50):
            api.create(_node(i))
        api.create(_queue())
        for i in range((n_pods + 3) // 4):
            api.create(_pg(i))
        start_rv = api.current_resource_version()
        t0 = time.perf_counter()
        for i in range(n_pods):
            api.create(_pod(i))
        for r in range(2):
            for i in range(n_pods):
                api.patch_annotations("Pod", f"p{i}", NS, {"bench/round": str(r)})
        write_s = time.perf_counter() - t0
        end_rv = api.current_resource_version()
        n_events = end_rv - start_rv
        stream = api.stream_key("Pod")
        _, cache_kind = _make_cache()

        rates: dict[str, list[float]] = {"raw": [], "watch": [], "dict": [], "cache": [],
                                         "cache+log": [], "cache/default-gc": []}
        # CPU time per event of each reader (process time: what the machine's load does not
        # stretch, unlike the wall-clock rates; Redis' own work is not in it)
        cpu_us: dict[str, list[float]] = {k: [] for k in rates}
        errors = 0
        with tempfile.TemporaryDirectory(prefix="ha-bench-informer-") as tmp:
            # raw next to the figure (the machine's load drifts; neighbours compare best)
            plan = ["raw", "cache", "dict", "watch"] + ([] if quick else ["cache+log", "cache/default-gc"])
            for rnd in range(rounds):
                # odd rounds run the plan backwards, so the raw baseline and each informer variant
                # sit on average at the same point in time (the shared machine's load drifts)
                for what in (plan if rnd % 2 == 0 else plan[::-1]):
                    if what == "raw":
                        for _k, n, dt, cpu in _round(ctx, _child_raw, (url, stream, start_rv, end_rv),
                                                     "raw XREAD"):
                            if n != n_events:
                                raise RuntimeError(f"bench informer: a raw reader saw {n} of "
                                                   f"{n_events} events")
                            rates["raw"].append(n / dt)
                            cpu_us["raw"].append(cpu / n * 1e6)
                        continue
                    mode = what.split("+")[0].split("/")[0]
                    log_path = os.path.join(tmp, "delivery.log") if what.endswith("+log") else None
                    tuned = not what.endswith("/default-gc")
                    for _k, n, dt, tasks, herr, cpu in _round(ctx, _child_informer,
                                                              (url, start_rv, end_rv, mode, log_path, tuned),
                                                              what):
                        if n != n_events or (mode == "cache" and cache_kind == "SchedulerCache"
                                             and tasks != n_pods):
                            raise RuntimeError(f"bench informer ({what}): delivered {n} of "
                                               f"{n_events} events ({tasks} of {n_pods} tasks)")
                        errors += herr
                        rates[what].append(n / dt)
                        cpu_us[what].append(cpu / n * 1e6)

        # staleness at a paced rate: with the instance's GC settings (the figure), then with
        # CPython's defaults (for comparison)
        stale = {}
        first = n_pods
        for tuned in (True, False):
            stale[tuned] = _staleness_round(ctx, api, url, first, paced_s, rate, tuned)
            first += int(paced_s * rate)
            errors += stale[tuned]["errors"]
        samples = stale[True]["samples"]
        achieved = stale[True]["achieved"]
        n_writes = int(paced_s * rate)
        api.close()

    mean = {k: statistics.mean(v) for k, v in rates.items() if v}
    # per round: mean informer -> cache rate / mean raw rate of the same round
    per_round_ratio = [round(statistics.mean(rates["cache"][r * READERS:(r + 1) * READERS])
                             / statistics.mean(rates["raw"][r * READERS:(r + 1) * READERS]), 3)
                       for r in range(rounds)]
    raw, inf = mean["raw"], mean["cache"]
    p50, p99, mx = _pct(samples, 50), _pct(samples, 99), max(samples) if samples else float("nan")
    fp50, fp99 = _pct(stale[False]["samples"], 50), _pct(stale[False]["samples"], 99)
    params = {
        "readers": READERS, "events": n_events, "pods": n_pods, "rounds": rounds,
        "cache": cache_kind, "fifo": "real", "hook": "pass-through",
        "write_events_per_s": round(n_events / write_s, 1),
        "per_reader_eps": {k: [round(x) for x in v] for k, v in rates.items() if v},
        "cpu_us_per_event": {k: round(statistics.mean(v), 2) for k, v in cpu_us.items() if v},
        "cache_over_raw_by_cpu": round(statistics.mean(cpu_us["raw"]) / statistics.mean(cpu_us["cache"]), 3),
        "cache_over_raw_per_round": per_round_ratio,
        "order": "raw, cache, dict, watch[, cache+log, cache/default-gc] forwards in even rounds, "
                 "backwards in odd rounds (raw always next to the figure)",
        "load_avg_1m": {"start": round(load_start, 2), "end": round(os.getloadavg()[0], 2)},
        "paced_rate": rate, "paced_achieved": round(achieved, 1), "paced_s": paced_s,
        "staleness_samples": len(samples), "expected_samples": READERS * n_writes,
        "staleness_ms": {"p50": round(p50, 3), "p99": round(p99, 3), "max": round(mx, 3)},
        "gc": "informer processes use cluster_state.informer.instance_gc_options() (the scheduler "
              "instance's GC settings: watch pages applied in chunks of "
              f"{_refreeze_every()} events, each frozen after it) unless labelled default-gc",
        "decode": "every event fully msgpack-decoded by both sides (raw: decode and drop; informer: "
                  "decoded in its reflector, page by page, into the store and the cache; no lazy "
                  "decoding)",
        "gc_gen2_max_pause_ms": round(stale[True]["gc2_max_ms"], 1),
        "default_gc": {"staleness_ms": {"p50": round(fp50, 3), "p99": round(fp99, 3),
                                        "max": round(max(stale[False]["samples"] or [float("nan")]), 3)},
                       "samples": len(stale[False]["samples"]), "expected": stale[False]["expected"],
                       "paced_achieved": round(stale[False]["achieved"], 1),
                       "gc_gen2_max_pause_ms": round(stale[False]["gc2_max_ms"], 1)},
        "handler_errors": errors,
        "targets": {"ratio": ">= 0.5", "staleness_p99_ms": "<= 5"},
    }
    labels = {"watch": "API watch read + decode-and-drop, no informer (events/s per reader)",
              "dict": "informer -> dict store (events/s per informer)",
              "cache+log": "informer -> SchedulerCache + delivery log (events/s per informer)",
              "cache/default-gc": "informer -> SchedulerCache, CPython default GC (events/s per informer)"}
    extra = [{"name": labels[k], "value": mean[k], "unit": "events/s", "baseline": raw,
              "ratio": mean[k] / raw} for k in ("watch", "dict", "cache+log", "cache/default-gc") if k in mean]
    extra += [
        {"name": "informer staleness p50 @1k ev/s", "value": p50, "unit": "ms", "baseline": None,
         "ratio": None},
        {"name": "informer staleness p99 @1k ev/s", "value": p99, "unit": "ms", "baseline": None,
         "ratio": None},
        {"name": "staleness p50, CPython default GC", "value": fp50, "unit": "ms",
         "baseline": None, "ratio": None},
        {"name": "staleness p99, CPython default GC", "value": fp99, "unit": "ms",
         "baseline": None, "ratio": None},
    ]
    return BenchResult(name="informer -> SchedulerCache (events/s per informer)"
                       if cache_kind == "SchedulerCache" else "informer -> dict (events/s per informer)",
                       value=inf, unit="events/s", baseline=raw, ratio=inf / raw, params=params,
                       extra=extra)
