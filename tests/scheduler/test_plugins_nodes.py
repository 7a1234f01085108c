"""predicates, nodeorder and binpack: filters and scores against numbers computed by hand."""
from __future__ import annotations

import pytest

from ha.scheduler.api import FitError, StatusCode, TaskStatus
from ha.scheduler.api.types import NODE_POD_NUMBER_EXCEEDED
from ha.scheduler.plugins import binpack, nodeorder, predicates
from tests.scheduler.test_plugins_common import (
    GI, MI, make_session, node, opt, pod, podgroup, queue, task,
)


def _pred_session(nodes, pods, *, arguments=None, statuses=None):
    return make_session([[opt("predicates", arguments)]], nodes=nodes, pods=pods,
                        podgroups=[podgroup("pg1")], queues=[queue("q1")], statuses=statuses)


def _codes(err: FitError) -> list:
    return [s.code for s in err.status]


def _pre(ssn, name):
    """The task, its PrePredicate run in this session (as every action does before predicating)."""
    t = task(ssn, name)
    assert ssn.pre_predicate_fn(t) is None
    return t


# ----------------------------------------------------------------------------- predicates

def test_pod_count_counts_pipelined_and_releasing_tasks():
    nodes = [node("n1", pods=2), node("n2", pods=3)]
    pods = [pod("run", node="n1", phase="Running"), pod("pipe", node="n1"), pod("want"),
            pod("rel", node="n2", phase="Running", deleting=True), pod("run2", node="n2", phase="Running")]
    ssn = _pred_session(nodes, pods, statuses={"pipe": TaskStatus.PIPELINED})
    want = _pre(ssn, "want")
    err = ssn.predicate_fn(want, ssn.nodes["n1"])      # 2 pods (Running + Pipelined) >= 2
    assert isinstance(err, FitError)
    assert err.reasons() == [NODE_POD_NUMBER_EXCEEDED]
    assert _codes(err) == [StatusCode.UNSCHEDULABLE]
    assert ssn.predicate_fn(want, ssn.nodes["n2"]) is None   # 2 pods (Releasing + Running) < 3
    # pipelining `want` onto n2 in the session fills it up (AllocateFunc adds it to the k8s view)
    ssn.statement().pipeline(want, "n2")
    other = pod("other")
    from ha.scheduler.api import TaskInfo
    t2 = TaskInfo(other)
    assert ssn.pre_predicate_fn(t2) is None
    assert ssn.predicate_fn(t2, ssn.nodes["n2"]) is not None


def test_pod_count_is_freed_by_an_in_session_eviction():
    nodes = [node("n1", pods=1)]
    pods = [pod("victim", node="n1", phase="Running"), pod("want")]
    ssn = _pred_session(nodes, pods)
    want = _pre(ssn, "want")
    assert ssn.predicate_fn(want, ssn.nodes["n1"]) is not None
    ssn.statement().evict(_pre(ssn, "victim"), "preempt")  # still on the Volcano node as Releasing
    assert _pre(ssn, "victim").status == TaskStatus.RELEASING
    assert ssn.predicate_fn(want, ssn.nodes["n1"]) is None


def test_node_without_pods_allocatable_fits_nothing():
    n = node("n1")
    del n["status"]["allocatable"]["pods"]
    ssn = _pred_session([n], [pod("want")])
    err = ssn.predicate_fn(_pre(ssn, "want"), ssn.nodes["n1"])
    assert err is not None and NODE_POD_NUMBER_EXCEEDED in err.reasons()


def test_node_selector_and_required_affinity():
    nodes = [node("worker", labels={"role": "worker", "zone": "a"}), node("master", labels={"role": "master"})]
    pods = [pod("sel", node_selector={"role": "worker"}),
            pod("aff", extra={"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}}}),
            pod("notin", extra={"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "role", "operator": "NotIn",
                                                             "values": ["worker"]}]}]}}}})]
    ssn = _pred_session(nodes, pods)
    w, m = ssn.nodes["worker"], ssn.nodes["master"]
    assert ssn.predicate_fn(_pre(ssn, "sel"), w) is None
    err = ssn.predicate_fn(_pre(ssn, "sel"), m)
    assert err.reasons() == [predicates.ERR_REASON_AFFINITY]
    assert _codes(err) == [StatusCode.UNSCHEDULABLE_AND_UNRESOLVABLE]
    assert ssn.predicate_fn(_pre(ssn, "aff"), w) is None
    assert ssn.predicate_fn(_pre(ssn, "aff"), m) is not None
    assert ssn.predicate_fn(_pre(ssn, "notin"), w) is not None
    assert ssn.predicate_fn(_pre(ssn, "notin"), m) is None
    # the sub-predicate can be switched off by argument, as in Volcano
    off = _pred_session(nodes, [pod("sel", node_selector={"role": "worker"})],
                        arguments={"predicate.NodeAffinityEnable": False})
    assert off.predicate_fn(_pre(off, "sel"), off.nodes["master"]) is None


def test_unschedulable_node_and_taints():
    taint = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
    nodes = [node("cordoned", unschedulable=True), node("tainted", taints=[taint]),
             node("soft", taints=[{"key": "x", "effect": "PreferNoSchedule"}])]
    pods = [pod("plain"),
            pod("tol", tolerations=[{"key": "dedicated", "operator": "Equal", "value": "gpu",
                                     "effect": "NoSchedule"},
                                    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}])]
    ssn = _pred_session(nodes, pods)
    plain, tol = _pre(ssn, "plain"), _pre(ssn, "tol")
    err = ssn.predicate_fn(plain, ssn.nodes["cordoned"])
    assert err.reasons() == [predicates.ERR_REASON_UNSCHEDULABLE]
    err = ssn.predicate_fn(plain, ssn.nodes["tainted"])
    assert err.reasons() == ["node(s) had untolerated taint {dedicated: gpu}"]
    assert _codes(err) == [StatusCode.UNSCHEDULABLE_AND_UNRESOLVABLE]
    assert ssn.predicate_fn(plain, ssn.nodes["soft"]) is None  # PreferNoSchedule only scores
    assert ssn.predicate_fn(tol, ssn.nodes["cordoned"]) is None
    assert ssn.predicate_fn(tol, ssn.nodes["tainted"]) is None


def test_host_port_conflict():
    nodes = [node("n1")]
    pods = [pod("web", node="n1", phase="Running", host_ports=[8080]), pod("web2", host_ports=[8080]),
            pod("other", host_ports=[9090])]
    ssn = _pred_session(nodes, pods)
    err = ssn.predicate_fn(_pre(ssn, "web2"), ssn.nodes["n1"])
    assert err.reasons() == [predicates.ERR_REASON_PORTS] and _codes(err) == [StatusCode.UNSCHEDULABLE]
    assert ssn.predicate_fn(_pre(ssn, "other"), ssn.nodes["n1"]) is None


def test_pre_predicate_passes_and_no_resource_check():
    ssn = _pred_session([node("tiny", cpu=10, mem=MI)], [pod("huge", cpu=64000, mem=256 * GI)])
    huge = _pre(ssn, "huge")
    assert ssn.pre_predicate_fn(huge) is None
    assert ssn.predicate_fn(huge, ssn.nodes["tiny"]) is None  # resources are the actions' business


# ----------------------------------------------------------------------------- nodeorder

def _order_session(nodes, pods, arguments=None, with_predicates=False):
    tier = [opt("nodeorder", arguments)]
    if with_predicates:
        tier.append(opt("predicates"))
    return make_session([tier], nodes=nodes, pods=pods, podgroups=[podgroup("pg1")], queues=[queue("q1")])


def test_nodeorder_least_allocated_and_balanced_by_hand():
    # node 4000m / 8Gi with a running 1000m / 2Gi pod; the new pod asks 1000m / 1Gi
    ssn = _order_session([node("n1", cpu=4000, mem=8 * GI)],
                         [pod("run", node="n1", phase="Running", cpu=1000, mem=2 * GI),
                          pod("new", cpu=1000, mem=GI)])
    new, n1 = task(ssn, "new"), ssn.nodes["n1"]
    view = ssn.plugins["nodeorder"]
    from ha.scheduler.plugins.k8s_nodes import node_map
    ni = node_map(ssn)["n1"]
    # least: cpu (4000-2000)*100/4000 = 50; mem (8-3)*100/8 = 62 (integer); (50*50 + 62*50)/100 = 56
    assert nodeorder.least_allocated_score(ni, new.pod) == 56
    # balanced: fractions 0.5 and 0.375 -> std 0.0625 -> int(93.75) = 93
    assert nodeorder.balanced_allocation_score(ni, new.pod) == 93
    assert ssn.node_order_fn(new, n1) == pytest.approx(56 * 1 + 93 * 1)
    # batch: no PreferNoSchedule taints anywhere -> every node 100 x weight 3
    assert ssn.batch_node_order_fn(new, [n1]) == {"n1": 300.0}
    assert view.least_req_weight == 1 and view.taint_toleration_weight == 3


def test_nodeorder_non_zero_defaults_for_pods_without_requests():
    # an existing best-effort pod counts 100m / 200Mi for LeastAllocated, nothing for Balanced
    ssn = _order_session([node("n1", cpu=1000, mem=GI)],
                         [pod("be", node="n1", phase="Running", cpu=None, mem=None),
                          pod("new", cpu=500, mem=512 * MI)])
    new = task(ssn, "new")
    # least: cpu (1000-600)*100/1000 = 40; mem (1024-712)*100/1024 = 30; -> 35
    # balanced: 0.5 and 0.5 -> 100
    assert ssn.node_order_fn(new, ssn.nodes["n1"]) == pytest.approx(35 + 100)


def test_nodeorder_weights_from_arguments_and_overcommit():
    ssn = _order_session([node("n1", cpu=1000, mem=GI)],
                         [pod("run", node="n1", phase="Running", cpu=900, mem=256 * MI),
                          pod("new", cpu=500, mem=256 * MI)],
                         arguments={"leastrequested.weight": 2, "balancedresource.weight": 0,
                                    "mostrequested.weight": 1})
    new = task(ssn, "new")
    # least: cpu 1400 > 1000 -> 0; mem (1024-512)*100/1024 = 50 -> (0*50 + 50*50)/100 = 25, x2 = 50
    # most: cpu min(1400,1000)*100/1000 = 100; mem 512*100/1024 = 50 -> (100+50)/2 = 75, x1
    assert ssn.node_order_fn(new, ssn.nodes["n1"]) == pytest.approx(50 + 75)


def test_nodeorder_prefers_emptier_node_and_sees_in_session_allocations():
    nodes = [node("a", cpu=4000, mem=4 * GI), node("b", cpu=4000, mem=4 * GI)]
    pods = [pod("p1", cpu=2000, mem=2 * GI), pod("p2", cpu=1000, mem=GI)]
    ssn = _order_session(nodes, pods, with_predicates=True)
    p1, p2 = task(ssn, "p1"), task(ssn, "p2")
    a, b = ssn.nodes["a"], ssn.nodes["b"]
    assert ssn.node_order_fn(p2, a) == ssn.node_order_fn(p2, b)
    ssn.statement().allocate(p1, a)   # predicates' handler updates the shared k8s view
    assert ssn.node_order_fn(p2, b) > ssn.node_order_fn(p2, a)


def test_nodeorder_preferred_affinity_and_prefer_no_schedule_taints():
    nodes = [node("ssd", labels={"disk": "ssd"}), node("hdd", labels={"disk": "hdd"},
                                                         taints=[{"key": "slow", "effect": "PreferNoSchedule"}])]
    pods = [pod("p", extra={"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 7, "preference": {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}}]}}})]
    ssn = _order_session(nodes, pods)
    p = task(ssn, "p")
    ssd, hdd = ssn.nodes["ssd"], ssn.nodes["hdd"]
    # preferred affinity: raw weight 7 x nodeaffinity.weight 2 on ssd only
    assert ssn.node_order_fn(p, ssd) - ssn.node_order_fn(p, hdd) == pytest.approx(14)
    # taint toleration: counts 0 and 1 -> reversed normalisation 100 and 0, x3
    assert ssn.batch_node_order_fn(p, [ssd, hdd]) == {"ssd": 300.0, "hdd": 0.0}


# ----------------------------------------------------------------------------- binpack

def _binpack_session(arguments=None, node_kw=None, new_kw=None):
    nodes = [node("n1", **(node_kw or {"cpu": 4000, "mem": 8 * GI}))]
    pods = [pod("run", node="n1", phase="Running", cpu=1000, mem=2 * GI),
            pod("new", **(new_kw or {"cpu": 1000, "mem": GI}))]
    return make_session([[opt("binpack", arguments)]], nodes=nodes, pods=pods,
                        podgroups=[podgroup("pg1")], queues=[queue("q1")])


def test_binpack_default_weights_by_hand():
    ssn = _binpack_session()
    # cpu (1000+1000)/4000 = 0.5; memory (2+1)/8 = 0.375; (0.5 + 0.375)/2 x 100 x 1 = 43.75
    assert ssn.node_order_fn(task(ssn, "new"), ssn.nodes["n1"]) == pytest.approx(43.75)


def test_binpack_weights_from_arguments():
    ssn = _binpack_session({"binpack.weight": 2, "binpack.cpu": 3, "binpack.memory": 1})
    # (0.5 x 3 + 0.375 x 1) / 4 x 100 x 2 = 93.75
    assert ssn.node_order_fn(task(ssn, "new"), ssn.nodes["n1"]) == pytest.approx(93.75)


def test_binpack_extended_resource_and_overflow():
    args = {"binpack.resources": "nvidia.com/gpu, example.com/foo", "binpack.resources.nvidia.com/gpu": 2}
    gpu_req = {"containers": [{"name": "c", "resources": {"requests": {
        "cpu": "1000m", "memory": str(GI), "nvidia.com/gpu": "1"}}}]}
    ssn = _binpack_session(args, node_kw={"cpu": 4000, "mem": 8 * GI, "scalars": {"nvidia.com/gpu": 4}},
                           new_kw={"cpu": None, "mem": None, "extra": gpu_req})
    w = binpack.calculate_weight(args)
    assert w.binpacking_resources == {"nvidia.com/gpu": 2, "example.com/foo": 1, "cpu": 1, "memory": 1}
    # cpu 0.5 x1, memory 0.375 x1, gpu (0+1)/4 x2 = 0.5 -> 1.375 / 4 x 100 = 34.375
    assert ssn.node_order_fn(task(ssn, "new"), ssn.nodes["n1"]) == pytest.approx(34.375)
    over = _binpack_session(new_kw={"cpu": 3500, "mem": GI})   # 1000 + 3500 > 4000 cpu
    assert over.node_order_fn(task(over, "new"), over.nodes["n1"]) == 0.0


def test_binpack_weight_zero_registers_nothing():
    ssn = _binpack_session({"binpack.weight": 0})
    assert "binpack" not in ssn.node_order_fns
