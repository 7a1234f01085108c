"""SchedulerCache.update_pod's in-place paths leave exactly the state Volcano's updatePod =
deletePod(old) + addPod(new) leaves (task identity aside): a task the new pod would rebuild equal is
kept and the pod swapped in (``TaskInfo.rebuilt_equal``); one keeping its job, uid, node and status
is swapped for the new task in its job instead of delete + add.

A Hypothesis state machine drives two caches with the same random informer events (creates,
updates of every field a TaskInfo reads, deletes) mixed with scheduler operations that change the
cached tasks behind the pods' backs (pipeline, evict, bind): one cache is the real one, the other
a reference whose ``_update_pod`` is the plain delete + add. After every step the full states are
compared: jobs and their task order, every task's fields, task_status_index (order included),
total_request / allocated, nodes (stored clones, idle/used/releasing/pipelined), deleted jobs,
stats, errors and the digest. Resource requests include fractional quantities so float sums that
are not exact would show; PriorityClasses come and go under pods without spec.priority.
"""
from __future__ import annotations

import copy

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from ha.scheduler.api import CacheError, FatalCacheError, TaskInfo, TaskStatus
from ha.scheduler.cache import SchedulerCache, _md, _same_request
from ha.scheduler.interfaces import RecordingIO
from ha.scheduler.profiles import profile
from tests.scheduler.cachekit import make_node, make_pod, make_pod_group, make_queue

S = TaskStatus
NODES = ["n0", "n1", "n2"]          # n2 never gets a Node object: placeholder NodeInfo
PODS = [f"p{i}" for i in range(6)]
GROUPS = ["g0", "g1", "g2", None]    # g1, g2 have no PodGroup: a job ends with its last task


class DeleteAddCache(SchedulerCache):
    """The reference: updatePod exactly as Volcano writes it, deletePod(old) then addPod(new)."""

    def _update_pod(self, old: dict, new: dict) -> None:
        if not (new.get("spec") or {}).get("nodeName") and self._allocated_pod_in_cache(new):
            self.stats["ignored_updates"] += 1
            return
        job_id, uid = self._job_and_uid(old)
        job = self.jobs.get(job_id)
        prev = job.tasks.get(uid) if job is not None else None
        self._delete_pod(old)
        if not (_md(new).get("ownerReferences")) and _md(old).get("ownerReferences"):
            new.setdefault("metadata", {})["ownerReferences"] = _md(old)["ownerReferences"]
        self._add_task(self.new_task_info(new, _same_request(prev, new)))


def _res(r) -> tuple | None:
    if r is None:
        return None
    return (r.milli_cpu, r.memory, sorted((r.scalar_resources or {}).items()), r.max_task_num)


def _task(t: TaskInfo) -> dict:
    out = {}
    for f in TaskInfo.__slots__:
        if f == "__weakref__":
            continue
        v = getattr(t, f)
        if f in ("resreq", "init_resreq"):
            v = _res(v)
        elif f == "last_transaction":
            v = None if v is None else vars(v)
        out[f] = v
    out["resreq_is_init"] = t.resreq is t.init_resreq
    return out


def state(c: SchedulerCache) -> dict:
    jobs = []
    for jid, j in c.jobs.items():
        jobs.append((jid, j.uid, j.pg_uid, j.pod_group is not None,
                     [(uid, _task(t)) for uid, t in j.tasks.items()],
                     [(int(s), list(idx)) for s, idx in j.task_status_index.items()],
                     all(j.task_status_index[t.status][uid] is t for uid, t in j.tasks.items()),
                     _res(j.total_request), _res(j.allocated)))
    nodes = []
    for name, n in c.nodes.items():
        nodes.append((name, n.node is not None, [(k, _task(t)) for k, t in n.tasks.items()],
                      _res(n.idle), _res(n.used), _res(n.releasing), _res(n.pipelined)))
    return {"jobs": jobs, "nodes": nodes, "deleted_jobs": list(c.deleted_jobs),
            "stats": dict(c.stats), "errors": list(c.errors), "digest": c.digest(),
            "bind_queue": [b.task_info.uid for b in c.bind_queue]}


class FastPathEquivalence(RuleBasedStateMachine):
    @initialize(name=st.sampled_from(["v1.14", "pr5045", "pr5045-fixed", "annotations", "nomination-only"]))
    def setup(self, name):
        self.caches = []
        for cls in (SchedulerCache, DeleteAddCache):
            io = RecordingIO(evict_deletes=False)
            c = cls(profile(name), binder=io, evictor=io, status_updater=io)
            c.add_queue(make_queue("default"))
            for n in NODES[:2]:
                c.add_node(make_node(n, cpu=4000))
            c.add_pod_group(make_pod_group("g0", min_member=2))
            self.caches.append(c)
        self.delivered: dict[str, dict] = {}
        self.fast_hits = 0

    def _apply(self, fn) -> None:
        """fn(cache) on both caches; the same outcome (exception type included) in each."""
        outcomes = []
        for c in self.caches:
            try:
                fn(c)
                outcomes.append(None)
            except (CacheError, FatalCacheError) as e:
                outcomes.append(type(e).__name__)
        assert outcomes[0] == outcomes[1], outcomes

    def _deliver(self, key: str, new: dict | None) -> None:
        old = self.delivered.get(key)
        if new is None:
            if old is not None:
                self._apply(lambda c: c.delete_pod(copy.deepcopy(old)))
                del self.delivered[key]
            return
        if old is None:
            self._apply(lambda c: c.add_pod(copy.deepcopy(new)))
        else:
            self._apply(lambda c: c.update_pod(copy.deepcopy(old), copy.deepcopy(new)))
        self.delivered[key] = new

    # ---- informer side ------------------------------------------------------------------------
    @rule(name=st.sampled_from(PODS), group=st.sampled_from(GROUPS),
          cpu=st.sampled_from(["500m", "0.3333", "1", "1.1"]), node=st.sampled_from([""] + NODES),
          phase=st.sampled_from(["Pending", "Running", "Succeeded", "Failed", "Unknown"]))
    def create_pod(self, name, group, cpu, node, phase):
        key = f"ns/{name}"
        if key in self.delivered:
            return
        pod = make_pod(name, group=group, node=node, phase=phase if node else "Pending")
        pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = cpu
        pod["spec"]["containers"][0]["resources"]["requests"]["memory"] = "1.7Gi"
        self._deliver(key, pod)

    @rule(name=st.sampled_from(PODS), change=st.sampled_from([
        "annotation", "annotation", "condition", "condition", "priority", "task-priority", "role",
        "preemptable", "run", "finish", "fail", "deleting", "nominate", "unnominate", "bind-node",
        "unbind-node", "cpu", "regroup", "ungroup", "pipelined-annotations", "eviction-annotation",
        "owner", "uid", "gates", "noop", "noop", "priority-none", "pc-name", "label-role",
        "label-preemptable"]), value=st.integers(0, 3))
    def update_pod(self, name, change, value):
        key = f"ns/{name}"
        old = self.delivered.get(key)
        if old is None:
            return
        self._update(key, old, change, value)

    @rule(data=st.data(), change=st.sampled_from(["annotation", "condition", "noop", "priority-none",
                                                   "pc-name", "task-priority", "label-role"]),
          value=st.integers(0, 3))
    def touch_pod(self, data, change, value):
        """The commonest informer events (a pod that exists, updated in what a task may not
        read): the in-place path's own ground, drawn far more often than by ``update_pod``."""
        if self.delivered:
            key = data.draw(st.sampled_from(sorted(self.delivered)))
            self._update(key, self.delivered[key], change, value)

    def _update(self, key: str, old: dict, change: str, value: int) -> None:
        new = copy.deepcopy(old)
        md, spec, status = new["metadata"], new["spec"], new["status"]
        ann = md.setdefault("annotations", {})
        md["resourceVersion"] = md.get("resourceVersion", 1) + 1
        if change == "annotation":
            ann["bench/round"] = str(value)
        elif change == "condition":
            status["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": str(value)}]
        elif change == "priority":
            spec["priority"] = value * 10
        elif change == "task-priority":
            ann["volcano.sh/task-priority"] = str(value)
        elif change == "role":
            ann["volcano.sh/task-spec"] = f"r{value}"
        elif change == "preemptable":
            ann["volcano.sh/preemptable"] = ["true", "false", "bogus", "1"][value]
        elif change == "run":
            if spec["nodeName"]:
                status["phase"] = "Running"
        elif change == "finish":
            status["phase"] = "Succeeded"
        elif change == "fail":
            status["phase"] = "Failed"
        elif change == "deleting":
            md["deletionTimestamp"] = 1.0
        elif change == "nominate":
            status["nominatedNodeName"] = NODES[value % 3]
        elif change == "unnominate":
            status["nominatedNodeName"] = ""
        elif change == "bind-node":
            spec["nodeName"] = NODES[value % 3]
        elif change == "unbind-node":
            spec["nodeName"] = ""
        elif change == "cpu":
            spec["containers"][0]["resources"]["requests"]["cpu"] = ["100m", "0.25", "2", "0.3333"][value]
        elif change == "regroup":
            ann["scheduling.k8s.io/group-name"] = GROUPS[value % 3]
        elif change == "ungroup":
            ann.pop("scheduling.k8s.io/group-name", None)
        elif change == "pipelined-annotations":
            ann["volcano.sh/pipelined-status"] = "true"
            ann["volcano.sh/pipelined-node"] = NODES[value % 3]
        elif change == "eviction-annotation":
            ann["volcano.sh/eviction-occurred"] = "true"
        elif change == "owner":
            md["ownerReferences"] = [{"kind": "Job", "name": f"j{value}"}]
        elif change == "uid":
            md["uid"] = f"{key.replace('/', '-')}-{value}"
        elif change == "gates":
            spec["schedulingGates"] = [{"name": "g"}] if value else []
        elif change == "priority-none":
            spec["priority"] = None
        elif change == "pc-name":
            spec["priorityClassName"] = f"pc{value % 2}"
        elif change == "label-role":
            md.setdefault("labels", {})["volcano.sh/task-spec"] = f"l{value}"
        elif change == "label-preemptable":
            md.setdefault("labels", {})["volcano.sh/preemptable"] = ["true", "false", "x", "0"][value]
        self._deliver(key, new)

    @rule(name=st.sampled_from(PODS))
    def delete_pod(self, name):
        self._deliver(f"ns/{name}", None)

    @rule(name=st.sampled_from(["pc0", "pc1"]), value=st.integers(0, 3), default=st.booleans(),
          delete=st.booleans())
    def priority_class(self, name, value, default, delete):
        """PriorityClasses come and go: the admission emulation's value for a pod without
        spec.priority changes under the stored tasks (a rebuilt task takes the new one)."""
        pc = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
              "value": value * 100, "globalDefault": default}
        self._apply(lambda c: c.delete_priority_class(pc) if delete else c.add_priority_class(pc))

    # ---- scheduler side: tasks that no longer match their pods ---------------------------------
    def _pick(self, data, statuses):
        uids = sorted(t.uid for j in self.caches[0].jobs.values() for t in j.tasks.values()
                      if t.status in statuses)
        return data.draw(st.sampled_from(uids)) if uids else None

    @staticmethod
    def _find(c, uid):
        return next(t for j in c.jobs.values() for t in j.tasks.values() if t.uid == uid)

    @rule(data=st.data(), node=st.sampled_from(NODES))
    def pipeline(self, data, node):
        uid = self._pick(data, {S.PENDING})
        if uid:
            self._apply(lambda c: c.pipeline(self._find(c, uid).clone(), node))

    @rule(data=st.data())
    def evict(self, data):
        uid = self._pick(data, {S.RUNNING, S.BOUND, S.BINDING})
        if uid:
            self._apply(lambda c: c.evict(self._find(c, uid).clone(), "test"))

    @rule(data=st.data(), node=st.sampled_from(NODES[:2]))
    def bind(self, data, node):
        uid = self._pick(data, {S.PENDING, S.PIPELINED})
        if uid:
            def go(c):
                t = self._find(c, uid).clone()
                t.node_name = t.node_name or node
                c.add_bind_task(t)
            self._apply(go)

    @rule(data=st.data())
    def transaction_fields(self, data):
        """Session leftovers on a cached task that a rebuilt task would not have."""
        uid = self._pick(data, set(S))
        if uid:
            for c in self.caches:
                t = self._find(c, uid)
                t.generate_last_tx_context()
                t.volume_ready = True
                t.job_allocated_hyper_node = "hn"

    # ---- the property -------------------------------------------------------------------------
    @invariant()
    def same_state_as_delete_and_add(self):
        if not hasattr(self, "caches"):
            return
        a, b = state(self.caches[0]), state(self.caches[1])
        for k in a:
            assert a[k] == b[k], k


TestFastPathEquivalence = FastPathEquivalence.TestCase
TestFastPathEquivalence.settings = settings(max_examples=300, stateful_step_count=40, deadline=None,
                                            suppress_health_check=[HealthCheck.too_slow])


def test_the_fast_path_is_taken_for_an_annotation_update_and_matches_delete_add():
    """The common informer update (an annotation) keeps the stored task and swaps in the pod, for
    a pending task and for one on a node; the result equals the reference's."""
    caches = []
    for cls in (SchedulerCache, DeleteAddCache):
        c = cls(profile("v1.14"))
        c.add_queue(make_queue("default"))
        c.add_node(make_node("n0"))
        c.add_pod_group(make_pod_group("g0", min_member=2))
        caches.append(c)
    calls = []   # the node side of the in-place path (a task on a node)
    real = caches[0]._replace_task
    caches[0]._replace_task = lambda *a: (calls.append(a[1].uid), real(*a))[-1]
    pods = [make_pod("a", group="g0"), make_pod("b", group="g0", node="n0", phase="Running")]
    for c in caches:
        for p in pods:
            c.add_pod(copy.deepcopy(p))
    for p in pods:
        new = copy.deepcopy(p)
        new["metadata"]["annotations"]["x"] = "y"
        for c in caches:
            before = c.jobs["ns/g0"].tasks[p["metadata"]["uid"]]
            delivered = copy.deepcopy(new)
            c.update_pod(copy.deepcopy(p), delivered)
            after = c.jobs["ns/g0"].tasks[p["metadata"]["uid"]]
            assert after.pod is delivered and after.pod["metadata"]["annotations"]["x"] == "y"
            # nothing the task reads changed: the real cache keeps the object, the reference rebuilds
            assert (after is before) == (c is caches[0])
    assert calls == ["ns-b"]
    assert state(caches[0]) == state(caches[1])
    assert list(caches[0].jobs["ns/g0"].tasks) == ["ns-a", "ns-b"]
    assert caches[0].nodes["n0"].used.milli_cpu == 1000


def test_node_swap_task_only_when_accounting_cannot_change():
    """NodeInfo.swap_task replaces the stored copy only for the same status and request; anything
    else is refused (the caller then does RemoveTask + AddTask)."""
    c = SchedulerCache(profile("v1.14"))
    c.add_queue(make_queue("default"))
    c.add_node(make_node("n0"))
    c.add_pod_group(make_pod_group("g0", min_member=1))
    c.add_pod(make_pod("b", group="g0", node="n0", phase="Running"))
    node = c.nodes["n0"]
    stored = node.tasks["ns/b"]
    used = node.used.milli_cpu
    same = c.new_task_info(make_pod("b", group="g0", node="n0", phase="Running"))
    assert node.swap_task(same) and node.tasks["ns/b"] is not stored and node.used.milli_cpu == used
    bigger = c.new_task_info(make_pod("b", group="g0", node="n0", phase="Running", cpu=2000))
    other_status = c.new_task_info(make_pod("b", group="g0", node="n0", phase="Pending"))
    missing = c.new_task_info(make_pod("zz", group="g0", node="n0", phase="Running"))
    for t in (bigger, other_status, missing):
        before = node.tasks.get("ns/b")
        assert not node.swap_task(t) and node.tasks.get("ns/b") is before
    assert node.used.milli_cpu == used


def test_a_task_the_cache_changed_is_rebuilt_not_kept():
    """A stored task that no longer equals what its pod gives (a session's leftovers, a status
    the cache set) is rebuilt from the new pod, as delete + add would; one that does is kept."""
    c = SchedulerCache(profile("pr5045").with_(informer_guard_pipelined=False))
    c.add_queue(make_queue("default"))
    c.add_node(make_node("n0"))
    c.add_pod_group(make_pod_group("g0", min_member=2))
    pods = {n: make_pod(n, group="g0", priority=5) for n in ("a", "b", "c")}
    for p in pods.values():
        c.add_pod(copy.deepcopy(p))
    tasks = c.jobs["ns/g0"].tasks
    tasks["ns-a"].generate_last_tx_context()
    c.pipeline(tasks["ns-b"].clone(), "n0")
    assert tasks["ns-b"].status == S.PIPELINED
    before = dict(tasks)
    for n, p in pods.items():
        new = copy.deepcopy(p)
        new["metadata"]["annotations"]["x"] = "y"
        c.update_pod(copy.deepcopy(p), new)
    assert tasks["ns-a"] is not before["ns-a"] and tasks["ns-a"].last_transaction is None
    assert tasks["ns-b"] is not before["ns-b"] and tasks["ns-b"].status == S.PENDING
    assert tasks["ns-c"] is before["ns-c"]


def test_rebuilt_equal_follows_every_input_a_task_reads():
    """TaskInfo.rebuilt_equal is False for a change of any input a TaskInfo reads, True for one
    it does not read (an unrelated annotation, a condition, the resourceVersion)."""
    sw = profile("annotations")
    base = make_pod("a", group="g0", priority=5, labels={"app": "x"})
    t = TaskInfo(base, sw)

    def changed(fn) -> bool:
        p = copy.deepcopy(base)
        fn(p)
        return not t.rebuilt_equal(p, sw)

    md = lambda p: p["metadata"]  # noqa: E731
    assert not changed(lambda p: md(p)["annotations"].update({"x": "y"}))
    assert not changed(lambda p: p["status"].update({"conditions": [{"type": "Ready"}]}))
    assert not changed(lambda p: md(p).update({"resourceVersion": 9}))
    for fn in (lambda p: md(p)["annotations"].update({"volcano.sh/task-spec": "r"}),
               lambda p: md(p)["labels"].update({"volcano.sh/task-spec": "r"}),
               lambda p: md(p)["labels"].update({"volcano.sh/preemptable": "false"}),
               lambda p: md(p)["annotations"].update({"volcano.sh/preemptable": "false"}),
               lambda p: md(p)["annotations"].update({"volcano.sh/revocable-zone": "*"}),
               lambda p: md(p)["annotations"].update({"volcano.sh/task-priority": "7"}),
               lambda p: md(p)["annotations"].update({"volcano.sh/eviction-occurred": "true"}),
               lambda p: md(p)["annotations"].update({"volcano.sh/pipelined-status": "true",
                                                      "volcano.sh/pipelined-node": "n0"}),
               lambda p: md(p)["annotations"].update({"scheduling.k8s.io/group-name": "g1"}),
               lambda p: md(p).update({"uid": "other"}),
               lambda p: md(p).update({"deletionTimestamp": 1.0}),
               lambda p: p["spec"].update({"priority": 6}),
               lambda p: p["spec"].update({"nodeName": "n0"}),
               lambda p: p["spec"].update({"schedulingGates": [{"name": "g"}]}),
               lambda p: p["spec"]["containers"][0]["resources"]["requests"].update({"cpu": "2"}),
               lambda p: p["status"].update({"phase": "Running"}),
               lambda p: p["status"].update({"nominatedNodeName": "n0"})):
        assert changed(fn)
    assert not t.rebuilt_equal(copy.deepcopy(base), sw, priority=4)   # the admission's value
