"""Each oracle sees its constructed violation, and stays at zero on a quiet observation stream."""
from __future__ import annotations

from ha.experiment.checkers import headline
from ha.experiment.checkers.allocation_drift import AllocationDrift
from ha.experiment.checkers.cyclic_evictions import CyclicEvictions
from ha.experiment.checkers.overcommit_violations import OvercommitViolations
from ha.experiment.checkers.pairwise_drift import PairwiseDrift
from ha.experiment.checkers.partial_gang_binds import PartialGangBinds
from ha.experiment.checkers.wasted_evictions import WastedEvictions
from ha.experiment.oracles import (CacheDivergence, PodEvent, ResourceDrift, Truth, cluster_capacity,
                                   overcommitted_nodes, pod_requests, slot_of_name)


# ------------------------------------------------------------------------------- object makers

def node(name, cpu="4000m", memory="8589934592", pods="10"):
    return {"kind": "Node", "metadata": {"name": name},
            "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": pods}}}


def pod(name, cpu="1000m", node_name="", phase="Pending", group=None, nnn="", ns="default", ann=None):
    a = dict(ann or {})
    if group:
        a["scheduling.k8s.io/group-name"] = group
    return {"kind": "Pod", "metadata": {"name": name, "namespace": ns, "uid": f"u-{name}", "annotations": a},
            "spec": {"nodeName": node_name,
                     "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1073741824"}}}]},
            "status": {"phase": phase, "nominatedNodeName": nnn}}


def pg(name, min_member, ns="default"):
    return {"kind": "PodGroup", "metadata": {"name": name, "namespace": ns}, "spec": {"minMember": min_member}}


def truth(pods=(), nodes=(), groups=()):
    return Truth(pods={f"default/{p['metadata']['name']}": p for p in pods},
                 nodes={n["metadata"]["name"]: n for n in nodes},
                 pod_groups={f"default/{g['metadata']['name']}": g for g in groups})


def dec(op, pod_name, node_name, session=1, instance="scheduler-1", ok=True, dry=False, t=0.0):
    return {"op": op, "pod": f"default/{pod_name}", "node": node_name, "session": session,
            "instance": instance, "ok": ok, "dry_run": dry, "t": t, "leader": True}


def digest_nodes(idle_cpu, pipelined_cpu=0, releasing_cpu=0):
    return {"idle": {"cpu": idle_cpu, "memory": 8589934592}, "used": {},
            "pipelined": {"cpu": pipelined_cpu} if pipelined_cpu else {},
            "releasing": {"cpu": releasing_cpu} if releasing_cpu else {}}


# ------------------------------------------------------------------------------------- helpers

def test_pod_requests_and_capacity_parse_quantities():
    assert pod_requests(pod("a", cpu="1500m"))["cpu"] == 1500
    assert pod_requests(pod("a"))["pods"] == 1
    cap = cluster_capacity([node("n1"), node("n2", cpu="2")])
    assert cap["cpu"] == 6000 and cap["pods"] == 20


def test_slot_of_name_reads_retry_suffix_and_annotations():
    assert slot_of_name("job-3-0-r2") == ("job-3-0", 2)
    assert slot_of_name("pod1") == ("pod1", 0)
    assert slot_of_name("x", {"ha-testbed/slot": "base", "ha-testbed/attempt": "4"}) == ("base", 4)


# ------------------------------------------------------------------------------ cache divergence

def test_cache_divergence_sees_a_lagging_instance_and_zero_when_caught_up():
    ref = {"u1": ["Running", "n1"], "u2": ["Bound", "n2"], "u3": ["Pending", ""]}
    lagging = {"u1": ["Running", "n1"], "u2": ["Pending", ""]}          # missed u2's bind and u3
    o = CacheDivergence()
    assert o.observe("scheduler-2", lagging, ref) == 2
    assert o.observe("scheduler-2", dict(ref), ref) == 0
    s = o.summary()
    assert s["max"] == 2 and s["instances"]["scheduler-2"]["final"] == 0 and s["final_max"] == 0


def test_cache_divergence_status_spelling_does_not_matter():
    o = CacheDivergence()
    assert o.observe("a", {"u1": ["PIPELINED", "n1"]}, {"u1": ["Pipelined", "n1"]}) == 0
    assert o.observe("a", {"u1": ["Pipelined", "n2"]}, {"u1": ["Pipelined", "n1"]}) == 1


def test_cache_divergence_forgives_only_the_sampling_window():
    # the truth moved between the reference taken before the instances were asked (before) and the
    # one taken after (ref): an instance holding either state was up to date when it answered
    before = {"u1": ["Pending", ""], "u2": ["Bound", "n2"], "u4": ["Running", "n1"]}
    ref = {"u1": ["Binding", "n1"], "u2": ["Bound", "n2"], "u3": ["Pending", ""]}   # u3 new, u4 gone
    o = CacheDivergence()
    answered_early = {"u1": ["Pending", ""], "u2": ["Bound", "n2"], "u4": ["Running", "n1"]}
    assert o.observe("a", answered_early, ref, before) == 0
    assert o.observe("a", answered_early, ref) == 3                   # without the window: skew
    # older than the window's start is divergence: u2 still Pending, u4 on a node it never was on
    stale = {"u1": ["Pending", ""], "u2": ["Pending", ""], "u4": ["Running", "n2"], "u9": ["Pending", ""]}
    assert o.observe("a", stale, ref, before) == 3                    # u2, u4 and the phantom u9


def test_cache_divergence_gives_an_in_flight_decision_one_tick_then_counts_it():
    ref = {"u1": ["Pending", ""], "u2": ["Pipelined", "n2"], "u3": ["Bound", "n1"]}
    leader = {"u1": ["Binding", "n1"], "u2": ["Binding", "n2"], "u3": ["Bound", "n1"]}
    o = CacheDivergence()
    assert o.observe("leader", leader, ref) == 0          # binds written a moment ago, not yet seen
    assert o.observe("leader", leader, ref) == 2          # still not in the API server: lost writes
    assert o.observe("leader", {**leader, "u1": ["Pending", ""], "u2": ["Pipelined", "n2"]}, ref) == 0
    # behind the truth is never forgiven: a standby that missed u3's bind counts at once
    assert CacheDivergence().observe("standby", {**ref, "u3": ["Pending", ""]}, ref) == 1
    # its bind landed but its own informer has not brought it back yet: Binding vs Bound, same node
    o = CacheDivergence()
    assert o.observe("leader", {**ref, "u3": ["Binding", "n1"]}, ref) == 0
    assert o.observe("leader", {**ref, "u3": ["Binding", "n1"]}, ref) == 1   # never confirmed: counts
    # a decision on a node the truth does not show is not "ahead": it contradicts the truth
    assert CacheDivergence().observe("x", {**ref, "u3": ["Binding", "n2"]}, ref) == 1


def test_persistent_divergence_counts_a_wrong_state_held_for_a_whole_tick():
    ref1 = {"u1": ["Running", "n1"], "u2": ["Bound", "n2"]}
    o = CacheDivergence()
    assert o.observe("s", {"u1": ["Bound", "n1"], "u2": ["Pending", ""]}, ref1) == 2
    assert o.last_persistent["s"] == 0                       # first sight: maybe in flight
    ref2 = {"u1": ["Succeeded", "n1"], "u2": ["Running", "n2"]}
    # u1 caught up one step (still behind, but moving); u2 is still Pending: stuck
    assert o.observe("s", {"u1": ["Running", "n1"], "u2": ["Pending", ""]}, ref2) == 2
    assert o.last_persistent["s"] == 1
    assert o.observe("s", dict(ref2), ref2) == 0 and o.last_persistent["s"] == 0


def test_pairwise_drift_per_pair():
    o = PairwiseDrift()
    out = o.observe({"a": {"u1": ["Bound", "n1"]}, "b": {"u1": ["Bound", "n1"]}, "c": {"u1": ["Pending", ""]}})
    assert out[("a", "b")] == 0 and out[("a", "c")] == 1 and out[("b", "c")] == 1
    assert o.summary()["max"] == 1


# ------------------------------------------------------------------------------ resource drift

def test_resource_drift_counts_a_missing_reservation_as_a_fraction_of_capacity():
    cap = cluster_capacity([node("n1"), node("n2")])                 # 8000m cpu
    ref = {"n1": digest_nodes(0, pipelined_cpu=4000), "n2": digest_nodes(4000)}
    lost = {"n1": digest_nodes(0), "n2": digest_nodes(4000)}          # pipelined reservation lost
    o = ResourceDrift()
    assert o.observe("s", lost, ref, cap) == 0.5
    assert o.observe("s", ref, ref, cap) == 0.0
    assert o.summary()["max"] == 0.5


def test_resource_drift_forgives_only_the_sampling_window():
    cap = cluster_capacity([node("n1"), node("n2")])
    before = {"n1": digest_nodes(4000), "n2": digest_nodes(4000)}
    ref = {"n1": digest_nodes(0, pipelined_cpu=4000), "n2": digest_nodes(4000)}   # pipelined meanwhile
    o = ResourceDrift()
    assert o.observe("s", before, ref, cap, before) == 0.0
    assert o.observe("s", before, ref, cap) == 1.0                     # idle and pipelined both off
    wrong = {"n1": digest_nodes(2000), "n2": digest_nodes(4000)}                  # neither state
    assert o.observe("s", wrong, ref, cap, before) == 0.25


def test_resource_drift_absent_without_capacity():
    o = ResourceDrift()
    assert o.observe("s", {}, {}, {}) is None
    assert o.summary() is None


# ---------------------------------------------------------------------------------- overcommit

def test_overcommit_sees_an_overcommitted_node():
    nodes = {"n1": node("n1", cpu="2000m"), "n2": node("n2")}
    pods = [pod("a", node_name="n1", phase="Running"), pod("b", node_name="n1", phase="Running"),
            pod("c", cpu="1500m", node_name="n1", phase="Pending"), pod("d", node_name="n2")]
    assert overcommitted_nodes(pods, nodes) == {"n1": ["cpu"]}
    o = OvercommitViolations()
    assert o.observe(pods, nodes) == 1
    assert o.observe(pods, nodes) == 1
    assert o.summary()["count"] == 2 and o.summary()["nodes"] == {"n1": 2}


def test_overcommit_ignores_terminated_pods_and_counts_pod_slots():
    nodes = {"n1": node("n1", cpu="2000m", pods="1")}
    done = [pod("a", node_name="n1", phase="Succeeded"), pod("b", node_name="n1", phase="Failed"),
            pod("c", node_name="n1", phase="Running")]
    o = OvercommitViolations()
    assert o.observe(done, nodes) == 0
    two = [pod("c", cpu="100m", node_name="n1", phase="Running"), pod("d", cpu="100m", node_name="n1")]
    assert overcommitted_nodes(two, nodes) == {"n1": ["pods"]}


def test_overcommit_quiet():
    nodes = {"n1": node("n1")}
    o = OvercommitViolations()
    for _ in range(5):
        o.observe([pod("a", node_name="n1", phase="Running"), pod("b")], nodes)
    assert o.summary()["count"] == 0 and o.summary()["ticks"] == 5


# --------------------------------------------------------------------------- allocation drift

def test_allocation_drift_sees_a_pod_bound_away_from_its_nomination():
    o = AllocationDrift()
    o.observe_decisions([dec("pipeline", "h1", "n1")])
    o.observe_events([PodEvent(1.0, "bound", "default/h1", node="n2")])
    s = o.summary()
    assert s["count"] == 1 and s["rate"] == 1.0 and s["examples"][0]["nominated"] == "n1"


def test_allocation_drift_from_the_api_servers_nomination_events():
    o = AllocationDrift()
    o.observe_events([PodEvent(0.5, "nominated", "default/p", node="n1"),
                      PodEvent(0.7, "nominated", "default/p", node="n3"),
                      PodEvent(1.0, "bound", "default/p", node="n3"),
                      PodEvent(1.1, "nominated", "default/q", node="n2"),
                      PodEvent(1.2, "bound", "default/q", node="n1")])
    s = o.summary()
    assert s["count"] == 1 and s["renominations"] == 1 and s["nominated_then_bound"] == 2 and s["rate"] == 0.5


def test_allocation_drift_quiet_and_ignores_dry_run_and_failed():
    o = AllocationDrift()
    o.observe_decisions([dec("pipeline", "a", "n1"), dec("pipeline", "b", "n9", dry=True),
                         dec("status", "c", "n9", ok=False)])
    o.observe_events([PodEvent(1.0, "bound", "default/a", node="n1"),
                      PodEvent(1.0, "bound", "default/b", node="n2"),
                      PodEvent(1.0, "bound", "default/c", node="n2"),
                      PodEvent(1.0, "bound", "default/d", node="n2")])    # never nominated
    s = o.summary()
    assert s["count"] == 0 and s["nominated_then_bound"] == 1 and s["rate"] == 0.0


# ---------------------------------------------------------------------------- wasted evictions

def test_wasted_eviction_br1_competitor_takes_the_freed_node():
    o = WastedEvictions()
    o.observe_decisions([dec("evict", "l1", "n1", session=1, t=1.0), dec("pipeline", "h1", "n1", session=1)])
    o.observe_events([PodEvent(5.0, "deleted", "default/l1"), PodEvent(6.0, "bound", "default/c1", node="n1")])
    assert o.summary(final=False)["count"] == 0           # h1 still unresolved mid-run
    s = o.summary(final=True)
    assert s["count"] == 1 and s["examples"][0]["preemptors"] == ["default/h1"]


def test_wasted_eviction_preemptor_bound_elsewhere_and_used_eviction():
    o = WastedEvictions()
    o.observe_decisions([dec("evict", "v1", "n1", session=3), dec("pipeline", "p1", "n1", session=3),
                         dec("evict", "v2", "n2", session=4), dec("status", "p2", "n2", session=4),
                         dec("pipeline", "p3", "n2", session=5)])   # other session: not a preemptor of v2
    o.observe_events([PodEvent(2.0, "bound", "default/p1", node="n7"),
                      PodEvent(2.0, "bound", "default/p2", node="n2")])
    s = o.summary()
    assert s["count"] == 1 and s["used"] == 1 and s["with_preemptor"] == 2


def test_wasted_evictions_quiet_and_no_preemptor():
    o = WastedEvictions()
    o.observe_decisions([dec("evict", "v", "n1", session=1), dec("pipeline", "p", "n2", session=1)])
    s = o.summary()
    assert s["count"] == 0 and s["no_preemptor"] == 1


# ---------------------------------------------------------------------------- cyclic evictions

def test_cyclic_eviction_br2_evicted_recreated_evicted_again():
    o = CyclicEvictions()
    t = truth(pods=[pod("pod1-r1", group="pg1")], groups=[pg("pg1", 1)])
    o.observe_decisions([dec("evict", "pod1", "n1", session=1)], t)
    assert o.count == 0
    o.observe_decisions([dec("evict", "pod1-r1", "n1", session=3)], t)
    o.observe_decisions([dec("evict", "pod1-r1", "n1", session=3, instance="scheduler-2")], t)  # same pod
    o.observe_decisions([dec("evict", "pod1-r2", "n1", session=5)], t)
    s = o.summary()
    assert s["count"] == 2 and s["slots"] == 1 and s["jobs"] == 1


def test_cyclic_evictions_quiet_distinct_pods():
    o = CyclicEvictions()
    o.observe_decisions([dec("evict", f"p{i}", "n1") for i in range(5)] + [dec("evict", "q-r1", "n1", ok=False)])
    assert o.summary()["count"] == 0 and o.summary()["evicted_pods"] == 5


# -------------------------------------------------------------------------- partial gang binds

def test_partial_gang_bind_pr5045_binds_two_of_three():
    t = truth(pods=[pod("j1", group="pgj"), pod("j2", group="pgj"), pod("j3", group="pgj")],
              groups=[pg("pgj", 3)])
    o = PartialGangBinds()
    assert o.observe([dec("bind", "j1", "n1"), dec("bind", "j2", "n1"), dec("pipeline", "j3", "n1")], t) == 1
    s = o.summary()
    assert s["count"] == 1 and s["binds"] == 2 and s["examples"][0]["min_member"] == 3


def test_partial_gang_binds_quiet_whole_gang_and_top_up():
    t = truth(pods=[pod("a1", group="ga"), pod("a2", group="ga"), pod("a3", group="ga"),
                    pod("b1", group="gb", node_name="n1", phase="Running"), pod("b2", group="gb",
                                                                                node_name="n1", phase="Running"),
                    pod("b3", group="gb")],
              groups=[pg("ga", 3), pg("gb", 3)])
    o = PartialGangBinds()
    n = o.observe([dec("bind", "a1", "n1"), dec("bind", "a2", "n1"), dec("bind", "a3", "n2"),
                   dec("bind", "b3", "n2", session=2)], t)     # gb: 2 running + 1 = 3 → ready
    assert n == 0 and o.summary()["count"] == 0 and o.summary()["groups"] == 2


def test_partial_gang_binds_waits_for_an_unknown_job():
    o = PartialGangBinds(patience=2)
    o.observe([dec("bind", "x1", "n1")], truth())
    assert o.summary()["groups"] == 0
    t = truth(pods=[pod("x1", group="gx"), pod("x2", group="gx")], groups=[pg("gx", 2)])
    assert o.observe([], t) == 1


def test_partial_gang_binds_a_sessions_binds_over_two_ticks_are_one_group():
    """A real vc-scheduler's bind goroutines can put a tick between a gang's first bind and the
    rest: the later binds join the group and the gang is not counted as bound in part."""
    gang = [pod(f"a{i}", group="ga") for i in (1, 2, 3)]
    o = PartialGangBinds()
    assert o.observe([dec("bind", "a1", "n1")], truth(pods=gang, groups=[pg("ga", 3)])) == 1
    assert o.summary()["count"] == 1                      # judged provisionally
    bound = [pod("a1", group="ga", node_name="n1", phase="Running"), *gang[1:]]
    o.observe([dec("bind", "a2", "n1"), dec("bind", "a3", "n2")], truth(pods=bound, groups=[pg("ga", 3)]))
    s = o.summary()
    assert s["count"] == 0 and s["binds"] == 0 and s["examples"] == [] and s["groups"] == 1


def test_partial_gang_binds_a_later_tick_that_does_not_complete_the_gang_keeps_it_counted():
    gang = [pod(f"a{i}", group="ga") for i in (1, 2, 3, 4)]
    o = PartialGangBinds()
    o.observe([dec("bind", "a1", "n1")], truth(pods=gang, groups=[pg("ga", 4)]))
    o.observe([dec("bind", "a2", "n1")], truth(pods=gang, groups=[pg("ga", 4)]))
    # another session's bind of the same gang is its own group
    o.observe([dec("bind", "a3", "n2", session=2)], truth(pods=gang, groups=[pg("ga", 4)]))
    s = o.summary()
    assert s["count"] == 2 and s["binds"] == 3 and s["groups"] == 2
    assert s["examples"][0]["bound"] == ["default/a1", "default/a2"]


# ----------------------------------------------------------------------------------- the set

def test_pairwise_drift_from_changed_uids_equals_the_full_diff():
    import random
    rnd = random.Random(5)
    states = {"s1": {}, "s2": {}, "s3": {}}
    full, inc = PairwiseDrift(), PairwiseDrift()
    for tick in range(80):
        changed = {}
        for name, tasks in states.items():
            new = dict(tasks)
            for _ in range(rnd.randint(0, 4)):
                uid = f"u{rnd.randrange(12)}"
                if rnd.random() < 0.2:
                    new.pop(uid, None)
                else:
                    new[uid] = [rnd.choice(["Pending", "PENDING", "Bound", "Pipelined"]), rnd.choice(["", "n1"])]
            changed[name] = {u for u in new.keys() | tasks.keys() if new.get(u) != tasks.get(u)}
            states[name] = new
        # an instance drops out now and then: its pairs are recomputed in full when it is back
        seen = {n: d for n, d in states.items() if not (n == "s3" and tick % 7 == 3)}
        known = {n: (None if tick % 11 == 0 else c) for n, c in changed.items()}
        assert inc.observe(seen, known) == full.observe(seen)
    assert inc.summary() == full.summary() and full.summary()["max"] > 0
