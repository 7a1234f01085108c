"""``ha-testbed bench scale --param implementation=volcano``: the readers of the vc-scheduler
processes (klog times, the sync lines, each session from the /metrics histogram's count and sum,
VmRSS), the report beside the model's figures, the parameters' errors, and one run at a tiny shape
against the real binary (skipped, with the reason, where it is not built: tests/runtime/real_volcano.py).
"""
from __future__ import annotations

import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import psutil
import pytest

from ha.bench import scale, scale_volcano
from ha.bench.scale_volcano import SessionMeter, klog_time, sync_from_log, vm_rss
from ha.errors import BadInput

ROOT = Path(__file__).resolve().parents[2]
MIB = 1024 * 1024


def test_klog_time_reads_the_header_as_local_time():
    t = klog_time("I1127 22:23:02.269388   23655 scheduler.go:97] Scheduler completes Initialization", year=2026)
    assert t == pytest.approx(datetime(2026, 11, 27, 22, 23, 2, 269388).timestamp())
    assert klog_time("2026/11/27 22:23:01 maxprocs: Leaving GOMAXPROCS=2") is None
    assert klog_time("=== scheduler-1 life 0 at 1795818181.314") is None


LOG = """=== scheduler-1 life 0 at 1.0 (supervisor x, pid 1): vc-scheduler ...
I1127 22:23:01.795321   23655 leaderelection.go:257] attempting to acquire leader lease volcano-system/volcano...
I1127 22:23:02.066868   23655 leaderelection.go:271] successfully acquired lease volcano-system/volcano
I1127 22:23:02.183327   23655 reflector.go:436] "Caches populated" type="*v1.CSINode"
I1127 22:23:19.569388   23655 scheduler.go:97] Scheduler completes Initialization and start to run
"""


def test_sync_from_log_is_lease_won_to_cache_synced():
    got = sync_from_log(LOG)
    assert got is not None
    assert got["synced"] - got["acquired"] == pytest.approx(17.50252, abs=1e-5)
    # not synced yet (or never led): nothing
    assert sync_from_log(LOG.rsplit("\n", 2)[0]) is None
    assert sync_from_log(LOG.replace("successfully acquired lease", "attempting")) is None


def test_session_meter_takes_each_session_from_the_histograms_count_and_sum():
    m = SessionMeter()
    assert m.read(None) == [] and m.read({"buckets": []}) == []
    assert m.read({"count": 0, "sum": 0, "buckets": []}) == []
    assert m.read({"count": 1, "sum": 812.5, "buckets": []}) == [812.5]
    assert m.read({"count": 1, "sum": 812.5, "buckets": []}) == []              # no session since
    assert m.read({"count": 2, "sum": 1012.5, "buckets": []}) == [200.0]        # exactly that one
    assert m.read({"count": 4, "sum": 1612.5, "buckets": [[5, 1]]}) == [300.0, 300.0]   # two: the mean
    assert m.merged == 2 and m.buckets == [[5, 1]]
    # a new process life: its counters start again
    assert m.read({"count": 1, "sum": 90.0, "buckets": []}) == [90.0]
    assert m.take() == [812.5, 200.0, 300.0, 300.0, 90.0] and m.take() == []


def test_vm_rss_is_the_processes_own_resident_set():
    mine = vm_rss(os.getpid())
    assert mine is not None
    assert abs(mine - psutil.Process().memory_info().rss) < 64 * MIB
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    assert vm_rss(p.pid) is None        # gone


def _real(**over) -> dict:
    m = {"sizes": {"nodes": 10, "bound": 90, "pending": 10, "instances": 3, "period_s": 1.0,
                   "actions": ["enqueue", "allocate", "backfill"]},
         "scheduler": {"implementation": "volcano", "version": "v1.14.1"},
         "setup_s": 1.0, "leader": "scheduler-2",
         "sync": {"acquired_to_synced_s": 17.5, "spawn_to_synced_s": 18.4, "spawn_to_acquired_s": 0.9},
         "rss_after_sync_bytes": {"scheduler-1": 50 * MIB, "scheduler-2": 700 * MIB, "scheduler-3": 50 * MIB},
         "rss_max_bytes": {"scheduler-1": 50 * MIB, "scheduler-2": 900 * MIB, "scheduler-3": 50 * MIB},
         "first_session_ms": 2000.0, "baseline_sessions_ms": [100.0, 150.0], "baseline_merged": 0,
         "window_s": 10.0, "sessions_ms": [300.0, 400.0, 1200.0], "sessions_merged": 0,
         "histogram_buckets": [[640, 2], [1280, 3], ["+Inf", 3]],
         "created": 100, "binds": 80, "restarts": {}, "exits": {}, "cluster": {}}
    m.update(over)
    return m


def _model() -> dict:
    return {"sessions_ms": [500.0, 600.0], "baseline_sessions_ms": [200.0, 300.0], "first_session_ms": 3000.0,
            "sync_s": {"scheduler-1": 6.0, "scheduler-2": 7.0, "scheduler-3": 6.5},
            "rss_max_bytes": {"scheduler-1": 700 * MIB, "scheduler-2": 800 * MIB, "scheduler-3": 700 * MIB},
            "leader": "scheduler-1"}


def test_the_report_puts_each_real_figure_beside_the_models():
    r = scale_volcano.result_from(_real(), _model(), quick=True)
    assert (r.name, r.unit, r.value, r.baseline) == ("scale (vc-scheduler)", "ms", 1200.0, 600.0)
    assert r.ratio == pytest.approx(2.0)
    rows = {x["name"]: x for x in r.extra}
    assert (rows["scale-volcano-sync"]["value"], rows["scale-volcano-sync"]["baseline"]) == (17.5, 7.0)
    assert rows["scale-volcano-rss-total"]["value"] == pytest.approx(1000.0)
    assert rows["scale-volcano-rss-total"]["baseline"] == pytest.approx(2200.0)
    assert rows["scale-volcano-rss-scheduler-2"]["value"] == pytest.approx(900.0)
    assert (rows["scale-volcano-first-session"]["value"], rows["scale-volcano-first-session"]["baseline"]) == (2000.0, 3000.0)
    assert rows["scale-volcano-bound-per-s"]["value"] == pytest.approx(8.0)
    assert rows["scale-volcano-bound-per-s"]["baseline"] == pytest.approx(10.0)
    assert r.params["session_p99_from_histogram_ms"] == pytest.approx(1260.8)
    assert r.params["model"]["leader"] == "scheduler-1"
    # without the model's run: the figures alone, no baselines
    alone = scale_volcano.result_from(_real(), None, quick=True)
    assert alone.value == 1200.0 and alone.baseline is None and alone.ratio is None
    assert all(x["baseline"] is None for x in alone.extra if x["name"] != "scale-volcano-bound-per-s")


@pytest.mark.parametrize("kw, what", [
    ({"implementation": "kube"}, "implementation"),
    ({"implementation": "volcano", "model": "maybe"}, "model"),
    ({"volcano": "v1.13.0"}, "implementation=volcano"),
    ({"implementation": "volcano", "volcano": "v1.14.0"}, "volcano"),
    ({"implementation": "volcano", "volcano_source": "/nonexistent"}, "volcano"),
])
def test_bad_parameters_are_named(kw, what):
    with pytest.raises(BadInput, match=what):
        scale.run(quick=True, **kw)


def test_a_tiny_real_run_reports_every_figure(tmp_path, monkeypatch):
    from tests.runtime.real_volcano import binary_or_skip
    binary_or_skip("v1.14.1")
    from dataclasses import replace

    from ha.bench.scale_cluster import QUICK
    tiny = replace(QUICK, nodes=10, bound=90, pending=20, baseline_window_s=1.0, window_s=2.0,
                   rate_gangs_per_s=2.0, min_sessions=1, max_window_s=30.0, creators=1)
    monkeypatch.setattr(scale, "QUICK", tiny)
    r = scale.run(quick=True, implementation="volcano", model="off")
    p = r.params
    assert p["nodes"] == 10 and p["pods"] == 110 and p["leader"] in ("scheduler-1", "scheduler-2", "scheduler-3")
    # the leader's sessions, each one read from its own /metrics
    assert p["sessions"] >= 1 and r.value is not None and r.value > 0
    assert p["session_p99_from_histogram_ms"] is not None
    rows = {x["name"]: x for x in r.extra}
    assert 0 < rows["scale-volcano-sync"]["value"] < 60
    assert p["sync_s"]["spawn_to_synced_s"] >= p["sync_s"]["acquired_to_synced_s"]
    # each process's own resident set: a Go binary of ~110 MB text is tens of MiB resident at least
    for n in ("scheduler-1", "scheduler-2", "scheduler-3"):
        assert p["rss_mib"][n] >= 10, p["rss_mib"]
    assert p["rss_mib"][p["leader"]] >= max(p["rss_mib"].values()) - 1
    assert p["restarts"] == {"scheduler-1": 0, "scheduler-2": 0, "scheduler-3": 0}


def test_last_life_is_the_part_after_the_last_header():
    text = ("=== scheduler-2 life 0 at 1.0 (...)\nI1127 22:58:34.739063 1 x] successfully acquired lease v/v\n"
            "F1127 22:58:51.046615 1 x] leaderelection lost\n"
            "=== scheduler-2 life 1 at 2.0 (...)\nI1127 22:59:11.881988 2 x] successfully acquired lease v/v\n"
            "I1127 23:00:21.881988 2 x] Scheduler completes Initialization and start to run\n")
    life, part = scale_volcano.last_life(text, "scheduler-2")
    assert life == 1 and part.startswith("=== scheduler-2 life 1 at")
    got = sync_from_log(part)
    assert got["synced"] - got["acquired"] == pytest.approx(70.0)
    # the whole log would pair life 0's Lease with life 1's sync
    assert sync_from_log(text)["synced"] - sync_from_log(text)["acquired"] > 100
    assert scale_volcano.last_life("no header\n", "scheduler-2") == (0, "no header\n")
