"""NodeInfo accounting (``api/node_info.go``): how adding, updating and removing a task of each
status moves the node's Idle, Used, Releasing and Pipelined resources."""
from __future__ import annotations

import logging

from .resource import ZERO, Resource
from .task_info import TaskInfo
from .types import FatalCacheError, NodePhase, NodeState, TaskNodeError, TaskStatus

__all__ = ["NodeInfo", "new_node_info"]

log = logging.getLogger(__name__)

_RELEASING = TaskStatus.RELEASING
_PIPELINED = TaskStatus.PIPELINED
_BINDING = TaskStatus.BINDING
_EMPTY: dict = {}
REVOCABLE_ZONE_LABEL = "volcano.sh/revocable-zone"

# Counters an experiment can read: how often Volcano would only have logged an error.
negative_idle_events = 0


def _allocatable(node: dict) -> dict:
    return (node.get("status") or _EMPTY).get("allocatable") or _EMPTY


class NodeInfo:
    """Volcano's NodeInfo. ``node`` is the Node dict, or None for the placeholder created when a
    pod arrives before its node (state NotReady/"UnInitialized"; no accounting until set_node)."""

    __slots__ = ("name", "node", "state", "releasing", "pipelined", "idle", "used", "allocatable",
                 "capacity", "tasks", "revocable_zone", "others", "bind_generation",
                 "oversubscription_resource", "_sink", "_changes", "derived", "__weakref__")

    def __init__(self, node: dict | None = None):
        # a set the allocate fast path (actions/allocate/fastpath.py) watches: every change of this
        # node's accounting adds the node name to it; None (the default) costs one test
        self._sink = None
        # the same, for the snapshot's reuse of unchanged clones (cache.py, "snapshot reuse"):
        # a cache node reports to the cache's set of nodes changed since the last snapshot, a
        # session's clone to the set of clones that session changed
        self._changes = None
        # what a plugin derived from this clone in the session that had it (the k8s node view),
        # kept with a clone the next session reuses (plugins/k8s_nodes.py); never copied
        self.derived = None
        self.releasing = Resource()
        self.pipelined = Resource()
        self.idle = Resource()
        self.used = Resource()
        self.allocatable = Resource()
        self.capacity = Resource()
        self.oversubscription_resource = Resource()
        self.tasks: dict[str, TaskInfo] = {}
        self.others: dict = {}
        self.bind_generation = 0
        self.name = ""
        self.node = None
        self.revocable_zone = ""
        if node is not None:
            self.name = (node.get("metadata") or _EMPTY).get("name", "")
            self.node = node
            self.idle = Resource.from_quantities(_allocatable(node))
            self.allocatable = self.idle.clone()
            self.capacity = Resource.from_quantities((node.get("status") or _EMPTY).get("capacity"))
            self.revocable_zone = ((node.get("metadata") or _EMPTY).get("labels") or _EMPTY).get(
                REVOCABLE_ZONE_LABEL, "")
        self._set_node_state(node)

    # ---- state --------------------------------------------------------------------------------
    def _set_node_state(self, node: dict | None) -> None:
        if node is None:
            self.state = NodeState(NodePhase.NOT_READY, "UnInitialized")
            return
        ok, names = self.used.less_equal_with_resources_name(self.allocatable, ZERO)
        if not ok:  # Volcano only logs "Node out of sync"
            log.debug("node %s out of sync: %s", self.name, names)
        self.state = NodeState(NodePhase.READY, "")

    def ready(self) -> bool:
        return self.state.phase == NodePhase.READY

    def future_idle(self) -> Resource:
        """Idle + Releasing − Pipelined (never asserts)."""
        return self.idle.clone().add(self.releasing).sub_without_assert(self.pipelined)

    def has_pipelined_overflow(self) -> bool:
        """PR #5045: the reservations no longer fit what is (or will be) free."""
        return not self.pipelined.less_equal(self.idle.clone().add(self.releasing), ZERO)

    def get_node_allocatable(self) -> Resource:
        return Resource.from_quantities(_allocatable(self.node)) if self.node else Resource()

    def set_node(self, node: dict | None) -> None:
        """SetNode: recompute every resource from the stored tasks."""
        if self._changes is not None:   # (a node turning NotReady changes its state alone)
            self._changes.add(self.name)
        self._set_node_state(node)
        if not self.ready():
            log.warning("failed to set node info for %s: %s", self.name, self.state.reason)
            return
        self._set_node(node)

    def _set_node(self, node: dict) -> None:
        if self._sink is not None:
            self._sink.add(self.name)
        if self._changes is not None:
            self._changes.add(self.name)
        self.name = (node.get("metadata") or _EMPTY).get("name", "")
        self.node = node
        self.revocable_zone = ((node.get("metadata") or _EMPTY).get("labels") or _EMPTY).get(
            REVOCABLE_ZONE_LABEL, "")
        self.allocatable = Resource.from_quantities(_allocatable(node))
        self.capacity = Resource.from_quantities((node.get("status") or _EMPTY).get("capacity"))
        self.releasing = Resource()
        self.pipelined = Resource()
        self.idle = self.allocatable.clone()
        self.used = Resource()
        for ti in self.tasks.values():
            st = ti.status
            if st == _RELEASING:
                self._allocate_idle_resource(ti)
                self.releasing.add(ti.resreq)
                self.used.add(ti.resreq)
            elif st == _PIPELINED:
                self.pipelined.add(ti.resreq)
            else:
                self._allocate_idle_resource(ti)
                self.used.add(ti.resreq)

    def _allocate_idle_resource(self, ti: TaskInfo) -> None:
        # Idle may go negative: Volcano only logs it.
        if not ti.resreq.less_equal(self.idle, ZERO):
            global negative_idle_events
            negative_idle_events += 1
        self.idle._sub(ti.resreq)

    # ---- tasks --------------------------------------------------------------------------------
    def add_task(self, task: TaskInfo, *, check_idle: bool = True) -> None:
        """AddTask; raises TaskNodeError with Volcano's message where Go returns an error.
        ``check_idle=False`` skips the Binding branch's Idle check (only the test-only
        ``planted_skip_fit`` switch asks for it)."""
        err = self._add_task(task, check_idle)
        if err is not None:
            raise TaskNodeError(err)

    def _add_task(self, task: TaskInfo, check_idle: bool = True) -> str | None:
        """AddTask's work; Volcano's error message where Go returns an error (then nothing is
        stored). A message, not an exception: a snapshot's clone adds every bound pod this way
        and ignores the errors."""
        if task.node_name and self.name and task.node_name != self.name:
            return f"task <{task.namespace}/{task.name}> already on different node <{task.node_name}>"
        key = f"{task.namespace}/{task.name}"
        if key in self.tasks:
            return f"task <{task.namespace}/{task.name}> already on node <{self.name}>"
        ti = task.clone()
        if self._sink is not None:
            self._sink.add(self.name)
        if self._changes is not None:
            self._changes.add(self.name)
        if self.node is not None:
            st = ti.status
            r = ti.resreq
            if st == _RELEASING:
                self._allocate_idle_resource(ti)
                self.releasing.add(r)
                self.used.add(r)
            elif st == _PIPELINED:
                self.pipelined.add(r)
            elif st == _BINDING:
                ok, names = r.less_equal_with_resources_name(self.idle, ZERO)
                if not ok and check_idle:
                    return (f"node {self.name} resources [{' '.join(names)}] are not enough to put task "
                            f"<{ti.namespace}/{ti.name}>, idle: {self.idle}, req: {r}")
                self._allocate_idle_resource(ti)
                self.used.add(r)
            else:
                self._allocate_idle_resource(ti)
                self.used.add(r)
        task.node_name = self.name
        ti.node_name = self.name
        self.tasks[key] = ti
        return None

    def remove_task(self, ti: TaskInfo) -> None:
        """RemoveTask: accounting by the *stored* copy's status; a missing key is only logged."""
        key = f"{ti.namespace}/{ti.name}"
        task = self.tasks.get(key)
        if task is None:
            log.debug("failed to find task <%s/%s> on host <%s>", ti.namespace, ti.name, self.name)
            return
        if self._sink is not None:
            self._sink.add(self.name)
        if self._changes is not None:
            self._changes.add(self.name)
        if self.node is not None:
            st = task.status
            r = task.resreq
            if st == _RELEASING:
                self.releasing.sub(r)
                self.idle.add(r)
                self.used.sub(r)
            elif st == _PIPELINED:
                self.pipelined.sub(r)
            else:
                self.idle.add(r)
                self.used.sub(r)
        del self.tasks[key]

    def swap_task(self, ti: TaskInfo) -> bool:
        """RemoveTask + AddTask of a task whose stored copy has the same status and request: the
        accounting would come back to where it was, so only the stored copy is replaced (the
        informer's common pod update). False, doing nothing, when that does not hold."""
        key = f"{ti.namespace}/{ti.name}"
        stored = self.tasks.get(key)
        if stored is None or stored.status != ti.status or (ti.node_name and self.name and ti.node_name != self.name):
            return False
        a, b = stored.resreq, ti.resreq
        if not (a.milli_cpu == b.milli_cpu and a.memory == b.memory
                and a.scalar_resources == b.scalar_resources):
            return False
        if self._sink is not None:
            self._sink.add(self.name)
        if self._changes is not None:
            self._changes.add(self.name)
        c = ti.clone()
        ti.node_name = c.node_name = self.name
        del self.tasks[key]       # re-insert: the same iteration order as remove + add
        self.tasks[key] = c
        return True

    def refresh_task_pod(self, ti: TaskInfo, pod: dict) -> bool:
        """Point the node's copy of ``ti`` (same uid) at ``pod``; accounting untouched. False when
        the node holds no copy of it."""
        stored = self.tasks.get(f"{ti.namespace}/{ti.name}")
        if stored is None or stored.uid != ti.uid:
            return False
        stored.pod = pod
        if self._sink is not None:
            self._sink.add(self.name)
        if self._changes is not None:
            self._changes.add(self.name)
        return True

    def update_task(self, ti: TaskInfo) -> None:
        """RemoveTask + AddTask; where AddTask fails Volcano calls klog.Fatalf → FatalCacheError."""
        self.remove_task(ti)
        try:
            self.add_task(ti)
        except TaskNodeError as e:
            raise FatalCacheError(f"Failed to add Task <{ti.namespace},{ti.name}> to Node <{self.name}> "
                                  f"during task update: {e}") from e

    def clone(self) -> "NodeInfo":
        """NewNodeInfo(node) + AddTask of every stored task: accounting recomputed from statuses.
        An AddTask error is ignored, as in Volcano (the task is then missing from the clone)."""
        res = NodeInfo(self.node)
        if self.node is None:
            res.name = self.name
        for t in self.tasks.values():
            err = res._add_task(t)
            if err is not None:
                log.debug("clone of node %s dropped a task: %s", self.name, err)
        res.others = dict(self.others)
        res.bind_generation = self.bind_generation
        return res

    def pods(self) -> list[dict]:
        return [t.pod for t in self.tasks.values()]

    def next_bind_generation(self) -> None:
        self.bind_generation += 1

    # ---- testbed helpers ----------------------------------------------------------------------
    @property
    def labels(self) -> dict:
        return ((self.node or _EMPTY).get("metadata") or _EMPTY).get("labels") or {}

    @property
    def unschedulable(self) -> bool:
        return bool(((self.node or _EMPTY).get("spec") or _EMPTY).get("unschedulable"))

    def recompute(self) -> dict[str, Resource]:
        """What idle/used/releasing/pipelined should be, from the tasks (an invariant check)."""
        idle = Resource.from_quantities(_allocatable(self.node)) if self.node else Resource()
        used, releasing, pipelined = Resource(), Resource(), Resource()
        if self.node is not None:
            for t in self.tasks.values():
                if t.status == _PIPELINED:
                    pipelined.add(t.resreq)
                    continue
                idle._sub(t.resreq)
                used.add(t.resreq)
                if t.status == _RELEASING:
                    releasing.add(t.resreq)
        return {"idle": idle, "used": used, "releasing": releasing, "pipelined": pipelined}

    def to_dict(self) -> dict[str, dict]:
        return {"idle": self.idle.to_plain(), "used": self.used.to_plain(),
                "releasing": self.releasing.to_plain(), "pipelined": self.pipelined.to_plain()}

    def __repr__(self) -> str:
        return (f"Node({self.name}: idle <{self.idle}>, used <{self.used}>, releasing <{self.releasing}>, "
                f"pipelined <{self.pipelined}>, tasks {len(self.tasks)}, {self.state.phase})")


def new_node_info(node: dict | None) -> NodeInfo:
    return NodeInfo(node)
