"""``ha-testbed bench api-write``: API-server writes/s beside raw Redis XADD, measured interleaved.

* single: one ``ApiClient.create`` of a pod (validate, normalise, encode, ONE EVALSHA of
  lua/create.lua that checks, bumps the RV, stores, appends the watch event, trims) vs one raw
  redis-py ``XADD`` round trip of a payload of the same shape and size (a stored pod; msgpack
  encoding included);
* batched: ``bind_many`` of 100 pods per call (the binding done inside Redis by lua/bind.lua:
  read, check uid/deletion/nodeName, splice nodeName + PodScheduled into the stored bytes, store,
  append the event -- atomic per pod; two pipelined EVALSHAs of 50; the bound pods decoded and
  returned) vs a raw non-transactional pipeline of 100 ``XADD``\\ s of a stored bound pod;
* status: a PodScheduled condition on each of those pods by ``update_status_many`` (one request,
  50 writes per Lua call; a session's close sends its conditions so) vs the same writes one
  ``update_status`` call each.

The two sides alternate in small chunks so machine noise hits both alike. Targets: single >= 0.6x
raw, batched >= 0.5x raw.
"""
from __future__ import annotations

import os
import time
from contextlib import ExitStack

import msgpack
import redis

from cluster_state.client import ApiClient
from cluster_state.embedded import EmbeddedRedis
from ha.bench import BenchResult

BATCH = 100


def _pod(i: int) -> dict:
    return {"kind": "Pod",
            "metadata": {"name": f"p{i}", "namespace": "bench",
                         "labels": {"app": "bench", "tier": "batch"},
                         "annotations": {"scheduling.k8s.io/group-name": f"pg{i // 8}"}},
            "spec": {"schedulerName": "volcano", "priorityClassName": "low",
                     "containers": [{"name": "main", "resources": {"requests": {"cpu": "500m",
                                                                                "memory": "512Mi"}}}]},
            "status": {"phase": "Pending"}}


def _rate(n: int, seconds: float) -> float:
    return n / seconds if seconds > 0 else float("nan")


def _measure(url: str, quick: bool) -> BenchResult:
    rounds = 6 if quick else 20
    chunk = 100 if quick else 250                 # single writes per side per round
    batches_per_round = 2 if quick else 5         # bind_many calls per side per round
    prefix = f"bench{os.getpid()}{int(time.time() * 1000) % 100000}"
    r = redis.Redis.from_url(url, decode_responses=False)
    api = ApiClient(r, prefix)
    raw_key = f"{prefix}:raw"
    # warm up both paths (script load, connection); the raw side writes payloads of the same shape
    # and size as the API server stores: a created pod, and a bound one
    payload = api.create(_pod(10**9))
    bound_payload = api.bind("bench", f"p{10**9}", "n0")
    r.xadd(raw_key, {"t": "ADDED", "o": msgpack.packb(payload)}, maxlen=100_000, approximate=True)

    # pods to bind later, created outside the timed sections
    n_bind = rounds * batches_per_round * BATCH
    s_api = s_raw = b_api = b_raw = 0.0
    i = 0
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(chunk):
            api.create(_pod(i))
            i += 1
        s_api += time.perf_counter() - t0
        t0 = time.perf_counter()
        for _ in range(chunk):
            r.xadd(raw_key, {"t": "ADDED", "o": msgpack.packb(payload)}, maxlen=100_000, approximate=True)
        s_raw += time.perf_counter() - t0
    n_single = rounds * chunk
    # make sure enough unbound pods exist for the batched part
    while i < n_bind:
        api.create(_pod(i))
        i += 1
    j = 0
    for _ in range(rounds):
        for _ in range(batches_per_round):
            batch = [("bench", f"p{j + k}", f"n{(j + k) % 50}") for k in range(BATCH)]
            t0 = time.perf_counter()
            res = api.bind_many(batch)
            b_api += time.perf_counter() - t0
            j += BATCH
            bad = [x for x in res if not isinstance(x, dict)]
            if bad:
                raise RuntimeError(f"bench: bind_many failed: {bad[0]}")
        for _ in range(batches_per_round):
            t0 = time.perf_counter()
            pipe = r.pipeline(transaction=False)
            for _ in range(BATCH):
                pipe.xadd(raw_key, {"t": "MODIFIED", "o": msgpack.packb(bound_payload)}, maxlen=100_000,
                          approximate=True)
            pipe.execute()
            b_raw += time.perf_counter() - t0
    n_batched = rounds * batches_per_round * BATCH
    # the bound pods, read back only now: holding them through the binds slowed the binds
    # (the collector walked them)
    bound = sorted((p for p in api.list("Pod", "bench").items if p["spec"].get("nodeName")),
                   key=lambda p: p["metadata"]["name"])
    u_one, u_many, n_status = _status_writes(api, bound, rounds)
    # clean up this run's keys
    for k in r.scan_iter(match=f"{prefix}:*", count=1000):
        r.delete(k)
    r.close()

    single, single_raw = _rate(n_single, s_api), _rate(n_single, s_raw)
    batched, batched_raw = _rate(n_batched, b_api), _rate(n_batched, b_raw)
    status_many, status_one = _rate(n_status, u_many), _rate(n_status, u_one)
    params = {"single_writes": n_single, "batched_binds": n_batched, "batch": BATCH, "rounds": rounds,
              "status_writes": n_status,
              "payload_bytes": len(msgpack.packb(payload)),
              "bound_payload_bytes": len(msgpack.packb(bound_payload)), "redis": url.rsplit("@", 1)[-1],
              "targets": {"single": 0.6, "batched": 0.5}}
    return BenchResult(
        name="api-write single (create, 1 EVALSHA each)", value=round(single, 1), unit="writes/s",
        baseline=round(single_raw, 1), ratio=round(single / single_raw, 3), params=params,
        extra=[{"name": f"api-write batched (bind_many x{BATCH}: binding inside Redis)", "value": round(batched, 1),
                "unit": "writes/s", "baseline": round(batched_raw, 1),
                "ratio": round(batched / batched_raw, 3), "params": {"baseline": f"raw pipelined XADD x{BATCH}"}},
               {"name": "api-write status batched (update_status_many: a session close's conditions)",
                "value": round(status_many, 1), "unit": "writes/s", "baseline": round(status_one, 1),
                "ratio": round(status_many / status_one, 3),
                "params": {"baseline": "the same writes, one update_status call each",
                           "per_request": len(bound) // (2 * rounds)}}])


def _status_writes(api: ApiClient, pods: list[dict], rounds: int) -> tuple[float, float, int]:
    """A PodScheduled condition written on every pod, half of each round's pods one
    ``update_status`` call each, the other half in one ``update_status_many``; which goes first
    alternates. Returns (seconds one by one, seconds batched, writes per side)."""
    per = len(pods) // (2 * rounds)
    one = many = 0.0
    for k in range(rounds):
        part = pods[2 * k * per:2 * (k + 1) * per]
        sides = [part[:per], part[per:]]
        if k % 2:
            sides.reverse()
        objs = [_unschedulable(p, k) for p in sides[0]]
        t0 = time.perf_counter()
        for o in objs:
            api.update_status(o)
        one += time.perf_counter() - t0
        objs = [_unschedulable(p, k) for p in sides[1]]
        t0 = time.perf_counter()
        res = api.update_status_many(objs)
        many += time.perf_counter() - t0
        bad = [x for x in res if not isinstance(x, dict)]
        if bad:
            raise RuntimeError(f"bench: update_status_many failed: {bad[0]}")
    return one, many, rounds * per


def _unschedulable(pod: dict, k: int) -> dict:
    st = dict(pod.get("status") or {})
    st["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                         "message": f"0/50 nodes are available (round {k})"}]
    return {**pod, "status": st}


def run(quick: bool = False) -> BenchResult:
    url = os.environ.get("REDIS_URL")
    with ExitStack() as stack:
        if not url:
            url = stack.enter_context(EmbeddedRedis()).url
        return _measure(url, quick)
