"""The reference cache: "what an up-to-date cache would hold under the same profile".

In the driver process, on a private asyncio loop thread: one informer per kind with no chaos hook
and no delivery log, feeding a :class:`SchedulerCache` built with the run's profile and switches
(it never schedules: its binder/evictor are an in-memory recorder that nothing calls). Its digest
is what the instances' digests are compared with (cache_divergence, resource_drift); its informer
stores are the API server's truth (overcommit, gangs); the pod updates it sees are the API server's
own event stream of nominations, binds and deletions (allocation drift, wasted evictions).

At the end, :meth:`ReferenceCache.consistency` compares the informer stores (the replay of the
API server's event stream) with a fresh list: a lost or phantom write shows as a mismatch.
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from ha.experiment.oracles import PodEvent, Truth, pod_events_of

__all__ = ["ReferenceCache", "PodEventRecorder", "KINDS"]

log = logging.getLogger(__name__)

KINDS = ("PriorityClass", "Queue", "Node", "PodGroup", "Pod")
DIVERGENCE_EXAMPLES = 25   # divergence.jsonl lines per instance and tick


def _key(obj: dict) -> str:
    md = obj.get("metadata") or {}
    ns = md.get("namespace")
    return f"{ns}/{md.get('name')}" if ns else str(md.get("name"))


class PodEventRecorder:
    """Informer handler: turns pod updates into PodEvents (nominated, bound, deleted)."""

    def __init__(self) -> None:
        self.events: list[PodEvent] = []

    def _note(self, old: dict | None, new: dict) -> None:
        self.events.extend(pod_events_of(old, new, time.time()))

    def on_add(self, obj, is_initial_list=False):
        self._note(None, obj)

    def on_update(self, old, new):
        self._note(old, new)

    def on_delete(self, obj, tombstone=False):
        self.events.append(PodEvent(time.time(), "deleted", _key(obj), (obj.get("metadata") or {}).get("uid")))

    def drain(self) -> list[PodEvent]:
        out, self.events = self.events, []
        return out


class _CacheFeed:
    def __init__(self, cache, kind: str):
        name = {"Pod": "pod", "Node": "node", "PodGroup": "pod_group", "Queue": "queue",
                "PriorityClass": "priority_class"}[kind]
        self._add = getattr(cache, f"add_{name}")
        self._update = getattr(cache, f"update_{name}", None)
        self._delete = getattr(cache, f"delete_{name}")
        self.errors = 0

    def _guard(self, fn, *a):
        try:
            fn(*a)
        except Exception as e:  # noqa: BLE001 — the reference must survive what an instance survives
            self.errors += 1
            log.debug("reference cache handler: %s", e)

    def on_add(self, obj, is_initial_list=False):
        self._guard(self._add, obj)

    def on_update(self, old, new):
        if self._update is None:
            self._guard(self._delete, old)
            self._guard(self._add, new)
        else:
            self._guard(self._update, old, new)

    def on_delete(self, obj, tombstone=False):
        self._guard(self._delete, obj)


class _Deletions:
    def __init__(self, into: dict[str, int]):
        self.into = into

    def on_add(self, obj, is_initial_list=False):
        pass

    def on_update(self, old, new):
        pass

    def on_delete(self, obj, tombstone=False):
        self.into[_key(obj)] = int((obj.get("metadata") or {}).get("resourceVersion") or 0)


class ReferenceCache:
    def __init__(self, redis_url: str, prefix: str, *, profile: str = "v1.14",
                 switches: dict[str, bool] | None = None, scheduler_name: str = "volcano",
                 default_queue: str = "default", block_ms: int = 200):
        self.redis_url, self.prefix = redis_url, prefix
        self.profile, self.switches = profile, dict(switches or {})
        self.scheduler_name, self.default_queue = scheduler_name, default_queue
        self.block_ms = block_ms
        self.loop = None
        self.api = None
        self.cache = None
        self.informers: dict[str, Any] = {}
        self.pod_events = PodEventRecorder()
        self.feeds: list[_CacheFeed] = []
        self.deletions: dict[str, dict[str, int]] = {}   # kind -> key -> RV of its DELETED

    # -- lifecycle (driver thread) -------------------------------------------------------------
    def start(self, timeout: float = 60.0) -> "ReferenceCache":
        from chaos.loop import LoopThread
        self.loop = LoopThread("reference-cache").start()
        self.loop.run(self._start(timeout), timeout=timeout + 10)
        return self

    async def _start(self, timeout: float) -> None:
        from cluster_state.aio import AsyncApiClient
        from cluster_state.informer import Informer
        from cluster_state.reflector import Backoff
        from ha.scheduler.cache import SchedulerCache
        from ha.scheduler.interfaces import RecordingIO
        from ha.scheduler.profiles import profile
        sw = profile(self.profile)
        if self.switches:
            sw = sw.with_(**self.switches)
        io = RecordingIO()
        self.cache = SchedulerCache(switches=sw, binder=io, evictor=io, status_updater=io,
                                    scheduler_names=(self.scheduler_name,),
                                    default_queue=self.default_queue)
        self.api = AsyncApiClient.from_url(self.redis_url, prefix=self.prefix)
        for kind in KINDS:
            # the reference is the "up-to-date cache": it must not sit out client-go's 0.8-30 s
            # (x2 jitter) backoff after a redis-restart while the instances it judges resume
            inf = Informer(self.api, kind, name=f"reference/{kind}", block_ms=self.block_ms,
                           backoff=Backoff(initial=0.05, cap=0.5, jitter=0.0))
            feed = _CacheFeed(self.cache, kind)
            self.feeds.append(feed)
            inf.add_event_handler(feed)
            if kind == "Pod":
                inf.add_event_handler(self.pod_events)
            inf.add_event_handler(_Deletions(self.deletions.setdefault(kind, {})))
            self.informers[kind] = inf
            await inf.start()
            await inf.wait_for_sync(timeout)

    def stop(self) -> None:
        if self.loop is None:
            return
        try:
            self.loop.run(self._stop(), timeout=30)
        except Exception as e:  # noqa: BLE001
            log.warning("stopping the reference cache: %s", e)
        self.loop.stop()
        self.loop = None

    async def _stop(self) -> None:
        for inf in reversed(list(self.informers.values())):
            try:
                await inf.stop()
            except Exception:  # noqa: BLE001
                pass
        if self.api is not None:
            await self.api.close()

    # -- queries (driver thread; run on the loop so they never race the handlers) ---------------
    def sample(self) -> tuple[dict, Truth, list[PodEvent]]:
        """(digest, truth, pod events since the last sample), all taken in one loop step."""
        def take():
            d = self.cache.digest()
            d["rvs"] = {k: i.delivered_rv for k, i in self.informers.items()}
            truth = Truth(pods={_key(p): p for p in self.informers["Pod"].store.list()},
                          nodes={_key(n): n for n in self.informers["Node"].store.list()},
                          pod_groups={_key(g): g for g in self.informers["PodGroup"].store.list()})
            return d, truth, self.pod_events.drain()
        return self.loop.call(take, timeout=30)

    def digest(self) -> dict:
        """The reference cache's digest alone (taken just before the instances are asked)."""
        return self.loop.call(self.cache.digest, timeout=30)

    def handler_errors(self) -> int:
        return sum(f.errors for f in self.feeds)

    def consistency(self, timeout: float = 15.0) -> dict[str, Any]:
        """Compare the informer stores (the API server's event stream, replayed) with a fresh list,
        per kind, once the informer has applied everything up to the list's resourceVersion.
        ``lost_writes``: listed objects whose listed state the stream never delivered (absent, or
        older, and not deleted since); ``phantoms``: stored objects the list does not hold that were
        not created after it."""
        async def one(kind, inf):
            res = await self.api.list(kind)
            lrv = int(res.resource_version)
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                seen = max(int(inf.delivered_rv or 0), int(inf.last_synced_rv or 0))
                if seen >= lrv and inf.pending() == 0:
                    break
                await asyncio.sleep(0.05)
            else:
                return {"caught_up": False, "list_rv": lrv}
            deleted = self.deletions.get(kind, {})
            listed = {_key(o): int((o.get("metadata") or {}).get("resourceVersion") or 0) for o in res.items}
            stored = {_key(o): int((o.get("metadata") or {}).get("resourceVersion") or 0) for o in inf.store.list()}
            lost = sorted(k for k, rv in listed.items()
                          if (k not in stored and deleted.get(k, 0) <= lrv) or (k in stored and stored[k] < rv))
            phantoms = sorted(k for k, rv in stored.items() if k not in listed and rv <= lrv)
            return {"caught_up": True, "list_rv": lrv, "listed": len(listed), "stored": len(stored),
                    "lost": lost[:10], "lost_n": len(lost), "phantoms": phantoms[:10],
                    "phantoms_n": len(phantoms)}

        async def go():
            kinds = {k: await one(k, inf) for k, inf in self.informers.items()}
            lost = sum(v.get("lost_n", 0) for v in kinds.values())
            phantom = sum(v.get("phantoms_n", 0) for v in kinds.values())
            caught = all(v["caught_up"] for v in kinds.values())
            return {"ok": caught and lost == 0 and phantom == 0, "caught_up": caught,
                    "lost_writes": lost, "phantoms": phantom, "kinds": kinds}
        return self.loop.run(go(), timeout=timeout * len(self.informers) + 30)


class OracleHub:
    """What the runner holds: the reference cache, the oracles, and each instance's decision
    cursor. ``tick`` is called at every measurement; ``summary`` merges the metrics into the
    runner's summary; ``finish`` checks the API server against its own event stream."""

    def __init__(self, redis_url: str, prefix: str, *, profile: str, switches: dict | None,
                 scheduler_name: str = "volcano", out=None):
        from ha.experiment.oracles import Oracles
        self.ref = ReferenceCache(redis_url, prefix, profile=profile, switches=switches,
                                  scheduler_name=scheduler_name)
        self.oracles = Oracles()
        self.since: dict[tuple[str, int], int] = {}
        self.error: str | None = None
        self.consistency: dict[str, Any] | None = None
        self._before: dict | None = None     # the reference digest at the start of a sampling window
        self._decisions_file = None
        self._divergence_file = None
        if out is not None:
            self._decisions_file = open(f"{out}/decisions.jsonl", "w", encoding="utf-8")
            self._divergence_file = open(f"{out}/divergence.jsonl", "w", encoding="utf-8")

    def start(self) -> "OracleHub":
        try:
            self.ref.start()
        except Exception as e:  # noqa: BLE001 — the run goes on; the metrics are absent, with why
            self.error = f"reference cache did not start: {type(e).__name__}: {e}"
            log.warning(self.error)
            self.ref.stop()
            self.ref = None
        return self

    def _pull_decisions(self, slots) -> list[dict]:
        import json
        import ray
        live = [s for s in slots.values() if s.alive and not s.paused and s.actor is not None]
        refs = {s.name: s.actor.decisions.remote(self.since.get((s.name, s.generation), 0)) for s in live}
        out: list[dict] = []
        for s in live:
            try:
                ds = ray.get(refs[s.name], timeout=10)
            except Exception:  # noqa: BLE001 — gone or slow: next tick
                continue
            for d in ds:
                d["generation"] = s.generation
            if ds:
                self.since[(s.name, s.generation)] = ds[-1]["seq"]
            out.extend(ds)
        out.sort(key=lambda d: d.get("t") or 0.0)
        if self._decisions_file is not None and out:
            for d in out:
                self._decisions_file.write(json.dumps(d, default=str) + "\n")
        return out

    def before_sample(self) -> None:
        """Called just before the instances' digests are requested: the truth at the start of the
        sampling window (see oracles.task_diff)."""
        self._before = None
        if self.ref is None:
            return
        try:
            self._before = self.ref.digest()
        except Exception as e:  # noqa: BLE001 — then the tick judges against the end of the window only
            log.debug("reference digest before sampling: %s", e)

    def tick(self, t: float, digests: dict, stats: dict, slots) -> dict[str, dict]:
        if self.ref is None:
            return {}
        try:
            decisions = self._pull_decisions(slots)
            ref_digest, truth, events = self.ref.sample()
            before, self._before = self._before, None
            rows = self.oracles.tick(t, digests, stats, ref_digest, truth, events, decisions,
                                     reference_before=before)
            self._write_divergence(t, digests, ref_digest, before, truth)
            return rows
        except Exception as e:  # noqa: BLE001 — a broken oracle must not stop the run
            self.error = f"oracle tick failed: {type(e).__name__}: {e}"
            log.exception("oracle tick")
            return {}

    def _write_divergence(self, t: float, digests: dict, ref: dict, before: dict | None, truth) -> None:
        """divergence.jsonl: the tasks behind each tick's cache_divergence (at most
        DIVERGENCE_EXAMPLES per instance and tick), so a reader can see what diverged and how."""
        import json
        if self._divergence_file is None:
            return
        counted = self.oracles.divergence.last_counted
        if not any(counted.get(n) for n in digests):
            return
        names = {(p.get("metadata") or {}).get("uid"): k for k, p in truth.pods.items()}
        rt, bt = ref.get("tasks") or {}, (before or {}).get("tasks") or {}
        for inst in sorted(digests):
            uids = sorted(counted.get(inst) or ())
            it = digests[inst].get("tasks") or {}
            for uid in uids[:DIVERGENCE_EXAMPLES]:
                self._divergence_file.write(json.dumps(
                    {"t": round(t, 3), "instance": inst, "pod": names.get(uid), "uid": uid,
                     "instance_state": it.get(uid), "reference": rt.get(uid),
                     "reference_before": bt.get(uid) if before is not None else "n/a",
                     "of": len(uids)}) + "\n")
        self._divergence_file.flush()

    def finish(self) -> None:
        if self.ref is None:
            return
        try:
            self.consistency = self.ref.consistency()
        except Exception as e:  # noqa: BLE001
            self.consistency = {"ok": None, "error": f"{type(e).__name__}: {e}"}

    def summary(self, s: dict[str, Any]) -> dict[str, Any]:
        """The runner's summary plus every oracle metric it does not hold already."""
        metrics, absent = self.oracles.summary()
        if self.ref is None or self.error:
            for k in absent:
                absent[k] = self.error or absent[k]
        for k, v in metrics.items():
            s.setdefault(k, v)
        self.absent = {k: v for k, v in absent.items() if k not in s}
        return s

    def extra(self) -> dict[str, Any]:
        return {"absent": getattr(self, "absent", {}), "error": self.error,
                "api_consistency": self.consistency,
                "reference_handler_errors": self.ref.handler_errors() if self.ref is not None else None,
                "divergence_t": self.oracles.divergence_t[-2000:]}

    def stop(self) -> None:
        for f in (self._decisions_file, self._divergence_file):
            if f is not None:
                f.close()
        self._decisions_file = self._divergence_file = None
        if self.ref is not None:
            self.ref.stop()
