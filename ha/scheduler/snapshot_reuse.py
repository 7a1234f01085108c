"""Snapshot reuse: the clone of a node or a job that nothing changed since the last snapshot is
handed to the next session instead of cloning it again (at 5,000 nodes and 100,000 pods in 10,000
jobs, cloning every node and job was nearly all of a session's snapshot, and between two sessions
few of either change).

The contract:

* A clone is reused only when (1) the session that had it gave its snapshot back
  (``SchedulerCache.give_back``, called by ``Session.release``): a session still held shares
  nothing with the next one; (2) the cache's ``NodeInfo`` / ``JobInfo`` is the same object and
  reported no change since that snapshot; (3) that session reported no change of the clone. An
  object reports a change through its ``_changes`` set, which every mutator adds its name (a
  node's) or uid (a job's) to. Nothing else writes a node's fields (its pod and Node dicts are
  shared with the cache, as in Volcano, so a fresh clone would hold the same objects). A job's
  reports cover its *tasks part* -- the tasks, the status index, the sums, a task's fields (the
  few writes past the mutators call ``JobInfo.report_change``); its *header* -- the PodGroup the
  job updater writes a status into, fit errors, hyper-node and enqueue fields, the priority --
  every session changes without reporting, and a reused job clone gets it copied from the
  cache's job again (``JobInfo.copy_header``, as ``clone`` does).
* A reused clone is what ``clone()`` would give now, field for field, dict orders and float sums
  included. ``verify_snapshot_reuse`` (``ha.scheduler.acceleration``; ``HA_VERIFY_SNAPSHOT_REUSE=1``,
  which the test suite sets) clones afresh beside every
  reuse and raises :class:`SnapshotReuseMismatch` naming the node or job and the field that
  differ.
* ``snapshot_reuse`` off (``HA_SNAPSHOT_REUSE=0``) turns reuse off: every snapshot clones every node and job (the
  baseline of ``ha-testbed bench scale --param where=model``).

A job clone takes the job's running sums (allocated, total request) instead of adding its tasks
up again when that is exact (whole, non-negative amounts below 2**53, no scalar resource:
``JobInfo.clone``); the verifier checks those too.

What a session derives from an unchanged clone is kept with it for the next session, each keyed on
what it was derived from and checked by the same verifier switch: a job's close verdict
(framework/settled_close.py), its queue account (plugins/queue_attrs.py ``QueueAccount``), and the
allocate fast path's row of a node (actions/allocate/fastpath.py ``_load_rows``, kept on the cache by node
clone and k8s view).
"""
from __future__ import annotations

from typing import Any, Iterable

from ha.scheduler.api.job_info import JobInfo
from ha.scheduler.api.node_info import NodeInfo
from ha.scheduler.acceleration import Acceleration, acceleration_of

__all__ = ["JobClones", "NodeClones", "SnapshotReuseMismatch", "check_same", "node_state", "verifying"]

# slots that say who watches a node, not what it is
# and what a job clone keeps for the next session, derived from its state, each checked apart:
# its close verdict (framework/settled_close.py), its queue account (plugins/queue_attrs.py)
_WATCHERS = frozenset({"_sink", "_changes", "derived", "__weakref__", "settled_close", "queue_account"})
# shared with the cache by reference, in a fresh clone as in a reused one: compared by identity
_SHARED = frozenset({"pod", "node"})


def verifying(holder: Any) -> bool:
    """Whether reuses are checked against fresh copies, in the settings the cache or session
    ``holder`` was given (``Acceleration.verify_snapshot_reuse``)."""
    return acceleration_of(holder).verify_snapshot_reuse


class SnapshotReuseMismatch(AssertionError):
    """A reused clone differs from a fresh one: some change of a node went unreported."""


def _slots(cls: type) -> list[str]:
    out: list[str] = []
    for klass in cls.__mro__:
        for s in getattr(klass, "__slots__", ()):
            if s not in _WATCHERS and s not in out:
                out.append(s)
    return out


def node_state(obj: Any, name: str = "") -> Any:
    """A comparable picture of ``obj``: slots and compared dataclass fields walked recursively, dicts as
    ordered item lists (order is part of the state), Pods and Node dicts by identity."""
    if name in _SHARED:
        return ("id", id(obj))
    if isinstance(obj, dict):
        return ("dict", [(k, node_state(v)) for k, v in obj.items()])
    if isinstance(obj, (list, tuple)):
        return (type(obj).__name__, [node_state(v) for v in obj])
    if isinstance(obj, (set, frozenset)):
        return ("set", sorted(map(repr, obj)))
    slots = _slots(type(obj))
    if slots:
        return (type(obj).__name__, [(s, node_state(getattr(obj, s, None), s)) for s in slots])
    fields = getattr(obj, "__dataclass_fields__", None)
    if fields:
        return (type(obj).__name__, [(f, node_state(getattr(obj, f), f)) for f, fd in fields.items()
                                     if fd.compare])   # (compare=False: memos and watchers)
    return obj


def _first_difference(a: Any, b: Any, path: str) -> str:
    if type(a) is not type(b) or not isinstance(a, tuple) or len(a) != 2 or not isinstance(a[1], list):
        return path
    if len(a[1]) != len(b[1]):
        return f"{path} (length {len(a[1])} vs {len(b[1])})"
    for i, (x, y) in enumerate(zip(a[1], b[1])):
        if x != y:
            if isinstance(x, tuple) and len(x) == 2 and isinstance(x[0], str) and isinstance(y, tuple):
                return _first_difference(x[1], y[1], f"{path}.{x[0]}" if x[0] == y[0] else f"{path}[{i}]")
            return _first_difference(x, y, f"{path}[{i}]")
    return path


class _Clones:
    """The cache's clones of one kind between snapshots (keyed by ``key``); used under the
    cache's lock. A cache object and its clones report changes through their ``_changes`` set."""

    kind = ""        # what a mismatch names: "node", "job"
    key = ""         # the attribute naming an object

    def __init__(self, acceleration: Acceleration | None = None) -> None:
        acc = acceleration if acceleration is not None else Acceleration.from_environ()
        self.enabled = acc.snapshot_reuse
        self.verify = acc.verify_snapshot_reuse
        self.changed: set[str] = set()       # cache objects changed since the last lending snapshot
        self._pool: dict[str, tuple[Any, Any]] = {}   # given back: key -> (cache object, clone)
        self._pool_touched: set[str] = set()   # clones the session that had them changed
        self._lent: tuple[int, dict[str, tuple[Any, Any]], set[str]] | None = None
        self._token = 0
        self.stats = {"reused": 0, "cloned": 0}

    def _reuse(self, obj: Any, c: Any) -> None:
        """Make the kept clone ``c`` of ``obj`` what a fresh clone would be in the parts a session
        may change without reporting (none for a node)."""

    def clone(self, objs: Iterable[Any], *, lend: bool) -> tuple[int | None, dict[str, Any]]:
        """Clones of ``objs`` (in order) by key. ``lend``: the clones may come back
        (``give_back(token)``) to be reused; the token is None when they may not."""
        key = self.key
        if not (lend and self.enabled):
            return None, {getattr(o, key): o.clone() for o in objs}
        changed = self.changed
        pool, touched = self._pool, self._pool_touched
        self._pool, self._pool_touched = {}, set()
        out: dict[str, Any] = {}
        lent: dict[str, tuple[Any, Any]] = {}
        now_touched: set[str] = set()
        reused = 0
        for o in objs:
            name = getattr(o, key)
            rec = None
            if o._changes is not changed:       # an object the cache created since: watch it
                o._changes = changed
            elif name not in changed and name not in touched:
                rec = pool.get(name)
            if rec is not None and rec[0] is o:
                c = rec[1]
                self._reuse(o, c)
                reused += 1
                if self.verify:
                    check_same(f"the clone of {self.kind} {name!r}", c, o.clone(), self.kind)
            else:
                c = o.clone()
            c._changes = now_touched
            out[name] = c
            lent[name] = (o, c)
        changed.clear()
        self._token += 1
        self._lent = (self._token, lent, now_touched)
        self.stats["reused"] += reused
        self.stats["cloned"] += len(out) - reused
        return self._token, out

    def give_back(self, token: int) -> None:
        """The session holding the clones of snapshot ``token`` is done with them."""
        lent = self._lent
        if lent is None or lent[0] != token:
            return              # an older snapshot's: a later one has been taken since
        self._lent = None
        self._pool, self._pool_touched = lent[1], lent[2]


class NodeClones(_Clones):
    """The cache's node clones between snapshots."""

    kind, key = "node", "name"

    def _reuse(self, obj: NodeInfo, c: NodeInfo) -> None:
        c._sink = None                  # the last session's fast path watched it


class JobClones(_Clones):
    """The cache's job clones between snapshots. A session changes every job clone it has in
    its header -- the PodGroup status the job updater writes, fit errors, hyper-node and
    enqueue fields -- without reporting: those are copied from the cache's job again
    (``JobInfo.copy_header``), as ``clone`` copies them. What is reported is a change of the
    tasks part (the tasks, the status index, the sums, a task's fields)."""

    kind, key = "job", "uid"

    def __init__(self, acceleration: Acceleration | None = None) -> None:
        super().__init__(acceleration)
        # jobs whose close verdict was kept (framework/settled_close.py)
        self.stats["settled_close"] = 0

    def _reuse(self, obj: JobInfo, c: JobInfo) -> None:
        obj.copy_header(c)


def check_same(what: str, reused: Any, fresh: Any, root: str = "node") -> None:
    """Raise SnapshotReuseMismatch unless ``reused`` is ``fresh`` field for field."""
    a, b = node_state(reused), node_state(fresh)
    if a != b:
        raise SnapshotReuseMismatch(f"snapshot reuse: {what} kept from the last session differs from a "
                                    f"fresh one at {_first_difference(a, b, root)}")
