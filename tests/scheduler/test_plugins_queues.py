"""proportion and capacity: deserved, shares, votes and event handlers, against numbers computed by
hand from Volcano's formulas."""
from __future__ import annotations

import pytest

from ha.scheduler.plugins import capacity
from ha.scheduler.plugins.util import PERMIT, REJECT
from tests.scheduler.test_plugins_common import (
    GI, make_session, names, node, opt, pod, podgroup, queue, task,
)


# ----------------------------------------------------------------------------- proportion

def _three_queue_session():
    # 12 cpu in the cluster; q1 (w1) asks 2000, q2 (w2) asks 10000, q3 (w1) asks 10000 but its
    # capability is 3000 cpu.
    nodes = [node("n1", cpu=12000, mem=64 * GI, pods=110)]
    pods = [pod("a", group="j1", cpu=2000, mem=None), pod("b", group="j2", cpu=10000, mem=None),
            pod("c", group="j3", cpu=10000, mem=None)]
    pgs = [podgroup("j1", queue="q1", phase="Inqueue"), podgroup("j2", queue="q2", phase="Inqueue"),
           podgroup("j3", queue="q3", phase="Inqueue")]
    qs = [queue("q1", weight=1), queue("q2", weight=2), queue("q3", weight=1, capability={"cpu": "3"})]
    return make_session([[opt("proportion")]], nodes=nodes, pods=pods, podgroups=pgs, queues=qs)


def test_proportion_water_filling_three_queues_with_capability():
    ssn = _three_queue_session()
    attrs = ssn.plugins["proportion"].queue_opts
    # round 1: 12000 by 1:2:1 -> 3000 / 6000 / 3000; q1 clipped to its request 2000 (met),
    #          q3 clipped to its capability 3000; 1000 remains.
    # round 2: q2 and q3 share 1000 by 2:1 -> q2 6666.67; q3 stays at 3000 (met, capped).
    # round 3: q2 alone takes the last 333.33 -> 7000.
    assert attrs["q1"].deserved.milli_cpu == pytest.approx(2000)
    assert attrs["q2"].deserved.milli_cpu == pytest.approx(7000)
    assert attrs["q3"].deserved.milli_cpu == pytest.approx(3000)
    # memory is clipped to what the queues request (nothing)
    assert all(a.deserved.memory == 0 for a in attrs.values())
    # a capability without memory leaves memory unlimited: the real capability is the cluster's
    assert attrs["q3"].capability.memory > 1e300
    assert attrs["q3"].real_capability.memory == 64 * GI
    # nothing allocated yet: all shares 0
    assert [attrs[q].share for q in ("q1", "q2", "q3")] == [0, 0, 0]


def test_proportion_guarantee_raises_deserved():
    nodes = [node("n1", cpu=8000, mem=8 * GI)]
    pods = [pod("a", group="j1", cpu=1000, mem=GI), pod("b", group="j2", cpu=8000, mem=GI)]
    pgs = [podgroup("j1", queue="q1"), podgroup("j2", queue="q2")]
    qs = [queue("q1", guarantee={"cpu": "4"}), queue("q2")]
    ssn = make_session([[opt("proportion")]], nodes=nodes, pods=pods, podgroups=pgs, queues=qs)
    attrs = ssn.plugins["proportion"].queue_opts
    assert attrs["q1"].deserved.milli_cpu == pytest.approx(4000)  # request 1000, guarantee 4000
    # q2's real capability excludes q1's guarantee: 8000 - 4000
    assert attrs["q2"].real_capability.milli_cpu == pytest.approx(4000)
    assert attrs["q2"].deserved.milli_cpu == pytest.approx(4000)


def _two_queue_running_session(**queue_kw):
    nodes = [node("n1", cpu=4000, mem=8 * GI), node("n2", cpu=4000, mem=8 * GI)]
    pods = [pod(f"r{i}", group="busy", cpu=2000, mem=2 * GI, node="n1" if i < 2 else "n2", phase="Running")
            for i in range(3)]
    pods += [pod("want", group="idle", cpu=2000, mem=2 * GI)]
    pgs = [podgroup("busy", queue="q1"), podgroup("idle", queue="q2", phase="Inqueue")]
    qs = [queue("q1"), queue("q2", **queue_kw)]
    return make_session([[opt("proportion")]], nodes=nodes, pods=pods, podgroups=pgs, queues=qs)


def test_proportion_overused_reclaimable_allocatable_and_order():
    ssn = _two_queue_running_session()
    attrs = ssn.plugins["proportion"].queue_opts
    # total 8000 cpu: q1 requests 6000, q2 2000 -> q1 deserved 6000 (met after q2 is met)
    assert attrs["q1"].deserved.milli_cpu == pytest.approx(6000)
    assert attrs["q2"].deserved.milli_cpu == pytest.approx(2000)
    q1, q2 = ssn.queues["q1"], ssn.queues["q2"]
    assert ssn.overused(q1) is True   # deserved <= allocated (6000 = 6000)
    assert ssn.overused(q2) is False
    assert attrs["q1"].share == pytest.approx(1.0)
    assert ssn.queue_order_fn(q2, q1) is True  # lower share first
    want = task(ssn, "want")
    assert ssn.allocatable(q2, want) is True   # 0 + 2000 <= 2000
    assert ssn.preemptive(q2, want) is True
    # q1 is not above deserved: nothing to reclaim
    cands = [task(ssn, f"r{i}") for i in range(3)]
    assert ssn.reclaimable(want, cands) == []


def test_proportion_reclaims_only_while_queue_is_above_deserved():
    nodes = [node("n1", cpu=6000, mem=12 * GI)]
    pods = [pod(f"r{i}", group="busy", cpu=2000, mem=GI, node="n1", phase="Running") for i in range(3)]
    pods += [pod("want1", group="idle", cpu=2000, mem=GI), pod("want2", group="idle", cpu=2000, mem=GI)]
    pgs = [podgroup("busy", queue="q1"), podgroup("idle", queue="q2", phase="Inqueue")]
    ssn = make_session([[opt("proportion")]], nodes=nodes, pods=pods, podgroups=pgs,
                       queues=[queue("q1"), queue("q2")])
    attrs = ssn.plugins["proportion"].queue_opts
    assert attrs["q1"].deserved.milli_cpu == pytest.approx(3000)
    cands = [task(ssn, f"r{i}") for i in range(3)]
    # allocated 6000 > 3000 -> r0 (-> 4000) -> r1 (-> 2000) -> r2 no longer
    assert names(ssn.reclaimable(task(ssn, "want1"), cands)) == ["r0", "r1"]


def test_proportion_event_handlers_keep_allocated_current():
    ssn = _two_queue_running_session()
    attrs = ssn.plugins["proportion"].queue_opts
    q2 = ssn.queues["q2"]
    stmt = ssn.statement()
    stmt.allocate(task(ssn, "want"), ssn.nodes["n2"])
    assert attrs["q2"].allocated.milli_cpu == pytest.approx(2000)
    assert attrs["q2"].share == pytest.approx(1.0)
    assert ssn.overused(q2) is True
    stmt.discard()
    assert attrs["q2"].allocated.milli_cpu == pytest.approx(0)
    assert ssn.overused(q2) is False
    # an eviction (DeallocateFunc) lowers the victim queue's allocated
    stmt2 = ssn.statement()
    stmt2.evict(task(ssn, "r0"), "test")
    assert attrs["q1"].allocated.milli_cpu == pytest.approx(4000)


def test_proportion_closed_queue_is_not_allocatable_nor_enqueueable():
    ssn = _two_queue_running_session(state="Closed")
    want = task(ssn, "want")
    assert ssn.allocatable(ssn.queues["q2"], want) is False
    assert ssn.job_enqueueable_fns["proportion"](ssn.jobs["ns1/idle"]) == REJECT


def test_proportion_job_enqueueable_checks_real_capability():
    nodes = [node("n1", cpu=8000, mem=16 * GI)]
    pods = [pod("r", group="run", cpu=2000, mem=GI, node="n1", phase="Running"),
            pod("p", group="small", cpu=1000, mem=GI), pod("b", group="big", cpu=3000, mem=GI)]
    pgs = [podgroup("run", queue="q1", min_resources={"cpu": "2"}),  # no elastic part
           podgroup("small", queue="q1", phase="Pending", min_resources={"cpu": "1"}),
           podgroup("big", queue="q1", phase="Pending", min_resources={"cpu": "3"})]
    ssn = make_session([[opt("proportion")]], nodes=nodes, pods=pods, podgroups=pgs,
                       queues=[queue("q1", capability={"cpu": "4"})])
    fn = ssn.job_enqueueable_fns["proportion"]
    # 1000 + allocated 2000 <= 4000 -> permit, and the queue's inqueue grows by 1000
    assert fn(ssn.jobs["ns1/small"]) == PERMIT
    assert ssn.plugins["proportion"].queue_opts["q1"].inqueue.milli_cpu == pytest.approx(1000)
    # 3000 + 2000 + inqueue 1000 > 4000 -> reject
    assert fn(ssn.jobs["ns1/big"]) == REJECT


def test_proportion_job_enqueueable_subtracts_elastic_resources():
    # the running job has no minResources: all of its 2000 cpu is elastic and does not block
    nodes = [node("n1", cpu=8000, mem=16 * GI)]
    pods = [pod("r", group="run", cpu=2000, mem=GI, node="n1", phase="Running"),
            pod("b", group="big", cpu=3000, mem=GI)]
    pgs = [podgroup("run", queue="q1"),
           podgroup("big", queue="q1", phase="Pending", min_resources={"cpu": "4"})]
    ssn = make_session([[opt("proportion")]], nodes=nodes, pods=pods, podgroups=pgs,
                       queues=[queue("q1", capability={"cpu": "4"})])
    assert ssn.plugins["proportion"].queue_opts["q1"].elastic.milli_cpu == pytest.approx(2000)
    # 4000 + 2000 - 2000 <= 4000
    assert ssn.job_enqueueable_fns["proportion"](ssn.jobs["ns1/big"]) == PERMIT


# ----------------------------------------------------------------------------- capacity

def _capacity_session(q1_kw=None, q2_kw=None, n_running=3, running_cpu=2000, want_cpu=2000, want_mem=GI,
                      want_extra=None):
    nodes = [node("n1", cpu=8000, mem=16 * GI), node("n2", cpu=8000, mem=16 * GI)]
    pods = [pod(f"r{i}", group="busy", cpu=running_cpu, mem=GI, node="n1", phase="Running")
            for i in range(n_running)]
    pods += [pod("want", group="idle", cpu=want_cpu, mem=want_mem, extra=want_extra)]
    pgs = [podgroup("busy", queue="q1"), podgroup("idle", queue="q2", phase="Inqueue")]
    qs = [queue("q1", **(q1_kw or {"deserved": {"cpu": "4", "memory": "8Gi"}})),
          queue("q2", **(q2_kw or {"deserved": {"cpu": "4", "memory": "8Gi"}}))]
    return make_session([[opt("capacity")]], nodes=nodes, pods=pods, podgroups=pgs, queues=qs)


def test_capacity_refuses_evictions_below_deserved():
    # q1: deserved 4000, allocated 4000 (two running tasks) -> no victim at all (#4936)
    ssn = _capacity_session(n_running=2)
    cands = [task(ssn, "r0"), task(ssn, "r1")]
    assert ssn.reclaimable(task(ssn, "want"), cands) == []


def test_capacity_reclaims_down_to_deserved_only():
    # q1: deserved 4000, allocated 6000 -> r0 is a victim (6000 > 4000), then 4000 is not > 4000
    ssn = _capacity_session(n_running=3)
    cands = [task(ssn, f"r{i}") for i in range(3)]
    assert names(capacity.capacity_victims(ssn.jobs, ssn.plugins["capacity"].queue_opts,
                                           task(ssn, "want"), cands)) == ["r0"]
    assert names(ssn.reclaimable(task(ssn, "want"), cands)) == ["r0"]


def test_capacity_guarantee_blocks_reclaim():
    ssn = _capacity_session(q1_kw={"deserved": {"cpu": "4"}, "guarantee": {"cpu": "6"}}, n_running=3)
    cands = [task(ssn, f"r{i}") for i in range(3)]
    # deserved is raised to the guarantee (6000); and evicting any task would go below it
    assert ssn.plugins["capacity"].queue_opts["q1"].deserved.milli_cpu == pytest.approx(6000)
    assert ssn.reclaimable(task(ssn, "want"), cands) == []


def test_capacity_immediate_victim_without_common_dimension_with_deserved():
    # q1 deserves only memory; its cpu-only tasks share no dimension with that deserved
    ssn = _capacity_session(q1_kw={"deserved": {"memory": "64Gi"}}, n_running=2)
    for t in (task(ssn, "r0"), task(ssn, "r1")):
        t.resreq.memory = 0.0  # make the victims cpu-only
    cands = [task(ssn, "r0"), task(ssn, "r1")]
    assert names(ssn.reclaimable(task(ssn, "want"), cands)) == ["r0", "r1"]


def test_capacity_skips_reclaimees_without_dimensions_the_reclaimer_wants():
    ssn = _capacity_session(n_running=3, want_cpu=None, want_mem=None,
                            want_extra={"containers": [{"name": "c", "resources": {
                                "requests": {"nvidia.com/gpu": "1"}}}]})
    cands = [task(ssn, f"r{i}") for i in range(3)]
    assert ssn.reclaimable(task(ssn, "want"), cands) == []


def test_capacity_allocatable_uses_capability_preemptive_uses_deserved():
    ssn = _capacity_session(q2_kw={"deserved": {"cpu": "2"}, "capability": {"cpu": "6"}}, n_running=3)
    q2 = ssn.queues["q2"]
    want = task(ssn, "want")
    stmt = ssn.statement()
    stmt.allocate(want, ssn.nodes["n2"])          # q2 allocated 2000 = deserved
    attrs = ssn.plugins["capacity"].queue_opts
    assert attrs["q2"].allocated.milli_cpu == pytest.approx(2000)
    probe = task(ssn, "r0").clone()               # a 2000-cpu request from q2's point of view
    # allocatable: 2000 + 2000 <= capability 6000 -> still allocatable beyond deserved (#4947)
    assert ssn.allocatable(q2, probe) is True
    # preemptive: 4000 > deserved 2000 on cpu, memory not in deserved (filtered) -> no
    assert ssn.preemptive(q2, probe) is False


def test_capacity_share_and_queue_order():
    nodes = [node("n1", cpu=8000, mem=16 * GI)]
    pods = [pod("a", group="ja", cpu=1000, mem=GI, node="n1", phase="Running"),
            pod("b", group="jb", cpu=1000, mem=GI, node="n1", phase="Running"),
            pod("c", group="jc", cpu=4000, mem=GI, node="n1", phase="Running")]
    pgs = [podgroup("ja", queue="qa"), podgroup("jb", queue="qb"), podgroup("jc", queue="qc")]
    qs = [queue("qa", deserved={"cpu": "1"}),        # share 1 (full)
          queue("qb"),                                # no deserved: best effort, share 1
          queue("qc", deserved={"cpu": "8"}),         # share 0.5
          ]
    ssn = make_session([[opt("capacity")]], nodes=nodes, pods=pods, podgroups=pgs, queues=qs)
    attrs = ssn.plugins["capacity"].queue_opts
    assert attrs["qa"].share == pytest.approx(1.0)
    assert attrs["qb"].share == 1.0
    assert attrs["qc"].share == pytest.approx(0.5)
    qa, qb, qc = ssn.queues["qa"], ssn.queues["qb"], ssn.queues["qc"]
    assert ssn.queue_order_fn(qc, qa) is True
    # equal shares: the queue with a deserved goes first
    assert capacity.compare_share_with_deserved(attrs["qa"], attrs["qb"]) == -1
    assert ssn.queue_order_fn(qa, qb) is True and ssn.queue_order_fn(qb, qa) is False


def test_capacity_queue_priority_wins_over_share():
    nodes = [node("n1", cpu=8000, mem=16 * GI)]
    pods = [pod("a", group="ja", cpu=4000, mem=GI, node="n1", phase="Running"),
            pod("b", group="jb", cpu=1000, mem=GI)]
    pgs = [podgroup("ja", queue="hi"), podgroup("jb", queue="lo")]
    qs = [queue("hi", deserved={"cpu": "4"}, priority=10), queue("lo", deserved={"cpu": "4"})]
    ssn = make_session([[opt("capacity")]], nodes=nodes, pods=pods, podgroups=pgs, queues=qs)
    assert ssn.queue_order_fn(ssn.queues["hi"], ssn.queues["lo"]) is True


def test_capacity_job_enqueueable_and_closed_queue():
    nodes = [node("n1", cpu=8000, mem=16 * GI)]
    pods = [pod("p", group="j1", cpu=1000, mem=GI), pod("q", group="j2", cpu=1000, mem=GI)]
    pgs = [podgroup("j1", queue="open", phase="Pending", min_resources={"cpu": "5"}),
           podgroup("j2", queue="closed", phase="Pending", min_resources={"cpu": "1"})]
    qs = [queue("open", deserved={"cpu": "2"}, capability={"cpu": "4"}),
          queue("closed", deserved={"cpu": "2"}, state="Closed")]
    ssn = make_session([[opt("capacity")]], nodes=nodes, pods=pods, podgroups=pgs, queues=qs)
    fn = ssn.job_enqueueable_fns["capacity"]
    assert fn(ssn.jobs["ns1/j1"]) == REJECT   # 5000 > capability 4000
    assert fn(ssn.jobs["ns1/j2"]) == REJECT   # queue closed
    assert ssn.allocatable(ssn.queues["closed"], task(ssn, "q")) is False


# ----------------------------------------------------------------------------- overcommit

def test_overcommit_admits_up_to_factor_times_total_minus_used():
    nodes = [node("n1", cpu=10000, mem=64 * GI)]
    pods = [pod("run", group="run", cpu=4000, mem=GI, node="n1", phase="Running"),
            pod("a", group="queued", cpu=1000, mem=GI), pod("b", group="next", cpu=1000, mem=GI),
            pod("c", group="last", cpu=1000, mem=GI), pod("d", group="free", cpu=1000, mem=GI)]
    pgs = [podgroup("run"), podgroup("queued", phase="Inqueue", min_resources={"cpu": "3"}),
           podgroup("next", phase="Pending", min_resources={"cpu": "5"}),
           podgroup("last", phase="Pending", min_resources={"cpu": "1"}),
           podgroup("free", phase="Pending")]
    ssn = make_session([[opt("overcommit")]], nodes=nodes, pods=pods, podgroups=pgs, queues=[queue("q1")])
    oc = ssn.plugins["overcommit"]
    # idle = 10000 x 1.2 - 4000 used = 8000; already admitted: 3000
    assert oc.idle_resource.milli_cpu == pytest.approx(8000)
    assert oc.inqueue_resource.milli_cpu == pytest.approx(3000)
    assert ssn.job_enqueueable(ssn.jobs["ns1/next"]) is True       # 3000 + 5000 <= 8000
    ssn.job_enqueued(ssn.jobs["ns1/next"])
    assert ssn.job_enqueueable(ssn.jobs["ns1/last"]) is False      # 8000 + 1000 > 8000
    assert ssn.job_enqueueable(ssn.jobs["ns1/free"]) is True       # no minResources
    low = make_session([[opt("overcommit", {"overcommit-factor": 0.5})]], nodes=nodes, pods=pods,
                       podgroups=pgs, queues=[queue("q1")])
    assert low.plugins["overcommit"].over_commit_factor == 1.2     # below 1 -> default
