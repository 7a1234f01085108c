"""HyperNodes in the cache (api/hypernode_info.py): member selectors (exact / regex / label), the
tree (parents, children, tiers, real nodes), re-resolution when nodes or hypernodes change, build
errors, the tree walks, and the session's view (cluster-top hypernode, allocated-hypernode
recovery)."""
from __future__ import annotations

from ha.scheduler.api.hypernode_info import (CLUSTER_TOP_HYPERNODE, HyperNodeInfo, HyperNodeInfoMap,
                                             HyperNodesInfo, get_members, hyper_node_object,
                                             label_selector_matches)
from tests.scheduler.fw_helpers import conf, make_cache, node, pod, podgroup, session


def exact(name, typ="Node"):
    return {"type": typ, "selector": {"exactMatch": {"name": name}}}


def regex(pattern):
    return {"type": "Node", "selector": {"regexMatch": {"pattern": pattern}}}


def label(**match):
    return {"type": "Node", "selector": {"labelMatch": {"matchLabels": match}}}


def labelled(name, **labels):
    n = node(name, 4000)
    n["metadata"]["labels"] = dict(labels)
    return n


NODES = [labelled("s0-n1", rack="r0"), labelled("s0-n2", rack="r0"), labelled("s1-n3", rack="r1"),
         labelled("s1-n4", rack="r1", gpu="a100")]


def tree_cache():
    cache, _ = make_cache(nodes=NODES)
    cache.add_hyper_node(hyper_node_object("s0", 1, [regex("^s0-")], tier_name="switch"))
    cache.add_hyper_node(hyper_node_object("s1", 1, [label(rack="r1")], tier_name="switch"))
    cache.add_hyper_node(hyper_node_object("s2", 2, [exact("s0", "HyperNode"), exact("s1", "HyperNode")],
                                           tier_name="spine"))
    return cache


def real(cache):
    return {k: sorted(v) for k, v in cache.hyper_nodes_info.real_nodes.items()}


def test_selectors():
    nodes = {"a-1": {"x": "1"}, "a-2": {"x": "2"}, "b-1": {}}
    assert get_members({"exactMatch": {"name": "ghost"}}, nodes) == {"ghost"}   # kept as written
    assert get_members({"regexMatch": {"pattern": "^a-"}}, nodes) == {"a-1", "a-2"}
    assert get_members({"regexMatch": {"pattern": "1"}}, nodes) == {"a-1", "b-1"}   # anywhere in the name
    assert get_members({"regexMatch": {"pattern": "(("}}, nodes) == set()           # bad regex: nothing
    assert get_members({"labelMatch": {}}, nodes) == set()                           # empty: nothing
    assert get_members({"labelMatch": {"matchLabels": {"x": "2"}}}, nodes) == {"a-2"}
    expr = {"matchExpressions": [{"key": "x", "operator": "In", "values": ["1", "2"]}]}
    assert get_members({"labelMatch": expr}, nodes) == {"a-1", "a-2"}
    assert label_selector_matches({"matchExpressions": [{"key": "x", "operator": "DoesNotExist"}]}, {})
    assert not label_selector_matches({"matchExpressions": [{"key": "x", "operator": "Exists"}]}, {})
    assert label_selector_matches({"matchExpressions": [{"key": "x", "operator": "NotIn", "values": ["1"]}]},
                                  {"x": "3"})


def test_tree_tiers_and_real_nodes():
    cache = tree_cache()
    info = cache.hyper_nodes_info
    assert info.ready and info.error == ""
    assert real(cache) == {"s0": ["s0-n1", "s0-n2"], "s1": ["s1-n3", "s1-n4"],
                           "s2": ["s0-n1", "s0-n2", "s1-n3", "s1-n4"]}
    assert info.set_by_tier == {1: {"s0", "s1"}, 2: {"s2"}}
    assert info.hyper_nodes["s0"].parent == "s2" and info.hyper_nodes["s2"].children == {"s0", "s1"}
    assert info.tier_name_map() == {"switch": 1, "spine": 2}
    assert info.find_hyper_node_for_node("s1-n4") == "s1"
    hns = info.hyper_nodes
    assert hns.get_ancestors("s0") == ["s0", "s2"]
    assert hns.get_lca_hyper_node("s0", "s1") == "s2" and hns.get_lca_hyper_node("s0", "") == "s0"


def test_node_changes_re_resolve_the_members():
    cache = tree_cache()
    cache.add_node(labelled("s0-n9", rack="r9"))             # regex member of s0
    cache.add_node(labelled("x-n5", rack="r1"))              # label member of s1
    assert real(cache)["s0"] == ["s0-n1", "s0-n2", "s0-n9"]
    assert real(cache)["s1"] == ["s1-n3", "s1-n4", "x-n5"]
    assert "x-n5" in real(cache)["s2"] and "s0-n9" in real(cache)["s2"]
    moved = labelled("x-n5", rack="r0")                      # label change: leaves s1
    cache.update_node(None, moved)
    assert real(cache)["s1"] == ["s1-n3", "s1-n4"] and "x-n5" not in real(cache)["s2"]
    cache.delete_node(labelled("s0-n9"))
    assert real(cache)["s0"] == ["s0-n1", "s0-n2"]


def test_hypernode_update_and_delete_rebuild_the_tree():
    cache = tree_cache()
    cache.update_hyper_node(None, hyper_node_object("s2", 2, [exact("s0", "HyperNode")]))
    info = cache.hyper_nodes_info
    assert info.hyper_nodes["s1"].parent == "" and real(cache)["s2"] == ["s0-n1", "s0-n2"]
    assert info.tier_name_map() == {"switch": 1}
    cache.delete_hyper_node(hyper_node_object("s0", 1))
    assert "s0" not in info.set_by_tier[1] and real(cache)["s2"] == []
    assert info.hyper_nodes["s0"].hyper_node is None          # a member without an object: placeholder


def test_build_errors_mark_not_ready():
    cache = tree_cache()
    cache.add_hyper_node(hyper_node_object("s3", 2, [exact("s0", "HyperNode")]))
    info = cache.hyper_nodes_info
    assert not info.ready and "already has a parent" in info.error
    cache.delete_hyper_node(hyper_node_object("s3", 2))
    assert info.ready
    cache.add_hyper_node(hyper_node_object("s0", 1, [exact("s2", "HyperNode")]))
    assert not info.ready and "cyclic" in info.error


def test_ready_flag_reaches_allocate():
    """A network-topology job waits while the hypernodes are not ready; others still schedule."""
    cache, io = make_cache(nodes=NODES, podgroups=[podgroup("t", 1), podgroup("f", 1)],
                           pods=[pod("t-0", "t", 1000), pod("f-0", "f", 1000)])
    cache.jobs["ns/t"].pod_group["spec"]["networkTopology"] = {"mode": "hard", "highestTierAllowed": 2}
    cache.add_hyper_node(hyper_node_object("a", 1, [exact("b", "HyperNode")]))
    cache.add_hyper_node(hyper_node_object("b", 1, [exact("a", "HyperNode")]))
    assert not cache.hyper_nodes_info.ready
    ssn = session(cache, conf(actions=["allocate"], tiers=[[{"name": "gang", "enabledJobReady": True}]]))
    from ha.scheduler.actions import get_action
    get_action("allocate").execute(ssn)
    bound = {r.key for r in io.records if r.op == "bind"}
    assert bound == {"ns/f-0"}


def test_session_adds_the_cluster_top_and_recovers_the_allocated_hypernode():
    cache = tree_cache()
    pg = podgroup("g", 2)
    pg["spec"]["networkTopology"] = {"mode": "hard", "highestTierAllowed": 2}
    cache.add_pod_group(pg)
    cache.add_pod(pod("g-0", "g", 1000, node_name="s1-n3", phase="Running"))
    cache.add_pod(pod("g-1", "g", 1000))
    ssn = session(cache, conf())
    top = ssn.hyper_nodes[CLUSTER_TOP_HYPERNODE]
    assert top.tier == 3 and top.children == {"s2"} and ssn.hyper_nodes["s2"].parent == CLUSTER_TOP_HYPERNODE
    assert ssn.hyper_nodes_tiers == [1, 2, 3]
    assert [n.name for n in ssn.real_nodes_list[CLUSTER_TOP_HYPERNODE]] == [n.name for n in ssn.node_list]
    # the running task's node is in s1, s2 and the top: the smallest (s1) wins
    assert ssn.jobs["ns/g"].allocated_hyper_node == "s1"
    # the cache's own tree is not touched by the session
    assert cache.hyper_nodes_info.hyper_nodes["s2"].parent == ""


def test_injected_cache_is_taken_verbatim():
    info = HyperNodesInfo()
    info.inject({"a": HyperNodeInfo("a", 0)}, {0: ["a", "b"]}, {"a": ["n1"], "b": ["n2", "ghost"]})
    assert info.injected and info.set_by_tier == {0: {"a", "b"}}
    info.node_changed("n3", {}, {})                            # injected sets are not re-resolved
    assert info.real_nodes["b"] == frozenset({"n2", "ghost"})


def test_info_map_parent_by_members_before_the_tree_is_built():
    hm = HyperNodeInfoMap({"a": HyperNodeInfo("a", 1, hyper_node=hyper_node_object("a", 1)),
                           "b": HyperNodeInfo("b", 2, hyper_node=hyper_node_object("b", 2, [exact("a", "HyperNode")]))})
    assert hm.get_ancestors("a") == ["a", "b"]
    assert hm.get_lca_hyper_node("a", "b") == "b" and hm.get_lca_hyper_node("a", "zz") == ""


def test_cache_handlers_by_kind():
    cache, _ = make_cache()
    add, update, delete = cache.handlers("HyperNode")
    add(hyper_node_object("s9", 1, [exact("x")]))
    assert cache.hyper_nodes_info.real_nodes["s9"] == frozenset({"x"})
    delete(hyper_node_object("s9", 1))
    assert "s9" not in cache.hyper_nodes_info.real_nodes
    import pytest
    with pytest.raises(KeyError, match="Lease"):
        cache.handlers("Lease")


def test_incremental_re_resolution_equals_a_fresh_build():
    """Random node and hypernode events: the incrementally kept tree always equals the one a fresh
    cache builds from the final objects (and it can differ: the check is not vacuous)."""
    import random
    rng = random.Random(5)
    names = [f"n{i}" for i in range(12)]
    racks = ["r0", "r1", "r2"]

    def random_hn(i):
        kind = rng.choice(["exact", "regex", "label"])
        if kind == "exact":
            m = exact(rng.choice(names))
        elif kind == "regex":
            m = regex(f"^n{rng.randint(0, 1)}")
        else:
            m = label(rack=rng.choice(racks))
        return hyper_node_object(f"h{i}", 1, [m])

    non_trivial = 0
    for trial in range(20):
        cache, _ = make_cache()
        nodes: dict = {}
        hns: dict = {}
        for _ in range(40):
            r = rng.random()
            if r < 0.35:
                n = rng.choice(names)
                nodes[n] = labelled(n, rack=rng.choice(racks))
                cache.add_node(nodes[n])
            elif r < 0.5 and nodes:
                n = rng.choice(sorted(nodes))
                cache.delete_node(nodes.pop(n))
            elif r < 0.8:
                i = rng.randint(0, 4)
                hns[f"h{i}"] = random_hn(i)
                cache.add_hyper_node(hns[f"h{i}"])
            elif r < 0.9:   # may list itself: a cycle, which must read the same both ways
                top = hyper_node_object("top", 2, [exact(h, "HyperNode") for h in sorted(hns)[:3]])
                hns["top"] = top
                cache.add_hyper_node(top)
            elif hns:
                h = rng.choice(sorted(hns))
                cache.delete_hyper_node(hns.pop(h))
        fresh, _ = make_cache(nodes=list(nodes.values()))
        for h in hns.values():
            fresh.add_hyper_node(h)
        a, b = cache.hyper_nodes_info, fresh.hyper_nodes_info
        assert a.real_nodes == b.real_nodes, trial
        assert a.set_by_tier == b.set_by_tier and a.ready == b.ready
        assert {k: (v.parent, v.children) for k, v in a.hyper_nodes.items()} == \
               {k: (v.parent, v.children) for k, v in b.hyper_nodes.items()}
        non_trivial += any(a.real_nodes.values()) and a.ready
    assert non_trivial >= 10
    # the comparison sees a difference when one exists: a node event the info missed
    cache, _ = make_cache(nodes=[labelled("n1", rack="r0")])
    cache.add_hyper_node(hyper_node_object("h", 1, [label(rack="r0")]))
    fresh, _ = make_cache(nodes=[labelled("n1", rack="r0"), labelled("n2", rack="r0")])
    fresh.add_hyper_node(hyper_node_object("h", 1, [label(rack="r0")]))
    assert cache.hyper_nodes_info.real_nodes != fresh.hyper_nodes_info.real_nodes
