"""The gang-aware eviction design's scenario files (tests/data/scenarios/gang-aware): each passes its ``expected`` with the
gang-aware flag as written, through the real cache, session, actions and plugins; the same files
with the flag off (legacy) or without the topology plugin give the different outcomes their notes
describe; and ``ha-testbed scenario run DIR --check`` accepts the directory."""
from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

from ha.errors import BadInput
from ha.scenario.loader import load_scenario
from ha.scenario.runner import run_scenario

DIR = Path(__file__).resolve().parents[1] / "data" / "scenarios" / "gang-aware"
FILES = sorted(DIR.glob("*.json"))


def _run(path: Path, mutate=None):
    d = json.loads(path.read_text())
    if mutate is not None:
        d = copy.deepcopy(d)
        mutate(d)
    return run_scenario(load_scenario(path, d), "v1.14")


def _flag_off(d: dict) -> None:
    d["action_arguments"] = {}


def _no_topology(d: dict) -> None:
    for tier in d["plugins"]["tiers"]:
        tier[:] = [p for p in tier if p["name"] != "network-topology-aware"]


def _racks(path: Path) -> dict[str, str]:
    d = json.loads(path.read_text())
    return {n["name"]: n["labels"].get("topology/rack", "") for n in d["nodes"]}


def test_the_gang_aware_set_exists():
    names = {f.stem for f in FILES}
    assert len(FILES) == 7
    assert any(n.startswith("preempt__") for n in names) and any(n.startswith("reclaim__") for n in names)
    for f in FILES:
        d = json.loads(f.read_text())
        assert d["kind"] == "action" and d["expected"] is not None


@pytest.mark.parametrize("path", FILES, ids=[f.stem for f in FILES])
def test_gang_aware_scenario_matches_expected(path: Path):
    res = _run(path)
    assert res.mismatches == [], "; ".join(res.mismatches)
    assert res.ok is True


def test_flag_off_runs_the_legacy_path():
    # ROI case: legacy preempt evicts nothing (gang protects every minMember)
    res = _run(DIR / "preempt__whole-local-gang-beats-distributed-gang.json", _flag_off)
    assert res.outcome.evicted == [] and res.outcome.pipelined == {}
    # reclaim: legacy breaks two gangs (one task of a and one of b) instead of one whole gang
    res = _run(DIR / "reclaim__whole-gang-from-overused-queue.json", _flag_off)
    assert sorted(res.outcome.evicted) == ["c1/a-0", "c1/b-0"]
    assert res.ok is False
    # safe surplus: legacy takes a surplus task too, but in node order (elastic-1), not the bundle order
    res = _run(DIR / "preempt__safe-surplus-before-whole.json", _flag_off)
    assert res.outcome.evicted == ["c1/elastic-1"]


def test_the_flag_is_also_read_with_the_action_prefix_and_from_plugin_arguments():
    def prefixed(d: dict) -> None:
        d["action_arguments"] = {"reclaim": {"reclaim.gangAwareEnable": "true"}}

    def in_plugin_args(d: dict) -> None:
        d["action_arguments"] = {}
        d["plugins"]["tiers"][0][0]["arguments"] = {"reclaim.gangAwareEnable": True}

    for m in (prefixed, in_plugin_args):
        res = _run(DIR / "reclaim__whole-gang-from-overused-queue.json", m)
        assert sorted(res.outcome.evicted) == ["c1/a-0", "c1/a-1"], m.__name__


def test_without_topology_the_gang_is_split_across_racks():
    for name in ("preempt__hard-rack-first-fit.json", "preempt__legacy-sticky-domain-fails-fast.json"):
        path = DIR / name
        racks = _racks(path)
        res = _run(path, _no_topology)
        placed = set(res.outcome.pipelined.values())
        assert len(res.outcome.evicted) == 1, name
        assert len({racks[n] for n in placed}) == 2, (name, res.outcome.pipelined)
        # with the hard constraint every pipelined task of the gang shares one rack
        res = _run(path)
        assert len({racks[n] for n in res.outcome.pipelined.values()}) <= 1, name
    path = DIR / "allocate__hard-rack-keeps-gang-together.json"
    racks = _racks(path)
    split = _run(path, _no_topology).outcome.binds
    assert len({racks[n] for n in split.values()}) == 2
    kept = _run(path).outcome.binds
    assert len(kept) == 2 and {racks[n] for n in kept.values()} == {"r2"}


def test_network_topology_is_validated_by_the_loader():
    d = json.loads((DIR / "preempt__hard-rack-first-fit.json").read_text())
    d["podgroups"][3]["networkTopology"] = {"mode": "strict", "highestTierAllowed": 1}
    with pytest.raises(BadInput, match=r"podgroups\[3\]\.networkTopology\.mode"):
        load_scenario("x.json", d)
    # tier 0 is a valid tier (docs/design.md, scenario files item 1); negative tiers are not
    d["podgroups"][3]["networkTopology"] = {"mode": "hard", "highestTierAllowed": -1}
    with pytest.raises(BadInput, match="highestTierAllowed: must be >= 0"):
        load_scenario("x.json", d)
    d["podgroups"][3]["networkTopology"] = {"mode": "hard", "tier": 1}
    with pytest.raises(BadInput, match=r"networkTopology\.tier"):
        load_scenario("x.json", d)


def test_cli_checks_the_directory():
    script = Path(sys.executable).parent / "ha-testbed"
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "ha.cli"]
    p = subprocess.run(cmd + ["scenario", "run", str(DIR), "--check", "--json"], capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    out = json.loads(p.stdout)
    assert len(out) == 7 and all(r["ok"] for r in out)


def test_gang_path_nominates_every_task_and_the_dry_run_leaves_no_trace():
    """Gang-aware reclaim nominates (unlike legacy reclaim): after session close the API holds
    ``status.nominatedNodeName`` for both gang tasks; the dry-run allocate did not leave a
    ``spec.nodeName`` on the shared pods."""
    from ha.scheduler.actions import get_action
    from ha.scheduler.framework import close_session, open_session
    from ha.scenario.runner import ScenarioCluster, make_conf
    from ha.scheduler.profiles import profile
    scn = load_scenario(DIR / "reclaim__whole-gang-from-overused-queue.json")
    cluster = ScenarioCluster(scn.objects, profile("v1.14"))
    conf = make_conf(scn.actions, scn.tiers, scn.action_arguments)
    ssn = open_session(cluster.cache, conf, seed=1)
    get_action("reclaim").execute(ssn)
    r = ssn.jobs["c1/r"]
    placed = {t.name: t.node_name for t in r.tasks.values()}
    assert sorted(placed.values()) == ["n1", "n2"]
    assert all(t.eviction_occurred for t in r.tasks.values())
    assert all(not (t.pod.get("spec") or {}).get("nodeName") for t in r.tasks.values())
    close_session(ssn)
    for name, node_name in placed.items():
        assert cluster.io.nominated_node_name(f"c1/{name}") == node_name
