"""The two un-pipeline rules of PR #5045 and the profiles that carry them, in multi-session runs
(real cache, RecordingIO, real plugins; informer events applied by hand between sessions).

* ``fastpath_unpipeline`` — the PR description's fix for a task competing with its own reservation,
  as written (ba1e9c5bd, profile ``seed000``): a task Pipelined on its nominated node that no longer
  fits that node's FutureIdle is un-pipelined in the session and goes through the normal node scan;
* ``overflow_unpipeline`` — the PR head's pre-pass (2053c7114, profile ``pr5045``): a node whose
  Pipelined exceeds Idle + Releasing loses its lowest-priority reservations, in session and cache;
* ``futureidle_unpipeline`` — the old name of ``overflow_unpipeline``, still accepted.
"""
from __future__ import annotations

import pytest

from ha.errors import BadInput
from ha.scheduler.api import TaskStatus
from ha.scheduler.profiles import DEPRECATED_SWITCHES, PROFILES, Switches, profile, profile_names
from ha.scheduler.scheduler import Scheduler

from .fw_helpers import GANG_ALL, PREDICATES, cache_task, conf, make_cache, node, pod, podgroup

S = TaskStatus
ALLOC = conf(["allocate"], [[GANG_ALL, PREDICATES]])


# ---------------------------------------------------------------------------------- profiles

def test_seed000_is_the_seed_as_written_and_pr5045_the_head():
    seed = set(PROFILES["seed000"].enabled())
    assert seed == {"cache_pipeline", "three_way_commit", "pipelined_first", "repipeline_guard",
                    "update_task_on_allocate", "fastpath_unpipeline", "sync_nominated_node",
                    "informer_guard_pipelined", "reconstruct_pipelined", "update_task_on_bind"}
    head = set(PROFILES["pr5045"].enabled())
    assert head == (seed - {"fastpath_unpipeline"}) | {"overflow_unpipeline"}
    # the fixes build on the head, not on the PR description's rule
    for name in ("pr5045-fixed", "pr5045-s4fixed", "pr5045-s6fixed"):
        sw = PROFILES[name]
        assert sw.overflow_unpipeline and not sw.fastpath_unpipeline and sw.self_exclusion, name
    for name in ("v1.14", "annotations", "nomination-only"):
        assert not PROFILES[name].overflow_unpipeline and not PROFILES[name].fastpath_unpipeline


def test_the_old_switch_name_means_the_overflow_prepass():
    assert DEPRECATED_SWITCHES == {"futureidle_unpipeline": "overflow_unpipeline"}
    assert profile("pr5045", futureidle_unpipeline=False) == profile("pr5045", overflow_unpipeline=False)
    assert Switches().with_(futureidle_unpipeline=True) == Switches(overflow_unpipeline=True)
    assert not Switches().with_(futureidle_unpipeline=True).fastpath_unpipeline
    assert Switches().with_(futureidle_unpipeline=True, overflow_unpipeline=True).overflow_unpipeline
    with pytest.raises(BadInput, match="futureidle_unpipeline.*overflow_unpipeline.*disagree"):
        Switches().with_(futureidle_unpipeline=True, overflow_unpipeline=False)
    assert "futureidle_unpipeline" not in Switches().to_dict()


# ------------------------------------------------------------------ fastpath_unpipeline (S1)

def releasing_then_free(sw):
    """n1 2000m held by v (Running, deleting); p (2000m) pending: session 1 pipelines p on n1."""
    return make_cache(sw, nodes=[node("n1", 2000)], podgroups=[podgroup("pgp", 1), podgroup("pgv", 1)],
                      pods=[pod("v", "pgv", 2000, node_name="n1", phase="Running", deleting=True),
                            pod("p", "pgp", 2000)])


@pytest.mark.parametrize("sw,binds", [
    (profile("seed000"), True),                                 # the PR description's rule frees the node
    (profile("seed000", fastpath_unpipeline=False), False),     # without it: self-competition
    (profile("pr5045"), False),                                 # the head removed the rule (S1)
    (profile("pr5045-fixed"), True),                            # self-exclusion instead
])
def test_fastpath_unpipeline_lets_a_self_competing_task_bind(sw, binds):
    c, io = releasing_then_free(sw)
    sched = Scheduler(c, ALLOC, seed=1)
    first = sched.run_once()
    assert first.committed_pipelines == {"ns/p": "n1"} and io.binds == {}
    assert cache_task(c, "ns/p").status == S.PIPELINED and c.nodes["n1"].pipelined.milli_cpu == 2000
    c.delete_pod(io.pods["ns/v"])        # the victim is gone: n1 Idle 2000, Pipelined 2000
    for _ in range(3):
        sched.run_once()
    if binds:
        assert io.binds == {"ns/p": "n1"}
        assert cache_task(c, "ns/p").status == S.BINDING and c.nodes["n1"].pipelined.milli_cpu == 0
    else:   # FutureIdle = 2000 + 0 - 2000 counts p's own reservation: p never binds
        assert io.binds == {}
        assert cache_task(c, "ns/p").status == S.PIPELINED and c.nodes["n1"].idle.milli_cpu == 2000


def test_fastpath_unpipeline_is_session_only_until_a_commit_replaces_the_task():
    """The PR description's UnPipeline is ba1e9c5bd's session-only call: when the node scan finds
    no other place, the cache keeps the reservation and the session ends with the task Pending."""
    c, io = make_cache(profile("seed000"), nodes=[node("n1", 2000)],
                       podgroups=[podgroup("pgp", 1), podgroup("pgr", 1)],
                       pods=[pod("r", "pgr", 2000, node_name="n1", phase="Running"),
                             pod("p", "pgp", 2000, nominated="n1")])
    assert cache_task(c, "ns/p").status == S.PIPELINED          # rebuilt from the nomination
    res = Scheduler(c, ALLOC, seed=1).run_once()
    assert res.ok and res.pipelined == {} and res.committed_pipelines == {} and io.binds == {}
    assert cache_task(c, "ns/p").status == S.PIPELINED and c.nodes["n1"].pipelined.milli_cpu == 2000
    # only the session-end condition: the nomination is neither cleared nor written again
    assert [(k, st["nominatedNodeName"], st["conditions"][-1]["reason"]) for k, st in io.status_writes] \
        == [("ns/p", "n1", "Unschedulable")]
    # the head's rule instead drops the reservation in the cache at once (S7)
    c, io = make_cache(profile("pr5045"), nodes=[node("n1", 2000)],
                       podgroups=[podgroup("pgp", 1), podgroup("pgr", 1)],
                       pods=[pod("r", "pgr", 2000, node_name="n1", phase="Running"),
                             pod("p", "pgp", 2000, nominated="n1")])
    Scheduler(c, ALLOC, seed=1).run_once()
    assert cache_task(c, "ns/p").status == S.PENDING and c.nodes["n1"].pipelined.milli_cpu == 0


def test_fastpath_is_taken_by_a_pending_task_with_a_nomination_only_under_the_seed():
    """ba1e9c5bd tries the nominated node for every task with a nomination; the head only for a
    Pipelined one. A Pending task nominated to n2 (n1 scores better: emptier) shows the difference."""
    def cl(sw):
        c, io = make_cache(sw, nodes=[node("n1", 4000), node("n2", 4000)],
                           podgroups=[podgroup("pgp", 1), podgroup("pgr", 1)],
                           pods=[pod("r", "pgr", 2000, node_name="n2", phase="Running"),
                                 pod("p", "pgp", 1000)])
        t = cache_task(c, "ns/p")
        t.nominated_node_name = "n2"     # a nomination the cache holds on a Pending task
        return c, io
    tiers = [[GANG_ALL, PREDICATES, {"name": "nodeorder", "enabledNodeOrder": True}]]
    c, io = cl(profile("seed000"))
    Scheduler(c, conf(["allocate"], tiers), seed=1).run_once()
    assert io.binds == {"ns/p": "n2"}
    c, io = cl(profile("pr5045"))
    Scheduler(c, conf(["allocate"], tiers), seed=1).run_once()
    assert io.binds == {"ns/p": "n1"}


# ------------------------------------------------------------------- overflow_unpipeline

def taken_over(sw):
    """Session 1 pipelines p on n1 (v releasing there; n2 full with w). Then v is gone and r takes
    n1, while w finishes on n2: p's reservation on n1 overflows, n2 is free."""
    c, io = make_cache(sw, nodes=[node("n1", 2000), node("n2", 2000)],
                       podgroups=[podgroup("pgp", 1), podgroup("pgv", 1), podgroup("pgw", 1),
                                  podgroup("pgr", 1)],
                       pods=[pod("v", "pgv", 2000, node_name="n1", phase="Running", deleting=True),
                             pod("w", "pgw", 2000, node_name="n2", phase="Running"),
                             pod("p", "pgp", 2000)])
    sched = Scheduler(c, ALLOC, seed=1)
    assert sched.run_once().committed_pipelines == {"ns/p": "n1"}
    c.delete_pod(io.pods["ns/v"])
    c.add_pod(pod("r", "pgr", 2000, node_name="n1", phase="Running"))
    c.delete_pod(io.pods["ns/w"])
    assert c.nodes["n1"].has_pipelined_overflow()
    return c, io, sched


@pytest.mark.parametrize("sw,moved", [
    (profile("pr5045"), True),
    (profile("pr5045", overflow_unpipeline=False), False),
    (profile("pr5045", futureidle_unpipeline=False), False),   # the deprecated name, same switch
    (profile("seed000"), False),
])
def test_overflow_unpipeline_moves_a_stale_reservation(sw, moved):
    c, io, sched = taken_over(sw)
    res = sched.run_once()
    if moved:   # the pre-pass drops the reservation (cache too), allocate binds p on n2
        assert io.binds == {"ns/p": "n2"} and c.nodes["n1"].pipelined.milli_cpu == 0
        assert ("ns/p", "") in [(k, s.get("nominatedNodeName")) for k, s in io.status_writes]
    else:
        # the seed000 profile's fast path un-pipelines p in the session and the scan picks n2, but the
        # cache still holds p Pipelined on n1: AddBindTask fails ("already on different node", S4) and
        # the reservation stays; without any rule the same happens from the plain node scan
        assert io.binds == {}
        assert any("different node" in e for e in res.errors), res.errors
        assert cache_task(c, "ns/p").status == S.PIPELINED and c.nodes["n1"].pipelined.milli_cpu == 2000


# --------------------------------------------------------- Volcano's own tests, every profile

def _action_files():
    import json
    from pathlib import Path
    data = Path(__file__).resolve().parents[1] / "data" / "scenarios"
    return [f for f in sorted(data.glob("*.json")) if json.loads(f.read_text())["kind"] == "action"]


@pytest.mark.parametrize("name", profile_names())
def test_every_action_scenario_passes_under_every_profile(name):
    """Volcano's single-session action tests hold under every profile, seed000 included (none of
    them starts with a reservation a rule would drop)."""
    from ha.scenario.loader import load_scenario
    from ha.scenario.runner import run_scenario
    files = _action_files()
    assert len(files) == 27
    for path in files:
        res = run_scenario(load_scenario(path), name)
        assert res.ok is True and res.mismatches == [], f"{name} {path.stem}: {res.mismatches}"
