"""The shrinker's reductions: each candidate is a valid experiment, smaller in the named dimension,
with what depends on it clipped or dropped along (chaos after a shortened end, faults on a removed
instance, podgroups of a removed queue)."""
from __future__ import annotations

from pathlib import Path

from ha.experiment.config import load_experiment, parse_experiment
from ha.experiment.shrink import passes
from ha.experiment.shrink.shrinker import compact

DATA = Path(__file__).resolve().parents[2] / "data" / "shrink"
ROOT = Path(__file__).resolve().parents[3]


def _cands(fn, d, *args):
    return {what: cand for what, cand in fn(d, *args)}


def test_every_candidate_of_the_planted_experiment_is_valid_and_deterministic():
    d = compact(load_experiment(DATA / "planted-overcommit.yaml"))
    for name, fn in passes.PASSES:
        first = list(fn(d, 56) if fn is passes.smaller_workload else fn(d))
        again = list(fn(d, 56) if fn is passes.smaller_workload else fn(d))
        assert first == again, name
        for what, cand in first:
            parse_experiment(cand, what)        # raises BadInput if a pass made an invalid file
            assert cand != d, what


def test_duration_clips_chaos_and_workload():
    d = compact(load_experiment(DATA / "planted-overcommit.yaml"))
    c = _cands(passes.shorten_duration, d)["duration 20s -> 10s"]
    exp = parse_experiment(c, "t")
    assert exp.duration == 10
    assert [e.at for e in exp.chaos] == [2.0, 5.0, 8.0]
    assert c["chaos"][0]["for"] == "8s" and c["chaos"][1]["for"] == "5s"
    c7 = _cands(passes.shorten_duration, c)["duration 10s -> 7s"]
    assert [e["at"] for e in c7["chaos"]] == ["2s", "5s"]        # the kill at 8 s is gone


def test_fewer_instances_drops_their_faults():
    d = compact(load_experiment(DATA / "planted-overcommit.yaml"))
    c = _cands(passes.fewer_instances, d)["schedulers.instances 3 -> 1"]
    assert [e.get("target") for e in c["chaos"]] == ["scheduler-1", "leader"]
    parse_experiment(c, "t")


def test_fixed_delays_take_a_typical_value():
    d = compact(load_experiment(DATA / "planted-overcommit.yaml"))
    c = _cands(passes.fixed_delays, d)
    assert c["chaos[0].delay: exponential -> fixed 300ms"]["chaos"][0]["delay"] == {"dist": "fixed", "value": "300ms"}
    # pareto: its median, scale * 2^(1/alpha) = 50 ms * 1.587
    (what,) = [w for w in c if w.startswith("chaos[1]")]
    assert what == "chaos[1].delay: pareto -> fixed 79ms"


def test_default_conf_is_made_explicit_then_reduced():
    d = compact(load_experiment(DATA / "planted-overcommit.yaml"))
    assert "scheduler_conf" not in d
    c = _cands(passes.simpler_conf, d)
    drop = c["scheduler_conf (default, made explicit): drop action enqueue"]
    exp = parse_experiment(drop, "t")
    assert exp.scheduler_conf.actions == ["allocate", "preempt", "reclaim", "backfill"]
    full = parse_experiment(d, "t").scheduler_conf_resolved().to_dict()
    assert exp.scheduler_conf_resolved().to_dict()["tiers"] == full["tiers"]


def test_queue_and_objects_go_with_their_dependents():
    d = compact(load_experiment(ROOT / "examples" / "br2-cyclic-eviction.yaml"))
    c = _cands(passes.fewer_queues, d)["drop initial queue q2 (and its podgroups)"]
    ini = parse_experiment(c, "t").initial
    assert [pg.name for pg in ini.podgroups] == ["pg1"] and [p.name for p in ini.pods] == ["pod1"]
    n = _cands(passes.fewer_nodes, d)["drop initial node n1 (and the pods bound to it)"]
    assert [p["name"] for p in n["initial"]["pods"]] == ["pod3"]
