"""The scheduler cache's window on the world inside a scheduler instance: Binder, Evictor,
StatusUpdater and PodGetter (``ha.scheduler.interfaces``) on the API server, plus the bookkeeping the
testbed needs — every decision recorded, 409s counted, optional lease fencing, and a dry-run mode.

The requests themselves are ``ha.runtime.scheduler_io.ApiServerIO`` (Volcano's shapes).
Why synchronous calls (a blocking ``ApiClient`` on the actor's event loop): the cache calls its
binder synchronously and wants the per-task errors back (``Cache.Bind`` → resyncTask), and the
cache must not be touched from two threads. One ``bind_many`` Lua call per batch costs about a
millisecond; the informers simply run a little later.

Fencing (off by default; client-go has none): before each bind batch and each eviction the current
Lease is read and compared with the term this leader won (holder + leaseTransitions); on mismatch the
writes are refused locally with ``412 Fenced``. The API server exposes no atomic hook to put this
check inside the bind's own Lua call, so a leader that loses its lease *between* the check and the
write can still write once — the check narrows the window, it does not close it.
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from ha.scheduler.interfaces import IOError_

__all__ = ["InstanceIO"]

log = logging.getLogger(__name__)


@dataclass
class IOCounters:
    binds: int = 0
    bind_conflicts: int = 0
    bind_errors: int = 0
    evictions: int = 0
    evict_errors: int = 0
    status_writes: int = 0
    status_errors: int = 0
    pod_group_writes: int = 0
    pod_group_errors: int = 0
    fenced: int = 0
    dry_run_ops: int = 0

    def add(self, name: str, n: int = 1) -> None:
        """Count under a lock: the bind worker, the session and the status writer's threads count
        at once."""
        with _COUNT_LOCK:
            setattr(self, name, getattr(self, name) + n)


_COUNT_LOCK = threading.Lock()


def _pod_key(pod: dict) -> str:
    md = pod.get("metadata") or {}
    return f"{md.get('namespace', '')}/{md.get('name', '')}"


class InstanceIO:
    """Binder + Evictor + StatusUpdater + PodGetter on a sync ``ApiClient``.

    ``context()`` returns (session number, is_leader) for the decision records; ``fence()`` returns
    the leader's Fence or None; ``dry_run()`` says whether writes must only be recorded (shadow
    standbys). Recorded decisions go to ``record(dict)``, stamped with ``clock.now()`` (default:
    the wall clock).
    """

    def __init__(self, api, *, instance: str, record: Callable[[dict], None],
                 context: Callable[[], tuple[int, bool]], dry_run: Callable[[], bool] = lambda: False,
                 fence: Callable[[], Any] | None = None, fencing: bool = False,
                 on_first_bind: Callable[[], None] | None = None, scheduler_name: str = "volcano",
                 clock: Any = None):
        from ha.runtime.scheduler_io import ApiServerIO
        self.api = api
        # the Volcano-shaped requests (uid/RV preconditions, evictor conditions) are the informer
        # engineer's ApiServerIO; this class adds decisions, counters, dry run and fencing
        self.inner = ApiServerIO(api, scheduler_name=scheduler_name)
        self.instance = instance
        self._record = record
        self._context = context
        self._dry_run = dry_run
        self._fence = fence
        self.fencing = fencing
        self._on_bind = on_first_bind
        self.counters = IOCounters()
        self._now = clock.now if clock is not None else time.time   # decision timestamps

    # -- helpers -------------------------------------------------------------------------------
    def _rec(self, op: str, pod: str, uid: str | None, node: str | None, ok: bool,
             error: str | None, dry: bool, **extra) -> None:
        session, leader = self._context()
        self._record({"t": self._now(), "session": session, "instance": self.instance,
                      "leader": leader, "dry_run": dry, "op": op, "pod": pod, "uid": uid,
                      "node": node, "ok": ok, "error": error, **extra})

    def _fence_error(self) -> str | None:
        """None if writes may proceed; else why they are refused."""
        if not self.fencing or self._fence is None:
            return None
        fence = self._fence()
        if fence is None:
            return "412 Fenced: this instance does not hold the lease"
        try:
            lease = self.api.get("Lease", fence.lease_name, fence.namespace)
        except Exception as e:  # noqa: BLE001 — cannot verify the term: do not write
            return f"412 Fenced: cannot read lease: {e}"
        spec = lease.get("spec") or {}
        if spec.get("holderIdentity") != fence.holder or \
                int(spec.get("leaseTransitions") or 0) != fence.transitions:
            return (f"412 Fenced: lease held by {spec.get('holderIdentity')!r} "
                    f"(transitions {spec.get('leaseTransitions')}), our term is "
                    f"{fence.holder!r}/{fence.transitions}")
        return None

    # -- Binder --------------------------------------------------------------------------------
    def bind(self, tasks: list) -> dict[str, str]:
        if not tasks:
            return {}
        if self._dry_run():
            self.counters.add("dry_run_ops", len(tasks))
            for t in tasks:
                self._rec("bind", f"{t.namespace}/{t.name}", t.uid, t.node_name, False, "dry-run", True)
            return {t.uid: "dry-run: not written" for t in tasks}
        fenced = self._fence_error()
        if fenced:
            self.counters.add("fenced", len(tasks))
            for t in tasks:
                self._rec("bind", f"{t.namespace}/{t.name}", t.uid, t.node_name, False, fenced, False)
            return {t.uid: fenced for t in tasks}
        try:
            errors = self.inner.bind(tasks)
        except Exception as e:  # noqa: BLE001 — connection lost (partition): the whole batch failed
            errors = {t.uid: f"bind failed: {e!r}" for t in tasks}
        for t in tasks:
            key = f"{t.namespace}/{t.name}"
            msg = errors.get(t.uid)
            if msg is not None:
                if msg.startswith("409"):
                    self.counters.add("bind_conflicts")
                else:
                    self.counters.add("bind_errors")
                self._rec("bind", key, t.uid, t.node_name, False, msg, False)
            else:
                self.counters.add("binds")
                self._rec("bind", key, t.uid, t.node_name, True, None, False)
                if self._on_bind is not None:
                    self._on_bind()
        return errors

    # -- Evictor -------------------------------------------------------------------------------
    def evict(self, pod: dict, reason: str) -> None:
        key = _pod_key(pod)
        uid = (pod.get("metadata") or {}).get("uid")
        node = (pod.get("spec") or {}).get("nodeName")
        if self._dry_run():
            self.counters.add("dry_run_ops")
            self._rec("evict", key, uid, node, False, "dry-run", True, reason=reason)
            raise IOError_("dry-run: not written")
        fenced = self._fence_error()
        if fenced:
            self.counters.add("fenced")
            self._rec("evict", key, uid, node, False, fenced, False, reason=reason)
            raise IOError_(fenced)
        try:
            self.inner.evict(pod, reason)   # Volcano's defaultEvictor: conditions, then delete
        except Exception as e:  # noqa: BLE001
            self.counters.add("evict_errors")
            self._rec("evict", key, uid, node, False, str(e), False, reason=reason)
            raise IOError_(str(e)) from None
        self.counters.add("evictions")
        self._rec("evict", key, uid, node, True, None, False, reason=reason)

    # -- StatusUpdater ---------------------------------------------------------------------------
    def _status_done(self, pod: dict, error: str | None, dry: bool = False) -> None:
        """Record and count one status write: written (``error`` None), failed, or a dry run."""
        self.counters.add("dry_run_ops" if dry else "status_errors" if error is not None else "status_writes")
        self._rec("status", _pod_key(pod), (pod.get("metadata") or {}).get("uid"),
                  (pod.get("status") or {}).get("nominatedNodeName"), error is None, error, dry)

    def update_pod_status(self, pod: dict) -> dict:
        if self._dry_run():
            self._status_done(pod, "dry-run", dry=True)
            raise IOError_("dry-run: not written")
        try:
            out = self.inner.update_pod_status(pod)   # precondition: the cache's resourceVersion
        except Exception as e:  # noqa: BLE001
            self._status_done(pod, str(e))
            raise IOError_(str(e)) from None
        self._status_done(pod, None)
        return out

    def update_pod_status_many(self, pods: list[dict]) -> list:
        """``update_pod_status`` for many pods in one request: per pod, in order, the stored pod or
        the ``IOError_`` its write would raise; recorded and counted each as its own write."""
        if self._dry_run():
            for pod in pods:
                self._status_done(pod, "dry-run", dry=True)
            return [IOError_("dry-run: not written") for _ in pods]
        try:
            got = self.inner.update_pod_status_many(pods)
        except Exception as e:  # noqa: BLE001 - the request as a whole failed: every pod did
            got = [e] * len(pods)
        out: list = []
        for pod, res in zip(pods, got):
            if isinstance(res, Exception):
                self._status_done(pod, str(res))
                out.append(IOError_(str(res)))
            else:
                self._status_done(pod, None)
                out.append(res)
        return out

    def update_pod_group(self, pg: dict) -> dict:
        key = _pod_key(pg)
        phase = (pg.get("status") or {}).get("phase")
        if self._dry_run():
            self.counters.add("dry_run_ops")
            return pg
        try:
            out = self.inner.update_pod_group(pg)
        except Exception as e:  # noqa: BLE001
            self.counters.add("pod_group_errors")
            self._rec("podgroup", key, None, phase, False, str(e), False)
            raise IOError_(str(e)) from None
        self.counters.add("pod_group_writes")
        return out

    def patch_pod_annotations(self, namespace: str, name: str, annotations: dict) -> dict:
        key = f"{namespace}/{name}"
        if self._dry_run():
            self.counters.add("dry_run_ops")
            self._rec("annotate", key, None, None, False, "dry-run", True, annotations=dict(annotations))
            raise IOError_("dry-run: not written")
        try:
            out = self.inner.patch_pod_annotations(namespace, name, annotations)
        except Exception as e:  # noqa: BLE001
            self.counters.add("status_errors")
            self._rec("annotate", key, None, None, False, str(e), False, annotations=dict(annotations))
            raise IOError_(str(e)) from None
        self._rec("annotate", key, None, None, True, None, False, annotations=dict(annotations))
        return out

    # -- PodGetter -------------------------------------------------------------------------------
    def get_pod(self, namespace: str, name: str) -> dict | None:
        return self.inner.get_pod(namespace, name)
