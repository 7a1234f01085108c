"""network-topology-aware as v1.14.0 registers it: the hypernode binpack order, the LCA-tier node
score, the normal-pod tier-fading binpack score, the gradient BFS (tiers, eligibility, the search
root of a job with an allocated hypernode), the used-resource event handler, and the label-tier
shortcut that builds HyperNodes when the cluster has none."""
from __future__ import annotations

import pytest

from ha.scheduler.api.hypernode_info import CLUSTER_TOP_HYPERNODE, hyper_node_object
from ha.scheduler.plugins.network_topology import PLUGIN_NAME, _search_root
from tests.scheduler.fw_helpers import conf, make_cache, node, pod, podgroup, session

NTA = {"name": PLUGIN_NAME, "enabledNodeOrder": True, "enabledHyperNodeOrder": True,
       "enabledHyperNodeGradient": True}


def exact(name, typ="Node"):
    return {"type": typ, "selector": {"exactMatch": {"name": name}}}


def cluster(pods=(), pgs=(), args=None):
    """s0 = {a1, a2}, s1 = {b1, b2} (tier 1), s2 = {s0, s1} (tier 2); 4 cpu nodes."""
    nodes = [node(n, 4000) for n in ("a1", "a2", "b1", "b2")]
    cache, io = make_cache(nodes=nodes, podgroups=list(pgs), pods=list(pods))
    cache.add_hyper_node(hyper_node_object("s0", 1, [exact("a1"), exact("a2")]))
    cache.add_hyper_node(hyper_node_object("s1", 1, [exact("b1"), exact("b2")]))
    cache.add_hyper_node(hyper_node_object("s2", 2, [exact("s0", "HyperNode"), exact("s1", "HyperNode")]))
    opt = dict(NTA, arguments=args) if args else NTA
    ssn = session(cache, conf(actions=["allocate"], tiers=[[opt]]))
    return ssn, ssn.plugins[PLUGIN_NAME], io


def topo_pg(name, n, mode="hard", tier=2):
    pg = podgroup(name, n)
    pg["spec"]["networkTopology"] = {"mode": mode, "highestTierAllowed": tier}
    return pg


def test_hypernode_order_is_binpack_then_task_share():
    # s0 has 3 of 8 cpu used by a running job; s1 is empty
    ssn, p, _ = cluster(pods=[pod("x-0", "x", 3000, node_name="a1", phase="Running"), pod("g-0", "g", 1000)],
                        pgs=[podgroup("x", 1), topo_pg("g", 1)])
    job = ssn.jobs["ns/g"]
    scores = ssn.hyper_node_order_map_fn(job, {"s0": ssn.real_nodes_list["s0"], "s1": ssn.real_nodes_list["s1"]})
    # (used + request) / allocatable per resource, cpu and memory weighted 1, x100
    # (pods carry 1 MiB of memory; the nodes 8 GiB each)
    want_s0 = 100 * ((3000 + 1000) / 8000 + (2**20 + 2**20) / (2 * 8 * 2**30)) / 2
    got = scores[PLUGIN_NAME]
    assert got["s0"] == pytest.approx(want_s0) and got["s0"] > got["s1"]
    # a tie adds the share of the job's tasks already on the hypernode
    ssn, p, _ = cluster(pods=[pod("g-0", "g", 1000, node_name="b1", phase="Running"), pod("g-1", "g", 1000),
                              pod("y-0", "y", 1000, node_name="a1", phase="Running")],
                        pgs=[topo_pg("g", 2), podgroup("y", 1)])
    got = p.hyper_node_order_fn(ssn, ssn.jobs["ns/g"], {"s0": [], "s1": []})
    assert got["s1"] - got["s0"] == pytest.approx(100 * 0.5)


def test_node_score_follows_the_lca_tier_of_the_allocated_hypernode():
    ssn, p, _ = cluster(pods=[pod("g-0", "g", 1000)], pgs=[topo_pg("g", 1)])
    task = next(iter(ssn.jobs["ns/g"].tasks.values()))
    assert p.batch_node_order_fn(ssn, task, ssn.node_list) == {}        # nothing allocated yet
    task.job_allocated_hyper_node = "s0"
    got = p.batch_node_order_fn(ssn, task, ssn.node_list)
    # tiers 1..3 (the cluster top): same hypernode 1.0; LCA s2 (tier 2): (3-2)/(3-1) = 0.5
    assert got == {"a1": 100.0, "a2": 100.0, "b1": 50.0, "b2": 50.0}


def test_normal_pod_score_fades_over_tiers():
    ssn, p, _ = cluster(pods=[pod("x-0", "x", 2000, node_name="a1", phase="Running"), pod("f-0", "f", 1000)],
                        pgs=[podgroup("x", 1), podgroup("f", 1)],
                        args={"hypernode.binpack.normal-pod.fading": 0.5, "hypernode.binpack.memory": 0})
    task = next(iter(ssn.jobs["ns/f"].tasks.values()))
    got = p.batch_node_order_fn(ssn, task, ssn.node_list)
    # cpu only (memory weight 0): tier 1 weight 1, tier 2 0.5, tier 3 0.25
    s0, s1 = (2000 + 1000) / 8000, 1000 / 8000
    s2 = top = (2000 + 1000) / 16000
    assert got["a1"] == pytest.approx(100 * (s0 + 0.5 * s2 + 0.25 * top) / 1.75)
    assert got["b1"] == pytest.approx(100 * (s1 + 0.5 * s2 + 0.25 * top) / 1.75)


def test_gradient_groups_eligible_hypernodes_by_tier():
    # the gang needs 6 cpu: no 8-cpu rack with 3 used can take it, s2 can
    ssn, p, _ = cluster(pods=[pod("x-0", "x", 3000, node_name="a1", phase="Running"),
                              pod("x-1", "x", 3000, node_name="b1", phase="Running"),
                              pod("g-0", "g", 3000), pod("g-1", "g", 3000)],
                        pgs=[podgroup("x", 2), topo_pg("g", 2, tier=2)])
    job = ssn.jobs["ns/g"]
    top = ssn.hyper_nodes[CLUSTER_TOP_HYPERNODE]
    assert [[h.name for h in g] for g in ssn.hyper_node_gradient_for_job_fn(job, top)] == [["s2"]]
    job.pod_group["spec"]["networkTopology"]["highestTierAllowed"] = 1
    assert ssn.hyper_node_gradient_for_job_fn(job, top) == []
    job.pod_group["spec"]["networkTopology"]["mode"] = "soft"        # soft: the hypernode itself
    assert ssn.hyper_node_gradient_for_job_fn(job, top) == [[top]]


def test_search_root_of_a_job_with_an_allocated_hypernode():
    ssn, _, _ = cluster()
    hns = ssn.hyper_nodes
    top = hns[CLUSTER_TOP_HYPERNODE]
    assert _search_root(hns, top, 2, "s0").name == "s2"      # the highest allowed ancestor
    assert _search_root(hns, top, 1, "s0").name == "s0"
    assert _search_root(hns, hns["s1"], 2, "s0").name == "s1"
    with pytest.raises(LookupError, match="no intersection"):
        _search_root(hns, hns["s1"], 1, "s0")
    with pytest.raises(LookupError, match="greater than highest allowed"):
        _search_root(hns, top, 0, "s0")


def test_allocation_events_update_the_used_resources():
    ssn, p, _ = cluster(pods=[pod("g-0", "g", 1000)], pgs=[podgroup("g", 1)])
    task = next(iter(ssn.jobs["ns/g"].tasks.values()))
    before = p.resources["s0"].used.milli_cpu
    ssn.statement().allocate(task, ssn.nodes["a2"])
    assert p.resources["s0"].used.milli_cpu == before + 1000
    assert p.resources["s2"].used.milli_cpu == before + 1000 and p.resources["s1"].used.milli_cpu == 0


def test_hard_gang_is_placed_in_one_rack_and_records_its_hypernode():
    ssn, _, io = cluster(pods=[pod("g-0", "g", 2000), pod("g-1", "g", 2000)], pgs=[topo_pg("g", 2, tier=1)])
    from ha.scheduler.actions import get_action
    get_action("allocate").execute(ssn)
    binds = {r.key: r.detail["node"] for r in io.records if r.op == "bind"}
    assert len(binds) == 2 and len({n[0] for n in binds.values()}) == 1
    job = ssn.jobs["ns/g"]
    assert job.allocated_hyper_node in ("s0", "s1") and job.uid in ssn.dirty_jobs


def test_label_tiers_build_hypernodes_when_the_cluster_has_none():
    nodes = []
    for name, sw, rack in (("n1", "s1", "r1"), ("n2", "s1", "r1"), ("n3", "s2", "r1"), ("n4", "s3", "r2")):
        n = node(name, 4000)
        n["metadata"]["labels"] = {"topology/switch": sw, "topology/rack": rack}
        nodes.append(n)
    cache, _ = make_cache(nodes=nodes)
    ssn = session(cache, conf(tiers=[[{"name": PLUGIN_NAME}]]))
    hns = ssn.hyper_nodes
    assert hns["topology/switch=s1"].parent == "topology/rack=r1"
    assert hns["topology/rack=r1"].children == {"topology/switch=s1", "topology/switch=s2"}
    assert hns["topology/rack=r1"].parent == CLUSTER_TOP_HYPERNODE
    assert ssn.real_nodes_set["topology/rack=r1"] == frozenset({"n1", "n2", "n3"})
    assert ssn.hyper_nodes_set_by_tier[1] == {"topology/switch=s1", "topology/switch=s2", "topology/switch=s3"}
    assert ssn.plugins[PLUGIN_NAME].labels_built
    # HyperNode objects in the cluster win over the labels
    cache.add_hyper_node(hyper_node_object("real", 1, [exact("n1")]))
    ssn = session(cache, conf(tiers=[[{"name": PLUGIN_NAME}]]))
    assert set(ssn.hyper_nodes) == {"real", CLUSTER_TOP_HYPERNODE} and not ssn.plugins[PLUGIN_NAME].labels_built


def test_gang_eviction_domains_are_the_hypernodes():
    """The gang-aware eviction design's GangSearchSpaceFn takes its domains from the session's HyperNodes (objects here,
    no labels): tier <= highestTierAllowed, the cluster top when the bound reaches it."""
    from ha.scheduler.framework.gang_eviction import PURPOSE_ALLOCATE, PURPOSE_EVICT
    ssn, p, _ = cluster(pods=[pod("g-0", "g", 1000), pod("g-1", "g", 1000)], pgs=[topo_pg("g", 2, tier=2)])
    job = ssn.jobs["ns/g"]
    ev = ssn.gang_valid_domains(job, PURPOSE_EVICT)
    assert ev.hard and ev.names == ["s0", "s1", "s2"]
    assert [sorted(n.name for n in d) for d in ev] == [["a1", "a2"], ["b1", "b2"], ["a1", "a2", "b1", "b2"]]
    # with enabledHyperNodeGradient on, allocate follows v1.14.0's gradients, not these domains
    assert ssn.gang_valid_domains(job, PURPOSE_ALLOCATE) == []
    job.pod_group["spec"]["networkTopology"]["highestTierAllowed"] = 3
    assert ssn.gang_valid_domains(job, PURPOSE_EVICT).names == ["s0", "s1", "s2"]   # top K = 3
    p.evict_top_k = 5
    assert ssn.gang_valid_domains(job, PURPOSE_EVICT).names[-1] == "cluster"
