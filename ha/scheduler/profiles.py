"""Behaviour switches and named profiles (docs/design.md "Behaviour switches and profiles").

Each part of each proposed fix is one switch so that an experiment can turn one on at a time.

Profiles ``v1.14``, ``seed000``, ``pr5045``, ``pr5045-fixed``, ``annotations`` and
``nomination-only`` are the contract (docs/design.md). ``seed000`` is PR #5045's design exactly as
its description states it, incl. the fast-path un-pipeline (``fastpath_unpipeline``); ``pr5045`` is
the PR's head 2053c7114, which removed that rule and added the overflow pre-pass
(``overflow_unpipeline``); docs/volcano-semantics.md, "Where the PR's code and its description disagree", says where the two differ. ``pr5045-s4fixed`` extends that contract: it is
``pr5045-fixed`` plus ``unpipeline_on_replace``, the fix for docs/volcano-semantics.md S4 (a task the
cache holds Pipelined on one node, re-placed by a session, fails or crashes the scheduler);
``pr5045-s6fixed`` adds ``refresh_guarded_pod``, the fix for S6's stale pod copy (every write
built from a Pipelined task's pod fails with 409).

Switch names are part of the experiment-file contract: a renamed switch stays accepted under its
old name (``DEPRECATED_SWITCHES``: old name -> new name) by ``Switches.with_`` and ``profile``.
``futureidle_unpipeline`` ran the head's overflow pre-pass while the switch's description promised
the fast-path rule of the PR's description; it now means ``overflow_unpipeline``.

What ``seed000`` shares with ``pr5045`` beyond the PR's description (the model ties it to
``cache_pipeline``): an un-pipeline recorded in a Statement reaches the cache at commit
(``Cache.UnPipeline``, head only; the description's own ``fastpath_unpipeline`` un-pipelines in the
session only, as the design describes), and AddBindTask clears the nomination (head only).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace

from ha.errors import BadInput

__all__ = ["Switches", "PROFILES", "DEPRECATED_SWITCHES", "profile", "profile_names", "switch_on"]

# old switch name -> the switch it means now (accepted in experiment / scenario files, with_)
DEPRECATED_SWITCHES: dict[str, str] = {"futureidle_unpipeline": "overflow_unpipeline"}


def switch_on(ssn: object, name: str) -> bool:
    """Whether the session's switch ``name`` is on (a session without switches: off)."""
    sw = getattr(ssn, "switches", None) if ssn is not None else None
    return bool(getattr(sw, name, False))


@dataclass(frozen=True)
class Switches:
    # PR #5045's design — Statement / allocate layer
    cache_pipeline: bool = False            # Statement commit persists Pipeline in the cache + writes nominatedNodeName
    three_way_commit: bool = False          # allocate: commit ready jobs, commit pipelined jobs, discard the rest
    pipelined_first: bool = False           # allocate: pipelined jobs first, pipelined tasks before pending ones
    repipeline_guard: bool = False          # Pipeline of a task already pipelined on that node is a no-op
    # Allocate of a task already on the node uses UpdateTask (AddTask refuses it: a Pipelined task
    # could never become Allocated)
    update_task_on_allocate: bool = False
    # the design's nominated-node fast path takes every task with a
    # nomination; a task Pipelined on that node whose FutureIdle no longer fits is un-pipelined in
    # the session (Statement.UnPipeline: session only, nothing recorded) and goes through the
    # normal node scan. Removed at the PR head.
    fastpath_unpipeline: bool = False
    # the PR head's pre-pass (2053c7114, unpipelineOverflowedPipelinedTasks): on every node whose
    # Pipelined > Idle + Releasing un-pipeline the lowest-priority Pipelined tasks (session and
    # cache at once, S7) until it fits; denominate a job left starving. Not in the PR's description.
    overflow_unpipeline: bool = False
    self_exclusion: bool = False            # fit checks of a pipelined task on its own node add back its reservation
    # NominatedNodeName in the transaction context, set synchronously (the asynchronous status write
    # may come back through the informer after the next snapshot, which then misses the nomination)
    sync_nominated_node: bool = False
    # PR #5045's design — cache / informer layer
    informer_guard_pipelined: bool = False  # ignore pod updates without nodeName for Pipelined tasks
    # getTaskStatus: Pending + no nodeName + nominatedNodeName -> Pipelined (HA cache coherence: an
    # instance learns of another's reservations from the nomination)
    reconstruct_pipelined: bool = False
    # AddBindTask of a pipelined task uses UpdateTask (AddTask refuses it: a Pipelined task could
    # never become Binding)
    update_task_on_bind: bool = False
    # S4 fix (testbed; the intent of the PR's description — a stale reservation is un-pipelined,
    # then re-placed): Cache.Pipeline / AddBindTask of a task the cache holds Pipelined (on another
    # node, or on the same node where it no longer fits) first un-pipelines it from its old node
    # (releases the reservation as UnPipeline does), then applies the new operation with AddTask;
    # if that fails the old reservation is restored and an error returned — never klog.Fatalf.
    # Neither path uses NodeInfo.UpdateTask any more (overrides update_task_on_bind): a task the
    # cache already holds placed (bound meanwhile) gets AddTask's error, as in v1.14.0. UnPipeline
    # of a task whose node is gone just returns it to Pending.
    unpipeline_on_replace: bool = False
    # S6 fix (testbed): an update the informer guard ignores (a task the cache holds allocated or
    # Pipelined, a pod without nodeName) still replaces the task's pod copy — on its job and on its
    # node — keeping the cache's status, node and reservation: writes built from the copy (status
    # conditions, clearing a nomination) then carry the current resourceVersion instead of failing
    # with 409 for as long as the task stays Pipelined
    refresh_guarded_pod: bool = False
    # alternatives
    annotation_persistence: bool = False    # annotation-persistence design: pipelined state in pod annotations
    nominate_for_expectation: bool = False  # KEP-5278: set nominatedNodeName when a bind starts
    commit_pipelined_only: bool = False     # PR #5663: a JobPipelined statement keeps only its Pipeline ops
    # timing: AddBindTask's order before PR #5045's head (which clears the nomination with a
    # synchronous write under the cache lock, then queues the bind): the bind is queued first and
    # the clear written once the lock is released, so the bind worker may bind first and the clear,
    # built from the pod copy the bind outdated, gets a 409. In no profile: it measures the order
    bind_before_nomination_clear: bool = False  # bind queued first, clear written after unlocking: may 409
    # API server
    clear_nnn_on_binding: bool = False      # binding clears status.nominatedNodeName (KEP-5278)
    # test only, never part of a profile: a planted bug the shrinker's tests look for
    planted_skip_fit: bool = False          # allocate and AddBindTask skip their Idle checks: binds overcommit nodes

    def with_(self, **changes: bool) -> "Switches":
        for old, new in DEPRECATED_SWITCHES.items():
            if old in changes:
                value = changes.pop(old)
                if new in changes and bool(changes[new]) != bool(value):
                    raise BadInput(f"switches {old} (deprecated name of {new}) and {new} disagree: "
                                   f"{value!r} vs {changes[new]!r}")
                changes[new] = value
        unknown = set(changes) - {f.name for f in fields(self)}
        if unknown:
            raise BadInput(f"unknown switch(es): {', '.join(sorted(unknown))}; "
                           f"known: {', '.join(f.name for f in fields(self))}")
        return replace(self, **changes)

    def to_dict(self) -> dict[str, bool]:
        return asdict(self)

    def enabled(self) -> list[str]:
        return [k for k, v in asdict(self).items() if v]


# the design's changes as written: no self-exclusion ("do not
# add the task's own request back"), the fast-path un-pipeline of a stale reservation
_SEED000 = Switches(cache_pipeline=True, three_way_commit=True, pipelined_first=True,
                    repipeline_guard=True, update_task_on_allocate=True, fastpath_unpipeline=True,
                    sync_nominated_node=True, informer_guard_pipelined=True,
                    reconstruct_pipelined=True, update_task_on_bind=True)
# the PR head (2053c7114): the fast-path un-pipeline removed, the overflow pre-pass added
_PR5045 = replace(_SEED000, fastpath_unpipeline=False, overflow_unpipeline=True)

PROFILES: dict[str, Switches] = {
    "v1.14": Switches(),
    # the proposal as designed: every switch the design describes, none it leaves out
    "seed000": _SEED000,
    # the PR as coded at 2053c7114: seed000 without its fast-path un-pipeline, plus the
    # overflow pre-pass; like the PR's description, no self-exclusion (S1)
    "pr5045": _PR5045,
    "pr5045-fixed": replace(_PR5045, self_exclusion=True),
    # extension of the contract (docs/design.md): pr5045-fixed + the S4 fix
    "pr5045-s4fixed": replace(_PR5045, self_exclusion=True, unpipeline_on_replace=True),
    # ... + the S6 fix (the guarded task's pod copy follows the informer)
    "pr5045-s6fixed": replace(_PR5045, self_exclusion=True, unpipeline_on_replace=True,
                              refresh_guarded_pod=True),
    # the annotation-persistence design: pipelined state persisted in annotations, rebuilt from them
    "annotations": Switches(annotation_persistence=True, three_way_commit=True, pipelined_first=True,
                            repipeline_guard=True, self_exclusion=True),
    # PR #5663: keep the nomination, reserve nothing in the cache
    "nomination-only": Switches(three_way_commit=True, commit_pipelined_only=True,
                                sync_nominated_node=True),
}
# aliases users type
PROFILES["v1.14.0"] = PROFILES["v1.14"]


def profile_names() -> list[str]:
    return [n for n in PROFILES if n != "v1.14.0"]


def profile(name: str, **overrides: bool) -> Switches:
    """The switches of a named profile, with optional per-switch overrides (deprecated switch
    names accepted, see ``DEPRECATED_SWITCHES``)."""
    try:
        base = PROFILES[name]
    except KeyError:
        raise BadInput(f"unknown profile {name!r}; known: {', '.join(profile_names())}") from None
    return base.with_(**overrides) if overrides else base
