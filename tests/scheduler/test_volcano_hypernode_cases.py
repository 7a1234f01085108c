"""Volcano v1.14.0's network-topology allocate cases (tests/data/scenarios/volcano-hypernode): every
case under every profile, under several tie-break seeds (the Go cases hold for any random tie-break),
through the CLI, and a check that the cases can fail (without the network-topology-aware plugin's
hypernode functions the hard cases break). Also the loader's errors for the new fields."""
from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

from ha.errors import BadInput
from ha.scenario.loader import load_scenario
from ha.scenario.runner import ScenarioCluster, compare, make_conf, resolve_profile, run_scenario

DIR = Path(__file__).resolve().parents[1] / "data" / "scenarios" / "volcano-hypernode"
FILES = sorted(DIR.glob("*.json"))
PROFILES = ("v1.14", "pr5045", "pr5045-fixed", "annotations", "nomination-only")


def test_the_folder_holds_the_converted_cases():
    assert len(FILES) == 29
    assert sum(1 for f in FILES if f.name.startswith("Test")) == 26


@pytest.mark.parametrize("profile", PROFILES)
def test_every_case_passes_under_the_profile(profile):
    bad = {}
    for f in FILES:
        res = run_scenario(load_scenario(f), profile)
        if not res.ok:
            bad[f.name] = res.mismatches
    assert bad == {}


def _run(scn, seed, tiers=None):
    conf = make_conf(scn.actions, tiers if tiers is not None else scn.tiers, scn.action_arguments,
                     source=scn.path, registered_builders=scn.registered_builders)
    cluster = ScenarioCluster(scn.objects, resolve_profile("v1.14"), source=scn.path)
    return compare(scn.expected, cluster.run_session(conf, seed=seed))


def test_cases_do_not_depend_on_tie_breaks():
    bad = {}
    for f in FILES:
        scn = load_scenario(f)
        for seed in (1, 2, 3, 7, 11):
            mm = _run(scn, seed)
            if mm:
                bad[(f.name, seed)] = mm
    assert bad == {}


def _without_hypernode_fns(scn):
    return [[p for p in tier if p.name != "network-topology-aware"] for tier in copy.deepcopy(scn.tiers)]


def test_the_cases_detect_a_scheduler_that_ignores_hypernodes():
    """Without the network-topology-aware plugin (no gradients, no hypernode order) a hard job is
    tried on the cluster-top hypernode alone: the cases that forbid crossing a tier must fail."""
    failing = []
    for f in FILES:
        scn = load_scenario(f)
        if _run(scn, 0, _without_hypernode_fns(scn)):
            failing.append(f.name)
    assert "TestAllocateWithNetWorkTopologies__06-hard-network-topology-constrain-can-not-allocate-job-when-cross-highesttierallow.json" in failing
    assert len(failing) >= 4, failing


def test_cli_checks_the_folder():
    script = Path(sys.executable).parent / "ha-testbed"
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "ha.cli"]
    p = subprocess.run(cmd + ["scenario", "run", str(DIR), "--check", "--json", "--profile", "pr5045"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    out = json.loads(p.stdout)
    assert len(out) == 29 and all(r["ok"] for r in out)


def test_by_hypernode_check_detects_a_wrong_split():
    f = DIR / "allocate-network-topology__hard-hypernode-binpack-lca.json"
    d = json.loads(f.read_text())
    d["expected"]["bind_counts_by_hypernode"] = [1, 3]
    res = run_scenario(load_scenario("x.json", d), "v1.14")
    assert not res.ok and any("bind_counts_by_hypernode" in m for m in res.mismatches)


def _base():
    return json.loads((DIR / "allocate-network-topology__hard-hypernode-binpack-lca.json").read_text())


@pytest.mark.parametrize("mutate, where", [
    (lambda d: d["hypernodes"][0].update(tier=-1), "hypernodes[0].tier"),
    (lambda d: d["hypernodes"][0].pop("tier"), "hypernodes[0].tier"),
    (lambda d: d["hypernodes"][0].update(colour="red"), "hypernodes[0].colour"),
    (lambda d: d["hypernodes"][0]["members"][0].update(type="Rack"), "hypernodes[0].members[0].type"),
    (lambda d: d["hypernodes"][0]["members"][0]["selector"].update(regexMatch={"pattern": "(("}),
     "hypernodes[0].members[0].selector"),
    (lambda d: d["hypernodes"][1].update(name="s0"), "hypernodes[1].name"),
    (lambda d: d["hypernodes"][0].update(parent="nowhere"), "hypernodes[0].parent"),
    (lambda d: d["hypernode_cache"]["setByTier"].update({"x": []}), "hypernode_cache.setByTier.x"),
    (lambda d: d["podgroups"][0]["networkTopology"].update(mode="strict"), "podgroups[0].networkTopology.mode"),
    (lambda d: d["podgroups"][0]["networkTopology"].update(highestTierName=3),
     "podgroups[0].networkTopology.highestTierName"),
    (lambda d: d["expected"].update(bind_check="some"), "expected.bind_check"),
    (lambda d: d["expected"].pop("bind_counts_by_hypernode"), "expected.bind_counts_by_hypernode"),
])
def test_loader_errors_name_the_field(mutate, where):
    d = _base()
    mutate(d)
    with pytest.raises(BadInput) as ei:
        load_scenario("case.json", d)
    assert f"case.json: {where}" in str(ei.value), str(ei.value)


def test_loader_keeps_nil_tier_and_empty_mode():
    d = _base()
    d["podgroups"][0]["networkTopology"] = {"mode": "", "highestTierName": "volcano.sh/x"}
    scn = load_scenario("case.json", d)
    nt = scn.objects.podgroups[0]["spec"]["networkTopology"]
    assert nt == {"mode": "", "highestTierName": "volcano.sh/x"}
    assert scn.objects.podgroups[0]["metadata"]["annotations"] == {"volcano.sh/job-allocated-hypernode": ""}
    assert scn.objects.hyper_node_parents == {"s0": "s3", "s1": "s3", "s2": "s3"}
    assert scn.objects.hyper_node_cache.set_by_tier == {1: ["s0", "s1", "s2"], 2: ["s3"]}
