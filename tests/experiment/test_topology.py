"""Racks and spines as HyperNodes in experiment files, hard-topology gangs from the workload, and
the topology_violations checker over literal histories (a split gang is caught; a gang inside one
rack is not)."""
from __future__ import annotations

from ha.experiment.checkers import Absent, all_checkers
from ha.experiment.config import load_experiment
from ha.experiment.objects import starting_objects
from ha.runtime.workload import WorkloadConfig, WorkloadGenerator
from ha.scheduler.api.hypernode_info import hyper_node_object

from .histories import Api, History, HistoryWriter, header, inst, pod, queue


def test_cluster_topology_makes_racks_spines_and_labels(tmp_path):
    f = tmp_path / "e.yaml"
    f.write_text("name: t\ncluster: {nodes: 5, topology: {rack_size: 2, racks_per_spine: 2}}\n"
                 "workload: {rate: 1/s, gang_size: 2, network_topology: {mode: hard, highestTierAllowed: 1}}\n")
    exp = load_experiment(f)
    objs = starting_objects(exp)
    racks = {h["metadata"]["name"]: h for h in objs.hyper_nodes if h["spec"]["tier"] == 1}
    spines = {h["metadata"]["name"]: h for h in objs.hyper_nodes if h["spec"]["tier"] == 2}
    assert sorted(racks) == ["rack-0", "rack-1", "rack-2"] and sorted(spines) == ["spine-0", "spine-1"]
    assert [m["selector"]["exactMatch"]["name"] for m in spines["spine-0"]["spec"]["members"]] == ["rack-0", "rack-1"]
    labels = {n["metadata"]["name"]: n["metadata"]["labels"]["topology/rack"] for n in objs.nodes}
    assert labels == {"node-1": "rack-0", "node-2": "rack-0", "node-3": "rack-1", "node-4": "rack-1",
                      "node-5": "rack-2"}
    assert objs.in_order().index(objs.hyper_nodes[0]) > objs.in_order().index(objs.nodes[-1])
    wl = WorkloadConfig.from_experiment(exp.workload, duration_s=10, queues=["default"])
    gen = WorkloadGenerator(wl, seed=1)
    pg, _ = gen.objects(gen.plan()[0])
    assert pg["spec"]["networkTopology"] == {"mode": "hard", "highestTierAllowed": 1}


def _node(name, rack):
    return {"kind": "Node", "metadata": {"name": name, "labels": {"topology/rack": rack}},
            "status": {"allocatable": {"cpu": "4000m", "memory": "8589934592", "pods": "10"}}}


def _gang_run(tmp_path, nodes_of_pods, *, mode="hard"):
    api = Api()
    api.create(queue(), _node("n1", "r0"), _node("n2", "r0"), _node("n3", "r1"))
    for r in ("r0", "r1"):
        api.create(hyper_node_object(r, 1, [{"type": "Node", "selector": {
            "labelMatch": {"matchLabels": {"topology/rack": r}}}}]))
    api.create({"kind": "PodGroup", "metadata": {"name": "g", "namespace": "default", "uid": "pg-g"},
                "spec": {"minMember": 2, "queue": "default",
                         "networkTopology": {"mode": mode, "highestTierAllowed": 1}},
                "status": {"phase": "Running"}})
    for i, _ in enumerate(nodes_of_pods):
        api.create(pod(f"g-{i}", group="g"))
    with HistoryWriter(tmp_path, header(instances=("scheduler-1",))) as w:
        w.tick(0.0, api.rv, api.rv, {"scheduler-1": inst({})})
        for i, n in enumerate(nodes_of_pods):
            api.bind(f"default/g-{i}", n)
        w.events(api.drain())
        w.tick(1.0, api.rv, api.rv, {"scheduler-1": inst({})})
        w.tick(2.0, api.rv, api.rv, {"scheduler-1": inst({})})
    return next(c for c in all_checkers() if c.name == "topology_violations").check(History(tmp_path))


def test_a_hard_gang_split_over_two_racks_is_a_violation(tmp_path):
    got = _gang_run(tmp_path, ["n1", "n3"])
    assert got["count"] == 1 and got["gang_ticks"] == 2 and got["gangs"] == 1
    assert got["examples"][0]["nodes"] == ["n1", "n3"]


def test_a_hard_gang_inside_one_rack_is_not(tmp_path):
    got = _gang_run(tmp_path, ["n1", "n2"])
    assert got["count"] == 0 and got["gangs"] == 1


def test_soft_gangs_are_not_judged(tmp_path):
    assert isinstance(_gang_run(tmp_path, ["n1", "n3"], mode="soft"), Absent)
