"""BR4 and BR5 of tests/data/bug-repros.json at the cache level: baseline under profile("v1.14"),
fixed under profile("pr5045"). Expected values come from the JSON."""
from __future__ import annotations

import copy

import pytest

from ha.scheduler.cache import SchedulerCache
from ha.scheduler.interfaces import RecordingIO
from ha.scheduler.profiles import profile
from tests.scheduler.cachekit import (bug_repro, node_from_scenario, pod_from_scenario, pod_group_from_scenario,
                                      queue_from_scenario)


def build(repro: dict, switches) -> tuple[SchedulerCache, RecordingIO]:
    io = RecordingIO()
    cache = SchedulerCache(switches, binder=io, evictor=io, status_updater=io)
    init = repro["initial"]
    for q in init["queues"]:
        cache.add_queue(queue_from_scenario(q))
    for n in init["nodes"]:                    # "feed Node n1, then pods ... via AddPod"
        cache.add_node(node_from_scenario(n))
    for pg in init["podgroups"]:
        cache.add_pod_group(pod_group_from_scenario(pg))
    for p in init["pods"]:
        cache.add_pod(pod_from_scenario(p))
    return cache, io


def _task(cache, key):
    ns, name = key.split("/")
    t = cache.find_task(ns, name)
    assert t is not None
    return t


def _check_node(cache, name, exp: dict, snapshot):
    for ni in (cache.nodes[name], snapshot.nodes[name]):   # the cache and what a session sees
        got = {"idle_cpu": ni.idle.milli_cpu, "releasing_cpu": ni.releasing.milli_cpu,
               "pipelined_cpu": ni.pipelined.milli_cpu, "future_idle_cpu": ni.future_idle().milli_cpu}
        assert {k: got[k] for k in exp} == exp


@pytest.mark.parametrize("profile_name,expect_key", [("v1.14", "expect_baseline"), ("pr5045", "expect_fix")])
def test_br4_fresh_cache_rebuilds_or_loses_reservation(profile_name, expect_key):
    repro = bug_repro("BR4")
    cache, _ = build(repro, profile(profile_name))
    check = next(s for s in repro["steps"] if s.get("check"))
    exp = check[expect_key]
    for key, want in exp.items():
        if isinstance(want, dict):
            _check_node(cache, key, want, cache.snapshot())
            continue
        pod, field = key.split(".", 1)
        t = _task(cache, f"ns/{pod}")
        got = {"status": str(t.status), "nodeName": t.node_name, "NominatedNodeName": t.nominated_node_name}[field]
        assert got == want, key
    if profile_name == "pr5045":   # the session sees the reservation too
        snap = cache.snapshot()
        assert str(snap.jobs["ns/pgp"].tasks["ns-p"].status) == exp["p.status"]


def _br5_run(switches):
    repro = bug_repro("BR5")
    cache, io = build(repro, switches)
    pod_spec = repro["initial"]["pods"][0]
    pod = cache.find_task(pod_spec["namespace"], pod_spec["name"]).pod
    task = cache.find_task(pod_spec["namespace"], pod_spec["name"])
    node = repro["initial"]["nodes"][0]["name"]
    cache.pipeline(task, node)                       # step 1: Cache.Pipeline(p1, n1)
    new = copy.deepcopy(pod)                         # step 2: a condition changed, no nomination yet
    new["metadata"]["resourceVersion"] = 2
    new["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                    "message": "waiting"}]
    new["status"]["nominatedNodeName"] = ""
    cache.update_pod(pod, new)
    t = cache.find_task(pod_spec["namespace"], pod_spec["name"])
    return repro, {"status": str(t.status), "n1.pipelined_cpu": cache.nodes[node].pipelined.milli_cpu}


@pytest.mark.parametrize("switches", [profile("v1.14", cache_pipeline=True), profile("v1.14")],
                         ids=["v1.14-guard+cache-pipeline", "v1.14"])
def test_br5_baseline_guard_drops_pipelined(switches):
    repro, got = _br5_run(switches)
    exp = next(s for s in repro["steps"] if s.get("check"))["expect_with_v1.14.0_guard"]
    assert got == exp


def test_br5_fix_guard_keeps_pipelined():
    repro, got = _br5_run(profile("pr5045"))
    exp = next(s for s in repro["steps"] if s.get("check"))["expect_with_fix_guard"]
    assert got == exp
