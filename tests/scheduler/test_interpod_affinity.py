"""Inter-pod affinity (ha/scheduler/plugins/interpod_affinity.py) through whole scenario sessions:
the predicates plugin's required affinity / anti-affinity filter (the incoming pod's terms and
the terms of pods already placed), nodeorder's preferred-term score, and the PreFilter state
recomputed per task so that a gang's own pods see each other. Each case has exactly one right
answer (one feasible node, or one best score)."""
from __future__ import annotations

import copy
from typing import Any

import pytest

from ha.scenario.loader import load_scenario
from ha.scenario.runner import run_scenario
from ha.scheduler.plugins.interpod_affinity import selector_matches

R = "requiredDuringSchedulingIgnoredDuringExecution"
P = "preferredDuringSchedulingIgnoredDuringExecution"
HOST = "kubernetes.io/hostname"


def node(name: str, zone: str | None = "a", **labels: str) -> dict:
    lab = {HOST: name, **labels}
    if zone is not None:
        lab["zone"] = zone
    return {"name": name, "allocatable": {"cpu": 8000, "memory": 8 * 2**30, "pods": 10}, "labels": lab}


def pod(name: str, group: str, node_name: str = "", ns: str = "ns1", labels: dict | None = None,
        affinity: dict | None = None) -> dict:
    d: dict[str, Any] = {"namespace": ns, "name": name, "podgroup": group, "request": {"cpu": 1000, "memory": 2**30},
                         "phase": "Running" if node_name else "Pending", "nodeName": node_name,
                         "labels": labels or {}}
    if affinity:
        d["affinity"] = affinity
    return d


def term(key: str, **match: str) -> dict:
    return {"labelSelector": {"matchLabels": match}, "topologyKey": key}


def scenario(nodes: list, pods: list, *, weights: dict | None = None, pred_args: dict | None = None) -> dict:
    groups = sorted({(p["namespace"], p["podgroup"]) for p in pods})
    pgs = []
    for ns, g in groups:
        members = [p for p in pods if (p["namespace"], p["podgroup"]) == (ns, g)]
        running = all(p["nodeName"] for p in members)
        pgs.append({"name": g, "namespace": ns, "queue": "q1", "minMember": 0 if running else len(members),
                    "phase": "Running" if running else "Inqueue"})
    pred: dict[str, Any] = {"name": "predicates", "enabledPredicate": True}
    if pred_args:
        pred["arguments"] = pred_args
    tier = [{"name": "gang", "enabledJobReady": True, "enabledJobPipelined": True}, pred]
    if weights is not None:
        args = {k: 0 for k in ("leastrequested.weight", "balancedresource.weight", "nodeaffinity.weight",
                               "tainttoleration.weight", "imagelocality.weight", "podtopologyspread.weight")}
        args.update(weights)
        tier.append({"name": "nodeorder", "enabledNodeOrder": True, "arguments": args})
    return {"name": "interpod", "nodes": nodes, "queues": [{"name": "q1"}], "podgroups": pgs, "pods": pods,
            "actions": ["allocate"], "plugins": {"tiers": [tier]}}


def binds(doc: dict, profile: str = "v1.14") -> dict[str, str]:
    res = run_scenario(load_scenario("interpod.json", copy.deepcopy(doc)), profile)
    assert res.outcome.fatal is None
    return dict(res.outcome.binds)


def test_selector_semantics():
    assert selector_matches({}, {"a": "1"})            # empty selector: everything
    assert not selector_matches(None, {"a": "1"})      # absent selector: nothing
    sel = {"matchLabels": {"a": "1"}, "matchExpressions": [{"key": "b", "operator": "NotIn", "values": ["x"]}]}
    assert selector_matches(sel, {"a": "1"}) and selector_matches(sel, {"a": "1", "b": "y"})
    assert not selector_matches(sel, {"a": "1", "b": "x"}) and not selector_matches(sel, {"a": "2"})


def test_required_anti_affinity_of_the_incoming_pod():
    anti = {"podAntiAffinity": {R: [term("zone", app="db")]}}
    doc = scenario([node("n1", "a"), node("n2", "a"), node("n3", "b")],
                   [pod("db-0", "db", "n1", labels={"app": "db"}), pod("web", "web", affinity=anti)])
    assert binds(doc) == {"ns1/web": "n3"}  # the whole zone a holds a db pod
    # without the filter the pod may go to zone a (n2 is as good as n3 for nothing else differs)
    doc["nodes"] = [node("n1", "a"), node("n2", "a")]
    assert binds(doc) == {}
    assert binds(dict(doc, plugins={"tiers": [[{"name": "gang", "enabledJobReady": True},
                                              {"name": "predicates", "enabledPredicate": True,
                                               "arguments": {"predicate.PodAffinityEnable": False}}]]})) != {}


def test_required_anti_affinity_of_a_pod_already_placed_is_symmetric():
    anti = {"podAntiAffinity": {R: [term(HOST, app="web")]}}
    doc = scenario([node("n1"), node("n2")],
                   [pod("guard", "g", "n1", affinity=anti), pod("web", "web", labels={"app": "web"})])
    assert binds(doc) == {"ns1/web": "n2"}
    # a pod the guard's selector does not match may go next to it
    doc["pods"][1]["labels"] = {"app": "other"}
    doc["nodes"] = [node("n1")]
    assert binds(doc) == {"ns1/web": "n1"}


def test_required_affinity_follows_matching_pods_by_topology():
    aff = {"podAffinity": {R: [term("zone", app="db")]}}
    doc = scenario([node("n1", "a"), node("n2", "b"), node("n3", None)],
                   [pod("db-0", "db", "n2", labels={"app": "db"}), pod("web", "web", affinity=aff)])
    doc["nodes"][1]["allocatable"]["pods"] = 1  # n2 is full: the pod must find another node of zone b
    doc["nodes"].append(node("n4", "b"))
    assert binds(doc) == {"ns1/web": "n4"}


def test_required_affinity_first_pod_of_a_self_affine_series():
    """No pod matches anywhere: the pod may go to any node carrying the topology label, but only
    if it matches its own terms."""
    aff = {"podAffinity": {R: [term("zone", app="web")]}}
    doc = scenario([node("n1", None), node("n2", "b")], [pod("web", "web", labels={"app": "web"}, affinity=aff)])
    assert binds(doc) == {"ns1/web": "n2"}  # n1 lacks the zone label
    doc["pods"][0]["labels"] = {"app": "other"}
    assert binds(doc) == {}


def test_terms_default_to_the_pods_own_namespace():
    anti = {"podAntiAffinity": {R: [term(HOST, app="db")]}}
    doc = scenario([node("n1")], [pod("db-0", "db", "n1", ns="other", labels={"app": "db"}),
                                  pod("web", "web", affinity=anti)])
    assert binds(doc) == {"ns1/web": "n1"}  # the db pod lives in another namespace
    doc["pods"][1]["affinity"]["podAntiAffinity"][R][0]["namespaces"] = ["other"]
    assert binds(doc) == {}


def test_a_gang_sees_its_own_placed_pods():
    """Two pods of one job, anti-affine to each other per host: the second task's PreFilter state
    includes the first one (added to the node view by the allocate event)."""
    anti = {"podAntiAffinity": {R: [term(HOST, app="w")]}}
    pods = [pod(f"w{i}", "job", labels={"app": "w"}, affinity=anti) for i in range(2)]
    got = binds(scenario([node("n1"), node("n2")], pods))
    assert sorted(got.values()) == ["n1", "n2"]
    # three such pods on two nodes: the gang cannot be placed
    pods = [pod(f"w{i}", "job", labels={"app": "w"}, affinity=anti) for i in range(3)]
    assert binds(scenario([node("n1"), node("n2")], pods)) == {}


@pytest.mark.parametrize("profile", ["v1.14", "pr5045-fixed"])
def test_preferred_terms_score_both_ways(profile: str):
    # the incoming pod's preferred anti-affinity pushes it away from the db pod's host
    away = {"podAntiAffinity": {P: [{"weight": 50, "podAffinityTerm": term(HOST, app="db")}]}}
    doc = scenario([node("n1"), node("n2")], [pod("db-0", "db", "n1", labels={"app": "db"}),
                                              pod("web", "web", affinity=away)],
                   weights={"podaffinity.weight": 1})
    assert binds(doc, profile) == {"ns1/web": "n2"}
    # an existing pod's preferred affinity attracts a matching incoming pod without terms
    attract = {"podAffinity": {P: [{"weight": 50, "podAffinityTerm": term(HOST, app="web")}]}}
    doc = scenario([node("n1"), node("n2"), node("n3")],
                   [pod("cache", "c", "n3", affinity=attract), pod("web", "web", labels={"app": "web"})],
                   weights={"podaffinity.weight": 1})
    assert binds(doc, profile) == {"ns1/web": "n3"}
    # with podaffinity.weight 0 nothing scores, and least-allocated prefers the empty nodes
    doc = scenario([node("n1"), node("n2")], [pod("cache", "c", "n2", affinity=attract),
                                              pod("web", "web", labels={"app": "web"})],
                   weights={"podaffinity.weight": 0, "leastrequested.weight": 1})
    assert binds(doc, profile) == {"ns1/web": "n1"}
