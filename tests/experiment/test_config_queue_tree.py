"""Experiment files accept the scenario format's new objects: queues in a tree (``parent``, at
the top level and in ``initial``), node taints, pod tolerations and affinity in ``initial`` —
validated with the scenario loader's own builders — and reject bad ones naming the field."""
from __future__ import annotations

import pytest

from ha.errors import BadInput
from ha.experiment.config import parse_experiment
from ha.experiment.objects import starting_objects

BASE = {"name": "tree", "duration": "10s", "cluster": {"nodes": 2}}


def exp(**extra):
    return parse_experiment({**BASE, **extra}, "tree.yaml")


def test_queue_tree_and_new_initial_fields_reach_the_objects():
    e = exp(queues=[{"name": "root"}, {"name": "q1", "parent": "root", "capability": {"cpu": 4}},
                    {"name": "q11", "parent": "q1"}],
            initial={"queues": [{"name": "q12", "parent": "q1"}],
                     "nodes": [{"name": "tainted", "allocatable": {"cpu": 4000, "pods": 10},
                                "taints": [{"key": "gpu", "value": "yes", "effect": "NoSchedule"}]}],
                     "podgroups": [{"name": "pg", "queue": "q11"}],
                     "pods": [{"name": "p", "podgroup": "pg", "request": {"cpu": 1000},
                               "tolerations": [{"key": "gpu", "operator": "Exists"}],
                               "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                                   {"labelSelector": {"matchLabels": {"app": "x"}},
                                    "topologyKey": "kubernetes.io/hostname"}]}}}]})
    assert e.leaf_queue_names() == ["q11", "q12"]
    objs = starting_objects(e, "tree.yaml")
    parents = {q["metadata"]["name"]: q["spec"].get("parent") for q in objs.queues}
    assert parents == {"default": "", "root": "", "q1": "root", "q11": "q1", "q12": "q1"}
    node = next(n for n in objs.nodes if n["metadata"]["name"] == "tainted")
    assert node["spec"]["taints"] == [{"key": "gpu", "value": "yes", "effect": "NoSchedule"}]
    spec = objs.pods[0]["spec"]
    assert spec["tolerations"] == [{"key": "gpu", "operator": "Exists", "value": "", "effect": ""}]
    assert spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0][
        "topologyKey"] == "kubernetes.io/hostname"


@pytest.mark.parametrize("extra,words", [
    ({"queues": [{"name": "q1", "parent": "nope"}]}, "queues[0].parent"),
    ({"queues": [{"name": "a", "parent": "b"}, {"name": "b", "parent": "a"}]}, "cycle"),
    ({"initial": {"nodes": [{"name": "x", "allocatable": {"cpu": 1},
                             "taints": [{"key": "k", "effect": "Never"}]}]}}, "unknown value 'Never'"),
    ({"initial": {"podgroups": [{"name": "pg"}], "pods": [
        {"name": "p", "podgroup": "pg", "tolerations": [{"key": "k", "operatr": "Exists"}]}]}}, "operatr"),
    ({"initial": {"podgroups": [{"name": "pg"}], "pods": [
        {"name": "p", "podgroup": "pg", "affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {}}]}}}]}}, "topologyKey"),
])
def test_bad_tree_or_shapes_are_named(extra, words):
    with pytest.raises(BadInput) as ei:
        exp(**extra)
    assert words in str(ei.value) and "tree.yaml" in str(ei.value)
