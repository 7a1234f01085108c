"""The model's boundary: the one place that builds a ``SchedulerCache`` and the informer handlers
that feed it (Volcano's ``newSchedulerCache`` + ``addEventHandler`` in pkg/scheduler/cache).

``build_cache(profile=..., switches=..., scheduler_name=..., io=..., clock=...)`` returns a
:class:`CacheWiring`: the cache and ``handlers`` (kind -> :class:`CacheEventHandler`, in
:data:`KINDS` order). Every user of the model wires its cache here — the live instance
(``ha.runtime.incarnation``), replay (``ha.experiment.replay``), the benchmarks, the scenario runner, the
reference cache — so they cannot drift apart in how an informer event reaches the cache.

A handler has the informer-handler shape (``on_add(obj, is_initial_list)``, ``on_update(old,
new)``, ``on_delete(obj, tombstone)``). What happens on an error is the caller's choice:

* ``on_fatal(exc)``: a ``FatalCacheError`` (Volcano: ``klog.Fatalf`` → the process exits) is
  handed to it instead of raised (the instance restarts; replay records it);
* ``on_error(exc)``: any other exception (and a fatal one when there is no ``on_fatal``) is
  handed to it instead of raised (replay and the reference count them; the live informer counts
  and swallows what is raised).

Without either, the handler adds no frame of its own for updates (the benchmarks' path).
Pure and synchronous: no I/O, no threads, no clock of its own (the ``clock`` goes to the cache).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ha.errors import BadInput

__all__ = ["KINDS", "CacheWiring", "CacheEventHandler", "build_cache", "resolve_switches"]

# Informer start order: what pods refer to comes first, so the first pods find their jobs/nodes.
# informer start order: what pods refer to comes first, so the first pods find their jobs/nodes
KINDS = ("PriorityClass", "Queue", "Node", "HyperNode", "PodGroup", "Pod")


def resolve_switches(profile: Any = "v1.14", switches: dict | None = None):
    """A profile name (or a ``Switches``) plus overrides -> ``Switches``; BadInput names the bad one."""
    from ha.scheduler.profiles import Switches
    from ha.scheduler.profiles import profile as get_profile
    if isinstance(profile, Switches):
        sw = profile
    else:
        try:
            sw = get_profile(profile)
        except BadInput:
            raise
        except Exception as e:  # noqa: BLE001
            raise BadInput(f"profile {profile!r}: {e}") from None
    return sw.with_(**switches) if switches else sw


class CacheEventHandler:
    """Informer events of one kind -> the cache's add/update/delete methods (a kind without an
    update method, e.g. priority classes, gets delete + add)."""

    def __init__(self, cache: Any, kind: str, *, on_fatal: Callable[[BaseException], None] | None = None,
                 on_error: Callable[[BaseException], None] | None = None):
        from ha.scheduler.api.types import FatalCacheError
        self.kind = kind
        self._add, self._update, self._delete = cache.handlers(kind)
        self._fatal_error = FatalCacheError
        self._on_fatal, self._on_error = on_fatal, on_error
        if on_fatal is None and on_error is None and self._update is not None:
            self.on_update = self._update   # unguarded: one frame less per event

    def _call(self, fn, *args) -> None:
        try:
            fn(*args)
        except self._fatal_error as e:
            self._fatal(e)
        except Exception as e:  # noqa: BLE001 — the caller chose to take these
            self._failed(e)

    # (called inside an ``except`` block: a bare ``raise`` re-raises what is being handled)
    def _fatal(self, e: BaseException) -> None:
        if self._on_fatal is None:
            if self._on_error is None:
                raise
            self._on_error(e)
        else:
            self._on_fatal(e)

    def _failed(self, e: Exception) -> None:
        if self._on_error is None:
            raise
        self._on_error(e)

    def on_add(self, obj, is_initial_list=False):
        try:   # _call, inlined: once per listed object
            self._add(obj)
        except self._fatal_error as e:
            self._fatal(e)
        except Exception as e:  # noqa: BLE001
            self._failed(e)

    def on_update(self, old, new):
        if self._update is None:
            self._call(self._delete, old)
            self._call(self._add, new)
        else:
            self._call(self._update, old, new)

    def on_delete(self, obj, tombstone=False):
        self._call(self._delete, obj)


@dataclass
class CacheWiring:
    cache: Any
    handlers: dict   # kind -> CacheEventHandler, in KINDS order

    def __iter__(self):   # cache, handlers = build_cache(...)
        return iter((self.cache, self.handlers))


def build_cache(*, profile: Any = "v1.14", switches: dict | None = None, scheduler_name: str = "volcano",
                default_queue: str = "default", io: Any = None, bind_mode: str = "sync",
                batch_num: int = 1, clock: Any = None, kinds: tuple = KINDS,
                on_fatal: Callable[[BaseException], None] | None = None,
                on_error: Callable[[BaseException], None] | None = None,
                acceleration: Any = None) -> CacheWiring:
    """A ``SchedulerCache`` under ``profile`` (+ ``switches``) and its informer handlers.
    ``acceleration``: an ``ha.scheduler.acceleration.Acceleration`` (default: the environment's).

    ``io``: binder, evictor, status updater and pod getter in one (default: an in-memory
    ``RecordingIO``); ``clock``: the sessions' time (default: the wall clock)."""
    from ha.scheduler.cache import SchedulerCache
    from ha.scheduler.interfaces import RecordingIO
    sw = resolve_switches(profile, switches)
    if io is None:
        io = RecordingIO()
    cache = SchedulerCache(switches=sw, binder=io, evictor=io, status_updater=io,
                           scheduler_names=(scheduler_name,), default_queue=default_queue,
                           pod_getter=io, bind_mode=bind_mode, batch_num=batch_num, clock=clock,
                           acceleration=acceleration)
    handlers = {k: CacheEventHandler(cache, k, on_fatal=on_fatal, on_error=on_error) for k in kinds}
    return CacheWiring(cache, handlers)
