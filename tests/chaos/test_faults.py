"""The fault packages (chaos/faults/): the registry holds every fault of the contract (docs/design.md), each package's
example is a valid entry, each fault's validation names the field, and each fault's start / end /
fire acts on the targets exactly as it says — against a recording implementation of the
chaos.targets.Targets protocol (our own test double of our own protocol; the effects on real
informers, proxies, processes and Redis are tested in the other files of this folder)."""
from __future__ import annotations


import pytest

from chaos.faults import (API_FAULTS, FAULTS, SELF_DRIVEN, WATCH_FAULTS, WINDOWED, ChaosEntry,
                          FaultPackage, parse_fault)
from chaos.nemesis import Nemesis
from chaos.schedule import build_schedule
from chaos.targets import (ApiHooks, NodeTargets, Proxy, RedisRestartTargets, Skip, Targets,
                           WatchHooks)
from ha.errors import BadInput

INSTANCES = ["scheduler-1", "scheduler-2", "scheduler-3"]
DESIGN_FAULTS = ["watch-delay", "watch-stall", "watch-reorder", "watch-expire", "partition", "kill",
                 "pause", "api-latency", "api-conflict", "redis-restart", "clock-rate"]


class Hooks:
    """Watch hooks / API chaos of one instance that record what is asked of them."""

    def __init__(self, kind: str, name: str, calls: list):
        self.kind, self.name, self.calls = kind, name, calls

    def activate(self, sf):
        self.calls.append((f"{self.kind}.activate", self.name, sf.index))
        return "activated"

    def deactivate(self, index):
        self.calls.append((f"{self.kind}.deactivate", self.name, index))

    def expire(self, kinds=None):
        self.calls.append((f"{self.kind}.expire", self.name, tuple(kinds) if kinds else None))
        return list(kinds or ["Pod", "Node"])


class RecProxy:
    def __init__(self, name, calls):
        self.name, self.calls = name, calls

    def partition(self):
        self.calls.append(("proxy.partition", self.name))
        return 2

    def heal(self):
        self.calls.append(("proxy.heal", self.name))


class RecordingTargets:
    """Every method of chaos.targets.Targets (+ redis_restart), recording its calls."""

    def __init__(self, leader: str | None = "scheduler-2"):
        self.calls: list[tuple] = []
        self.the_leader = leader
        self.watches = {n: Hooks("watch", n, self.calls) for n in INSTANCES}
        self.apis = {n: Hooks("api", n, self.calls) for n in INSTANCES}
        self.proxies = {n: RecProxy(n, self.calls) for n in INSTANCES}

    async def leader(self):
        return self.the_leader

    async def watch(self, name):
        return self.watches.get(name)

    async def api(self, name):
        return self.apis.get(name)

    def proxy(self, name):
        return self.proxies.get(name)

    async def kill(self, name):
        self.calls.append(("kill", name))
        return f"killed {name}"

    async def restart(self, name):
        self.calls.append(("restart", name))

    async def pause(self, name):
        self.calls.append(("pause", name))

    async def resume(self, name):
        self.calls.append(("resume", name))

    async def set_clock_rate(self, name, rate):
        self.calls.append(("set_clock_rate", name, rate))

    def redis_restart(self, down_s):
        self.calls.append(("redis_restart", down_s))

    async def kill_node(self, name):
        self.calls.append(("kill_node", name))
        return f"killed the node of {name}"


S1, S2, S3 = INSTANCES
# fault -> the calls its example entry makes, start to end (leader = scheduler-2)
EXPECTED = {
    "watch-delay": [("watch.activate", S1, 0), ("watch.deactivate", S1, 0)],
    "watch-stall": [("watch.activate", S2, 0), ("watch.deactivate", S2, 0)],
    "watch-reorder": [("watch.activate", n, 0) for n in INSTANCES]
                     + [("watch.deactivate", n, 0) for n in INSTANCES],
    "watch-expire": [("watch.expire", S1, ("Pod",))],
    "partition": [("proxy.partition", S2), ("proxy.heal", S2)],
    "kill": [("kill", S2), ("restart", S2)],
    "pause": [("pause", S2), ("resume", S2)],
    "api-latency": [("api.activate", S1, 0), ("api.deactivate", S1, 0)],
    "api-conflict": [("api.activate", n, 0) for n in INSTANCES] + [("api.deactivate", n, 0) for n in INSTANCES],
    "crash-point": [("api.activate", S2, 0), ("api.deactivate", S2, 0)],
    "redis-restart": [("redis_restart", 2.0)],
    "clock-rate": [("set_clock_rate", S2, 2.0), ("set_clock_rate", S2, 1.0)],
    "node-kill": [("kill_node", S2)],
}


async def _run_all(nem: Nemesis) -> None:
    nem.t0 = 0.0
    for a in list(nem._timeline):
        await nem.fire_due(a.t)


# ------------------------------------------------------------------------------------- registry

def test_registry_has_every_fault_of_the_design_in_order():
    assert list(FAULTS)[:len(DESIGN_FAULTS)] == DESIGN_FAULTS
    assert set(EXPECTED) == set(FAULTS)
    for name, pkg in FAULTS.items():
        assert isinstance(pkg, FaultPackage) and pkg.name == name
        assert pkg.doc and "\n" not in pkg.doc
        assert pkg.draw.mark == ("span" if pkg.windowed else "point")
        assert pkg.draw.label and pkg.label == pkg.draw.label
        assert pkg.injector in ("watch", "api", "proxy", "process", "clock", "redis")


def test_derived_views_agree_with_the_packages():
    assert WATCH_FAULTS == {"watch-delay", "watch-stall", "watch-reorder", "watch-expire"}
    assert API_FAULTS == {"api-latency", "api-conflict", "crash-point"}
    assert SELF_DRIVEN == WATCH_FAULTS | API_FAULTS
    # point faults: drawn as markers, fired once (the report's and the schedule's view agree)
    assert set(FAULTS) - WINDOWED == {"watch-expire", "kill", "redis-restart", "node-kill"}


@pytest.mark.parametrize("name", list(FAULTS))
def test_each_example_is_a_valid_entry_of_its_fault(name):
    pkg = FAULTS[name]
    f = parse_fault(pkg.example, 0)
    assert f.fault == name
    assert [a for _, a in pkg.actions(f)] == (["start", "end"] if pkg.windowed else
                                               ["fire", "restart"] if name == "kill" else ["fire"])


def test_defaults_are_filled_in():
    reorder = parse_fault({"at": "1s", "fault": "watch-reorder", "target": "all"})
    assert reorder.window == 0.5
    lat = parse_fault({"at": "1s", "fault": "api-latency", "delay": "10ms"})
    assert lat.target == "all" and "bind" in lat.verbs and "get" not in lat.verbs
    assert lat.delay.dist == "fixed" and lat.delay.value == pytest.approx(0.01)
    assert FAULTS["watch-reorder"].defaults() == {"window": 0.5}
    assert FAULTS["kill"].required() == ["target"] and FAULTS["kill"].optional() == ["restart_after"]


# ----------------------------------------------------------------------------------- validation

BAD = [
    # (fault, entry without at/fault, path, words)
    ("watch-delay", {"target": "all"}, "chaos[0]", "fault watch-delay needs delay"),
    ("watch-delay", {"target": "all", "delay": {"dist": "pareto", "scale": "10ms"}},
     "chaos[0].delay", "dist pareto needs alpha"),
    ("watch-delay", {"target": "all", "delay": {"dist": "pareto", "scale": "10ms", "alpha": 0}},
     "chaos[0].delay.alpha", "must be > 0"),
    ("watch-delay", {"target": "all", "delay": {"dist": "uniform", "min": "1s"}},
     "chaos[0].delay", "dist uniform needs max"),
    ("watch-delay", {"target": "all", "delay": {"dist": "fixed", "value": "1s", "mean": "2s"}},
     "chaos[0].delay", "dist fixed does not take mean"),
    ("watch-delay", {"target": "all", "delay": {"dist": "exponential", "mean": "1s", "max": "1h"}},
     "chaos[0].delay.max", "expected a duration"),
    ("watch-stall", {"target": "scheduler-1"}, "chaos[0]", "fault watch-stall needs for"),
    ("watch-stall", {"target": "scheduler-1", "for": "1s", "window": "1s"}, "chaos[0]",
     "fault watch-stall does not take window (it takes for, kinds, target)"),
    ("watch-reorder", {"target": "all", "window": "0s"}, "chaos[0].window", "must be > 0"),
    ("watch-expire", {"target": "all", "for": "1s"}, "chaos[0]", "does not take for"),
    ("watch-expire", {"target": "all", "kinds": []}, "chaos[0].kinds", "non-empty"),
    ("partition", {"target": "scheduler-1", "for": "-1s"}, "chaos[0].for", "expected a duration"),
    ("kill", {"target": "all"}, "chaos[0].target", "fault kill cannot target 'all' (it takes scheduler-<N> or leader)"),
    ("kill", {"target": "leader", "restart_after": "soon"}, "chaos[0].restart_after", "expected a duration"),
    ("pause", {"target": "all", "for": "1s"}, "chaos[0].target", "cannot target 'all'"),
    ("api-latency", {"delay": {"dist": "gauss"}}, "chaos[0].delay.dist", "must be one of"),
    ("api-latency", {"delay": "5ms", "verbs": ["bind", "jump"]}, "chaos[0].verbs", "unknown verb 'jump'"),
    ("api-conflict", {}, "chaos[0]", "fault api-conflict needs probability"),
    ("api-conflict", {"probability": -0.1}, "chaos[0].probability", "must be ≥ 0"),
    ("crash-point", {"target": "leader"}, "chaos[0]", "fault crash-point needs point"),
    ("crash-point", {"target": "leader", "point": "mid-session"}, "chaos[0].point", "after-evictions"),
    ("redis-restart", {"target": "leader"}, "chaos[0]", "fault redis-restart does not take target (it takes for)"),
    ("clock-rate", {"target": "leader"}, "chaos[0]", "fault clock-rate needs rate"),
    ("clock-rate", {"target": "leader", "rate": -2}, "chaos[0].rate", "must be > 0"),
    ("node-kill", {"target": "all"}, "chaos[0].target",
     "fault node-kill cannot target 'all' (it takes scheduler-<N> or leader)"),
    ("node-kill", {"target": "leader", "restart_after": "5s"}, "chaos[0]",
     "fault node-kill does not take restart_after (it takes target)"),
    ("node-kill", {}, "chaos[0]", "fault node-kill needs target"),
]


@pytest.mark.parametrize("fault, rest, path, words", BAD, ids=[f"{b[0]}-{i}" for i, b in enumerate(BAD)])
def test_validation_names_the_field_and_the_problem(fault, rest, path, words):
    with pytest.raises(BadInput) as ei:
        parse_fault({"at": "1s", "fault": fault, **rest}, 0)
    msg = str(ei.value)
    assert msg.startswith(f"{path}: "), msg
    assert words in msg, msg


def test_every_fault_has_a_validation_case():
    assert {b[0] for b in BAD} == set(FAULTS)


def test_entry_index_is_named_and_every_problem_reported():
    with pytest.raises(BadInput) as ei:
        parse_fault({"at": "1s", "fault": "kill", "target": "all", "kinds": ["Pod"]}, 7)
    lines = str(ei.value).splitlines()
    assert lines == ["chaos[7]: fault kill does not take kinds (it takes restart_after, target)",
                     "chaos[7].target: fault kill cannot target 'all' (it takes scheduler-<N> or leader)"]


# ----------------------------------------------------------------------- start / end / fire

def test_recording_targets_satisfy_the_protocol():
    t = RecordingTargets()
    assert isinstance(t, Targets) and isinstance(t, RedisRestartTargets) and isinstance(t, NodeTargets)
    assert isinstance(t.watches[S1], WatchHooks) and isinstance(t.apis[S1], ApiHooks)
    assert isinstance(t.proxies[S1], Proxy)


@pytest.mark.parametrize("name", list(FAULTS))
async def test_each_fault_acts_on_the_targets(name):
    pkg = FAULTS[name]
    sched = build_schedule([pkg.example], 3, INSTANCES)
    t = RecordingTargets(leader=S2)
    nem = Nemesis(sched, t)
    await _run_all(nem)
    assert t.calls == EXPECTED[name]
    assert [r.status for r in nem.records] == ["applied"] * len(nem.records), nem.to_json()
    assert [r.action for r in nem.records] == [a for _, a in pkg.actions(sched.faults[0].fault)]
    assert nem.pending() == 0


async def test_a_driver_without_the_method_makes_the_action_skipped():
    class NoRedis(RecordingTargets):
        redis_restart = None
    sched = build_schedule([FAULTS["redis-restart"].example, FAULTS["partition"].example], 1, INSTANCES)
    t = NoRedis()
    t.proxies = {}
    nem = Nemesis(sched, t)
    await _run_all(nem)
    by = {(r.fault, r.action): r for r in nem.records}
    assert by[("redis-restart", "fire")].status == "skipped"
    assert "the driver gives no redis_restart()" in by[("redis-restart", "fire")].detail
    assert by[("partition", "start")].status == "skipped"
    assert "scheduler-2: no proxy" in by[("partition", "start")].detail
    assert t.calls == []


async def test_node_kill_without_kill_node_is_skipped_and_a_refusal_is_recorded():
    """A driver without kill_node() (the sim engine) skips node-kill; a kill_node() that refuses
    (the head node, another machine's node) records its reason; neither touches anything else."""
    class NoNodes(RecordingTargets):
        kill_node = None

    class HeadOnly(RecordingTargets):
        async def kill_node(self, name):
            raise Skip(f"{name} runs on the head's node 0123abcd: node-kill refuses it")
    entries = [{"at": "1s", "fault": "node-kill", "target": "leader"},
               {"at": "2s", "fault": "node-kill", "target": "scheduler-3"}]
    t = NoNodes(leader=S1)
    nem = Nemesis(build_schedule(entries, 1, INSTANCES), t)
    await _run_all(nem)
    assert [(r.status, r.targets) for r in nem.records] == [("skipped", [S1]), ("skipped", [S3])]
    assert all(r.detail == "the driver gives no kill_node()" for r in nem.records)
    assert t.calls == []
    h = HeadOnly(leader=S1)
    nem = Nemesis(build_schedule(entries, 1, INSTANCES), h)
    await _run_all(nem)
    assert [r.status for r in nem.records] == ["skipped", "skipped"]
    assert nem.records[0].detail == "scheduler-1 runs on the head's node 0123abcd: node-kill refuses it"
    assert h.calls == []


async def test_no_leader_skip_and_failure_are_recorded_and_the_run_goes_on():
    class Odd(RecordingTargets):
        async def pause(self, name):
            raise Skip(f"{name} is not running")

        async def set_clock_rate(self, name, rate):
            raise RuntimeError("actor died")
    entries = [{"at": "1s", "fault": "kill", "target": "leader"},
               {"at": "2s", "for": "1s", "fault": "pause", "target": "scheduler-1"},
               {"at": "3s", "for": "1s", "fault": "clock-rate", "target": "scheduler-3", "rate": 3},
               {"at": "4s", "fault": "kill", "target": "scheduler-3"}]
    t = Odd(leader=None)
    nem = Nemesis(build_schedule(entries, 1, INSTANCES), t)
    await _run_all(nem)
    got = [(r.index, r.action, r.status) for r in nem.records]
    # an end fires even when its start was skipped (at 3s: ends before starts)
    assert got == [(0, "fire", "skipped"), (1, "start", "skipped"), (1, "end", "applied"),
                   (2, "start", "failed"), (2, "end", "failed"), (3, "fire", "applied")]
    assert nem.records[0].detail == "no leader at that moment"
    assert nem.records[1].detail == "scheduler-1 is not running"
    assert nem.records[2].detail == "resume scheduler-1"
    assert nem.records[3].detail == "RuntimeError: actor died"
    assert t.calls == [("resume", S1), ("kill", S3)]


async def test_self_driven_faults_are_only_recorded_for_named_targets_and_activated_for_the_leader():
    entries = [{"at": "1s", "for": "1s", "fault": "watch-delay", "target": "scheduler-1", "delay": "5ms"},
               {"at": "1s", "for": "1s", "fault": "watch-delay", "target": "leader", "delay": "5ms"},
               {"at": "1s", "fault": "api-conflict", "probability": 0.5}]
    t = RecordingTargets(leader=S3)
    nem = Nemesis(build_schedule(entries, 1, INSTANCES), t, self_driven=SELF_DRIVEN)
    await _run_all(nem)
    assert t.calls == [("watch.activate", S3, 1), ("watch.deactivate", S3, 1)]
    named = [r for r in nem.records if r.index in (0, 2)]
    assert named and all(r.status == "applied" and "own hooks" in r.detail for r in named)


async def test_stop_ends_open_windows_through_their_package():
    entries = [{"at": "0s", "fault": "watch-reorder", "target": "scheduler-1"},
               {"at": "0s", "for": "10m", "fault": "pause", "target": "leader"}]
    t = RecordingTargets(leader=S2)
    nem = Nemesis(build_schedule(entries, 1, INSTANCES), t)
    nem.t0 = 0.0
    await nem.fire_due(0.0)
    await nem.stop()
    assert t.calls == [("watch.activate", S1, 0), ("pause", S2), ("watch.deactivate", S1, 0), ("resume", S2)]
    assert all("run ended" in r.detail for r in nem.records[2:])


def test_chaos_entry_dumps_what_it_read():
    e = ChaosEntry.model_validate({"at": "10s", "for": "30s", "fault": "watch-delay",
                                   "target": "scheduler-1", "delay": {"dist": "exponential", "mean": "500ms"}})
    assert e.model_dump(mode="json", by_alias=True, exclude_none=True) == {
        "at": "10s", "fault": "watch-delay", "target": "scheduler-1", "for": "30s",
        "delay": {"dist": "exponential", "mean": "500ms"}}
    assert e.end == 40.0
