"""Experiment files accept HyperNodes and PodGroup network topologies in ``initial:`` (the same
shapes as scenario files, validated by the same loader code)."""
from __future__ import annotations

import pytest

from ha.errors import BadInput
from ha.experiment.config import parse_experiment
from ha.experiment.objects import starting_objects
from ha.scenario.loader import build_objects, new_context

EXP = {
    "name": "hn", "cluster": {"nodes": 0},
    "initial": {
        "nodes": [{"name": "r0-n1", "allocatable": {"cpu": 4000, "pods": 10}},
                  {"name": "r0-n2", "allocatable": {"cpu": 4000, "pods": 10}}],
        "hypernodes": [{"name": "r0", "tier": 1, "tierName": "rack",
                        "members": [{"type": "Node", "selector": {"regexMatch": {"pattern": "^r0-"}}}]}],
        "podgroups": [{"name": "g", "minMember": 2,
                       "networkTopology": {"mode": "hard", "highestTierAllowed": 1}}],
        "pods": [{"name": "g-0", "podgroup": "g", "request": {"cpu": 1000}}],
    },
}


def test_initial_hypernodes_and_network_topology_are_accepted():
    exp = parse_experiment(EXP, "exp.yaml")
    spec = exp.initial.model_dump(mode="python", exclude_none=True)
    built = build_objects(new_context("exp.yaml"), spec, "initial", strict=False)
    assert [h["metadata"]["name"] for h in built.hyper_nodes] == ["r0"]
    assert built.hyper_nodes[0]["spec"]["members"][0]["selector"] == {"regexMatch": {"pattern": "^r0-"}}
    pgs = {g["metadata"]["name"]: g for g in starting_objects(exp, "exp.yaml").podgroups}
    assert pgs["g"]["spec"]["networkTopology"] == {"mode": "hard", "highestTierAllowed": 1}


def test_bad_initial_hypernodes_name_the_field():
    bad = {**EXP, "initial": {**EXP["initial"], "hypernodes": [{"name": "r0", "tier": -1}]}}
    with pytest.raises(BadInput, match="initial.hypernodes"):
        parse_experiment(bad, "exp.yaml")
    bad = {**EXP, "initial": {**EXP["initial"], "hypernodes": [
        {"name": "r0", "tier": 1, "members": [{"type": "Node", "selector": {"regexMatch": {"pattern": "(("}}}]}]}}
    # the object builders are the section's schema: a bad member is refused when the file is read
    with pytest.raises(BadInput, match=r"exp.yaml: initial\.hypernodes\[0\]\.members\[0\]\.selector\.regexMatch\.pattern"):
        parse_experiment(bad, "exp.yaml")
