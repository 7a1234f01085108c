"""gang, priority, drf and conformance on small hand-built sessions."""
from __future__ import annotations

import pytest

from ha.scheduler.api import TaskStatus
from ha.scheduler.plugins import conformance, gang, priority
from tests.scheduler.test_plugins_common import (
    GI, make_session, names, node, opt, pod, podgroup, queue, task,
)


def _gang_session(**kw):
    pods = kw.pop("pods")
    pgs = kw.pop("podgroups")
    return make_session([[opt("gang")]], nodes=[node("n1", cpu=8000, mem=16 * GI)], pods=pods,
                        podgroups=pgs, queues=[queue("q1")], **kw)


# ----------------------------------------------------------------------------- gang

def test_gang_job_order_puts_not_ready_jobs_first():
    pods = [pod("a1", group="ready", node="n1", phase="Running"),
            pod("b1", group="waiting")]
    ssn = _gang_session(pods=pods, podgroups=[podgroup("ready"), podgroup("waiting")])
    ready, waiting = ssn.jobs["ns1/ready"], ssn.jobs["ns1/waiting"]
    assert gang.job_order(ready, waiting) == 1
    assert gang.job_order(waiting, ready) == -1
    assert gang.job_order(ready, ready) == 0
    assert ssn.job_order_fn(waiting, ready) is True  # through the session aggregator


def test_gang_ready_pipelined_starving_follow_min_member():
    pods = [pod("p1", node="n1", phase="Running"), pod("p2", node="n1"), pod("p3")]
    ssn = _gang_session(pods=pods, podgroups=[podgroup("pg1", min_member=3)],
                        statuses={"p2": TaskStatus.PIPELINED})
    job = ssn.jobs["ns1/pg1"]
    # ready 1, waiting (pipelined) 1: not ready, not pipelined, starving
    assert gang.job_ready(job) is False and ssn.job_ready(job) is False
    assert gang.job_pipelined(job) == gang.REJECT and ssn.job_pipelined(job) is False
    assert gang.job_starving(job) is True
    # allocate the pending one in the session: ready 2 + waiting 1 = 3 -> pipelined, not starving
    ssn.statement().allocate(task(ssn, "p3"), ssn.nodes["n1"])
    assert ssn.job_pipelined(job) is True
    assert ssn.job_ready(job) is False
    assert ssn.job_starving(job) is False


def test_gang_job_valid_counts_pending_and_pipelined():
    pods = [pod("p1", phase="Running", node="n1"), pod("p2"), pod("p3", phase="Failed", node="n1")]
    ssn = _gang_session(pods=pods, podgroups=[podgroup("pg1", min_member=3)])
    vr = ssn.job_valid(ssn.jobs["ns1/pg1"])
    assert vr is not None and not vr.passed
    assert vr.reason == gang.NOT_ENOUGH_PODS_REASON
    assert "valid: 2, min: 3" in vr.message
    ok = _gang_session(pods=pods[:2], podgroups=[podgroup("pg1", min_member=2)])
    assert ok.job_valid(ok.jobs["ns1/pg1"]) is None


def test_gang_job_valid_per_role_minimum():
    pods = [pod("m", annotations={"volcano.sh/task-spec": "master"}),
            pod("w1", annotations={"volcano.sh/task-spec": "worker"})]
    ssn = _gang_session(pods=pods, podgroups=[podgroup("pg1", min_member=3,
                                                       min_task_member={"master": 1, "worker": 2})])
    vr = gang.job_valid(ssn.jobs["ns1/pg1"])
    assert vr is not None and vr.reason == gang.NOT_ENOUGH_PODS_OF_TASK_REASON


def test_gang_victims_keep_min_member_ready():
    pods = [pod(f"a{i}", group="a", node="n1", phase="Running") for i in range(3)]
    pods += [pod(f"b{i}", group="b", node="n1", phase="Running") for i in range(2)]
    pods += [pod("c0", group="c")]
    ssn = _gang_session(pods=pods, podgroups=[podgroup("a", min_member=2), podgroup("b", min_member=2),
                                              podgroup("c")])
    candidates = [task(ssn, n) for n in ("a0", "a1", "a2", "b0", "b1")]
    victims = gang.gang_victims(ssn.jobs, candidates)
    # job a: 3 ready, min 2 -> exactly one victim (the first offered); job b: none
    assert names(victims) == ["a0"]
    assert names(ssn.preemptable(task(ssn, "c0"), candidates)) == ["a0"]
    assert names(ssn.reclaimable(task(ssn, "c0"), candidates)) == ["a0"]


def test_gang_session_close_sets_conditions():
    pods = [pod("a1", group="a", node="n1", phase="Running"), pod("b1", group="b"), pod("b2", group="b")]
    ssn = _gang_session(pods=pods, podgroups=[podgroup("a"), podgroup("b", min_member=2)])
    ssn.plugins["gang"].on_session_close(ssn)
    ca = ssn.jobs["ns1/a"].pod_group["status"]["conditions"]
    cb = ssn.jobs["ns1/b"].pod_group["status"]["conditions"]
    assert [c["type"] for c in ca] == ["Scheduled"]
    assert [c["type"] for c in cb] == ["Unschedulable"]
    assert cb[0]["reason"] == "NotEnoughResources"
    assert cb[0]["message"].startswith("2/2 tasks in gang unschedulable: ")
    assert cb[0]["transitionID"] == str(ssn.uid)


def test_gang_unschedulable_message_counts_discarded_allocations():
    # a task allocated then discarded keeps its attempt in last_transaction: it counts as schedulable
    pods = [pod("b1", group="b"), pod("b2", group="b")]
    ssn = _gang_session(pods=pods, podgroups=[podgroup("b", min_member=2)])
    stmt = ssn.statement()
    stmt.allocate(task(ssn, "b1"), ssn.nodes["n1"])
    stmt.discard()
    assert gang.schedulable_task_num(ssn.jobs["ns1/b"]) == 1
    ssn.plugins["gang"].on_session_close(ssn)
    msg = ssn.jobs["ns1/b"].pod_group["status"]["conditions"][0]["message"]
    assert msg.startswith("1/2 tasks in gang unschedulable")


# ----------------------------------------------------------------------------- priority

def test_priority_task_and_job_order():
    pods = [pod("lo", priority=1), pod("hi", priority=10), pod("x", group="other")]
    ssn = make_session([[opt("priority")]], nodes=[node("n1")], pods=pods,
                       podgroups=[podgroup("pg1"), podgroup("other")], queues=[queue("q1")],
                       job_priorities={"ns1/pg1": 5, "ns1/other": 7})
    lo, hi = task(ssn, "lo"), task(ssn, "hi")
    assert priority.task_order(hi, lo) == -1 and priority.task_order(lo, hi) == 1
    assert priority.task_order(lo, lo) == 0
    assert ssn.task_order_fn(hi, lo) is True
    j1, j2 = ssn.jobs["ns1/pg1"], ssn.jobs["ns1/other"]
    assert priority.job_order(j2, j1) == -1 and ssn.job_order_fn(j2, j1) is True


def test_priority_preemptable_between_and_within_jobs():
    pods = [pod("v-low", group="low", node="n1", phase="Running"),
            pod("v-high", group="high", node="n1", phase="Running"),
            pod("same-lo", group="mid", node="n1", phase="Running", priority=1),
            pod("same-hi", group="mid", node="n1", phase="Running", priority=100),
            pod("preemptor", group="mid", priority=50)]
    ssn = make_session([[opt("priority")]], nodes=[node("n1", cpu=16000, mem=32 * GI)], pods=pods,
                       podgroups=[podgroup("low"), podgroup("high"), podgroup("mid")], queues=[queue("q1")],
                       job_priorities={"ns1/low": 1, "ns1/high": 9, "ns1/mid": 5})
    cands = [task(ssn, n) for n in ("v-low", "v-high", "same-lo", "same-hi")]
    victims = priority.priority_victims(ssn.jobs, task(ssn, "preemptor"), cands)
    assert names(victims) == ["same-lo", "v-low"]


def test_priority_job_starving_counts_all_tasks():
    pods = [pod("p1", node="n1", phase="Running"), pod("p2")]
    ssn = make_session([[opt("priority")]], nodes=[node("n1")], pods=pods,
                       podgroups=[podgroup("pg1", min_member=1)], queues=[queue("q1")])
    job = ssn.jobs["ns1/pg1"]
    assert priority.job_starving(job) is True  # 1 ready < 2 tasks, although minMember is met
    ssn.statement().pipeline(task(ssn, "p2"), "n1")
    assert priority.job_starving(job) is False  # ready 1 + waiting 1


# ----------------------------------------------------------------------------- drf

def test_drf_share_order_and_handlers():
    # cluster: cpu 10000, memory 10Gi, pods 20
    nodes = [node("n1", cpu=10000, mem=10 * GI, pods=20)]
    pods = [pod("a1", group="a", cpu=4000, mem=1 * GI, node="n1", phase="Running"),
            pod("b1", group="b", cpu=1000, mem=3 * GI, node="n1", phase="Running"),
            pod("b2", group="b", cpu=1000, mem=1 * GI)]
    ssn = make_session([[opt("drf")]], nodes=nodes, pods=pods,
                       podgroups=[podgroup("a"), podgroup("b")], queues=[queue("q1")])
    plugin = ssn.plugins["drf"]
    # a: max(4000/10000, 1/10, 1/20) = 0.4; b: max(0.1, 0.3, 0.05) = 0.3
    assert plugin.share_of("ns1/a") == pytest.approx(0.4)
    assert plugin.share_of("ns1/b") == pytest.approx(0.3)
    assert ssn.job_order_fn(ssn.jobs["ns1/b"], ssn.jobs["ns1/a"]) is True
    ssn.statement().allocate(task(ssn, "b2"), ssn.nodes["n1"])
    assert plugin.share_of("ns1/b") == pytest.approx(0.4)  # memory 4Gi / 10Gi
    assert plugin.job_attrs["ns1/b"].dominant_resource == "memory"


def test_drf_preemptable_compares_shares_after_the_move():
    nodes = [node("n1", cpu=10000, mem=100 * GI, pods=100)]
    pods = [pod(f"big{i}", group="big", cpu=2000, mem=GI, node="n1", phase="Running") for i in range(3)]
    pods += [pod("small1", group="small", cpu=1000, mem=GI, node="n1", phase="Running"),
             pod("want", group="small", cpu=2000, mem=GI)]
    ssn = make_session([[opt("drf")]], nodes=nodes, pods=pods,
                       podgroups=[podgroup("big"), podgroup("small")], queues=[queue("q1")])
    preemptor = task(ssn, "want")
    # preemptor share after adding: (1000+2000)/10000 = 0.3
    # big after removing one: 0.4 (victim), after removing two: 0.2 (not, removals accumulate)
    cands = [task(ssn, "big0"), task(ssn, "big1"), task(ssn, "small1")]
    got = ssn.preemptable(preemptor, cands)
    assert names(got) == ["big0"]


def test_drf_preemptable_shares_use_the_totals_dimensions_taken_at_open():
    """preemptable divides by the session's total through the dimensions drf took of it at open
    (not worked out again for every candidate): its victims are those of shares computed with
    the total's dimensions afresh, and the total is still what they were taken of."""
    from ha.scheduler.plugins.drf import SHARE_DELTA, calculate_share, total_dims
    nodes = [node("n1", cpu=10000, mem=10 * GI, pods=20), node("n2", cpu=6000, mem=30 * GI, pods=10)]
    pods = [pod(f"cpu{i}", group="cpu", cpu=2500, mem=GI, node="n1", phase="Running") for i in range(3)]
    pods += [pod(f"mem{i}", group="mem", cpu=500, mem=8 * GI, node="n2", phase="Running") for i in range(3)]
    pods += [pod("few", group="few", cpu=500, mem=GI, node="n2", phase="Running"),
             pod("want", group="few", cpu=1500, mem=4 * GI)]
    ssn = make_session([[opt("drf")]], nodes=nodes, pods=pods,
                       podgroups=[podgroup("cpu"), podgroup("mem"), podgroup("few")], queues=[queue("q1")])
    plugin = ssn.plugins["drf"]
    preemptor = task(ssn, "want")
    cands = [task(ssn, n) for n in ("cpu0", "cpu1", "mem0", "mem1", "mem2", "cpu2")]

    def reference() -> list[str]:
        total = plugin.total_resource
        _, ls = calculate_share(plugin.job_attrs[preemptor.job].allocated.clone().add(preemptor.resreq), total)
        left: dict = {}
        out = []
        for t in cands:
            left.setdefault(t.job, plugin.job_attrs[t.job].allocated.clone())
            _, rs = calculate_share(left[t.job].sub(t.resreq), total)
            if ls < rs or abs(ls - rs) <= SHARE_DELTA:
                out.append(t.name)
        return out

    want = reference()
    assert want and len(want) < len(cands)     # some victims, not every candidate
    assert names(ssn.preemptable(preemptor, cands)) == want
    ssn.statement().allocate(task(ssn, "want"), ssn.nodes["n2"])     # the session goes on
    assert plugin._dims == total_dims(plugin.total_resource)
    assert names(ssn.preemptable(preemptor, cands)) == reference()


# ----------------------------------------------------------------------------- conformance

def test_conformance_never_offers_critical_pods():
    pods = [pod("sys", ns="kube-system", group="s", node="n1", phase="Running"),
            pod("crit", group="c", node="n1", phase="Running", priority_class="system-node-critical"),
            pod("crit2", group="c", node="n1", phase="Running", priority_class="system-cluster-critical"),
            pod("plain", group="c", node="n1", phase="Running"),
            pod("want", group="w")]
    ssn = make_session([[opt("conformance")]], nodes=[node("n1", cpu=16000, mem=32 * GI)], pods=pods,
                       podgroups=[podgroup("s", ns="kube-system"), podgroup("c"), podgroup("w")],
                       queues=[queue("q1")])
    cands = [task(ssn, "sys", ns="kube-system"), task(ssn, "crit"), task(ssn, "crit2"), task(ssn, "plain")]
    victims, vote = conformance.evictable(task(ssn, "want"), cands)
    assert names(victims) == ["plain"] and vote == conformance.PERMIT
    assert names(ssn.preemptable(task(ssn, "want"), cands)) == ["plain"]
    assert names(ssn.reclaimable(task(ssn, "want"), cands)) == ["plain"]
