"""A job controller for gang jobs (a PodGroup and its pods), the part of Volcano's job controller that
matters to a scheduler testbed:

* a pod of an unfinished job that was evicted (deleted) or Failed is re-created with a NEW uid and a
  new name: ``<slot-base>-r<attempt>`` (annotation ``ha-testbed/attempt``), so cyclic evictions are
  visible; a Failed pod is deleted first (grace 0), an evicted one is re-created once it is gone;
* a job is complete when every slot has a Succeeded pod; then nothing is re-created, and optionally
  its pods are deleted (keeps caches small in long runs).

The PodGroup's status (phase, running / succeeded / failed counts, conditions) is the scheduler's
alone, as in Volcano, where the scheduler's job updater writes it and the job controller writes the
Job's status, never the PodGroup's. A second writer would race the scheduler's full-object PodGroup
updates (every race a 409 for one of them) and would show phases the scheduler never decided.

State is rebuilt from the API server on start (slots are remembered from the pods seen), so the
controller survives its actor's restart.
"""
from __future__ import annotations

import asyncio
import copy
import logging
import re
import time
from dataclasses import dataclass

from ha.runtime.mirror import KindMirror
from ha.runtime.workload import ATTEMPT_ANNOTATION, GROUP_ANNOTATION, SLOT_ANNOTATION

__all__ = ["ControllerConfig", "JobController", "slot_of"]

log = logging.getLogger(__name__)

_RETRY_SUFFIX = re.compile(r"^(?P<base>.+)-r(?P<n>\d+)$")


@dataclass(frozen=True)
class ControllerConfig:
    recreate: bool = True
    delete_finished: bool = False
    tick_s: float = 0.5


def slot_of(pod: dict) -> tuple[str, int]:
    """(slot base name, attempt) of a pod: from its annotations, else from its name."""
    md = pod.get("metadata") or {}
    ann = md.get("annotations") or {}
    name = md.get("name") or ""
    base = ann.get(SLOT_ANNOTATION)
    attempt = ann.get(ATTEMPT_ANNOTATION)
    m = _RETRY_SUFFIX.match(name)
    if base is None:
        base = m.group("base") if m else name
    try:
        n = int(attempt) if attempt is not None else (int(m.group("n")) if m else 0)
    except ValueError:
        n = 0
    return base, n


@dataclass
class ControllerStats:
    recreated: int = 0
    failed_deleted: int = 0
    completed_jobs: int = 0
    finished_pods_deleted: int = 0
    errors: int = 0


class JobController:
    def __init__(self, api, config: ControllerConfig | None = None, *,
                 pods: KindMirror | None = None, podgroups: KindMirror | None = None, wall=time.time):
        self.api = api
        self._wall = wall   # write-time stamps of re-created pods
        self.config = config or ControllerConfig()
        self.pods = pods or KindMirror(api, "Pod")
        self.podgroups = podgroups or KindMirror(api, "PodGroup")
        self._own_mirrors = pods is None
        self.stats = ControllerStats()
        # (ns, job) -> {slot base: (template pod, highest attempt seen)}
        self._slots: dict[tuple[str, str], dict[str, tuple[dict, int]]] = {}
        self._completed: set[tuple[str, str]] = set()
        # kept from the mirrors' changes: each pod's job, each job's pods, the jobs to look at
        self._pod_changes = self.pods.changes()
        self._pg_changes = self.podgroups.changes()
        self._job_of: dict[tuple[str, str], tuple[str, str]] = {}
        self._pods_of: dict[tuple[str, str], dict[tuple[str, str], None]] = {}
        self._dirty: dict[tuple[str, str], None] = {}
        self._wrote = False   # the job being reconciled tried a write

    async def run(self) -> None:
        while True:
            try:
                if self._own_mirrors:
                    await self.pods.sync(block_ms=50)
                    await self.podgroups.sync(block_ms=10)
                await self.tick()
            except asyncio.CancelledError:
                raise
            except Exception as e:
                self.stats.errors += 1
                log.warning("job controller tick failed: %r", e)
            await asyncio.sleep(self.config.tick_s)

    def jobs(self) -> dict[str, dict]:
        """Per job: phase, slots, running/succeeded/failed — for stats and tests."""
        out = {}
        by_job = self._pods_by_job()
        for (ns, name), pg in self.podgroups.objects.items():
            pods = by_job.get((ns, name), [])
            st = pg.get("status") or {}
            out[f"{ns}/{name}"] = {"phase": st.get("phase"), "slots": len(self._slots.get((ns, name), {})),
                                   "pods": len(pods),
                                   "running": sum(_phase(p) == "Running" for p in pods),
                                   "succeeded": sum(_phase(p) == "Succeeded" for p in pods)}
        return out

    def _pods_by_job(self) -> dict[tuple[str, str], list[dict]]:
        by_job: dict[tuple[str, str], list[dict]] = {}
        for (ns, _), pod in self.pods.objects.items():
            grp = ((pod.get("metadata") or {}).get("annotations") or {}).get(GROUP_ANNOTATION)
            if grp:
                by_job.setdefault((ns, grp), []).append(pod)
        return by_job

    async def tick(self) -> None:
        """Reconcile the jobs whose PodGroup or pods changed since the last tick, and those whose
        last reconcile wrote (its result, or its failure, may need another look); a job nothing
        touched would be reconciled to the same nothing. Jobs are met in the order of the
        PodGroup mirror and a job's pods in the order of the Pod mirror: the order a walk of
        every job met them in, so the writes come out in the same order."""
        dirty = self._take_changes()
        pgs = self.podgroups.objects
        retry: dict[tuple[str, str], None] = {}
        for key in self.podgroups.in_order(dirty):
            pods = self._job_pods(key)
            if key not in self._slots:   # first met, or forgotten while its PodGroup was away
                slots = self._slots[key] = {}
                for pod in pods:
                    self._remember(slots, pod)
            self._wrote = False
            await self._sync_job(key, pods)
            if self._wrote:
                retry[key] = None
        # forget jobs whose PodGroup is gone
        for key in [k for k in dirty if k in self._slots and k not in pgs]:
            self._slots.pop(key, None)
            self._completed.discard(key)
        self._dirty = retry

    def _take_changes(self) -> dict[tuple[str, str], None]:
        """The jobs to reconcile this tick: the index of pods by job brought up to the Pod
        mirror (slots remembered from each changed pod, in the mirror's order), the changed
        PodGroups, and the jobs carried over from the last tick."""
        pkeys = self._pod_changes.drain()
        objects = self.pods.objects
        dirty = self._dirty
        gone = [k for k in pkeys if k not in objects]
        for pkey in gone + self.pods.in_order(pkeys):
            pod = objects.get(pkey)
            old = self._job_of.get(pkey)
            new = None
            if pod is not None:
                grp = ((pod.get("metadata") or {}).get("annotations") or {}).get(GROUP_ANNOTATION)
                if grp:
                    new = (pkey[0], grp)
            if old is not None:
                dirty[old] = None
                if old != new:
                    members = self._pods_of.get(old)
                    if members is not None:
                        members.pop(pkey, None)
                        if not members:
                            del self._pods_of[old]
            if new is None:
                self._job_of.pop(pkey, None)
                continue
            self._job_of[pkey] = new
            self._pods_of.setdefault(new, {})[pkey] = None
            dirty[new] = None
            slots = self._slots.get(new)
            if slots is not None:   # else the job's reconcile remembers all its pods at once
                self._remember(slots, pod)
        for gkey in self._pg_changes.drain():
            dirty[gkey] = None
        return dirty

    def _job_pods(self, key: tuple[str, str]) -> list[dict]:
        objects = self.pods.objects
        return [objects[k] for k in self.pods.in_order(self._pods_of.get(key, ()))]

    @staticmethod
    def _remember(slots: dict[str, tuple[dict, int]], pod: dict) -> None:
        """A slot's template is its pod of the highest attempt seen."""
        base, n = slot_of(pod)
        old = slots.get(base)
        if old is None or n >= old[1]:
            slots[base] = (pod, n)

    async def _sync_job(self, key, pods: list[dict]) -> None:
        slots = self._slots.get(key, {})
        by_slot: dict[str, list[dict]] = {}
        for pod in pods:
            by_slot.setdefault(slot_of(pod)[0], []).append(pod)
        done = bool(slots) and all(any(_phase(p) == "Succeeded" for p in by_slot.get(b, []))
                                   for b in slots)
        if done and key not in self._completed:
            self._completed.add(key)
            self.stats.completed_jobs += 1
        done = done or key in self._completed
        if not done and self.config.recreate:
            for base, (template, attempt) in slots.items():
                mine = by_slot.get(base, [])
                if any(_phase(p) == "Succeeded" or (_phase(p) != "Failed" and not _deleting(p))
                       for p in mine):
                    continue  # the slot has a live (or finished) pod
                failed = [p for p in mine if _phase(p) == "Failed" and not _deleting(p)]
                for p in failed:
                    await self._delete(p)
                    self.stats.failed_deleted += 1
                if any(_deleting(p) for p in mine):
                    continue  # wait until the evicted pod is gone (its resources are released)
                await self._recreate(key, base, template, attempt + 1)
        if done and self.config.delete_finished:
            for p in pods:
                if not _deleting(p):
                    await self._delete(p)
                    self.stats.finished_pods_deleted += 1

    async def _recreate(self, key, base: str, template: dict, attempt: int) -> None:
        from cluster_state.errors import AlreadyExists, ApiError
        md = template.get("metadata") or {}
        ann = dict(md.get("annotations") or {})
        ann[SLOT_ANNOTATION] = base
        ann[ATTEMPT_ANNOTATION] = str(attempt)
        # a fresh write-time (not the template's): staleness is measured from this create
        from cluster_state.delivery import WRITE_TIME_ANNOTATION
        ann[WRITE_TIME_ANNOTATION] = repr(self._wall())
        spec = copy.deepcopy(template.get("spec") or {})
        spec["nodeName"] = ""
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": f"{base}-r{attempt}", "namespace": md.get("namespace"),
                            "labels": dict(md.get("labels") or {}), "annotations": ann},
               "spec": spec,
               "status": {"phase": "Pending", "nominatedNodeName": "", "conditions": []}}
        try:
            self._wrote = True
            created = await self.api.create(pod)
            self.stats.recreated += 1
            self._slots[key][base] = (created, attempt)
        except AlreadyExists:
            self._slots[key][base] = (template, attempt)
        except ApiError as e:
            self.stats.errors += 1
            log.warning("re-create %s failed: %r", pod["metadata"]["name"], e)

    async def _delete(self, pod: dict) -> None:
        from cluster_state.errors import ApiError, NotFound
        md = pod["metadata"]
        try:
            self._wrote = True
            await self.api.delete("Pod", md["name"], md.get("namespace"), grace_period_seconds=0)
        except NotFound:
            pass
        except ApiError:
            self.stats.errors += 1


def _phase(pod: dict) -> str:
    return (pod.get("status") or {}).get("phase") or "Pending"


def _deleting(pod: dict) -> bool:
    return (pod.get("metadata") or {}).get("deletionTimestamp") is not None
