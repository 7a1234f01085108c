"""The seven bug reproductions of tests/data/bug-repros.json as multi-session, in-memory runs.

Each test drives one SchedulerCache through several sessions (``ScenarioCluster``); between
sessions the scheduler's API writes (binds, evictions, nomination / status writes) are applied to
the in-memory API truth and delivered back to the cache as informer updates (the round trip the
repros speak of), then the repro's own events (pods added, deleted, turned Running) are applied.

Profiles: ``v1.14`` must show the v1.14.0 outcome, ``pr5045`` the PR as coded where the repro
gives one, ``pr5045-fixed`` the intended fix. Expected binds / evictions / session-Pipelined tasks
/ cache fields are read from the JSON where it states them structurally.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from ha.scenario.repros import expectation, load_repros

DATA = Path(__file__).resolve().parents[1] / "data" / "bug-repros.json"
REPROS = load_repros(DATA)
FIX_PROFILES = ("pr5045", "pr5045-fixed")


# ------------------------------------------------------------------------------------ helpers

def uid(key: str) -> str:
    ns, name = key.split("/", 1)
    return f"{ns}-{name}"


def task_state(cluster, key: str) -> tuple[str, str]:
    """(status name, node name) of a pod's task in the cache."""
    st, node = cluster.cache.digest()["tasks"][uid(key)]
    return str(st).upper(), node or ""


def node_cpu(cluster, node: str, field: str) -> float:
    n = cluster.cache.digest()["nodes"][node]
    if field == "future_idle":
        return node_cpu(cluster, node, "idle") + node_cpu(cluster, node, "releasing") \
            - node_cpu(cluster, node, "pipelined")
    return float((n.get(field) or {}).get("cpu", 0))


def check_outcome(out, exp: dict, where: str) -> None:
    """binds / evicted / session_pipelined as far as the expectation states them."""
    if "binds" in exp:
        assert out.binds == exp["binds"], f"{where}: binds {out.binds} != {exp['binds']}"
    if "evicted" in exp:
        assert sorted(out.evicted) == sorted(exp["evicted"]), f"{where}: evicted {out.evicted} != {exp['evicted']}"
    if "session_pipelined" in exp:
        for key, node in exp["session_pipelined"].items():
            assert out.pipelined.get(key) == node, f"{where}: {key} not pipelined on {node} in the session: {out.pipelined}"


def new_pod(template: dict, name: str, *, group: str | None = None, cpu_m: int | None = None) -> dict:
    import copy
    p = copy.deepcopy(template)
    ns = p["metadata"]["namespace"]
    p["metadata"].update({"name": name, "uid": f"{ns}-{name}", "resourceVersion": 1})
    p["metadata"].pop("deletionTimestamp", None)
    p["metadata"]["labels"] = {}
    if group is not None:
        p["metadata"]["annotations"]["scheduling.k8s.io/group-name"] = group
    if cpu_m is not None:
        p["spec"]["containers"][0]["resources"]["requests"]["cpu"] = f"{cpu_m}m"
    p["spec"]["nodeName"] = ""
    p["status"] = {"phase": "Pending", "nominatedNodeName": "", "conditions": []}
    return p


def new_podgroup(template: dict, name: str, queue: str, min_member: int = 1) -> dict:
    import copy
    g = copy.deepcopy(template)
    ns = g["metadata"]["namespace"]
    g["metadata"].update({"name": name, "uid": f"{ns}-{name}", "resourceVersion": 1})
    g["spec"].update({"queue": queue, "minMember": min_member, "priorityClassName": "",
                      "minTaskMember": {}, "minResources": None})
    g["status"] = {"phase": "Inqueue", "conditions": [], "running": 0, "succeeded": 0, "failed": 0}
    return g


# ------------------------------------------------------------------------------------------ BR1

@pytest.mark.parametrize("prof", ["v1.14", *FIX_PROFILES])
def test_br1_pipeline_not_persisted_competitor_steals(prof):
    """BR1: h1 preempts l1 and is pipelined; a job of an emptier queue (c1) arrives; l1 finishes.

    v1.14: c1 takes the freed node, h1's eviction was wasted. pr5045-fixed: h1 binds.
    pr5045 as coded: nobody binds (h1 competes with its own reservation, S1).
    Session 2 under pr5045 has no stated as-coded outcome; by the same reading as session 3
    (FutureIdle(n1) = 0 + 2000 - 2000 for h1 and for c1) it matches the intended one: nothing is
    placed and h1 stays Pipelined, so the intended-fix block is checked for both fix profiles.
    """
    r = REPROS["BR1"]
    c = r.cluster(prof)
    s1 = r.session(1)
    out1 = r.run_session(c)
    check_outcome(out1, expectation(s1, prof), "session 1")
    if prof == "v1.14":
        after = s1["expect_after_close_baseline"]
        assert task_state(c, "ns/h1")[0] == after["cache.h1.status"].upper()
        assert node_cpu(c, "n1", "pipelined") == after["cache.n1.pipelined_cpu"]
    else:
        after = s1["expect_after_close_fix"]
        assert task_state(c, "ns/h1") == (after["cache.h1.status"].upper(), after["cache.h1.nodeName"])
        assert node_cpu(c, "n1", "pipelined") == after["cache.n1.pipelined_cpu"]
    # both: the nomination reached the API (status write) and came back through the informer
    assert c.pods["ns/h1"]["status"]["nominatedNodeName"] == "n1"
    assert c.pods["ns/l1"]["metadata"].get("deletionTimestamp")          # l1 is terminating

    # event: pg-c (q2, minMember 1) with c1 (2000m, 1Gi)
    pg_c = new_podgroup(c.podgroups["ns/pg-high"], "pg-c", "q2")
    c.add_pod_group(pg_c)
    c.add_pod(new_pod(c.pods["ns/h1"], "c1", group="pg-c"))

    s2 = r.session(2)
    out2 = r.run_session(c)
    exp2 = expectation(s2, prof if prof == "v1.14" else "pr5045-fixed")
    check_outcome(out2, exp2, "session 2")
    if prof == "v1.14":
        assert "ns/h1" not in out2.pipelined
    else:
        assert "ns/c1" not in out2.pipelined and "ns/c1" not in out2.binds
        assert task_state(c, "ns/h1") == ("PIPELINED", "n1")

    # event: l1's termination finished
    c.delete_pod("ns/l1")
    s3 = r.session(3)
    out3 = r.run_session(c)
    check_outcome(out3, expectation(s3, prof), "session 3")
    if prof == "v1.14":
        assert task_state(c, "ns/h1")[0] == "PENDING"
    elif prof == "pr5045-fixed":
        assert "ns/c1" not in out3.binds


# ------------------------------------------------------------------------------------------ BR2

@pytest.mark.parametrize("prof", ["v1.14", *FIX_PROFILES])
def test_br2_cyclic_eviction_with_capacity(prof):
    """BR2 (#4947 subBug1): reclaim evicts pod1 for pod3; pod1's owner re-creates pod1b.

    v1.14: pod1b binds in session 2, is evicted again in session 3 -- the cycle.
    pr5045-fixed: pod3 binds in session 2; session 3 evicts nothing (no cycle).
    pr5045 as coded: session 2 binds nothing (a stall instead of a cycle).
    The repro's "pod1b becomes Running (baseline only)" is applied to whatever was bound.
    """
    r = REPROS["BR2"]
    c = r.cluster(prof)
    out1 = r.run_session(c)
    check_outcome(out1, expectation(r.session(1), prof), "session 1")

    # event: pod1 terminated; the owner re-creates pod1b (Pending, 4000m) in pg1
    tmpl = c.pods["ns/pod1"]
    c.delete_pod("ns/pod1")
    c.add_pod(new_pod(tmpl, "pod1b", cpu_m=4000))

    out2 = r.run_session(c)
    exp2 = expectation(r.session(2), prof)
    check_outcome(out2, exp2, "session 2")

    # event: what was bound starts running
    for key in out2.binds:
        c.set_pod_phase(key, "Running")

    out3 = r.run_session(c)
    if prof == "v1.14":
        check_outcome(out3, expectation(r.session(3), prof), "session 3")
    elif prof == "pr5045-fixed":
        assert out3.evicted == [], "the intended fix must not cycle"
        assert "ns/pod1b" not in out3.binds
        assert task_state(c, "ns/pod3")[1] == "n1"


# ------------------------------------------------------------------------------------------ BR3

@pytest.mark.parametrize("prof", ["v1.14", *FIX_PROFILES, "nomination-only"])
def test_br3_pipelined_job_statement(prof):
    """BR3: gang of 3; two fit Idle, the third only FutureIdle (x1 is releasing).

    v1.14: nothing binds, the cache is unchanged. pr5045 (and pr5045-fixed, which differs only by
    self-exclusion and so commits the same way): j1 and j2 bind before the gang is ready, j3 is
    Pipelined in the cache. nomination-only (PR #5663): nothing binds; j3 stays Pipelined in the
    session only.
    """
    r = REPROS["BR3"]
    c = r.cluster(prof)
    assert node_cpu(c, "n1", "idle") == r.session(1)["node_before"]["idle_cpu"]
    assert node_cpu(c, "n1", "releasing") == r.session(1)["node_before"]["releasing_cpu"]
    out = r.run_session(c)
    exp = expectation(r.session(1), "pr5045" if prof == "pr5045-fixed" else prof)
    check_outcome(out, exp, "session 1")
    if prof == "v1.14":
        for k in ("ns/j1", "ns/j2", "ns/j3"):
            assert task_state(c, k)[0] == "PENDING"
        assert node_cpu(c, "n1", "pipelined") == 0
    elif prof in FIX_PROFILES:
        assert task_state(c, "ns/j3") == ("PIPELINED", "n1")
        assert out.binds == {"ns/j1": "n1", "ns/j2": "n1"}
    else:
        assert out.pipelined.get("ns/j3") == "n1"
        assert task_state(c, "ns/j1")[0] == "PENDING"


# ------------------------------------------------------------------------------------------ BR4

@pytest.mark.parametrize("prof", ["v1.14", *FIX_PROFILES])
def test_br4_fresh_cache_rebuilds_reservation(prof):
    """BR4: a fresh cache (restart / other instance) from n1, a terminating v, a nominated p."""
    r = REPROS["BR4"]
    c = r.cluster(prof)
    check = next(s for s in r.steps if s.get("check") == "cache state")
    exp = check["expect_baseline"] if prof == "v1.14" else check["expect_fix"]
    st, node = task_state(c, "ns/p")
    assert st == exp["p.status"].upper()
    assert node == exp["p.nodeName"]
    for field, val in exp["n1"].items():
        assert node_cpu(c, "n1", field.removesuffix("_cpu")) == val, field


# ------------------------------------------------------------------------------------------ BR5

@pytest.mark.parametrize("prof,guard", [("v1.14", "v1.14.0"), ("pr5045", "fix"), ("pr5045-fixed", "fix")])
def test_br5_informer_update_overwrites_pipelined(prof, guard):
    """BR5: Cache.Pipeline(p1, n1), then an UpdatePod without nodeName (a condition change).

    v1.14.0 has no Cache.Pipeline (its cache ``pipeline`` is a no-op), and the repro says it "only
    matters once Cache.Pipeline exists": it is about the informer *guard*. Decision: the v1.14 case
    runs the v1.14 profile with only ``cache_pipeline`` switched on -- Cache.Pipeline exists, the
    guard is v1.14.0's (only allocated statuses are protected), so the update rebuilds p1 from the
    pod as Pending and drops the reservation. The fix profiles run as they are.
    """
    r = REPROS["BR5"]
    c = r.cluster(prof, cache_pipeline=True) if guard == "v1.14.0" else r.cluster(prof)
    assert c.switches.informer_guard_pipelined is (guard == "fix")
    task = c.cache.find_task("test", "p1")
    c.cache.pipeline(task, "n1")
    assert task_state(c, "test/p1") == ("PIPELINED", "n1")
    assert node_cpu(c, "n1", "pipelined") == 1000

    def condition(p):
        p["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                      "message": "waiting"}]
        p["status"]["nominatedNodeName"] = ""
    c.update_pod("test/p1", condition)
    step = next(s for s in r.steps if s.get("check") == "cache task")
    exp = step["expect_with_v1.14.0_guard"] if guard == "v1.14.0" else step["expect_with_fix_guard"]
    assert task_state(c, "test/p1")[0] == exp["status"].upper()
    assert node_cpu(c, "n1", "pipelined") == exp["n1.pipelined_cpu"]


# ------------------------------------------------------------------------------------------ BR6

@pytest.mark.parametrize("prof", ["v1.14", *FIX_PROFILES])
def test_br6_pipelined_first_reorders_jobs(prof):
    """BR6 (S5): pga (ready, one more pending) vs pgb (gang of 2, not started) on 2000m free.

    v1.14: gang orders non-ready pgb first, b1 and b2 bind. pr5045: pga counts as "pipelined" and
    goes first; a2 binds and pgb is discarded. pr5045-fixed keeps the pipelined-first pass (only
    self-exclusion differs), so it shows the same regression.
    """
    r = REPROS["BR6"]
    c = r.cluster(prof)
    out = r.run_session(c)
    exp = expectation(r.session(1), "pr5045" if prof == "pr5045-fixed" else prof)
    check_outcome(out, exp, "session 1")


# ------------------------------------------------------------------------------------------ BR7

@pytest.mark.parametrize("prof", ["v1.14", *FIX_PROFILES])
def test_br7_stale_nomination_blocks_preemption(prof):
    """BR7 (#5131): g1 carries a stale nominatedNodeName=n1 where l1 runs.

    v1.14: preempt finds g1 "not eligible" (its nominated node passes the predicates), nothing is
    evicted -- in session 1 and in every later one. pr5045 / pr5045-fixed (by reading): g1 is
    rebuilt as Pipelined on n1, overflows (2000 > Idle 0 + Releasing 0) and the pre-pass
    un-pipelines it, clearing the nomination; preempt still reads the old nomination in session
    1, so the preemption happens in session 2 once the cleared nomination has come back through
    the informer: l1 evicted, g1 pipelined on n1 (the repro's "correct" outcome, one session late).
    """
    r = REPROS["BR7"]
    c = r.cluster(prof)
    s1 = r.session(1)
    out1 = r.run_session(c)
    assert out1.evicted == s1["expect_baseline"]["evicted"] == []
    if prof != "v1.14":
        # the pre-pass un-pipelined g1 and cleared its nomination; that write came back
        assert c.pods["ns/g1"]["status"]["nominatedNodeName"] == ""
        assert task_state(c, "ns/g1") == ("PENDING", "")
    out2 = r.run_session(c)
    if prof == "v1.14":
        assert out2.evicted == [], "v1.14 stays blocked"
        assert c.pods["ns/g1"]["status"]["nominatedNodeName"] == "n1"
    else:
        check_outcome(out2, s1["expect_correct"], "session 2")
