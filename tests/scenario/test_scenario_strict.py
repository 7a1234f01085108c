"""The scenario loader knows every field of the format (docs/design.md, scenario files) and rejects any other
at every level: top, node, queue, podgroup, pod, priority class, expected, plugins, plugin
options and plugin arguments — naming the file, the field and the problem (BadInput, exit 2).
The new fields (node taints, pod tolerations and affinity, queue parent, expected bind_check /
podgroup_phases / task_status_counts) are read into the Kubernetes-shaped objects."""
from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

from ha.errors import BadInput
from ha.scenario.loader import load_scenario

DATA = Path(__file__).resolve().parents[1] / "data" / "scenarios"
BASE = DATA / "allocate__one-job-two-pods-one-node.json"
EXTENDED = ("volcano-capacity-hierarchy", "volcano-affinity", "volcano-enqueue")


def base() -> dict:
    return json.loads(BASE.read_text())


def load(doc: dict, path: str = "scn.json"):
    return load_scenario(path, copy.deepcopy(doc))


def rejects(doc: dict, field: str, words: str = "unknown field") -> str:
    with pytest.raises(BadInput) as ei:
        load(doc)
    msg = str(ei.value)
    assert msg.startswith("scn.json: "), msg
    assert field in msg and words in msg, msg
    return msg


# ---------------------------------------------------------------------------- unknown fields

def test_every_scenario_file_in_tests_data_still_loads():
    files = sorted(DATA.rglob("*.json"))
    assert len(files) > 60
    for f in files:
        load_scenario(f)  # raises on any unknown or malformed field


def test_every_field_a_builder_reads_is_known():
    """A pod, node, queue, podgroup and priority class using every field they may hold load."""
    d = base()
    d["priority_classes"] = [{"name": "hi", "value": 10, "globalDefault": False,
                              "preemptionPolicy": "Never"}]
    d["queues"] = [{"name": "root", "weight": 1, "capability": {"cpu": 1000}, "deserved": {"cpu": 500},
                    "guarantee": {"resource": {"cpu": 100}}, "priority": 1, "state": "Open",
                    "reclaimable": True, "parent": ""}, {"name": "c1", "parent": "root"}]
    d["nodes"][0].update({"capacity": d["nodes"][0]["allocatable"], "unschedulable": False,
                          "taints": [{"key": "k", "value": "v", "effect": "PreferNoSchedule"}]})
    d["podgroups"][0].update({"minTaskMember": {}, "priorityClassName": "hi", "minResources": {"cpu": 100},
                              "phase": "Inqueue"})
    d["pods"][0].update({"key": f"{d['pods'][0]['namespace']}/{d['pods'][0]['name']}", "priority": 5,
                         "priorityClassName": "hi", "nominatedNodeName": "", "deletionTimestamp": False,
                         "labels": {"a": "b"}, "nodeSelector": {}, "preemptionPolicy": "Never",
                         "annotations": {}, "preemptable": True, "taskRole": "", "bestEffort": False,
                         "tolerations": [], "affinity": {}})
    scn = load(d)
    assert scn.objects.pods[0]["spec"]["priorityClassName"] == "hi"
    assert scn.objects.priority_classes[0]["preemptionPolicy"] == "Never"


def test_unknown_top_level_field():
    d = base()
    d["expectd"] = {}
    rejects(d, "expectd")


def test_unknown_node_field():
    d = base()
    d["nodes"][0]["taint"] = [{"key": "a", "effect": "NoSchedule"}]  # misspelt "taints"
    msg = rejects(d, "nodes[0].taint")
    assert "taints" in msg  # the message lists the known fields


def test_unknown_pod_field():
    d = base()
    d["pods"][1]["tolerations_"] = []
    rejects(d, "pods[1].tolerations_")


def test_unknown_podgroup_field():
    d = base()
    d["podgroups"][0]["minMembers"] = 2
    rejects(d, "podgroups[0].minMembers")


def test_unknown_queue_field():
    d = base()
    d["queues"][0]["parnet"] = "root"
    rejects(d, "queues[0].parnet")


def test_unknown_priority_class_field():
    d = base()
    d["priority_classes"] = [{"name": "hi", "value": 10, "description": "x"}]
    rejects(d, "priority_classes[0].description")


def test_unknown_expected_field():
    d = base()
    d["expected"]["bind"] = {}
    rejects(d, "expected.bind")


def test_unknown_plugins_field():
    d = base()
    d["plugins"]["tier"] = []
    rejects(d, "plugins.tier")


def test_unknown_plugin_option():
    d = base()
    d["plugins"]["tiers"][0][0]["enabledJobOrdr"] = True
    rejects(d, "enabledJobOrdr", "unknown plugin option")


def test_unknown_plugin_argument():
    d = base()
    d["plugins"]["tiers"].append([{"name": "nodeorder", "enabledNodeOrder": True,
                                   "arguments": {"leastrequested.weigth": 1}}])
    msg = rejects(d, "arguments.leastrequested.weigth", "unknown argument")
    assert "leastrequested.weight" in msg
    # a plugin that reads no argument rejects any
    d = base()
    d["plugins"]["tiers"][0][0]["arguments"] = {"x": 1}
    rejects(d, "arguments.x", "unknown argument")


def test_known_plugin_arguments_and_prefixes_load():
    d = base()
    # a plugin appears once in the tiers (the scheduler configuration's schema)
    d["plugins"]["tiers"] = [[p for p in t if p["name"] not in ("nodeorder", "predicates")]
                             for t in d["plugins"]["tiers"]]
    d["plugins"]["tiers"].append([
        {"name": "nodeorder", "arguments": {"podaffinity.weight": 3, "tainttoleration.weight": 0}},
        {"name": "binpack", "arguments": {"binpack.resources": "nvidia.com/gpu",
                                          "binpack.resources.nvidia.com/gpu": 2}},
        {"name": "predicates", "arguments": {"predicate.PodAffinityEnable": False}},
        {"name": "sla", "arguments": {"sla-waiting-time": "3m"}}])
    scn = load(d)
    assert scn.tiers[-1][3].arguments == {"sla-waiting-time": "3m"}


def test_unknown_field_inside_affinity_and_tolerations():
    d = base()
    d["pods"][0]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"a": "b"}}, "topologyKey": "zone", "namespaceSelector": {}}]}}
    rejects(d, "pods[0].affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].namespaceSelector")
    d = base()
    d["pods"][0]["tolerations"] = [{"key": "a", "operator": "Exists", "efect": "NoSchedule"}]
    rejects(d, "pods[0].tolerations[0].efect")


def test_cli_exits_2_on_an_unknown_field(tmp_path: Path):
    d = base()
    d["nodes"][0]["labelz"] = {}
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(d))
    script = Path(sys.executable).parent / "ha-testbed"
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "ha.cli"]
    r = subprocess.run(cmd + ["scenario", "run", str(p)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert f"{p}: nodes[0].labelz: unknown field" in r.stderr + r.stdout


# ---------------------------------------------------------------------------- the new fields

def test_taints_tolerations_and_affinity_reach_the_objects():
    d = base()
    d["nodes"][0]["taints"] = [{"key": "k", "value": "v", "effect": "NoSchedule"}]
    aff = {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]},
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 5, "preference": {"matchExpressions": [{"key": "disk", "operator": "Exists"}]}}]},
        "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 10, "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": "x"}},
                                               "topologyKey": "zone", "namespaces": ["ns2"]}}]}}
    d["pods"][0]["affinity"] = aff
    d["pods"][0]["tolerations"] = [{"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule",
                                    "tolerationSeconds": 30}]
    scn = load(d)
    assert scn.objects.nodes[0]["spec"]["taints"] == [{"key": "k", "value": "v", "effect": "NoSchedule"}]
    spec = scn.objects.pods[0]["spec"]
    assert spec["tolerations"] == [{"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule",
                                    "tolerationSeconds": 30}]
    na = spec["affinity"]["nodeAffinity"]
    assert na["preferredDuringSchedulingIgnoredDuringExecution"][0]["preference"]["matchExpressions"] == [
        {"key": "disk", "operator": "Exists", "values": []}]
    term = spec["affinity"]["podAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"]
    assert term == {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "zone", "namespaces": ["ns2"]}
    # no field given: no key in the object (nil in Go)
    assert "affinity" not in scn.objects.pods[1]["spec"] and "tolerations" not in scn.objects.pods[1]["spec"]


@pytest.mark.parametrize("path,value,field,words", [
    (("nodes", 0, "taints"), [{"key": "k", "effect": "Sometimes"}], "nodes[0].taints[0].effect", "unknown value"),
    (("nodes", 0, "taints"), [{"effect": "NoSchedule"}], "nodes[0].taints[0].key", "missing required field"),
    (("pods", 0, "tolerations"), [{"operator": "Equal", "value": "v"}], "pods[0].tolerations[0].operator",
     "an empty key needs operator Exists"),
    (("pods", 0, "tolerations"), [{"key": "k", "operator": "Exists", "value": "v"}], "pods[0].tolerations[0].value",
     "must be empty"),
    (("pods", 0, "affinity"), {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {}}]}}, "requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey", "missing required"),
    (("pods", 0, "affinity"), {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 0, "preference": {}}]}}, "[0].weight", "must be in 1..100"),
    (("pods", 0, "affinity"), {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]},
         "topologyKey": "z"}]}}, "matchExpressions[0].operator", "unknown value 'Gt'"),
    (("pods", 0, "affinity"), {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "In"}]}]}}},
     "matchExpressions[0].values", "needs at least one value"),
    (("queues", 0, "parent"), 3, "queues[0].parent", "expected a string"),
])
def test_bad_new_fields_are_named(path, value, field, words):
    d = base()
    obj = d
    for k in path[:-1]:
        obj = obj[k]
    obj[path[-1]] = value
    rejects(d, field, words)


def test_queue_parent_must_exist_and_not_loop():
    d = base()
    d["queues"] = [{"name": "root"}, {"name": "a", "parent": "b"}, {"name": "b", "parent": "a"},
                   {"name": "c1", "parent": "root"}]
    rejects(d, "queues[1].parent", "cycle")
    d["queues"] = [{"name": "root"}, {"name": "c1", "parent": "nope"}]
    rejects(d, "queues[1].parent", "unknown queue 'nope'")
    d["queues"] = [{"name": "root", "parent": ""}, {"name": "c1", "parent": "root",
                                                      "deserved": {"cpu": 0, "memory": 1024}}]
    scn = load(d)
    q = scn.objects.queues[1]["spec"]
    assert q["parent"] == "root" and q["deserved"] == {"cpu": "0m", "memory": "1024"}  # explicit zero kept


def test_expected_bind_check_and_phases():
    d = base()
    d["expected"] = {"bind_check": "count_only", "binds": {}, "bind_count": 2,
                     "podgroup_phases": {"c1/pg1": "Running"},
                     "task_status_counts": {"c1/pg1": {"Allocated": 2}}}
    e = load(d).expected
    assert (e.bind_check, e.bind_count, e.binds) == ("count_only", 2, {})
    assert e.podgroup_phases == {"c1/pg1": "Running"} and e.task_status_counts == {"c1/pg1": {"Allocated": 2}}
    d["expected"]["binds"] = {"c1/p1": "n1"}
    rejects(d, "expected.binds", "must be {}")
    d["expected"] = {"podgroup_phases": {"c1/pg1": "Queued"}}
    rejects(d, "expected.podgroup_phases.c1/pg1", "unknown value")
    d["expected"] = {"bind_check": "by_hypernode", "bind_count": 1}
    rejects(d, "expected.bind_counts_by_hypernode", "missing required field")


def test_count_only_and_phase_checks_can_fail():
    """The runner's checks of the new expectations report mismatches (and pass when right)."""
    from ha.scenario.runner import run_scenario
    d = base()
    good = run_scenario(load(d))
    assert good.ok, good.mismatches
    job = next(iter(sorted(good.outcome.podgroup_phases)))
    d["expected"] = {"bind_check": "count_only", "binds": {}, "bind_count": len(good.outcome.bind_list),
                     "podgroup_phases": {job: good.outcome.podgroup_phases[job]}}
    assert run_scenario(load(d)).ok
    d["expected"]["bind_count"] += 1
    d["expected"]["podgroup_phases"] = {job: "Pending" if good.outcome.podgroup_phases[job] != "Pending" else "Running"}
    d["expected"]["task_status_counts"] = {job: {"Pipelined": 5}}
    mm = "\n".join(run_scenario(load(d)).mismatches)
    assert "bind_count: expected" in mm and "podgroup_phases:" in mm and "task_status_counts:" in mm


def test_shared_worked_examples_are_in_tests_data():
    """The copied worked examples load (the network-topology ones belong to another part)."""
    names = {f.name for d in EXTENDED for f in (DATA / d).glob("*.json")}
    for n in ("capacity-hierarchy__case0-leaf-queue-allocatable.json", "enqueue__pending-enqueued.json",
              "nodeorder__node-affinity-preferred.json", "nodeorder__taint-prefer-no-schedule.json"):
        assert n in names


def test_a_plugin_listed_twice_is_refused():
    d = base()
    name = d["plugins"]["tiers"][0][0]["name"]
    d["plugins"]["tiers"].append([{"name": name}])
    rejects(d, f"plugins.tiers[{len(d['plugins']['tiers']) - 1}][0].name", "appears twice")
