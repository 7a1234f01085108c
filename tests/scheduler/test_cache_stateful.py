"""Hypothesis state machine over SchedulerCache.

Random informer events (add/update/delete pods, add/update nodes, informer deliveries of API-side
changes) mixed with scheduler operations (bind, evict, pipeline, unpipeline, resync, snapshot) on a
random profile. Invariants after every step:
  * every NodeInfo's idle/used/releasing/pipelined equal a recomputation from its stored tasks;
  * used/releasing/pipelined and every job's allocated/total_request never go negative (Volcano's
    asserting Sub would panic) — and no ResourceUnderflow is ever raised;
  * every job's task_status_index agrees with its tasks' statuses;
  * a snapshot's nodes have the same accounting as the cache's Ready nodes;
  * with ``unpipeline_on_replace`` (profile pr5045-s4fixed, the S4 fix): re-placing a Pipelined
    task (Pipeline or bind on another node, bind after Idle shrank) never hits klog.Fatalf, and
    every Pipelined/Binding task is held by exactly the node it names.
"""
from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from ha.scheduler.api import CacheError, FatalCacheError, TaskStatus, copy_object
from ha.scheduler.cache import SchedulerCache
from ha.scheduler.interfaces import RecordingIO
from ha.scheduler.profiles import profile
from tests.scheduler.cachekit import make_node, make_pod, make_pod_group, make_queue

S = TaskStatus
NODES = ["n0", "n1", "n2"]
PODS = [f"p{i}" for i in range(8)]
GROUPS = ["g0", "g1", None]
EPS = 0.1


def _close(a, b) -> bool:
    keys = set(a.scalar_resources or {}) | set(b.scalar_resources or {})
    return (abs(a.milli_cpu - b.milli_cpu) < EPS and abs(a.memory - b.memory) < EPS
            and all(abs(a.get(k) - b.get(k)) < EPS for k in keys))


def _non_negative(r) -> bool:
    return r.milli_cpu > -EPS and r.memory > -EPS and all(v > -EPS for v in (r.scalar_resources or {}).values())


class CacheMachine(RuleBasedStateMachine):
    @initialize(name=st.sampled_from(["v1.14", "pr5045", "pr5045-fixed", "pr5045-s4fixed", "pr5045-s6fixed", "annotations",
                                      "nomination-only"]))
    def setup(self, name):
        self.io = RecordingIO(evict_deletes=True)
        self.cache = SchedulerCache(profile(name), binder=self.io, evictor=self.io, status_updater=self.io)
        self.delivered: dict[str, dict] = {}   # what the informer last gave the cache
        self.fatal = 0
        self.cache.add_queue(make_queue("default"))
        for n in NODES[:2]:   # n2 arrives later (or never): pods on it exercise the placeholder node
            self.cache.add_node(make_node(n, cpu=4000))
        for g in GROUPS:
            if g:
                self.cache.add_pod_group(make_pod_group(g, min_member=2))

    # ---- informer side ------------------------------------------------------------------------
    @rule(name=st.sampled_from(NODES), cpu=st.sampled_from([1000, 2000, 4000, 8000]),
          pods=st.sampled_from([2, 10]))
    def add_or_update_node(self, name, cpu, pods):
        node = make_node(name, cpu=cpu, pods=pods)
        if name in self.cache.nodes:
            self.cache.update_node(None, node)
        else:
            self.cache.add_node(node)

    @rule(name=st.sampled_from(PODS), cpu=st.sampled_from([0, 500, 1000, 3000]),
          group=st.sampled_from(GROUPS), node=st.sampled_from([""] + NODES),
          phase=st.sampled_from(["Pending", "Pending", "Running", "Running", "Succeeded", "Unknown"]),
          deleting=st.sampled_from([False, False, False, True]),
          nominated=st.sampled_from(["", "n0", "n1"]))
    def create_pod(self, name, cpu, group, node, phase, deleting, nominated):
        free = [n for n in PODS if f"ns/{n}" not in self.io.pods]
        if not free:
            return
        if name not in free:
            name = free[0]
        key = f"ns/{name}"
        pod = make_pod(name, cpu=cpu, group=group, node=node, phase=phase if node else "Pending",
                       deleting=deleting, nominated=nominated)
        self.io.pods[key] = pod
        self._deliver(key)

    @rule(name=st.sampled_from(PODS), change=st.sampled_from(["run", "delete-graceful", "finish", "nominate",
                                                              "unnominate", "condition", "remove"]))
    def api_change(self, name, change):
        key = f"ns/{name}"
        pod = self.io.pods.get(key)
        if pod is None:
            return
        if change == "run" and pod["spec"]["nodeName"]:
            pod["status"]["phase"] = "Running"
        elif change == "delete-graceful":
            pod["metadata"]["deletionTimestamp"] = 1.0
        elif change == "finish" and pod["spec"]["nodeName"]:
            pod["status"]["phase"] = "Succeeded"
        elif change == "nominate":
            pod["status"]["nominatedNodeName"] = "n1"
        elif change == "unnominate":
            pod["status"]["nominatedNodeName"] = ""
        elif change == "condition":
            pod["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "x"}]
        elif change == "remove":
            del self.io.pods[key]
        self._deliver(key)

    @rule(name=st.sampled_from(PODS))
    def informer_sync(self, name):
        self._deliver(f"ns/{name}")

    def _deliver(self, key):
        api = self.io.pods.get(key)
        old = self.delivered.get(key)
        if api is None:
            if old is not None:
                self.cache.delete_pod(old)
                del self.delivered[key]
            return
        new = copy_object(api)
        if old is None:
            self.cache.add_pod(new)
        elif old != new:
            self.cache.update_pod(old, new)
        else:
            return
        self.delivered[key] = new

    # ---- scheduler side -----------------------------------------------------------------------
    def _tasks(self, statuses):
        return [t for j in self.cache.jobs.values() for t in j.tasks.values() if t.status in statuses]

    def _guard(self, fn):
        try:
            fn()
        except CacheError:
            pass
        except FatalCacheError:
            self.fatal += 1   # "the scheduler would have crashed"; accounting must still be coherent

    @rule(data=st.data(), node=st.sampled_from(NODES))
    def bind(self, data, node):
        cands = self._tasks({S.PENDING, S.PIPELINED})
        if not cands:
            return
        t = data.draw(st.sampled_from(cands)).clone()
        t.node_name = t.node_name or node
        self._guard(lambda: self.cache.add_bind_task(t))

    @rule(data=st.data())
    def evict(self, data):
        cands = self._tasks({S.RUNNING, S.BOUND, S.BINDING})
        if cands:
            t = data.draw(st.sampled_from(cands)).clone()
            self._guard(lambda: self.cache.evict(t, "test"))

    @rule(data=st.data(), node=st.sampled_from(NODES))
    def pipeline(self, data, node):
        cands = self._tasks({S.PENDING})
        if cands:
            t = data.draw(st.sampled_from(cands)).clone()
            self._guard(lambda: self.cache.pipeline(t, node))

    @rule(data=st.data(), node=st.sampled_from(NODES))
    def replace_pipelined(self, data, node):
        """S4: a session re-places a task the cache holds Pipelined — Pipeline or Allocate
        (AddBindTask) on any node, possibly another one."""
        cands = self._tasks({S.PIPELINED})
        if cands:
            t = data.draw(st.sampled_from(cands)).clone()
            t.node_name = node
            if data.draw(st.booleans()):
                self._guard(lambda: self.cache.pipeline(t, node))
            else:
                self._guard(lambda: self.cache.add_bind_task(t))

    @rule(data=st.data())
    def unpipeline(self, data):
        cands = self._tasks({S.PIPELINED})
        if cands:
            t = data.draw(st.sampled_from(cands)).clone()
            self._guard(lambda: self.cache.unpipeline(t))

    @rule()
    def resync(self):
        self._guard(self.cache.process_resync_task)

    @rule(fail=st.sampled_from(PODS))
    def make_next_bind_fail(self, fail):
        self.io.fail_bind[f"ns/{fail}"] = "409 Conflict"

    # ---- invariants ---------------------------------------------------------------------------
    @invariant()
    def node_accounting_matches_tasks(self):
        if not hasattr(self, "cache"):
            return
        for ni in self.cache.nodes.values():
            want = ni.recompute()
            for f in ("idle", "used", "releasing", "pipelined"):
                assert _close(getattr(ni, f), want[f]), (ni.name, f, getattr(ni, f), want[f])
                if f != "idle":
                    assert _non_negative(getattr(ni, f)), (ni.name, f)
            for t in ni.tasks.values():
                assert t.status not in (S.SUCCEEDED, S.FAILED)

    @invariant()
    def s4_fix_never_fatal_and_placements_held(self):
        if not hasattr(self, "cache") or not self.cache.switches.unpipeline_on_replace:
            return
        assert self.fatal == 0 and self.cache.stats["fatal"] == 0
        for job in self.cache.jobs.values():
            for t in job.tasks.values():
                if t.status not in (S.PIPELINED, S.BINDING) or t.node_name not in self.cache.nodes:
                    continue
                held = self.cache.nodes[t.node_name].tasks.get(f"{t.namespace}/{t.name}")
                assert held is not None and held.uid == t.uid and held.status == t.status, (t.name, t.status)
                others = [n for n, ni in self.cache.nodes.items() if n != t.node_name
                          and (ni.tasks.get(f"{t.namespace}/{t.name}") or t).uid == t.uid
                          and f"{t.namespace}/{t.name}" in ni.tasks]
                assert not others, (t.name, t.node_name, others)

    @invariant()
    def s6_fix_pod_copies_follow_the_informer(self):
        """With refresh_guarded_pod, the pod copy of a task the informer delivered (on its job and
        its node) is the informer's latest object, whatever the guard ignored -- or, after a
        resync, the object the cache fetched from the API server (Volcano's syncTask), which here
        says the same as the informer's latest."""
        if not hasattr(self, "cache") or not self.cache.switches.refresh_guarded_pod:
            return
        for job in self.cache.jobs.values():
            for t in job.tasks.values():
                latest = self.delivered.get(f"{t.namespace}/{t.name}")
                if latest is None or (latest.get("metadata") or {}).get("uid") != t.uid:
                    continue
                assert t.pod is latest or t.pod == latest, (t.name, t.status)
                held = self.cache.nodes.get(t.node_name).tasks.get(f"{t.namespace}/{t.name}") \
                    if t.node_name in self.cache.nodes else None
                if held is not None and held.uid == t.uid:
                    assert held.pod is t.pod, (t.name, t.status, t.node_name)

    @invariant()
    def jobs_consistent(self):
        if not hasattr(self, "cache"):
            return
        for job in self.cache.jobs.values():
            assert _non_negative(job.allocated) and _non_negative(job.total_request)
            indexed = {uid: s for s, ts in job.task_status_index.items() for uid in ts}
            for uid, t in job.tasks.items():
                assert indexed.get(uid) == t.status and job.task_status_index[t.status][uid] is t

    @invariant()
    def snapshot_matches_cache(self):
        if not hasattr(self, "cache"):
            return
        snap = self.cache.snapshot()
        for name, sn in snap.nodes.items():
            cn = self.cache.nodes[name]
            if len(sn.tasks) != len(cn.tasks):   # Clone drops a Binding task that no longer fits
                continue
            for f in ("idle", "used", "releasing", "pipelined"):
                assert _close(getattr(sn, f), getattr(cn, f)), (name, f)


TestCacheStateful = CacheMachine.TestCase
TestCacheStateful.settings = settings(max_examples=80, stateful_step_count=50, deadline=None,
                                      suppress_health_check=[HealthCheck.too_slow])
