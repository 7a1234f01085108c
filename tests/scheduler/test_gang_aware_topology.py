"""The network-topology-aware plugin (the gang-aware eviction design's search spaces): hypernodes
from node labels, the GangSearchSpaceFn for allocate (all domains) and eviction (top-K by cost to
enter), hard/soft constraints, a running gang kept in its domain, and the arguments."""
from __future__ import annotations

import pytest

from ha.errors import BadInput
from ha.scheduler.framework.gang_eviction import PURPOSE_ALLOCATE, PURPOSE_EVICT
from ha.scheduler.plugins.network_topology import (NetworkTopologyPlugin, build_hypernodes, job_constraint,
                                                   parse_tier_labels)
from tests.scheduler.fw_helpers import conf, make_cache, node, pod, podgroup, session

TOPO = {"name": "network-topology-aware"}


def labelled(name: str, cpu: int, switch: str, rack: str) -> dict:
    n = node(name, cpu)
    n["metadata"]["labels"] = {"topology/switch": switch, "topology/rack": rack}
    return n


NODES = [labelled("n1", 4000, "s1", "r1"), labelled("n2", 4000, "s1", "r1"),
         labelled("n3", 4000, "s2", "r1"), labelled("n4", 4000, "s3", "r2")]


def _pg(name: str, topo: dict | None, min_member: int = 2) -> dict:
    pg = podgroup(name, min_member)
    if topo is not None:
        pg["spec"]["networkTopology"] = topo
    return pg


def _ssn(pgs, pods, args=None):
    cache, _ = make_cache(nodes=NODES, podgroups=pgs, pods=pods)
    opt = dict(TOPO, arguments=args) if args else TOPO
    return session(cache, conf(tiers=[[opt]]))


def names(space):
    return [[n.name for n in d] for d in space]


def test_hypernodes_from_labels():
    cache, _ = make_cache(nodes=NODES)
    ssn = session(cache, conf())
    hns = build_hypernodes(list(ssn.node_list), ("topology/switch", "topology/rack"))
    assert [(h.name, h.tier, h.nodes) for h in hns] == [
        ("topology/switch=s1", 1, ["n1", "n2"]), ("topology/switch=s2", 1, ["n3"]),
        ("topology/switch=s3", 1, ["n4"]), ("topology/rack=r1", 2, ["n1", "n2", "n3"]),
        ("topology/rack=r2", 2, ["n4"])]


def test_allocate_gets_all_domains_of_allowed_tiers_eviction_top_k_by_cost():
    pods = [pod("g-0", "g", 3000), pod("g-1", "g", 3000)]
    # n1 busy (3 of 4 cpu) so switch s1 has 5 cpu free, rack r1 9 cpu free
    pods += [pod("x-0", "x", 3000, node_name="n1", phase="Running")]
    ssn = _ssn([_pg("g", {"mode": "hard", "highestTierAllowed": 2}), podgroup("x", 1)], pods)
    job = ssn.jobs["ns/g"]
    space = ssn.gang_valid_domains(job, PURPOSE_ALLOCATE)
    assert space.hard and space.names == ["topology/switch=s1", "topology/switch=s2", "topology/switch=s3",
                                          "topology/rack=r1", "topology/rack=r2"]
    ev = ssn.gang_valid_domains(job, PURPOSE_EVICT)
    # capacity filter drops s2, s3, r2 (4 cpu < 6); r1 fits now (shortfall 0), s1 short 1 of 6 cpu
    assert ev.names == ["topology/rack=r1", "topology/switch=s1"]
    assert names(ev) == [["n1", "n2", "n3"], ["n1", "n2"]]


def test_top_k_and_tier_limit_and_cluster_domain():
    pods = [pod("g-0", "g", 1000), pod("g-1", "g", 1000)]
    ssn = _ssn([_pg("g", {"mode": "hard", "highestTierAllowed": 1})], pods,
               args={"network-topology-aware.evictTopK": 2})
    ev = ssn.gang_valid_domains(ssn.jobs["ns/g"], PURPOSE_EVICT)
    assert ev.names == ["topology/switch=s1", "topology/switch=s2"]   # all fit: by tier, then name; K=2
    ssn = _ssn([_pg("g", {"mode": "hard", "highestTierAllowed": 3})], pods)
    alloc = ssn.gang_valid_domains(ssn.jobs["ns/g"], PURPOSE_ALLOCATE)
    assert alloc.names[-1] == "cluster" and names(alloc)[-1] == ["n1", "n2", "n3", "n4"]


def test_soft_constraint_appends_the_cluster_and_is_not_hard():
    pods = [pod("g-0", "g", 1000), pod("g-1", "g", 1000)]
    ssn = _ssn([_pg("g", {"mode": "soft", "highestTierAllowed": 1})], pods)
    sp = ssn.gang_valid_domains(ssn.jobs["ns/g"], PURPOSE_EVICT)
    assert not sp.hard and sp.names[-1] == "cluster" and len(sp[-1]) == 4


def test_unconstrained_job_gets_no_opinion_and_impossible_hard_gets_an_empty_domain():
    ssn = _ssn([_pg("free", None), _pg("huge", {"mode": "hard", "highestTierAllowed": 1})],
               [pod("free-0", "free", 1000), pod("free-1", "free", 1000),
                pod("huge-0", "huge", 5000), pod("huge-1", "huge", 5000)])
    assert ssn.gang_valid_domains(ssn.jobs["ns/free"], PURPOSE_EVICT) == []
    sp = ssn.gang_valid_domains(ssn.jobs["ns/huge"], PURPOSE_EVICT)
    assert sp.hard and names(sp) == [[]]


def test_running_gang_stays_in_its_domain():
    pods = [pod("g-0", "g", 1000, node_name="n3", phase="Running"), pod("g-1", "g", 1000), pod("g-2", "g", 1000)]
    ssn = _ssn([_pg("g", {"mode": "hard", "highestTierAllowed": 2}, min_member=3)], pods)
    sp = ssn.gang_valid_domains(ssn.jobs["ns/g"], PURPOSE_ALLOCATE)
    assert sp.names == ["topology/switch=s2", "topology/rack=r1"]


def test_arguments_and_constraint_parsing():
    assert parse_tier_labels("a/b, c/d") == ("a/b", "c/d")
    assert parse_tier_labels(["x"]) == ("x",)
    with pytest.raises(BadInput, match="tierLabels"):
        parse_tier_labels(3)
    with pytest.raises(BadInput, match="evictTopK"):
        NetworkTopologyPlugin({"evictTopK": 0})
    p = NetworkTopologyPlugin({"tierLabels": "topology/rack"})
    assert p.tier_labels == ("topology/rack",)
    ssn = _ssn([_pg("g", {"highestTierAllowed": "2"})], [pod("g-0", "g", 1000), pod("g-1", "g", 1000)])
    c = job_constraint(ssn.jobs["ns/g"])
    assert c.mode == "hard" and c.highest_tier == 2
