"""The experiment file (docs/design.md "Experiment files"): strict validation, units, defaults, and
error messages that name the file, the field path and the problem. Pure: no Redis, no Ray."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ha.errors import BadInput
from ha.experiment.config import (FAULTS, Experiment, load_experiment, parse_experiment)
from ha.experiment.objects import starting_objects
from apimachinery.units import format_duration, parse_duration, parse_rate

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))

DESIGN_SAMPLE = """\
name: failover-with-delayed-pod-watch
seed: 7
duration: 60s
profile: pr5045
cluster: {nodes: 200, node: {cpu: 32, memory: 128Gi, pods: 110}}
queues: [{name: q1, weight: 1}, {name: q2, weight: 1, deserved: {cpu: 2000}}]
workload: {arrivals: poisson, rate: 20/s, gang_size: [2, 16], runtime: [10s, 60s], queues: [q1, q2],
           priority_classes: {high: 1000, low: 10}}
schedulers: {instances: 3, mode: leader-elected, period: 1s,
             lease: {duration: 15s, renew_deadline: 10s, retry: 2s}, standby: warm}
chaos:
  - {at: 10s, for: 30s, fault: watch-delay, target: scheduler-1, kinds: [Pod],
     delay: {dist: exponential, mean: 500ms}}
  - {at: 20s, fault: kill, target: leader}
scheduler_conf:            # optional; the same shape as a scenario file's `actions` and `plugins.tiers`
  actions: [enqueue, allocate, preempt, reclaim, backfill]
  tiers:
    - [{name: priority}, {name: gang}, {name: conformance}]
    - [{name: drf}, {name: predicates}, {name: proportion}, {name: nodeorder}]
initial:                   # optional; exact starting objects, the same shape as a scenario file's
  podgroups: []            # nodes / queues / podgroups / pods (created before the schedulers start)
  pods: []
measure: {every: 250ms}
"""


def write(tmp_path: Path, text: str, name: str = "x.yaml") -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


def errors_of(tmp_path: Path, text: str, name: str = "x.yaml") -> str:
    p = write(tmp_path, text, name)
    with pytest.raises(BadInput) as ei:
        load_experiment(p)
    msg = str(ei.value)
    # every line names the file
    assert all(line.startswith(f"{p}: ") for line in msg.splitlines()), msg
    return msg


# -- the docs/design.md sample and the examples ------------------------------------------------------

def test_design_sample_parses_with_units(tmp_path):
    e = load_experiment(write(tmp_path, DESIGN_SAMPLE))
    assert e.name == "failover-with-delayed-pod-watch" and e.seed == 7
    assert e.duration == 60.0 and e.profile == "pr5045"
    assert e.cluster.nodes == 200 and e.cluster.node["memory"] == "128Gi"
    assert e.workload.rate == 20.0
    assert e.workload.gang_size == (2, 16) and e.workload.runtime == (10.0, 60.0)
    assert e.schedulers.lease.renew_deadline == 10.0 and e.schedulers.period == 1.0
    assert e.measure.every == 0.25
    kill = e.chaos[1]
    assert (kill.at, kill.fault, kill.target, kill.for_) == (20.0, "kill", "leader", None)
    wd = e.chaos[0]
    assert wd.for_ == 30.0 and wd.end == 40.0 and wd.delay.dist == "exponential" and wd.delay.mean == 0.5
    assert e.instance_names() == ["scheduler-1", "scheduler-2", "scheduler-3"]


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_examples_load(path):
    e = load_experiment(path)
    assert e.name == path.stem


def test_required_examples_exist():
    names = {p.name for p in EXAMPLES}
    assert {"quickstart.yaml", "failover-with-delayed-pod-watch.yaml"} <= names
    q = load_experiment(ROOT / "examples" / "quickstart.yaml")
    assert q.schedulers.instances == 3 and q.schedulers.mode == "leader-elected"
    assert q.duration <= 30 and q.workload.arrivals == "poisson"
    faults = [c.fault for c in q.chaos]
    assert "watch-delay" in faults and any(c.fault == "kill" and c.target == "leader" for c in q.chaos)


def test_resolved_round_trips(tmp_path):
    e = load_experiment(write(tmp_path, DESIGN_SAMPLE))
    again = parse_experiment(e.resolved(), "metrics.json")
    assert again == e
    r = e.resolved()
    assert r["duration"] == "1m" and r["measure"]["every"] == "250ms" and r["workload"]["rate"] == "20/s"
    assert r["chaos"][0]["for"] == "30s"


def test_defaults(tmp_path):
    e = load_experiment(write(tmp_path, "duration: 5s\n", "my-exp.yaml"))
    assert e.name == "my-exp"              # from the file name
    assert e.seed == 0 and e.profile == "v1.14" and e.workload is None and e.chaos == []
    assert e.schedulers.instances == 1 and e.schedulers.mode == "leader-elected"
    assert e.schedulers.standby == "cold"   # Volcano's: the cache starts once elected
    assert e.scheduler_conf is None


def test_shadow_standbys_default_to_warm_and_cannot_be_cold(tmp_path):
    e = load_experiment(write(tmp_path, "schedulers: {instances: 2, mode: shadow}\n", "s.yaml"))
    assert e.schedulers.standby == "warm"
    msg = errors_of(tmp_path, "schedulers: {instances: 2, mode: shadow, standby: cold}\n")
    assert "schedulers" in msg and "must be warm" in msg, msg


def test_scheduler_conf_default_is_volcano_default(tmp_path):
    from ha.scheduler.conf import default_conf
    e = load_experiment(write(tmp_path, "duration: 5s\n"))
    assert e.scheduler_conf_resolved().to_dict() == default_conf().to_dict()


def test_scheduler_conf_flags_default_on_like_production(tmp_path):
    e = load_experiment(write(tmp_path, DESIGN_SAMPLE))
    conf = e.scheduler_conf_resolved()
    assert conf.actions == ["enqueue", "allocate", "preempt", "reclaim", "backfill"]
    assert conf.plugin_names() == ["priority", "gang", "conformance", "drf", "predicates",
                                   "proportion", "nodeorder"]
    drf = conf.tiers[1].plugins[0]
    assert drf.is_enabled("enabled_job_order") and drf.is_enabled("enabled_preemptable")
    # an explicit false stays false
    text = DESIGN_SAMPLE.replace("[{name: drf}", "[{name: drf, enabledJobOrder: false}")
    conf2 = load_experiment(write(tmp_path, text, "y.yaml")).scheduler_conf_resolved()
    assert conf2.tiers[1].plugins[0].enabled_job_order is False


def test_overrides(tmp_path):
    e = load_experiment(write(tmp_path, DESIGN_SAMPLE))
    o = e.with_overrides(seed=3, profile="v1.14", duration="5s")
    assert (o.seed, o.profile, o.duration) == (3, "v1.14", 5.0)
    assert e.seed == 7                        # the original is untouched
    with pytest.raises(BadInput, match=r"--profile: unknown profile 'nope'"):
        e.with_overrides(profile="nope")
    with pytest.raises(BadInput, match=r"--duration: expected a duration"):
        e.with_overrides(duration="ten")


def test_switch_overrides(tmp_path):
    e = load_experiment(write(tmp_path, "duration: 5s\nprofile: pr5045\nswitches: {self_exclusion: true}\n"))
    assert e.switches_resolved().self_exclusion is True and e.switches_resolved().cache_pipeline is True
    assert "unknown switch" in errors_of(tmp_path, "switches: {warp_drive: true}\n")


# -- error messages -----------------------------------------------------------------------------

def test_instances_error_names_file_field_problem(tmp_path):
    msg = errors_of(tmp_path, "schedulers: {instances: 0}\n")
    assert msg == f"{tmp_path / 'x.yaml'}: schedulers.instances: must be ≥ 1 (got 0)"


def test_relative_path_in_message(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "examples").mkdir()
    (tmp_path / "examples" / "x.yaml").write_text("schedulers: {instances: 0}\n")
    with pytest.raises(BadInput) as ei:
        load_experiment("examples/x.yaml")
    assert str(ei.value).startswith("examples/x.yaml: schedulers.instances: must be ≥ 1")


@pytest.mark.parametrize("text, path, problem", [
    ("bogus: 1\n", "bogus", "unknown key (allowed: name, seed, duration"),
    ("cluster: {nodes: 2, nod: {cpu: 1}}\n", "cluster.nod", "unknown key (allowed: nodes, node, labels, topology)"),
    ("schedulers: {lease: {duration: 5s, renew: 1s}}\n", "schedulers.lease.renew", "unknown key"),
    ("duration: 10\n", "duration", "expected a duration like 500ms, 10s or 2m"),
    ("duration: 10h\n", "duration", "expected a duration"),
    ("duration: 0s\n", "duration", "must be > 0"),
    ("measure: {every: 0ms}\n", "measure.every", "must be > 0"),
    ("workload: {rate: 20}\n", "workload.rate", "expected a rate like 20/s"),
    ("workload: {rate: 0/s}\n", "workload.rate", "must be > 0/s"),
    ("workload: {gang_size: [4, 2]}\n", "workload.gang_size", "min 4 > max 2"),
    ("workload: {gang_size: 0}\n", "workload.gang_size", "must be ≥ 1"),
    ("workload: {runtime: [9s, 1s]}\n", "workload.runtime", "min 9s > max 1s"),
    ("workload: {arrivals: bursty}\n", "workload.arrivals", "must be one of 'poisson' or 'constant'"),
    ("cluster: {node: {cpu: 4, memory: 12x}}\n", "cluster.node", "resource 'memory': malformed quantity"),
    ("cluster: {node: {cpu: -1}}\n", "cluster.node", "negative quantity"),
    ("cluster: {node: {memory: 1Gi}}\n", "cluster.node", "a node needs at least cpu"),
    ("schedulers: {mode: hot}\n", "schedulers.mode", "must be one of 'leader-elected', 'active-active' or 'shadow'"),
    ("schedulers: {standby: tepid}\n", "schedulers.standby", "must be one of 'warm' or 'cold'"),
    ("schedulers: {instances: many}\n", "schedulers.instances", "expected an integer"),
    ("schedulers: {lease: {duration: 5s, renew_deadline: 10s}}\n", "schedulers.lease",
     "duration (5s) must be greater than renew_deadline (10s)"),
    ("schedulers: {lease: {renew_deadline: 2s, retry: 2s}}\n", "schedulers.lease",
     "renew_deadline (2s) must be greater than retry (2s)"),
    ("profile: v9\n", "profile", "unknown profile 'v9'"),
    ("name: 'a b'\n", "name", "use letters, digits"),
    ("queues: [{name: Q_1}]\n", "queues[0].name", "not a valid object name"),
    ("queues: [{name: q1}, {name: q1}]\n", "queues[1].name", "queue 'q1' is defined twice"),
    ("queues: [{name: q1, weight: 0}]\n", "queues[0].weight", "must be ≥ 1"),
    ("workload: {queues: [nope]}\n", "workload.queues[0]", "unknown queue 'nope'"),
    ("workload: {until: 0s}\n", "workload.until", "must be > 0"),
    ("duration: 10s\nworkload: {until: 20s}\n", "workload.until", "20s is after the end of the experiment (10s)"),
    ("measure: {converge_within: 0s}\n", "measure.converge_within", "must be > 0"),
])
def test_field_errors(tmp_path, text, path, problem):
    msg = errors_of(tmp_path, text)
    assert f": {path}: " in msg, msg
    assert problem in msg, msg


@pytest.mark.parametrize("entry, path, problem", [
    ("{at: 1s, fault: fly, target: leader}", "chaos[0].fault", "unknown fault 'fly'; known: watch-delay"),
    ("{at: 1s, fault: watch-delay, target: scheduler-1}", "chaos[0]", "fault watch-delay needs delay"),
    ("{at: 1s, fault: kill, target: all}", "chaos[0].target", "fault kill cannot target 'all'"),
    ("{at: 1s, fault: kill, target: node-1}", "chaos[0].target", "expected scheduler-<N>, leader or all"),
    ("{at: 1s, fault: pause, target: leader}", "chaos[0]", "fault pause needs for"),
    ("{at: 1s, fault: pause, target: leader, for: 2s, delay: {dist: fixed, value: 1s}}", "chaos[0]",
     "fault pause does not take delay (it takes for, target)"),
    ("{at: 1s, fault: watch-delay, target: scheduler-1, delay: {dist: pareto, mean: 1s}}",
     "chaos[0].delay", "dist pareto needs alpha, scale"),
    ("{at: 1s, fault: watch-delay, target: scheduler-1, delay: {dist: uniform, min: 2s, max: 1s}}",
     "chaos[0].delay", "min 2s > max 1s"),
    ("{at: 1s, fault: watch-delay, target: scheduler-1, delay: {dist: gauss, mean: 1s}}",
     "chaos[0].delay.dist", "must be one of"),
    ("{at: 1s, fault: watch-delay, target: scheduler-1, delay: {dist: fixed, value: 1s}, foo: 2}",
     "chaos[0].foo", "unknown key (allowed: at, fault, target, for"),
    ("{at: 1s, fault: watch-delay, target: scheduler-1, kinds: [Pods], delay: {dist: fixed, value: 1s}}",
     "chaos[0].kinds", "unknown kind 'Pods'"),
    ("{at: 1s, fault: api-conflict, probability: 2}", "chaos[0].probability", "must be ≤ 1"),
    ("{at: 1s, fault: api-latency, delay: {dist: fixed, value: 1s}, verbs: [smash]}", "chaos[0].verbs",
     "unknown verb 'smash'"),
    ("{at: 1s, fault: redis-restart, target: leader}", "chaos[0]", "fault redis-restart does not take target"),
    ("{fault: kill, target: leader}", "chaos[0].at", "required"),
    ("{at: 1s, fault: kill, target: scheduler-4}", "chaos[0].target", "'scheduler-4' does not exist"),
    ("{at: 10s, fault: kill, target: leader}", "chaos[0].at", "is not before the end of the experiment (10s)"),
])
def test_chaos_errors(tmp_path, entry, path, problem):
    msg = errors_of(tmp_path, f"duration: 10s\nschedulers: {{instances: 3}}\nchaos:\n  - {entry}\n")
    assert f": {path}: " in msg, msg
    assert problem in msg, msg


def test_leader_target_needs_a_leader(tmp_path):
    msg = errors_of(tmp_path, "schedulers: {instances: 2, mode: active-active}\n"
                              "chaos: [{at: 1s, fault: kill, target: leader}]\n")
    assert "chaos[0].target: 'leader' needs schedulers.mode leader-elected or shadow" in msg


def test_every_fault_has_a_valid_minimal_entry(tmp_path):
    minimal = {
        "watch-delay": "target: scheduler-1, delay: {dist: fixed, value: 100ms}",
        "watch-stall": "target: scheduler-1, for: 1s",
        "watch-reorder": "target: all, window: 100ms",
        "watch-expire": "target: scheduler-1, kinds: [Pod]",
        "partition": "target: leader, for: 1s",
        "kill": "target: scheduler-2, restart_after: 1s",
        "pause": "target: leader, for: 1s",
        "api-latency": "delay: {dist: uniform, min: 1ms, max: 5ms}, verbs: [bind]",
        "api-conflict": "probability: 0.1",
        "redis-restart": "for: 1s",
        "clock-rate": "target: scheduler-1, rate: 1.5",
        "crash-point": "target: leader, point: after-evictions",
        "node-kill": "target: leader",
    }
    assert set(minimal) == set(FAULTS)
    lines = "\n".join(f"  - {{at: 1s, fault: {f}, {rest}}}" for f, rest in minimal.items())
    e = load_experiment(write(tmp_path, f"duration: 5s\nschedulers: {{instances: 2}}\nchaos:\n{lines}\n"))
    assert [c.fault for c in e.chaos] == list(minimal)


def test_scheduler_conf_errors(tmp_path):
    msg = errors_of(tmp_path, """\
        scheduler_conf:
          actions: [allocate, dance]
          tiers: [[{name: gang, foo: 1}, {name: nope}, {name: drf, enabledWarp: true}, {name: priority, enabledJobOrder: 1}]]
        """)
    assert "x.yaml: scheduler_conf.actions[1]: unknown action 'dance'" in msg
    assert "x.yaml: scheduler_conf.tiers[0][0].foo: unknown plugin option 'foo'" in msg
    assert "x.yaml: scheduler_conf.tiers[0][1].name: unknown plugin 'nope'" in msg
    assert "x.yaml: scheduler_conf.tiers[0][2].enabledWarp: unknown plugin option 'enabledWarp'" in msg
    assert "x.yaml: scheduler_conf.tiers[0][3].enabledJobOrder: expected true, false or null" in msg
    assert "scheduler_conf.tiers: required" in errors_of(tmp_path, "scheduler_conf: {actions: [allocate]}\n")
    assert "plugin 'gang' appears twice" in errors_of(
        tmp_path, "scheduler_conf: {actions: [allocate], tiers: [[{name: gang}], [{name: gang}]]}\n")


def test_initial_objects(tmp_path):
    text = """\
        cluster: {nodes: 2, node: {cpu: 4, memory: 8Gi, pods: 10}}
        queues: [{name: q1}]
        initial:
          nodes: [{name: big, allocatable: {cpu: 8000, memory: 8Gi, pods: 10}}]
          priority_classes: [{name: hi, value: 100}]
          podgroups: [{name: pg1, queue: q1, minMember: 2}]
          pods:
            - {name: p1, podgroup: pg1, request: {cpu: 1000, memory: 1Gi}, nodeName: node-1, phase: Running}
            - {name: p2, podgroup: pg1, request: {cpu: 500m}, priorityClassName: hi}
        """
    e = load_experiment(write(tmp_path, text))
    objs = starting_objects(e)
    assert objs.counts() == {"PriorityClass": 1, "Queue": 2, "Node": 3, "HyperNode": 0, "PodGroup": 1, "Pod": 2}
    big = next(n for n in objs.nodes if n["metadata"]["name"] == "big")
    assert big["status"]["allocatable"]["cpu"] == "8000m"          # scenario units: millicores
    n1 = objs.nodes[0]
    assert n1["metadata"]["name"] == "node-1" and n1["status"]["allocatable"]["cpu"] == "4000m"
    p1, p2 = objs.pods
    assert p1["spec"]["nodeName"] == "node-1"
    assert p1["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == "pg1"
    assert p1["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "1000m", "memory": str(2**30)}
    assert p2["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "500m"}
    assert "uid" not in p1["metadata"] and "resourceVersion" not in p1["metadata"]
    assert [q["metadata"]["name"] for q in objs.queues] == ["default", "q1"]
    order = [o["kind"] for o in objs.in_order()]
    assert order.index("Queue") < order.index("PodGroup") < order.index("Pod")


@pytest.mark.parametrize("text, path, problem", [
    ("initial: {pods: [{name: p, podgroup: nope}]}\n", "initial.pods[0].podgroup", "unknown podgroup default/nope"),
    ("initial: {podgroups: [{name: g}], pods: [{name: p, podgroup: g, nodeName: n9}]}\n",
     "initial.pods[0].nodeName", "unknown node 'n9'"),
    ("initial: {podgroups: [{name: g, queue: qq}]}\n", "initial.podgroups[0].queue", "unknown queue 'qq'"),
    ("initial: {podgroups: [{name: g, phase: Done}]}\n", "initial.podgroups[0].phase", "expected one of"),
    ("initial: {podgroups: [{name: g}], pods: [{name: p, podgroup: g, request: {cpu: -5}}]}\n",
     "initial.pods[0].request.cpu", "negative quantity"),
    ("initial: {podgroups: [{name: g}], pods: [{name: p, podgroup: g, colour: red}]}\n",
     "initial.pods[0].colour", "unknown field 'colour'"),
    ("initial: {nodes: [{name: node-1, allocatable: {cpu: 1}}]}\n", "initial.nodes[0].name",
     "node 'node-1' already exists"),
    ("initial: {podgroups: [{name: g}], pods: [{name: p, podgroup: g}, {name: p, podgroup: g}]}\n",
     "initial.pods[1].name", "duplicate pod 'default/p'"),
    ("initial: {podgroups: [{name: g}], pods: [{name: p, podgroup: g, priorityClassName: vip}]}\n",
     "initial.pods[0].priorityClassName", "unknown priority class 'vip'"),
])
def test_initial_errors(tmp_path, text, path, problem):
    msg = errors_of(tmp_path, "cluster: {nodes: 1}\n" + text)
    assert f": {path}: " in msg, msg
    assert problem in msg, msg


def test_several_problems_are_all_reported(tmp_path):
    msg = errors_of(tmp_path, "bogus: 1\nschedulers: {instances: 0}\nduration: 5\n")
    assert len(msg.splitlines()) == 3


def test_yaml_problems(tmp_path):
    msg = errors_of(tmp_path, "name: [unclosed\n")
    assert "line " in msg and "not valid YAML" in msg
    assert "expected a map of experiment settings" in errors_of(tmp_path, "- a\n- b\n")
    assert "the file is empty" in errors_of(tmp_path, "")
    # safe_load: no Python objects from YAML tags
    msg = errors_of(tmp_path, "name: !!python/object/apply:os.system ['true']\n")
    assert "not valid YAML" in msg
    with pytest.raises(BadInput, match="no such file"):
        load_experiment(tmp_path / "missing.yaml")
    with pytest.raises(BadInput, match="is a folder"):
        load_experiment(tmp_path)


# -- units --------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, seconds", [("250ms", 0.25), ("10s", 10.0), ("2m", 120.0),
                                           ("1.5s", 1.5), (0, 0.0), (" 3 s ", 3.0)])
def test_parse_duration(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("bad", ["10", 10, "1h", "-1s", "s", True, None, "1e3ms"])
def test_parse_duration_rejects(bad):
    with pytest.raises(ValueError):
        parse_duration(bad)


def test_parse_rate():
    assert parse_rate("20/s") == 20.0 and parse_rate("600/m") == 10.0 and parse_rate("0.5/s") == 0.5
    for bad in ("20", "20/h", 20, "x/s"):
        with pytest.raises(ValueError):
            parse_rate(bad)


@given(st.integers(min_value=0, max_value=10**8))
def test_duration_format_round_trips(ms):
    assert parse_duration(format_duration(ms / 1000.0)) == pytest.approx(ms / 1000.0)


def test_experiment_model_is_strict_directly():
    with pytest.raises(Exception):
        Experiment.model_validate({"name": "x", "unknown": 1})
