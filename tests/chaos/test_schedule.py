"""Seeded fault schedules: same seed -> same schedule (and same draws, and same workload);
different seed -> different; bad entries -> BadInput naming the field."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from chaos.faults import Distribution, parse_fault
from chaos.schedule import build_schedule
from ha.errors import BadInput

INSTANCES = ["scheduler-1", "scheduler-2", "scheduler-3"]

CHAOS = [
    {"at": "10s", "for": "30s", "fault": "watch-delay", "target": "scheduler-1", "kinds": ["Pod"],
     "delay": {"dist": "exponential", "mean": "500ms"}},
    {"at": "5s", "for": "10s", "fault": "watch-delay", "target": "all",
     "delay": {"dist": "pareto", "scale": "50ms", "alpha": 1.5, "max": "3s"}},
    {"at": "12s", "for": "2s", "fault": "watch-stall", "target": "scheduler-2"},
    {"at": "1s", "fault": "watch-reorder", "target": "scheduler-3", "window": "200ms"},
    {"at": "3s", "fault": "watch-expire", "target": "all", "kinds": ["Pod", "Node"]},
    {"at": "20s", "for": "5s", "fault": "partition", "target": "scheduler-2"},
    {"at": "20s", "fault": "kill", "target": "leader", "restart_after": "5s"},
    {"at": "25s", "for": "3s", "fault": "pause", "target": "scheduler-3"},
    {"at": "2s", "for": "10s", "fault": "api-latency", "delay": {"dist": "uniform", "min": "10ms", "max": "50ms"}},
    {"at": "2s", "for": "10s", "fault": "api-conflict", "probability": 0.2, "verbs": ["bind", "bind_many"]},
    {"at": "30s", "for": "1s", "fault": "redis-restart"},
    {"at": "0s", "for": "20s", "fault": "clock-rate", "target": "leader", "rate": 2.0},
]


def test_same_seed_same_schedule_and_draws():
    a = build_schedule(CHAOS, 7, INSTANCES)
    b = build_schedule(CHAOS, 7, INSTANCES)
    ja, jb = a.to_json(), b.to_json()
    assert json.dumps(ja, sort_keys=True) == json.dumps(jb, sort_keys=True)
    assert len(a) == len(CHAOS)
    # the per-event draws of every fault, per instance and kind, are the same streams
    for sa, sb in zip(a, b):
        for inst in INSTANCES:
            ra, rb = sa.rng(inst, "Pod"), sb.rng(inst, "Pod")
            assert np.array_equal(ra.random(20), rb.random(20))


def test_different_seed_different_schedule():
    a = build_schedule(CHAOS, 7, INSTANCES).to_json()
    b = build_schedule(CHAOS, 8, INSTANCES).to_json()
    assert [f["seed"] for f in a["faults"]] != [f["seed"] for f in b["faults"]]
    assert all(x["seed"] != y["seed"] for x, y in zip(a["faults"], b["faults"]))
    assert a["faults"][0]["delay_preview_s"] != b["faults"][0]["delay_preview_s"]
    # the structure (times, targets) does not depend on the seed
    assert [(f["at"], f["targets"]) for f in a["faults"]] == [(f["at"], f["targets"]) for f in b["faults"]]


def test_streams_are_independent_per_instance_and_kind():
    s = build_schedule(CHAOS, 7, INSTANCES)
    sf = s.faults[1]   # target all
    x1 = sf.rng("scheduler-1", "Pod").random(5)
    x2 = sf.rng("scheduler-2", "Pod").random(5)
    x3 = sf.rng("scheduler-1", "Node").random(5)
    assert not np.array_equal(x1, x2) and not np.array_equal(x1, x3)


def test_resolution_and_timeline():
    s = build_schedule(CHAOS, 1, INSTANCES)
    assert s.faults[1].targets == tuple(INSTANCES)          # all
    assert s.faults[6].targets == ("leader",)               # resolved when it fires
    assert s.faults[10].targets == ()                       # redis-restart: no target
    assert s.faults[8].targets == tuple(INSTANCES)          # api-latency without target: all
    assert s.faults[8].fault.verbs and "bind" in s.faults[8].fault.verbs and "get" not in s.faults[8].fault.verbs
    assert s.faults[3].fault.window == pytest.approx(0.2)
    tl = s.timeline()
    assert [a.t for a in tl] == sorted(a.t for a in tl)
    acts = {(a.index, a.action) for a in tl}
    assert (6, "fire") in acts and (6, "restart") in acts
    assert (0, "start") in acts and (0, "end") in acts
    assert (3, "start") in acts and (3, "end") not in acts   # no `for`: until the end
    restart = next(a for a in tl if a.index == 6 and a.action == "restart")
    assert restart.t == pytest.approx(25.0)
    assert [f.index for f in s.for_instance("scheduler-1", watch_only=True)] == [0, 1, 4]
    json.dumps(s.to_json())   # serialisable for metrics.json


def test_accepts_experiment_chaos_entries():
    """The experiment file's pydantic ChaosEntry objects resolve exactly like the raw maps."""
    from ha.experiment.config import ChaosEntry
    entries = [ChaosEntry.model_validate(e) for e in CHAOS]
    a = build_schedule(entries, 3, INSTANCES).to_json()
    b = build_schedule(CHAOS, 3, INSTANCES).to_json()
    assert a == b


def test_same_seed_same_workload_and_schedule_from_an_experiment_file():
    from ha.experiment.config import load_experiment
    from ha.runtime.workload import WorkloadConfig, WorkloadGenerator
    path = Path(__file__).resolve().parents[2] / "examples" / "failover-with-delayed-pod-watch.yaml"
    exp = load_experiment(path)
    assert exp.chaos, "the example has a chaos list"

    def both(seed):
        sched = build_schedule(exp.chaos, seed, exp.instance_names()).to_json()
        queues = [q.name for q in exp.queues] or ["default"]
        wl = WorkloadConfig.from_experiment(exp.workload, duration_s=exp.duration, queues=queues)
        plan = [vars(j) if hasattr(j, "__dict__") else j for j in WorkloadGenerator(wl, seed).plan()]
        return json.dumps(sched, sort_keys=True), repr(plan)

    s7a, w7a = both(7)
    s7b, w7b = both(7)
    s8, w8 = both(8)
    assert s7a == s7b and w7a == w7b
    assert s7a != s8 and w7a != w8


def test_distributions_sample_within_their_bounds():
    rng = np.random.default_rng(0)
    fixed = Distribution.parse({"dist": "fixed", "value": "250ms"}, "d")
    assert fixed.sample(rng) == pytest.approx(0.25)
    uni = Distribution.parse({"dist": "uniform", "min": "10ms", "max": "20ms"}, "d")
    xs = [uni.sample(rng) for _ in range(500)]
    assert 0.01 <= min(xs) and max(xs) <= 0.02
    exp = Distribution.parse({"dist": "exponential", "mean": "100ms"}, "d")
    xs = [exp.sample(rng) for _ in range(4000)]
    assert 0.085 < sum(xs) / len(xs) < 0.115
    # exponential, not just the right mean: P(X > 2·mean) = e^-2 ≈ 0.135
    assert 0.115 < sum(x > 0.2 for x in xs) / len(xs) < 0.155
    par = Distribution.parse({"dist": "pareto", "scale": "50ms", "alpha": 2.0, "max": "1s"}, "d")
    xs = [par.sample(rng) for _ in range(4000)]
    assert min(xs) >= 0.05 and max(xs) <= 1.0
    assert 0.08 < sum(xs) / len(xs) < 0.12          # mean alpha*xm/(alpha-1) = 100ms
    assert par.mean_s() == pytest.approx(0.1)
    assert math.isinf(Distribution.parse({"dist": "pareto", "scale": "1ms", "alpha": 1}, "d").mean_s())
    assert Distribution.parse("200ms", "d") == Distribution(dist="fixed", value="200ms")


@pytest.mark.parametrize("entry, where, words", [
    ({"at": "1s", "fault": "watch-teleport", "target": "all"}, "chaos[0].fault", "unknown fault"),
    ({"fault": "kill", "target": "leader"}, "chaos[0].at", "required"),
    ({"at": "1s", "fault": "watch-delay", "target": "all"}, "chaos[0]", "needs delay"),
    ({"at": "1s", "fault": "kill", "target": "leader", "kinds": ["Pod"]}, "chaos[0]", "does not take kinds"),
    ({"at": "1s", "fault": "kill", "target": "all"}, "chaos[0].target", "cannot target"),
    ({"at": "1s", "fault": "kill", "target": "node-3"}, "chaos[0].target", "expected scheduler-<N>"),
    ({"at": "1s", "fault": "kill", "target": "scheduler-9"}, "chaos[0].target", "does not exist"),
    ({"at": "soon", "fault": "kill", "target": "leader"}, "chaos[0].at", "duration"),
    ({"at": "1s", "for": "0s", "fault": "partition", "target": "scheduler-1"}, "chaos[0].for", "> 0"),
    ({"at": "1s", "fault": "watch-delay", "target": "all", "delay": {"dist": "gauss", "mean": "1s"}},
     "chaos[0].delay.dist", "must be one of"),
    ({"at": "1s", "fault": "watch-delay", "target": "all", "delay": {"dist": "uniform", "min": "2s", "max": "1s"}},
     "chaos[0].delay", "min"),
    ({"at": "1s", "fault": "watch-delay", "target": "all", "delay": {"dist": "exponential"}},
     "chaos[0].delay", "needs mean"),
    ({"at": "1s", "fault": "watch-delay", "target": "all", "delay": {"dist": "pareto", "scale": "1s", "alpha": -1}},
     "chaos[0].delay.alpha", "> 0"),
    ({"at": "1s", "fault": "watch-delay", "target": "all", "kinds": ["Secret"], "delay": "1s"},
     "chaos[0].kinds", "unknown kind"),
    ({"at": "1s", "fault": "api-conflict", "probability": 1.5}, "chaos[0].probability", "must be ≤ 1"),
    ({"at": "1s", "fault": "api-conflict", "probability": 0.5, "verbs": ["fly"]}, "chaos[0].verbs", "unknown verb"),
    ({"at": "1s", "fault": "clock-rate", "target": "leader", "rate": 0}, "chaos[0].rate", "> 0"),
    ({"at": "1s", "fault": "kill", "target": "leader", "colour": "red"}, "chaos[0].colour", "unknown key"),
])
def test_bad_entries_name_the_field(entry, where, words):
    with pytest.raises(BadInput) as ei:
        build_schedule([entry], 1, INSTANCES)
    msg = str(ei.value)
    assert msg.startswith(where), msg
    assert words in msg, msg


def test_bad_seed_and_instances():
    with pytest.raises(BadInput, match="seed"):
        build_schedule([], "seven", INSTANCES)
    with pytest.raises(BadInput, match="duplicate"):
        build_schedule([], 1, ["scheduler-1", "scheduler-1"])
    assert parse_fault({"at": 0, "fault": "redis-restart"}).at == 0.0
