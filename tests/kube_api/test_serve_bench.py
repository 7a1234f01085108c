"""``ha-testbed bench kube-api`` runs for real at a small size (no speed assertions: the benchmark
holds those)."""
from __future__ import annotations

import pytest

from ha.bench import load
from ha.errors import BadInput


def test_kube_api_bench_small():
    res = load("kube-api").run(quick=True, pods="1500", events="600")
    assert res.unit == "pods/s" and res.value > 0 and res.baseline > 0
    assert abs(res.ratio - res.value / res.baseline) <= 0.001
    p = res.params
    assert p["pods"] == 1500 and p["watch_events"] == 600
    assert p["endpoints"] == ["observer", "scheduler-1", "scheduler-2", "scheduler-3"]
    assert len(p["list_pods_per_s"]["front"]) == p["rounds"] == len(p["list_ratio_per_round"])
    watch, multi = res.extra
    assert watch["unit"] == "events/s" and watch["value"] > 0 and watch["baseline"] > 0
    assert len(p["watch_events_per_s"]["http_3_concurrent"]) == 3 and multi["baseline"] > 0


def test_kube_api_bench_bad_param():
    with pytest.raises(BadInput, match="pods"):
        load("kube-api").run(quick=True, pods="lots")
