"""``ha-testbed bench kube-api``: the Kubernetes REST front (kube_api) beside the store it serves,
same run, with three scheduler-instance endpoints open (each with its chaos door, no faults active,
as in a run) plus the observer.

1. List. N pods (100,000; ``--quick`` 10,000) in the store. Figure: an informer's first list,
   ``GET /api/v1/pods?limit=500&resourceVersion=0``, through an instance endpoint, the client
   reading the whole body and decoding it (orjson, the GC paused as below) -- pods/s.
   Baseline: the informer's own list-and-decode of the same objects (``ApiClient.list("Pod")``:
   one MULTI/EXEC, msgpack decode of every object, the cyclic GC paused as the informer pauses it
   for its first list) -- pods/s. The front pauses it likewise while it answers a list. Rounds
   alternate the two; the figures are each side's median over the rounds.
2. Watch. M pod events in the store's history (annotation patches). Figure: an HTTP watch from
   the first event's RV on an instance endpoint, the client reading blocks and decoding every
   line (orjson) until it has all M -- events/s. Baseline: the store's raw watch rate
   (``ApiClient.watch`` pages of 1,000 from the same RV, decoded WatchEvents) -- events/s.
   Extra: three HTTP watches at once, one per instance endpoint (events/s per client), beside
   three raw store watches at once (events/s per reader).
The front runs in a process of its own (spawned, as ``ha-testbed serve`` runs it), the clients
in this one; everything on one private redis-server. Both sides of each figure run back to back
in each round, alternating which goes first. Targets: both ratios >= 0.5.
"""
from __future__ import annotations

import asyncio
import gc
import http.client
import multiprocessing as mp
import os
import statistics
import time
from urllib.parse import urlparse

from ha.bench import BenchResult

PREFIX = "bench-kube-api"
NS = "bench"
INSTANCES = ("scheduler-1", "scheduler-2", "scheduler-3")
# what a client-go informer's reflector asks for first (docs/kube-api.md: answered whole)
INFORMER_LIST = "/api/v1/pods?limit=500&resourceVersion=0"


def _pod(i: int) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"p{i:06d}", "namespace": NS,
                         "labels": {"app": "bench", "job": f"pg{i // 4}"},
                         "annotations": {"scheduling.k8s.io/group-name": f"pg{i // 4}",
                                         "volcano.sh/task-spec": "worker"}},
            "spec": {"schedulerName": "volcano", "nodeName": "", "priority": 10,
                     "containers": [{"name": "main", "image": "busybox",
                                     "resources": {"requests": {"cpu": "500m", "memory": "1Gi"},
                                                   "limits": {"cpu": "1", "memory": "2Gi"}}}],
                     "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]},
            "status": {"phase": "Pending",
                       "conditions": [{"type": "PodScheduled", "status": "False",
                                       "reason": "Unschedulable", "message": "waiting"}]}}


def front_main(url: str, prefix: str, q, stop, *, instances: tuple[str, ...], observer: bool = True,
               log_dir: str | None = None) -> None:
    """A front's process for a benchmark: an ``observer`` endpoint (unless ``observer`` is off) and
    one endpoint per instance, their URLs put on ``q``, served until ``stop`` is set (request
    logs under ``log_dir`` when given)."""
    from kube_api.endpoint import EndpointChaos
    from kube_api.server import KubeFront

    async def main():
        front = KubeFront(url, prefix, keep_logs=False, log_dir=log_dir)
        urls = {"observer": (await front.add_endpoint("observer")).url} if observer else {}
        for name in instances:
            urls[name] = (await front.add_endpoint(name, chaos=EndpointChaos(name))).url
        gc.freeze()     # as `ha-testbed serve` does once started: the long-lived heap leaves the GC's walks
        q.put(urls)
        while not stop.is_set():
            await asyncio.sleep(0.2)
        await front.stop()
    asyncio.run(main())


def _front_main(url: str, prefix: str, q, stop) -> None:
    """The front's process: the observer and three instance endpoints until ``stop`` is set."""
    front_main(url, prefix, q, stop, instances=INSTANCES)


def _http_list(url: str, path: str) -> tuple[int, float, int]:
    import orjson
    u = urlparse(url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
    t0 = time.perf_counter()
    c.request("GET", path, headers={"Accept": "application/json"})
    r = c.getresponse()
    from cluster_state.gcpause import gc_paused
    with gc_paused():                # the client decodes as an informer's first list does
        body = r.read()
        obj = orjson.loads(body)
    dt = time.perf_counter() - t0
    c.close()
    if r.status != 200:
        raise RuntimeError(f"bench kube-api: GET {path}: {r.status} {body[:200]!r}")
    return len(obj["items"]), dt, len(body)


def _http_watch(url: str, rv: int, n: int) -> tuple[int, float]:
    """Read a watch as client-go's decoder does: big reads, split into lines, each line decoded."""
    import orjson
    u = urlparse(url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
    t0 = time.perf_counter()
    c.request("GET", f"/api/v1/pods?watch=true&resourceVersion={rv}&timeoutSeconds=600")
    r = c.getresponse()
    got = 0
    loads = orjson.loads
    rest = b""
    while got < n:
        block = r.read1(1 << 20)
        if not block:
            break
        lines = (rest + block).split(b"\n")
        rest = lines.pop()
        for line in lines:
            if loads(line)["type"] != "BOOKMARK":
                got += 1
    dt = time.perf_counter() - t0
    c.close()
    return got, dt


def _watch_child(url: str, rv: int, n: int, q) -> None:
    q.put(_http_watch(url, rv, n))


def _positive(name: str, value, default: int) -> int:
    from ha.errors import BadInput
    if value is None:
        return default
    try:
        n = int(value)
    except (TypeError, ValueError):
        n = 0
    if n < 1:
        raise BadInput(f"bench kube-api: --param {name}={value!r}: expected a positive integer")
    return n


def _raw_child(url: str, rv: int, n: int, q) -> None:
    from cluster_state.client import ApiClient
    api = ApiClient.from_url(url, prefix=PREFIX)
    q.put(_raw_watch(api, rv, n))
    api.close()


def _raw_watch(api, rv: int, n: int) -> tuple[int, float]:
    t0 = time.perf_counter()
    got = 0
    cur = rv
    while got < n:
        evs = api.watch("Pod", cur, block_ms=1000, count=1000)
        for ev in evs:
            if ev.type != "BOOKMARK":
                got += 1
            cur = max(cur, ev.resource_version)
        if not evs:
            break
    return got, time.perf_counter() - t0


def run(quick: bool = False, pods: str | int | None = None, events: str | int | None = None) -> BenchResult:
    """``pods`` / ``events`` (``--param pods=N``): other sizes than the defaults."""
    from cluster_state.client import ApiClient
    from cluster_state.embedded import EmbeddedRedis
    from cluster_state.gcpause import gc_paused

    n_pods = _positive("pods", pods, 10_000 if quick else 100_000)
    n_watch_pods = min(n_pods, _positive("events", events, 5_000 if quick else 20_000))
    rounds = 2 if quick else 3
    ctx = mp.get_context("spawn")
    load_start = os.getloadavg()[0]
    with EmbeddedRedis() as server:
        api = ApiClient.from_url(server.url, prefix=PREFIX)
        t0 = time.perf_counter()
        for i in range(n_pods):
            api.create(_pod(i))
        seed_s = time.perf_counter() - t0
        q, stop = ctx.Queue(), ctx.Event()
        proc = ctx.Process(target=_front_main, args=(server.url, PREFIX, q, stop), daemon=True)
        proc.start()
        try:
            urls = q.get(timeout=120)
            ep = urls[INSTANCES[0]]
            # --- list ------------------------------------------------------------------------
            base_rates, front_rates, body_mb = [], [], 0.0
            _http_list(ep, "/api/v1/namespaces/none/pods?resourceVersion=0")   # warm up the endpoint
            for rnd in range(rounds):
                order = ("store", "front") if rnd % 2 == 0 else ("front", "store")
                for what in order:
                    if what == "store":
                        t = time.perf_counter()
                        with gc_paused():          # as an informer's first list runs
                            res = api.list("Pod")
                        dt = time.perf_counter() - t
                        if len(res.items) != n_pods:
                            raise RuntimeError(f"bench kube-api: the store listed {len(res.items)} of {n_pods}")
                        del res
                        base_rates.append(n_pods / dt)
                    else:
                        n, dt, size = _http_list(ep, INFORMER_LIST)
                        if n != n_pods:
                            raise RuntimeError(f"bench kube-api: the front listed {n} of {n_pods}")
                        front_rates.append(n_pods / dt)
                        body_mb = size / 1e6
            # --- watch -----------------------------------------------------------------------
            start_rv = api.current_resource_version()
            for i in range(n_watch_pods):
                api.patch_annotations("Pod", f"p{i:06d}", NS, {"bench/round": "1"})
            n_events = api.current_resource_version() - start_rv
            raw_rates, http_rates, multi_rates = [], [], []
            for rnd in range(rounds):
                order = ("raw", "http") if rnd % 2 == 0 else ("http", "raw")
                for what in order:
                    if what == "raw":
                        n, dt = _raw_watch(api, start_rv, n_events)
                        if n != n_events:
                            raise RuntimeError(f"bench kube-api: the raw watch saw {n} of {n_events}")
                        raw_rates.append(n / dt)
                    else:
                        n, dt = _http_watch(ep, start_rv, n_events)
                        if n != n_events:
                            raise RuntimeError(f"bench kube-api: the HTTP watch saw {n} of {n_events}")
                        http_rates.append(n / dt)
            # three HTTP watches at once, one per instance endpoint (clients in processes of their own)
            wq = ctx.Queue()
            kids = [ctx.Process(target=_watch_child, args=(urls[name], start_rv, n_events, wq), daemon=True)
                    for name in INSTANCES]
            for k in kids:
                k.start()
            for _ in kids:
                n, dt = wq.get(timeout=600)
                if n != n_events:
                    raise RuntimeError(f"bench kube-api: a concurrent HTTP watch saw {n} of {n_events}")
                multi_rates.append(n / dt)
            for k in kids:
                k.join(30)
            # ... beside three raw store watches at once, each in a process of its own
            raw_multi = []
            kids = [ctx.Process(target=_raw_child, args=(server.url, start_rv, n_events, wq), daemon=True)
                    for _ in INSTANCES]
            for k in kids:
                k.start()
            for _ in kids:
                n, dt = wq.get(timeout=600)
                if n != n_events:
                    raise RuntimeError(f"bench kube-api: a concurrent raw watch saw {n} of {n_events}")
                raw_multi.append(n / dt)
            for k in kids:
                k.join(30)
        finally:
            stop.set()
            proc.join(30)
            if proc.is_alive():
                proc.kill()
                proc.join(10)
            api.close()

    # medians of the rounds (each round measures the two sides back to back, alternating which
    # goes first): the shared machine's load swings the single rounds by up to 2x
    front_list, base_list = statistics.median(front_rates), statistics.median(base_rates)
    http_w, raw_w = statistics.median(http_rates), statistics.median(raw_rates)
    list_ratio = front_list / base_list
    watch_ratio = http_w / raw_w
    params = {
        "pods": n_pods, "watch_events": n_events, "list_request": INFORMER_LIST, "rounds": rounds, "endpoints": ["observer", *INSTANCES],
        "list_body_mb": round(body_mb, 1), "seed_creates_per_s": round(n_pods / seed_s),
        "list_pods_per_s": {"front": [round(x) for x in front_rates], "store": [round(x) for x in base_rates]},
        "watch_events_per_s": {"http": [round(x) for x in http_rates], "raw": [round(x) for x in raw_rates],
                               "http_3_concurrent": [round(x) for x in multi_rates],
                               "raw_3_concurrent": [round(x) for x in raw_multi]},
        "load_avg_1m": {"start": round(load_start, 2), "end": round(os.getloadavg()[0], 2)},
        "figures": "median of the rounds, each side",
        "list_ratio_per_round": [round(f / b, 3) for f, b in zip(front_rates, base_rates)],
        "watch_ratio_per_round": [round(h / w, 3) for h, w in zip(http_rates, raw_rates)],
        "targets": {"list_ratio": ">= 0.5", "watch_ratio": ">= 0.5"},
    }
    extra = [
        {"name": "kube-api watch (HTTP client, events/s)", "value": round(http_w, 1), "unit": "events/s",
         "baseline": round(raw_w, 1), "ratio": round(watch_ratio, 3)},
        {"name": "kube-api watch, 3 endpoints at once (per client)", "value": round(statistics.mean(multi_rates), 1),
         "unit": "events/s", "baseline": round(statistics.mean(raw_multi), 1),
         "ratio": round(statistics.mean(multi_rates) / statistics.mean(raw_multi), 3)},
    ]
    return BenchResult(name="kube-api list (pods/s through the front)", value=round(front_list, 1), unit="pods/s",
                       baseline=round(base_list, 1), ratio=round(list_ratio, 3), params=params, extra=extra)
