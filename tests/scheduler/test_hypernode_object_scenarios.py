"""Scenario files whose HyperNode objects the cache resolves as in production (regex and label
members, HyperNode members, tier names): they pass under every profile and tie-break seed, and
they fail for a scheduler that ignores the hypernodes or for the wrong tier name."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from ha.scenario.loader import load_scenario
from ha.scenario.runner import ScenarioCluster, compare, make_conf, resolve_profile, run_scenario

DIR = Path(__file__).resolve().parents[1] / "data" / "scenarios" / "hypernode-objects"
RACK = DIR / "allocate__hard-rack-regex-and-label-members.json"
SPINE = DIR / "allocate__hard-tier-name-spine.json"


def _outcome(scn, seed, tiers=None):
    conf = make_conf(scn.actions, tiers if tiers is not None else scn.tiers, scn.action_arguments, source=scn.path)
    return ScenarioCluster(scn.objects, resolve_profile("v1.14"), source=scn.path).run_session(conf, seed=seed)


@pytest.mark.parametrize("profile", ("v1.14", "pr5045", "pr5045-fixed", "annotations", "nomination-only"))
def test_the_files_pass(profile):
    for f in sorted(DIR.glob("*.json")):
        res = run_scenario(load_scenario(f), profile)
        assert res.ok, (f.name, res.mismatches)


def test_seeds_and_a_scheduler_without_the_plugin():
    scn = load_scenario(RACK)
    for seed in range(6):
        assert compare(scn.expected, _outcome(scn, seed)) == []
    bare = [[p for p in t if p.name != "network-topology-aware"] for t in scn.tiers]
    splits = [seed for seed in range(6) if compare(scn.expected, _outcome(scn, seed, bare))]
    assert splits, "without the plugin the gang never left one rack: the file could not fail"


def test_tier_name_decides():
    d = json.loads(SPINE.read_text())
    d["podgroups"][1]["networkTopology"]["highestTierName"] = "rack"
    res = run_scenario(load_scenario("x.json", d), "v1.14")
    assert not res.ok and res.outcome.bind_list == []
