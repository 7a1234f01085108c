"""A hollow kubelet for every node at once (KWOK-style): bound pods become Running after a startup
delay and Succeeded after their runtime (annotation ``ha-testbed/runtime-ms``; no annotation: they
run until deleted); pods being deleted disappear (DELETED) once their grace period has passed.

Timing uses the local monotonic clock from the moment *this kubelet saw* the pod bound/running, as
a real kubelet would (it learns of the binding through its own watch).

Optional admission (off by default, because the testbed wants to *see* overcommit in the API
server's truth): a bound pod whose requests no longer fit its node's allocatable next to the pods
already admitted there is set to phase Failed with reason OutOfcpu/OutOfmemory/OutOfpods — the last
line of defence of kubernetes #72043.
"""
from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field

from apimachinery.quantity import parse_quantity
from ha.runtime.mirror import KindMirror
from ha.runtime.workload import RUNTIME_ANNOTATION

__all__ = ["KubeletConfig", "Kubelet", "pod_requests"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class KubeletConfig:
    startup_delay_s: float = 0.5
    tick_s: float = 0.2
    admission: bool = False
    use_finalize: bool = True   # prefer the API server's finalize_deletions() over delete(grace=0)


def pod_requests(pod: dict) -> dict[str, int]:
    """Sum of the containers' requests (normalised units), plus ``pods: 1``."""
    total: dict[str, int] = {}
    for c in (pod.get("spec") or {}).get("containers") or []:
        for name, q in ((c.get("resources") or {}).get("requests") or {}).items():
            try:
                total[name] = total.get(name, 0) + int(parse_quantity(name, q))
            except Exception:  # malformed quantity: ignore it (the API server validates)
                continue
    total["pods"] = total.get("pods", 0) + 1
    return total


@dataclass
class KubeletStats:
    started: int = 0
    succeeded: int = 0
    finalized: int = 0
    rejected: int = 0
    conflicts: int = 0
    errors: int = 0


class Kubelet:
    def __init__(self, api, config: KubeletConfig | None = None, *, pods: KindMirror | None = None,
                 nodes: KindMirror | None = None, now=time.monotonic, wall=time.time):
        self.api = api
        self.config = config or KubeletConfig()
        self.pods = pods or KindMirror(api, "Pod")
        self.nodes = nodes or KindMirror(api, "Node")
        self._own_mirrors = pods is None
        self._now = now
        self._wall = wall
        self.stats = KubeletStats()
        self._bound_seen: dict[str, float] = {}    # uid -> local time first seen bound
        self._running_since: dict[str, float] = {}  # uid -> local time we set Running
        # the pods a tick looks at (bound and Pending, Running with a runtime, being deleted),
        # kept from the mirror's changes; the uid each pod key had when last seen
        self._changes = self.pods.changes()
        self._waiting: dict[tuple[str, str], None] = {}
        self._uid_of: dict[tuple[str, str], str] = {}

    async def run(self) -> None:
        while True:
            try:
                if self._own_mirrors:
                    await self.pods.sync(block_ms=50)
                    if self.config.admission:
                        await self.nodes.sync(block_ms=10)
                await self.tick()
            except asyncio.CancelledError:
                raise
            except Exception as e:  # a failed tick is retried; the world must keep turning
                self.stats.errors += 1
                log.warning("kubelet tick failed: %r", e)
            await asyncio.sleep(self.config.tick_s)

    async def _set_phase(self, pod: dict, phase: str, reason: str | None = None) -> bool:
        from cluster_state.errors import Conflict, NotFound
        new = {**pod, "status": {**(pod.get("status") or {}), "phase": phase}}
        if reason:
            new["status"]["reason"] = reason
        try:
            await self.api.update_status(new)
            return True
        except Conflict:
            self.stats.conflicts += 1   # a newer version exists; next tick sees it
        except NotFound:
            pass
        return False

    async def tick(self) -> None:
        """Act on the pods that need it: bound and Pending (start after the startup delay), Running
        with a runtime (succeed after it), being deleted (gone at the deletion timestamp). Which
        pods those are is kept from the mirror's changes, so a tick costs what changed plus what
        waits on a clock, not a walk of every pod; the ones it acts on are met in the order a walk
        of the mirror meets them, as the writes of a full walk were."""
        now = self._now()
        cfg = self.config
        self._take_changes(now)
        admitted: dict[str, dict[str, int]] = {}
        if cfg.admission:  # what already runs on each node is charged before admitting newcomers
            for pod in self.pods.objects.values():
                node = (pod.get("spec") or {}).get("nodeName") or ""
                if node and (pod.get("status") or {}).get("phase") == "Running":
                    self._charge(pod, node, admitted)
        due_deletion = []
        objects = self.pods.objects
        for key in self.pods.in_order(self._waiting):
            pod = objects[key]
            md = pod.get("metadata") or {}
            uid = md.get("uid") or ""
            spec = pod.get("spec") or {}
            phase = (pod.get("status") or {}).get("phase") or "Pending"
            node = spec.get("nodeName") or ""
            if md.get("deletionTimestamp") is not None:
                # the API server sets deletionTimestamp to the end of the grace period (as
                # Kubernetes does), so the grace is not added again here
                if self._wall() >= float(md["deletionTimestamp"]) - 1e-6 or \
                        float(md["deletionTimestamp"]) > self._wall() + 1e6:
                    due_deletion.append(pod)
                continue
            if phase == "Pending":
                seen = self._bound_seen.setdefault(uid, now)
                if cfg.admission and not self._admit(pod, node, admitted):
                    if await self._set_phase(pod, "Failed", "OutOfResources"):
                        self.stats.rejected += 1
                    continue
                if now - seen >= cfg.startup_delay_s:
                    if await self._set_phase(pod, "Running"):
                        self._running_since[uid] = now
                        self.stats.started += 1
            elif phase == "Running":
                since = self._running_since.setdefault(uid, now)
                runtime_s = _runtime_s(md)
                if runtime_s is not None and now - since >= runtime_s:
                    if await self._set_phase(pod, "Succeeded"):
                        self.stats.succeeded += 1
        if due_deletion:
            await self._finalize(due_deletion)

    def _take_changes(self, now: float) -> None:
        """Bring ``_waiting`` (the pods a tick must look at) up to the mirror; forget the pods
        that are gone (or replaced by another uid under the same name)."""
        objects = self.pods.objects
        for key in self._changes.drain():
            pod = objects.get(key)
            old_uid = self._uid_of.get(key)
            uid = ((pod.get("metadata") or {}).get("uid") or "") if pod is not None else None
            if old_uid is not None and old_uid != uid:
                self._bound_seen.pop(old_uid, None)
                self._running_since.pop(old_uid, None)
            if pod is None:
                self._uid_of.pop(key, None)
                self._waiting.pop(key, None)
                continue
            self._uid_of[key] = uid
            md = pod.get("metadata") or {}
            node = (pod.get("spec") or {}).get("nodeName") or ""
            phase = (pod.get("status") or {}).get("phase") or "Pending"
            if md.get("deletionTimestamp") is not None:
                waits = True
            elif not node:
                waits = False
            elif phase == "Pending":
                waits = True
            elif phase == "Running":
                # first seen running: its runtime counts from here (a pod without one runs on)
                self._running_since.setdefault(uid, now)
                waits = _runtime_s(md) is not None
            else:
                waits = False
            if waits:
                self._waiting[key] = None
            else:
                self._waiting.pop(key, None)

    async def _finalize(self, pods: list[dict]) -> None:
        from cluster_state.errors import ApiError, NotFound
        fin = getattr(self.api, "finalize_deletions", None)
        if self.config.use_finalize and fin is not None:
            try:
                res = await fin()
                self.stats.finalized += int(res) if isinstance(res, int) else len(res or [])
                return
            except ApiError:
                self.stats.errors += 1
        for pod in pods:
            md = pod["metadata"]
            try:
                await self.api.delete("Pod", md["name"], md.get("namespace"), grace_period_seconds=0)
                self.stats.finalized += 1
            except NotFound:
                pass
            except ApiError:
                self.stats.errors += 1

    # -- admission ---------------------------------------------------------------------------
    def _charge(self, pod: dict, node: str, admitted: dict[str, dict[str, int]]) -> None:
        used = admitted.setdefault(node, {})
        for r, v in pod_requests(pod).items():
            used[r] = used.get(r, 0) + v

    def _admit(self, pod: dict, node: str, admitted: dict[str, dict[str, int]]) -> bool:
        nd = self.nodes.objects.get(("", node))
        if nd is None:
            return False
        alloc = {}
        for r, q in ((nd.get("status") or {}).get("allocatable") or {}).items():
            try:
                alloc[r] = int(parse_quantity(r, q))
            except Exception:
                continue
        used = admitted.get(node, {})
        for r, v in pod_requests(pod).items():
            if r in alloc and used.get(r, 0) + v > alloc[r]:
                return False
        self._charge(pod, node, admitted)
        return True


def _runtime_s(md: dict) -> float | None:
    """A pod's runtime in seconds (annotation ``ha-testbed/runtime-ms``); None: it runs until
    deleted (no annotation, or one that is not a number)."""
    rt = (md.get("annotations") or {}).get(RUNTIME_ANNOTATION)
    if rt is None:
        return None
    try:
        return float(rt) / 1000.0
    except ValueError:
        return None
