"""Volcano v1.14.0's capacity-hierarchy, affinity / node-order and enqueue cases
(tests/data/scenarios/volcano-*/) pass under every profile, and the features they are about
decide them: with ``enabledHierarchy`` off, the hierarchy cases that depend on it fail."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from ha.scenario.loader import load_scenario
from ha.scenario.runner import run_scenario

DATA = Path(__file__).resolve().parents[1] / "data" / "scenarios"
FOLDERS = ("volcano-capacity-hierarchy", "volcano-affinity", "volcano-enqueue")
PROFILES = ("v1.14", "pr5045", "pr5045-fixed", "annotations", "nomination-only")
FILES = [f for d in FOLDERS for f in sorted((DATA / d).glob("*.json"))]


def test_folders_hold_the_converted_cases_and_a_readme():
    counts = {d: len(list((DATA / d).glob("*.json"))) for d in FOLDERS}
    assert counts == {"volcano-capacity-hierarchy": 13, "volcano-affinity": 6, "volcano-enqueue": 4}
    for d in FOLDERS:
        assert "Left out" in (DATA / d / "README.md").read_text()


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("path", FILES, ids=[f"{f.parent.name}/{f.stem}" for f in FILES])
def test_case_passes(path: Path, profile: str):
    res = run_scenario(load_scenario(path), profile)
    assert res.ok, f"{path.name} [{profile}]: " + "; ".join(res.mismatches)


def test_hierarchy_decides_the_hierarchy_cases():
    failing = set()
    for f in sorted((DATA / "volcano-capacity-hierarchy").glob("*.json")):
        d = json.loads(f.read_text())
        d["plugins"]["tiers"][0][0]["enabledHierarchy"] = False
        if not run_scenario(load_scenario(f, d)).ok:
            failing.add(f.stem.split("__")[1].split("-")[0])
    assert failing == {"case1", "case3", "case4", "case6"}


def test_a_broken_tree_makes_capacity_refuse():
    """No 'root' queue under enabledHierarchy: the plugin refuses to allocate (Volcano's
    readyToSchedule false), where flat capacity binds."""
    f = DATA / "volcano-capacity-hierarchy" / "capacity-hierarchy__case0-leaf-queue-allocatable.json"
    d = json.loads(f.read_text())
    d["queues"] = [dict(q, parent="") for q in d["queues"] if q["name"] == "q11"]
    res = run_scenario(load_scenario(f, d))
    assert res.outcome.binds == {}
    d["plugins"]["tiers"][0][0]["enabledHierarchy"] = False
    assert run_scenario(load_scenario(f, d)).outcome.binds == {"ns1/p1": "n1"}


def test_node_order_cases_depend_on_their_weight():
    """Zeroing the one weight a node-order case sets changes (or randomises away) its answer for
    at least one of 20 session seeds."""
    from ha.scenario.runner import ScenarioCluster, make_conf, resolve_profile
    for f in sorted((DATA / "volcano-affinity").glob("nodeorder__*.json")):
        d = json.loads(f.read_text())
        args = d["plugins"]["tiers"][0][1]["arguments"]
        key = next(k for k, v in args.items() if v)
        args[key] = 0
        scn = load_scenario(f, d)
        want = scn.expected.binds
        outcomes = set()
        for seed in range(20):
            cluster = ScenarioCluster(scn.objects, resolve_profile("v1.14"), source=str(f))
            conf = make_conf(scn.actions, scn.tiers, scn.action_arguments, source=str(f),
                             registered_builders=scn.registered_builders)
            outcomes.add(tuple(sorted(cluster.run_session(conf, seed=seed).binds.items())))
        assert outcomes != {tuple(sorted(want.items()))}, f"{f.name} does not depend on {key}"
