"""The drawn experiments: valid, a pure function of (seed, index), every sim fault kind reachable,
the intensities ordered, swarm testing's one-kind runs present, every fault and arrival inside the
active part of the run (the quiet tail the convergence oracle needs)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from apimachinery.units import parse_duration
from ha.experiment.config import parse_experiment
from ha.hunt.draw import FAULT_KINDS, INTENSITIES, TAIL_S, draw_experiment


def _draws(intensity: str, n: int = 150, seed: int = 4):
    return [draw_experiment(seed, i, "pr5045", None, intensity) for i in range(n)]


@pytest.mark.parametrize("intensity", sorted(INTENSITIES))
def test_every_draw_is_a_valid_experiment_with_a_quiet_tail(intensity):
    for d in _draws(intensity):
        exp = parse_experiment(d, f"draw {d['name']}")
        assert exp.profile == "pr5045"
        end = exp.duration - TAIL_S
        assert exp.workload.until is not None and exp.workload.until <= end + 1e-9
        for c in exp.chaos:
            assert c.fault != "crash-point"
            assert c.at <= end + 1e-9, (d["name"], c)
        for raw in d["chaos"]:
            if "for" in raw:
                assert parse_duration(raw["at"]) + parse_duration(raw["for"]) <= end + 0.5 + 1e-9, raw
        within = parse_duration(d["measure"]["converge_within"])
        assert within + 5.0 < TAIL_S


def test_same_seed_and_index_same_experiment_in_another_process():
    here = [draw_experiment(7, i, "v1.14", {"planted_skip_fit": True}, "high") for i in range(20)]
    code = ("import json,sys; from ha.hunt.draw import draw_experiment; "
            "print(json.dumps([draw_experiment(7, i, 'v1.14', {'planted_skip_fit': True}, 'high') for i in range(20)]))")
    env = dict(os.environ, PYTHONHASHSEED="12345")
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert json.loads(got.stdout) == json.loads(json.dumps(here))
    assert draw_experiment(7, 0, "v1.14", None, "high") != draw_experiment(8, 0, "v1.14", None, "high")
    assert draw_experiment(7, 0, "v1.14", None, "high") != draw_experiment(7, 1, "v1.14", None, "high")


def test_every_fault_kind_is_drawn_and_intensities_are_ordered():
    seen = {k: 0 for k in FAULT_KINDS}
    mean = {}
    one_kind = 0
    for intensity in ("low", "medium", "high"):
        ds = _draws(intensity, 200)
        mean[intensity] = sum(len(d["chaos"]) for d in ds) / len(ds)
        for d in ds:
            kinds = {c["fault"] for c in d["chaos"]}
            for k in kinds:
                seen[k] += 1
            if len(d["chaos"]) >= 3 and len(kinds) == 1:
                one_kind += 1
    assert all(v > 0 for v in seen.values()), seen
    assert mean["low"] < mean["medium"] < mean["high"], mean
    assert one_kind > 5         # swarm testing: some runs use a single kind many times


def test_the_draw_varies_the_cluster_the_workload_and_the_instances():
    ds = _draws("medium", 200)
    assert len({d["cluster"]["nodes"] for d in ds}) >= 5
    assert len({d["schedulers"]["instances"] for d in ds}) >= 3
    assert {d["schedulers"]["mode"] for d in ds} == {"leader-elected", "shadow", "active-active"}
    assert len({tuple(d["workload"]["gang_size"]) for d in ds}) >= 5
    assert any("topology" in d["cluster"] for d in ds)
    assert any("network_topology" in d["workload"] for d in ds)
    for d in ds:     # a hard-topology gang always meets the plugin that keeps its promise
        if "network_topology" in d["workload"]:
            assert "network-topology-aware" in [p["name"] for t in d["scheduler_conf"]["tiers"] for p in t]
    assert any("priority_classes" in d["workload"] for d in ds)
