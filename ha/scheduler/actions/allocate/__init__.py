"""The allocate action and what is its alone (Volcano's ``pkg/scheduler/actions/allocate``):

* ``allocate`` -- the action (``AllocateAction``, ``new``), and ``dry_run_allocate``, the dry run
  the gang path of preempt and reclaim nominates from;
* ``fastpath`` -- the vectorised node scan and scores, proven equal to the scalar path;
* ``gang_domains`` -- the gang-aware eviction design's hook placing a job within one of its gang
  domains;
* ``future_idle`` -- what a task may use of a node (FutureIdle, with the self-exclusion fix).

Nothing outside this package imports the fast path or the hook."""
from __future__ import annotations

from ha.scheduler.actions.allocate.allocate import (ENABLE_PREDICATE_ERR_CACHE_KEY, AllocateAction,
                                                    dry_run_allocate, new)
from ha.scheduler.actions.allocate.future_idle import future_idle_for

__all__ = ["AllocateAction", "new", "dry_run_allocate", "future_idle_for",
           "ENABLE_PREDICATE_ERR_CACHE_KEY"]
