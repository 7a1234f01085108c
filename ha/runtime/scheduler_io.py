"""The scheduler cache's binder / evictor / status updater / pod getter, on the API server.

Implements the protocols of ``ha.scheduler.interfaces`` over a synchronous :class:`ApiClient`, with
Volcano v1.14's request shapes (pkg/scheduler/cache/cache.go):

* bind: pods/binding with the pod's uid as precondition, a batch in one Lua call; per-task errors
  (409 already bound / being deleted / uid changed, 404) are *returned* ({uid: message}), never
  raised, as Volcano's Bind returns them;
* evict (defaultEvictor): status write adding Ready=False (reason Evict) and DisruptionTarget=True
  (reason PreemptionByScheduler), precondition = the cache's resourceVersion (a stale cache gets
  409), then a delete with the pod's grace period; if neither condition changes, nothing is done;
* update_pod_status: the status subresource with the cache's resourceVersion as precondition;
* update_pod_group: the PodGroup's status (and its annotations, when they differ from the stored
  ones), returning the stored object;
* patch_pod_annotations: the annotation-persistence design's write path; get_pod: resyncTask's GET
  (None when gone).

Errors other than bind's are raised as ``IOError_`` (what the cache expects) with the API error as
``__cause__`` and ``.api_error``. Every call is counted in ``stats``; ``on_result(op, key, detail)``,
if given, sees each outcome (the runtime logs decisions through it).
"""
from __future__ import annotations

import threading
from typing import Any, Callable

from cluster_state.errors import ApiError, Conflict, NotFound
from ha.scheduler.interfaces import IOError_

__all__ = ["ApiServerIO", "SchedulerIOError"]

DISRUPTION_TARGET = "DisruptionTarget"
REASON_PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"


class SchedulerIOError(IOError_):
    """An API error surfaced to the scheduler cache (keeps the typed error in ``api_error``)."""

    def __init__(self, api_error: ApiError):
        super().__init__(str(api_error))
        self.api_error = api_error
        self.code = api_error.code


def _key(obj: dict) -> str:
    md = obj.get("metadata") or {}
    ns = md.get("namespace")
    return f"{ns}/{md.get('name')}" if ns else str(md.get("name"))


def _set_condition(conditions: list[dict], cond: dict) -> bool:
    """podutil.UpdatePodCondition: replace the condition of that type; False if nothing changed."""
    for i, c in enumerate(conditions):
        if c.get("type") == cond["type"]:
            if all(c.get(k) == cond[k] for k in ("status", "reason", "message")):
                return False
            conditions[i] = cond
            return True
    conditions.append(cond)
    return True


class ApiServerIO:
    """Binder + Evictor + StatusUpdater + PodGetter for ``SchedulerCache`` on a sync ``ApiClient``."""

    def __init__(self, api: Any, *, scheduler_name: str = "volcano",
                 on_result: Callable[[str, str, dict], None] | None = None) -> None:
        self.api = api
        self.scheduler_name = scheduler_name
        self.on_result = on_result
        self._count_lock = threading.Lock()
        self.stats: dict[str, int] = {
            "binds": 0, "bind_conflicts": 0, "bind_errors": 0, "evictions": 0, "evict_errors": 0,
            "status_writes": 0, "status_conflicts": 0, "status_errors": 0, "pod_group_writes": 0,
            "annotation_patches": 0, "gets": 0,
        }

    def _count(self, name: str) -> None:
        with self._count_lock:   # the bind worker and the status writer's threads count at once
            self.stats[name] += 1

    def _report(self, op: str, key: str, detail: dict) -> None:
        if self.on_result is not None:
            try:
                self.on_result(op, key, detail)
            except Exception:  # noqa: BLE001 -- a logging callback must not break scheduling
                pass

    def _fail(self, op: str, key: str, e: ApiError, counter: str) -> SchedulerIOError:
        self._count(counter)
        if isinstance(e, Conflict) and counter == "status_errors":
            self._count("status_conflicts")
        self._report(op, key, {"ok": False, "error": str(e), "code": e.code})
        return SchedulerIOError(e)

    # ---------------------------------------------------------------------------------- Binder
    def bind(self, tasks: list[Any]) -> dict[str, str]:
        if not tasks:
            return {}
        bindings = [(t.namespace, t.name, t.node_name) for t in tasks]
        uids = [(t.pod.get("metadata") or {}).get("uid") if getattr(t, "pod", None) else None
                for t in tasks]
        try:
            results = self._bind_many(bindings, uids)
        except ApiError as e:      # the whole batch failed (e.g. a server error)
            results = [e] * len(tasks)
        errors: dict[str, str] = {}
        for t, r in zip(tasks, results):
            key = f"{t.namespace}/{t.name}"
            if isinstance(r, ApiError):
                errors[t.uid] = str(r)
                self._count("bind_conflicts" if isinstance(r, Conflict) else "bind_errors")
                self._report("bind", key, {"node": t.node_name, "ok": False, "error": str(r),
                                           "code": r.code})
            else:
                self._count("binds")
                self._report("bind", key, {"node": t.node_name, "ok": True,
                                           "rv": (r.get("metadata") or {}).get("resourceVersion")
                                           if isinstance(r, dict) else None})
        return errors

    def _bind_many(self, bindings: list[tuple[str, str, str]], uids: list[str | None]) -> list:
        # one Lua call per 100 binds, each with its pod's uid as a precondition
        return self.api.bind_many(bindings, uids=uids)

    # ---------------------------------------------------------------------------------- Evictor
    def evict(self, pod: dict, reason: str) -> None:
        md = pod.get("metadata") or {}
        key = _key(pod)
        msg = f"Pod is evicted, because of {reason}"
        new = dict(pod)
        status = dict(pod.get("status") or {})
        conds = [dict(c) for c in status.get("conditions") or ()]
        changed = _set_condition(conds, {"type": "Ready", "status": "False", "reason": "Evict",
                                         "message": msg})
        sched = (pod.get("spec") or {}).get("schedulerName") or self.scheduler_name
        changed = _set_condition(conds, {
            "type": DISRUPTION_TARGET, "status": "True", "reason": REASON_PREEMPTION_BY_SCHEDULER,
            "message": f"{sched}: preempting to accommodate a higher priority pod"}) or changed
        if not changed:
            # Volcano returns nil without deleting when the conditions are already there
            self._report("evict", key, {"ok": True, "reason": reason, "noop": True})
            return
        status["conditions"] = conds
        new["status"] = status
        try:
            self.api.update_status(new)
            self.api.delete("Pod", md.get("name"), md.get("namespace"))
        except ApiError as e:
            raise self._fail("evict", key, e, "evict_errors") from e
        self._count("evictions")
        self._report("evict", key, {"ok": True, "reason": reason})

    # ---------------------------------------------------------------------------------- StatusUpdater
    def update_pod_status(self, pod: dict) -> dict:
        try:
            out = self.api.update_status(pod)
        except ApiError as e:
            raise self._fail("status", _key(pod), e, "status_errors") from e
        return self._status_written(pod, out)

    def _status_written(self, pod: dict, out: dict) -> dict:
        self._count("status_writes")
        st = pod.get("status") or {}
        self._report("status", _key(pod), {"ok": True, "nominatedNodeName": st.get("nominatedNodeName", ""),
                                           "rv": out["metadata"].get("resourceVersion")})
        return out

    def update_pod_status_many(self, pods: list[dict]) -> list:
        """Many ``update_pod_status`` in one request (``update_status_many``): per pod, in order,
        the stored pod or the ``SchedulerIOError`` its write would raise; counted and reported
        each as its own write."""
        return [self._fail("status", _key(pod), res, "status_errors") if isinstance(res, ApiError)
                else self._status_written(pod, res)
                for pod, res in zip(pods, self.api.update_status_many(pods))]

    def update_pod_group(self, pg: dict) -> dict:
        key = _key(pg)
        md = pg.get("metadata") or {}
        try:
            out = self.api.update_status(pg)
            want = md.get("annotations") or {}
            if want != (out["metadata"].get("annotations") or {}):
                patch: dict[str, str | None] = dict(want)
                for k in out["metadata"].get("annotations") or {}:
                    if k not in want:
                        patch[k] = None
                out = self.api.patch_annotations(pg.get("kind") or "PodGroup", md.get("name"),
                                                 md.get("namespace"), patch)
        except ApiError as e:
            raise self._fail("pod_group", key, e, "status_errors") from e
        self._count("pod_group_writes")
        self._report("pod_group", key, {"ok": True, "phase": (pg.get("status") or {}).get("phase")})
        return out

    def patch_pod_annotations(self, namespace: str, name: str,
                              annotations: dict[str, str | None]) -> dict:
        key = f"{namespace}/{name}"
        try:
            out = self.api.patch_annotations("Pod", name, namespace, annotations)
        except ApiError as e:
            raise self._fail("annotations", key, e, "status_errors") from e
        self._count("annotation_patches")
        self._report("annotations", key, {"ok": True, "annotations": dict(annotations)})
        return out

    # ---------------------------------------------------------------------------------- PodGetter
    def get_pod(self, namespace: str, name: str) -> dict | None:
        self._count("gets")
        try:
            return self.api.get("Pod", name, namespace)
        except NotFound:
            return None
