"""capacity with enabledHierarchy, beyond Volcano's own cases (tests/data/scenarios/
volcano-capacity-hierarchy): the hierarchical queue order compares the ancestors just below the
deepest common one, the victim queue order prefers queues closer to the preemptor's, real
capabilities are derived down the tree, and a job in an inner queue makes the plugin refuse."""
from __future__ import annotations

import copy

from ha.scenario.loader import load_scenario
from ha.scenario.runner import ScenarioCluster, make_conf, resolve_profile, run_scenario
from ha.scheduler.framework import close_session, open_session
from ha.scheduler.plugins.capacity import queue_level
from ha.scheduler.plugins.queue_attrs import QueueAttr

GI = 2**30


def tree_doc() -> dict:
    """root -> a -> (a1, a2), root -> b -> b1; a deserves 4 cpu and runs 3 (share .75), b deserves
    4 and runs 1 (share .25); inside a, a1 runs nothing (share 0), b1 runs 1 of 1 (share 1)."""
    q = lambda name, parent, cpu: {"name": name, "parent": parent,
                                    "deserved": {"cpu": cpu * 1000, "memory": 64 * GI}}
    running = [("a2", 3), ("b1", 1)]
    pods, pgs = [], []
    for queue, n in running:
        pgs.append({"name": f"run-{queue}", "namespace": "ns", "queue": queue, "minMember": 1, "phase": "Running"})
        pods += [{"namespace": "ns", "name": f"run-{queue}-{i}", "podgroup": f"run-{queue}", "phase": "Running",
                  "nodeName": "n1", "request": {"cpu": 1000}} for i in range(n)]
    for queue in ("a1", "b1"):
        pgs.append({"name": f"new-{queue}", "namespace": "ns", "queue": queue, "minMember": 1, "phase": "Inqueue"})
        pods.append({"namespace": "ns", "name": f"new-{queue}-0", "podgroup": f"new-{queue}", "request": {"cpu": 1000}})
    return {"name": "tree", "nodes": [{"name": "n1", "allocatable": {"cpu": 16000, "memory": 64 * GI, "pods": 20}}],
            "queues": [{"name": "root"}, q("a", "root", 4), q("b", "root", 4), q("a1", "a", 2), q("a2", "a", 2),
                       q("b1", "b", 1)],
            "podgroups": pgs, "pods": pods, "actions": ["allocate"],
            "plugins": {"tiers": [[{"name": "capacity", "enabledQueueOrder": True, "enabledAllocatable": True,
                                    "enabledHierarchy": True}]]}}


def open_tree(d: dict):
    scn = load_scenario("tree.json", copy.deepcopy(d))
    cluster = ScenarioCluster(scn.objects, resolve_profile("v1.14"), source="tree.json")
    return open_session(cluster.cache, make_conf(scn.actions, scn.tiers, scn.action_arguments, source="tree.json"))


def test_queue_level():
    a = QueueAttr("x", "x", ancestors=["root", "a"])
    b = QueueAttr("y", "y", ancestors=["root", "a", "a1"])
    c = QueueAttr("z", "z", ancestors=["root", "b"])
    assert queue_level(a, b) == 1 and queue_level(a, c) == 0 and queue_level(a, a) == 1


def test_leaves_are_ordered_by_their_branches_share():
    ssn = open_tree(tree_doc())
    try:
        cap = ssn.plugins["capacity"]
        opts = cap.queue_opts
        assert opts["a1"].ancestors == ["root", "a"] and set(opts["a"].children) == {"a1", "a2"}
        assert (opts["a1"].share, opts["b1"].share) == (0.0, 1.0)
        assert (opts["a"].share, opts["b"].share) == (0.75, 0.25)
        order = ssn.queue_order_fns["capacity"]
        # leaf vs leaf: a1 (share 0) comes after b1 (share 1) because branch a (.75) > branch b (.25)
        assert order(ssn.queues["b1"], ssn.queues["a1"]) < 0
        # siblings compare themselves: a1 (0) before a2 (3/2)
        assert order(ssn.queues["a1"], ssn.queues["a2"]) < 0
        # a leaf before an inner queue
        assert order(ssn.queues["a1"], ssn.queues["b"]) < 0 and order(ssn.queues["b"], ssn.queues["b1"]) > 0
        # victims: for a preemptor in a1, a2 (same parent) before b1
        victim = ssn.victim_queue_order_fns["capacity"]
        assert victim(ssn.queues["a2"], ssn.queues["b1"], ssn.queues["a1"]) < 0
    finally:
        close_session(ssn)


def test_real_capability_down_the_tree():
    d = tree_doc()
    d["queues"][1]["capability"] = {"cpu": 5000}            # a: 5 cpu, memory inherited from root
    d["queues"][1]["guarantee"] = {"resource": {"cpu": 2000}}
    d["queues"][2]["guarantee"] = {"resource": {"cpu": 6000}}  # b
    d["queues"][3]["capability"] = {"cpu": 8000}            # a1 asks for more than a has
    ssn = open_tree(d)
    try:
        opts = ssn.plugins["capacity"].queue_opts
        # root: the cluster; a: min(5 cpu, 16 − (2 + 6) + 2 = 10) = 5; a1: min(8, 5 − 0 + 0) = 5
        assert opts["root"].real_capability.milli_cpu == 16000
        assert opts["a"].real_capability.milli_cpu == 5000
        assert opts["a"].capability.memory == opts["root"].capability.memory == 64 * GI
        assert opts["a1"].real_capability.milli_cpu == 5000
        assert opts["root"].guarantee.milli_cpu == 8000   # Σ of its children's
    finally:
        close_session(ssn)
    # a has 3 cpu running in a2: a1 may add 2 more, not 3
    d["pods"] = [p for p in d["pods"] if not p["name"].startswith("new-b1")]
    d["podgroups"] = [g for g in d["podgroups"] if g["name"] != "new-b1"]
    for p in d["pods"]:
        if p["name"] == "new-a1-0":
            p["request"] = {"cpu": 3000}
    assert run_scenario(load_scenario("tree.json", copy.deepcopy(d))).outcome.binds == {}
    for p in d["pods"]:
        if p["name"] == "new-a1-0":
            p["request"] = {"cpu": 2000}
    assert run_scenario(load_scenario("tree.json", copy.deepcopy(d))).outcome.binds == {"ns/new-a1-0": "n1"}


def test_a_job_in_an_inner_queue_makes_capacity_refuse():
    d = tree_doc()
    d["podgroups"].append({"name": "inner", "namespace": "ns", "queue": "a", "minMember": 1, "phase": "Inqueue"})
    d["pods"].append({"namespace": "ns", "name": "inner-0", "podgroup": "inner", "request": {"cpu": 100}})
    assert run_scenario(load_scenario("tree.json", copy.deepcopy(d))).outcome.binds == {}
    assert run_scenario(load_scenario("tree.json", tree_doc())).outcome.binds != {}
