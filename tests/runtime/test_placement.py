"""Placement of the scheduler instances over Ray nodes (ha.runtime.placement): one per node while
there are enough eligible nodes, worker nodes before the head and the driver's, SPREAD otherwise;
a restart goes back to its own node, else to the least occupied alive one. Pure planning over the
records Ray's GCS gives (``ray.nodes()`` rows); the real cluster is in test_node_kill_cluster.py."""
from __future__ import annotations

from ha.runtime.placement import HEAD_RESOURCE, RayNode, plan, replacement, strategy

NAMES = ["scheduler-1", "scheduler-2", "scheduler-3"]


def row(node_id, port, *, head=False, alive=True, cpu=1.0):
    res = {"CPU": cpu, "memory": 1e9}
    if head:
        res[HEAD_RESOURCE] = 1.0
    return {"NodeID": node_id, "Alive": alive, "NodeManagerAddress": "127.0.0.1",
            "NodeManagerHostname": "vm", "NodeManagerPort": port, "Resources": res}


def nodes(*rows):
    return [RayNode.from_ray(r) for r in rows]


def test_a_ray_row_becomes_a_node():
    n = RayNode.from_ray(row("aa", 4001, head=True, cpu=2))
    assert (n.node_id, n.address, n.port, n.head, n.alive, n.cpu, n.host) == ("aa", "127.0.0.1", 4001, True, True, 2.0, "vm")
    assert RayNode.from_ray(row("bb", 4002)).head is False


def test_one_instance_per_worker_node_the_head_last():
    ns = nodes(row("head", 4000, head=True), row("w3", 4003), row("w1", 4001), row("w2", 4002))
    assert plan(ns, NAMES, driver="head") == {"scheduler-1": "w1", "scheduler-2": "w2", "scheduler-3": "w3"}
    # three nodes for three instances: the head takes the last one
    ns = nodes(row("head", 4000, head=True), row("w1", 4001), row("w2", 4002))
    assert plan(ns, NAMES, driver="head") == {"scheduler-1": "w1", "scheduler-2": "w2", "scheduler-3": "head"}
    # the driver's own node (a driver on a worker machine) is kept for last like the head
    ns = nodes(row("head", 4000, head=True), row("w1", 4001), row("w2", 4002), row("w3", 4003))
    assert plan(ns, NAMES[:2], driver="w1") == {"scheduler-1": "w2", "scheduler-2": "w3"}


def test_too_few_eligible_nodes_spread():
    ns = nodes(row("head", 4000, head=True), row("w1", 4001), row("w2", 4002, alive=False),
               row("w3", 4003, cpu=0))
    assert plan(ns, NAMES, driver="head") == {n: None for n in NAMES}
    # nodes known dead (Ray still lists them alive for a while) do not count
    ns = nodes(row("head", 4000, head=True), row("w1", 4001), row("w2", 4002), row("w3", 4003))
    assert plan(ns, NAMES, exclude={"w2"}) == {"scheduler-1": "w1", "scheduler-2": "w3", "scheduler-3": "head"}
    assert plan(ns, NAMES, exclude={"w2", "w3"}) == {n: None for n in NAMES}


def test_a_restart_goes_back_to_its_node_or_the_least_occupied_alive_one():
    ns = nodes(row("head", 4000, head=True), row("w1", 4001), row("w2", 4002), row("w3", 4003))
    assert replacement(ns, "w2", {"w1": 1, "w3": 1}, driver="head") == "w2"
    # its node is gone: the least occupied eligible one, workers before the head
    assert replacement(ns, "w2", {"w1": 1, "w3": 1}, driver="head", exclude={"w2"}) == "head"
    assert replacement(ns, "w2", {"w1": 1, "w3": 0}, driver="head", exclude={"w2"}) == "w3"
    dead = nodes(row("head", 4000, head=True), row("w1", 4001, alive=False))
    assert replacement(dead, "w1", {}, driver="head") == "head"
    assert replacement(nodes(row("w1", 4001, alive=False)), "w1", {}) is None


def test_strategy_pins_softly_or_spreads():
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
    assert strategy(None) == "SPREAD"
    node_id = "ab" * 28   # Ray's node ids: 28 bytes in hex
    s = strategy(node_id)
    assert isinstance(s, NodeAffinitySchedulingStrategy) and s.node_id == node_id and s.soft is True
