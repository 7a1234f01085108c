"""``ha-testbed bench scale``: the plumbing at --quick sizes (three instance actors, the living
cluster, every figure beside its baseline) and the figures' arithmetic (targets, ratios).

A module of its own so that the benchmark's Ray (started by the command) never overlaps another
module's Ray."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ha.bench import scale

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "ha.cli"]   # this tree's CLI, whatever is installed
MIB = 1024 * 1024


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def _measurement(**over) -> dict:
    m = {"sizes": {"nodes": 10, "bound": 90, "pending": 10, "instances": 2, "period_s": 1.0,
                   "rate_gangs_per_s": 1.0, "actions": ["enqueue", "allocate", "backfill"]},
         "setup_s": 1.0, "raw_list_s": 0.5, "raw_list_objects": 120,
         "sync_s": {"scheduler-1": 2.0, "scheduler-2": 4.0},
         "rss_floor_bytes": 100 * MIB,
         "rss_after_sync_bytes": {"scheduler-1": 150 * MIB, "scheduler-2": 150 * MIB},
         "rss_max_bytes": {"scheduler-1": 200 * MIB, "scheduler-2": 300 * MIB},
         "baseline_sessions_ms": [100.0, 100.0, 200.0], "sessions_ms": [400.0, 500.0, 800.0],
         "baseline_sessions_cpu_ms": [(90.4, 120.0), (95.0, 130.0), (150.0, 260.6)],
         "sessions_cpu_ms": [(300.2, 390.0), (None, None), (640.0, 900.0)],
         "sessions_phases_ms": [{"snapshot": [100.4, 90.0], "allocate": [200.6, 180.2]}, None,
                                {"snapshot": [120.0, 99.0], "close": [10.0, 9.0]}],
         "sessions_skipped": 0,
         "staleness_ms": {"scheduler-1": {"p50": 1.0, "p99": 9.0, "max": 9.0, "n": 5},
                          "scheduler-2": {"p50": 1.0, "p99": 12.0, "max": 12.0, "n": 5}},
         "raw_staleness_ms": [1.0, 2.0, 3.0], "raw_watch_error": None,
         "window_s": 10.0, "binds": 50, "created": 100, "errors": {}, "leader": "scheduler-1",
         "writes": {"status_writes": 7, "pod_group_writes": 3},
         "cluster": {}}
    m.update(over)
    return m


def test_figures_and_baselines_from_a_measurement():
    r = scale.result_from(_measurement(), quick=True)
    assert (r.name, r.unit, r.value, r.baseline) == ("scale", "ms", 800.0, 200.0)
    assert r.params["sessions_ms_in_order"] == [400, 500, 800]
    assert r.params["baseline_sessions_ms_in_order"] == [100, 100, 200]
    assert r.params["writes_in_window"] == {"status_writes": 7, "pod_group_writes": 3}
    assert r.params["sessions_cpu_ms_in_order"] == [[300, 390], [None, None], [640, 900]]
    assert r.params["baseline_sessions_cpu_ms_in_order"] == [[90, 120], [95, 130], [150, 261]]
    assert scale.result_from(_measurement(sessions_cpu_ms=None), quick=True).params[
        "sessions_cpu_ms_in_order"] is None      # a measurement taken before the CPU figures
    assert r.params["sessions_phases_ms_in_order"] == [{"snapshot": [100, 90], "allocate": [201, 180]}, None,
                                                       {"snapshot": [120, 99], "close": [10, 9]}]
    assert r.params["baseline_sessions_phases_ms_in_order"] is None   # not in this measurement
    assert r.ratio == pytest.approx(4.0)
    rows = {x["name"]: x for x in r.extra}
    assert rows["scale-sync"]["value"] == 4.0 and rows["scale-sync"]["baseline"] == 0.5   # slowest
    assert rows["scale-rss-total"]["value"] == pytest.approx(500.0)
    assert rows["scale-rss-total"]["baseline"] == pytest.approx(200.0)
    assert rows["scale-staleness-p99"]["value"] == 12.0 and rows["scale-staleness-p99"]["baseline"] == 3.0
    assert rows["scale-bound-per-s"]["value"] == 5.0 and rows["scale-bound-per-s"]["ratio"] == 0.5
    assert r.params["targets_met"] == {"rss_total_le_8GiB": True, "sync_le_30s": True,
                                       "session_p99_le_1s": True}
    assert rows["scale-first-session"]["value"] is None        # not in this measurement
    cold = {x["name"]: x for x in scale.result_from(_measurement(first_session_ms=4000.0), quick=True).extra}
    assert cold["scale-first-session"]["value"] == 4000.0
    assert cold["scale-first-session"]["baseline"] == 100.0 and cold["scale-first-session"]["ratio"] == 40.0


def test_targets_detect_their_violations():
    m = _measurement(sync_s={"scheduler-1": 31.0, "scheduler-2": 2.0},
                     rss_max_bytes={"scheduler-1": 5 * 1024 * MIB, "scheduler-2": 3 * 1024 * MIB + 1},
                     sessions_ms=[500.0] * 98 + [1500.0, 1600.0])
    assert scale.result_from(m, quick=False).params["targets_met"] == {
        "rss_total_le_8GiB": False, "sync_le_30s": False, "session_p99_le_1s": False}


def test_unknown_benchmark_is_bad_input():
    res = subprocess.run([*CLI, "bench", "no-such-bench"], cwd=ROOT, env=_env(), capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == 2
    assert "unknown benchmark 'no-such-bench'" in res.stderr and "scale" in res.stderr


@pytest.mark.ray
def test_bench_scale_quick_json():
    res = subprocess.run([*CLI, "bench", "scale", "--quick", "--json"], cwd=ROOT, env=_env(), capture_output=True,
                         text=True, timeout=400)
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout)
    assert {"name", "value", "unit", "baseline", "ratio", "params"} <= set(out)
    assert out["name"] == "scale" and out["unit"] == "ms"
    assert out["value"] > 0 and out["baseline"] > 0
    assert out["ratio"] == pytest.approx(out["value"] / out["baseline"])
    p = out["params"]
    assert p["quick"] is True and p["nodes"] == scale.QUICK.nodes
    assert p["pods"] == scale.QUICK.bound + scale.QUICK.pending
    assert sorted(p["sync_s"]) == ["scheduler-1", "scheduler-2", "scheduler-3"]
    assert p["leader"] in p["sync_s"]
    assert all(e["errors"] == 0 and e["fatal_cache_errors"] == 0 for e in p["errors"].values())
    rows = {x["name"]: x for x in out["extra"]}
    assert {"scale-session-p50", "scale-sync", "scale-rss-total", "scale-staleness-p99",
            "scale-bound-per-s"} <= set(rows)
    for name in ("scale-sync", "scale-rss-total", "scale-bound-per-s"):
        assert rows[name]["value"] > 0 and rows[name]["baseline"] > 0, rows[name]
    # the instances hold the cluster: more than the process floor
    assert rows["scale-rss-total"]["ratio"] > 1.0
    assert rows["scale-bound-per-s"]["params"]["binds"] > 0
    # each sampled session carries its thread's and its process's CPU: measured, and the thread's
    # is part of the process's
    # the leader's snapshots: every node cloned or reused once per session
    lc = p["node_clones"][p["leader"]]
    assert set(p["node_clones"]) == set(p["sync_s"]) and lc["reused"] + lc["cloned"] >= scale.QUICK.nodes
    # and its jobs: the bound ones nothing changes come back session after session
    lj = p["job_clones"][p["leader"]]
    assert set(p["job_clones"]) == set(p["sync_s"]) and lj["reused"] >= scale.QUICK.bound // scale.QUICK.gang
    assert lj["settled_close"] > 0     # bound jobs' close verdicts kept between live sessions
    cpu = p["sessions_cpu_ms_in_order"]
    assert len(cpu) == len(p["sessions_ms_in_order"]) > 0
    assert p["sessions_skipped"] == 0       # every session of the window read from its record
    # the leader's cold first session, apart from the baseline
    assert rows["scale-first-session"]["value"] > 0 and rows["scale-first-session"]["baseline"] > 0
    assert len(p["baseline_sessions_ms_in_order"]) >= scale.QUICK.min_sessions
    assert all(c is not None and c > 0 and c <= pc + 1 for c, pc in cpu), cpu
    # and its phases, in the order run, none longer than the session
    for ph, wall in zip(p["sessions_phases_ms_in_order"], p["sessions_ms_in_order"]):
        assert list(ph) == ["snapshot", "open", "enqueue", "allocate", "backfill", "close"], ph
        assert sum(w for w, _ in ph.values()) <= wall + len(ph), (ph, wall)


def test_the_model_mode_times_each_phase_of_the_same_sessions():
    """``--param where=model``: the same cluster in one cache, the session split into phases that
    add up to it; the pending gangs make the actions work (every one of them is examined)."""
    from ha.bench import scale_model
    m = scale_model.measure(scale.QUICK, sessions=3)
    assert len(m["session_s"]) == len(m["baseline_s"]) == 3
    for secs, parts in ((m["session_s"], m["phases"]), (m["baseline_s"], m["baseline_phases"])):
        for s, p in zip(secs, parts):
            assert set(p) == {"snapshot", "plugins_open", "actions", "close"}
            assert min(p.values()) >= 0.0 and p["snapshot"] > 0.0
            assert sum(p.values()) == pytest.approx(s, rel=1e-6)
    # nothing changes the nodes between these sessions (the pending pods have no node and fit
    # nowhere): the window's four sessions (one warms up) all get the clones the sessions before
    # gave back; the baseline window clones them all again
    assert len(m["no_reuse_s"]) == 3
    assert m["node_clones"] == {"reused": 4 * scale.QUICK.nodes, "cloned": 0}
    # jobs likewise, but for the pending gangs' new jobs, cloned in the window's first session;
    # the bound jobs' close verdict (nothing to write) holds in every session of the window, the
    # pending gangs' (Pending tasks: their events depend on the session) is worked out each time
    bound_jobs = -(-scale.QUICK.bound // scale.QUICK.gang)
    new_jobs = scale.QUICK.pending // scale.QUICK.gang
    jobs = bound_jobs + new_jobs
    assert m["job_clones"] == {"reused": 4 * jobs - new_jobs, "cloned": new_jobs,
                               "settled_close": 4 * bound_jobs}
    r = scale_model.result_from(m, scale.QUICK, quick=True)
    rows = {x["name"]: x for x in r.extra}
    reuse = rows["scale-model-snapshot-reuse"]
    assert reuse["value"] == r.value and reuse["ratio"] == pytest.approx(reuse["value"] / reuse["baseline"])
    assert r.name == "scale-model" and r.value >= rows["scale-model-session-p50"]["value"]
    assert r.params["session_p99_le_1s"] == (r.value <= 1000.0)


def test_the_model_mode_checks_its_parameters():
    from ha.errors import BadInput
    with pytest.raises(BadInput, match="where: 'actors' or 'model'"):
        scale.run(quick=True, where="moon")
    with pytest.raises(BadInput, match="sessions: a positive integer"):
        scale.run(quick=True, where="model", sessions="0")
    with pytest.raises(BadInput, match="rate: gangs per second, a positive number, got '-2'"):
        scale.run(quick=True, rate="-2")
