"""Aggregator tier/vote rules of the session (docs/volcano-semantics.md §5.3, S9) and conf loading."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from ha.errors import BadInput
from ha.scheduler.api import ValidateResult
from ha.scheduler.conf import PluginOption, SchedulerConf, Tier, default_conf
from ha.scheduler.framework import ABSTAIN, PERMIT, REJECT
from ha.scheduler.framework.session import Session
from ha.scheduler.framework.util import PriorityQueue


def T(uid: str, job: str = "j") -> SimpleNamespace:
    return SimpleNamespace(uid=uid, job=job, name=f"p-{uid}", creation_timestamp=0.0)


def ssn_with(*tiers: list[PluginOption]) -> Session:
    return Session(None, SchedulerConf(tiers=[Tier(list(t)) for t in tiers]))


def opt(name: str, **flags: bool) -> PluginOption:
    return PluginOption(name=name, **flags)


# -- JobReady ---------------------------------------------------------------------------------

def test_job_ready_is_and_over_enabled_plugins_and_true_when_none():
    s = ssn_with([opt("a", enabled_job_ready=True), opt("b", enabled_job_ready=True)])
    assert s.job_ready(object()) is True  # nobody registered
    s.add_job_ready_fn("a", lambda j: True)
    s.add_job_ready_fn("b", lambda j: False)
    assert s.job_ready(object()) is False
    s.add_job_ready_fn("b", lambda j: True)
    assert s.job_ready(object()) is True


def test_unset_flag_means_disabled():
    s = ssn_with([opt("a")])  # enabled_job_ready unset
    s.add_job_ready_fn("a", lambda j: False)
    assert s.job_ready(object()) is True
    s2 = Session(None, SchedulerConf(tiers=[Tier([opt("a").with_defaults()])]))
    s2.add_job_ready_fn("a", lambda j: False)
    assert s2.job_ready(object()) is False


# -- JobPipelined votes -----------------------------------------------------------------------

def test_job_pipelined_votes():
    s = ssn_with([opt("a", enabled_job_pipelined=True), opt("b", enabled_job_pipelined=True)],
                 [opt("c", enabled_job_pipelined=True)])
    assert s.job_pipelined(object()) is True  # all abstain (none registered)
    s.add_job_pipelined_fn("a", lambda j: ABSTAIN)
    s.add_job_pipelined_fn("b", lambda j: ABSTAIN)
    s.add_job_pipelined_fn("c", lambda j: REJECT)
    assert s.job_pipelined(object()) is False  # tier 1 abstains -> tier 2 rejects
    s.add_job_pipelined_fn("a", lambda j: PERMIT)
    assert s.job_pipelined(object()) is True  # permit in tier 1 ends the vote before tier 2
    s.add_job_pipelined_fn("b", lambda j: REJECT)
    assert s.job_pipelined(object()) is False  # any reject within the deciding tier


def test_job_enqueueable_uses_job_enqueued_flag():
    s = ssn_with([opt("a", enabled_job_enqueued=True), opt("b")])
    s.add_job_enqueueable_fn("b", lambda j: REJECT)  # flag unset: ignored
    assert s.job_enqueueable(object()) is True
    s.add_job_enqueueable_fn("a", lambda j: REJECT)
    assert s.job_enqueueable(object()) is False


# -- JobStarving ------------------------------------------------------------------------------

def test_job_starving_false_when_none_and_first_tier_with_fn_decides():
    s = ssn_with([opt("a", enabled_job_starving=True)], [opt("b", enabled_job_starving=True)])
    assert s.job_starving(object()) is False
    s.add_job_starving_fns("b", lambda j: True)
    assert s.job_starving(object()) is True  # tier 1 has none: tier 2 decides
    s.add_job_starving_fns("a", lambda j: False)
    assert s.job_starving(object()) is False
    s.add_job_starving_fns("a", lambda j: True)
    s.add_job_starving_fns("b", lambda j: False)
    assert s.job_starving(object()) is True  # tier 2 never consulted


# -- Preemptable / Reclaimable ----------------------------------------------------------------

def test_preemptable_intersection_within_tier():
    a, b, c = T("a"), T("b"), T("c")
    s = ssn_with([opt("p1", enabled_preemptable=True), opt("p2", enabled_preemptable=True)])
    s.add_preemptable_fn("p1", lambda pr, ps: ([a, b], PERMIT))
    s.add_preemptable_fn("p2", lambda pr, ps: ([b, c], PERMIT))
    assert [v.uid for v in s.preemptable(T("x"), [a, b, c])] == ["b"]


def test_preemptable_abstain_is_skipped():
    a, b = T("a"), T("b")
    s = ssn_with([opt("p1", enabled_preemptable=True), opt("p2", enabled_preemptable=True)])
    s.add_preemptable_fn("p1", lambda pr, ps: ([], ABSTAIN))
    s.add_preemptable_fn("p2", lambda pr, ps: ([a], PERMIT))
    assert [v.uid for v in s.preemptable(T("x"), [a, b])] == ["a"]


def test_preemptable_empty_set_in_tier1_falls_through_to_tier2():
    a, b = T("a"), T("b")
    s = ssn_with([opt("p1", enabled_preemptable=True), opt("p2", enabled_preemptable=True)],
                 [opt("p3", enabled_preemptable=True)])
    s.add_preemptable_fn("p1", lambda pr, ps: ([], PERMIT))      # empty: stops tier 1, no veto
    s.add_preemptable_fn("p2", lambda pr, ps: ([b], PERMIT))     # never consulted
    s.add_preemptable_fn("p3", lambda pr, ps: ([a], PERMIT))
    assert [v.uid for v in s.preemptable(T("x"), [a, b])] == ["a"]


def test_preemptable_empty_intersection_takes_next_candidates_as_is():
    a, b, c = T("a"), T("b"), T("c")
    s = ssn_with([opt("p1", enabled_preemptable=True), opt("p2", enabled_preemptable=True),
                  opt("p3", enabled_preemptable=True)])
    s.add_preemptable_fn("p1", lambda pr, ps: ([a], PERMIT))
    s.add_preemptable_fn("p2", lambda pr, ps: ([b], PERMIT))     # intersection empty -> nil
    s.add_preemptable_fn("p3", lambda pr, ps: ([c], PERMIT))     # taken as is
    assert [v.uid for v in s.preemptable(T("x"), [a, b, c])] == ["c"]


def test_reclaimable_uses_its_own_flag():
    a = T("a")
    s = ssn_with([opt("r", enabled_preemptable=True)])
    s.add_reclaimable_fn("r", lambda pr, ps: ([a], PERMIT))
    assert s.reclaimable(T("x"), [a]) == []
    s.tiers[0].plugins[0].enabled_reclaimable = True
    assert [v.uid for v in s.reclaimable(T("x"), [a])] == ["a"]


# -- OR / AND / first-failing -----------------------------------------------------------------

def test_overused_or_allocatable_and_preemptive_and():
    s = ssn_with([opt("a", enabled_overused=True, enabled_allocatable=True, enabled_preemptive=True),
                  opt("b", enabled_overused=True, enabled_allocatable=True, enabled_preemptive=True)])
    s.add_overused_fn("a", lambda q: False)
    s.add_overused_fn("b", lambda q: True)
    assert s.overused(object()) is True
    s.add_allocatable_fn("a", lambda q, t: True)
    s.add_allocatable_fn("b", lambda q, t: False)
    assert s.allocatable(object(), object()) is False
    s.add_preemptive_fn("a", lambda q, t: True)
    assert s.preemptive(object(), object()) is True


def test_job_valid_first_failure_without_flags():
    s = ssn_with([opt("a"), opt("b")])
    s.add_job_valid_fn("a", lambda j: None)
    s.add_job_valid_fn("b", lambda j: ValidateResult(False, "NotEnoughPods", "1/2"))
    vr = s.job_valid(object())
    assert vr is not None and vr.reason == "NotEnoughPods"


# -- order functions --------------------------------------------------------------------------

def test_order_first_nonzero_wins_and_fallbacks():
    s = ssn_with([opt("a", enabled_job_order=True), opt("b", enabled_job_order=True),
                  opt("c", enabled_task_order=True)])
    j1 = SimpleNamespace(uid="j1", creation_timestamp=2.0)
    j2 = SimpleNamespace(uid="j2", creation_timestamp=1.0)
    assert s.job_order_fn(j2, j1) is True  # fallback: creation time
    s.add_job_order_fn("a", lambda l, r: 0)
    s.add_job_order_fn("b", lambda l, r: -1 if l.uid == "j1" else 1)
    assert s.job_order_fn(j1, j2) is True
    # tasks: fallback is the pod-name index, then creation time, then uid
    t10 = SimpleNamespace(uid="u1", name="job-t-10", creation_timestamp=0.0)
    t2 = SimpleNamespace(uid="u2", name="job-t-2", creation_timestamp=0.0)
    assert s.task_order_fn(t2, t10) is True
    s.add_task_order_fn("c", lambda l, r: -1 if l.uid == "u1" else 1)
    assert s.task_order_fn(t10, t2) is True


def test_victims_priority_queue_same_job_reverse_task_order():
    s = ssn_with([opt("prio", enabled_task_order=True)])
    s.add_task_order_fn("prio", lambda l, r: -1 if l.priority > r.priority else (1 if l.priority < r.priority else 0))
    hi = SimpleNamespace(uid="h", job="j", name="a-b-1", priority=10, creation_timestamp=0.0)
    lo = SimpleNamespace(uid="l", job="j", name="a-b-2", priority=1, creation_timestamp=0.0)
    q = s.build_victims_priority_queue([hi, lo], SimpleNamespace(job="j"))
    assert [q.pop().uid, q.pop().uid] == ["l", "h"]


def test_priority_queue_pops_in_order_and_matches_go_heap_on_ties():
    q = PriorityQueue(lambda a, b: a[0] < b[0])
    for item in [(3, "a"), (1, "b"), (2, "c"), (1, "d"), (3, "e")]:
        q.push(item)
    out = [q.pop() for _ in range(5)]
    assert [k for k, _ in out] == [1, 1, 2, 3, 3]
    # Go's container/heap yields (1,"b") before (1,"d") for this push order
    assert out[0] == (1, "b")
    assert q.pop() is None and q.empty()


def _go_heap_pops(less, pushes_and_pops):
    """Go's container/heap (heap.Push: append + up; heap.Pop: swap 0 and n-1, down(0, n-1),
    take the last), written out plainly: the reference the queue must match pop for pop."""
    h, out = [], []

    def up(j):
        while True:
            i = (j - 1) // 2
            if i == j or j <= 0 or not less(h[j], h[i]):
                break
            h[i], h[j] = h[j], h[i]
            j = i

    def down(i, n):
        while True:
            j1 = 2 * i + 1
            if j1 >= n or j1 < 0:
                break
            j = j1
            if j1 + 1 < n and less(h[j1 + 1], h[j1]):
                j = j1 + 1
            if not less(h[j], h[i]):
                break
            h[i], h[j] = h[j], h[i]
            i = j

    for op in pushes_and_pops:
        if op is None:
            if h:
                n = len(h) - 1
                h[0], h[n] = h[n], h[0]
                down(0, n)
                out.append(h.pop())
        else:
            h.append(op)
            up(len(h) - 1)
    return out


def test_priority_queue_matches_go_heap_pop_for_pop_with_many_ties():
    import random
    rng = random.Random(5)
    less = lambda a, b: a[0] < b[0]   # noqa: E731 -- ties on the key, told apart by the tag
    for _ in range(200):
        ops = [None if rng.random() < 0.3 else (rng.randrange(4), i) for i in range(rng.randrange(1, 40))]
        q, got = PriorityQueue(less), []
        for op in ops:
            if op is None:
                if not q.empty():
                    got.append(q.pop())
            else:
                q.push(op)
        while not q.empty():
            got.append(q.pop())
        want = _go_heap_pops(less, ops + [None] * len(ops))
        assert got == want


# -- conf -------------------------------------------------------------------------------------

def test_conf_from_dict_flags_and_errors():
    c = SchedulerConf.from_dict({"actions": "enqueue, allocate",
                                 "tiers": [{"plugins": [{"name": "gang", "enableJobReady": True,
                                                         "enabledJobPipelined": False,
                                                         "EnablePreemptive": True}]}]},
                                source="x.yaml")
    g = c.tiers[0].plugins[0]
    assert c.actions == ["enqueue", "allocate"]
    assert g.enabled_job_ready is True and g.enabled_job_pipelined is False and g.enabled_preemptive is True
    assert g.enabled_job_order is None  # unset stays off in files
    assert c.enabled_action_map == {"enqueue": True, "allocate": True}
    with pytest.raises(BadInput, match=r"x.json: tiers\[0\]\[0\]\.enabledJobReadyy"):
        SchedulerConf.from_dict({"tiers": [[{"name": "gang", "enabledJobReadyy": True}]]}, source="x.json")
    with pytest.raises(BadInput, match=r"x.json: actions\[1\]: unknown action 'shuffle'"):
        SchedulerConf.from_dict({"actions": ["allocate", "shuffle"]}, source="x.json")
    with pytest.raises(BadInput, match=r"x.json: tiers\[0\]\[0\]\.enabledJobReady: expected true, false or null"):
        SchedulerConf.from_dict({"tiers": [[{"name": "gang", "enabledJobReady": "yes"}]]}, source="x.json")
    with pytest.raises(BadInput, match="unknown scheduler configuration field"):
        SchedulerConf.from_dict({"actoins": []}, source="x.json")


def test_default_conf_is_volcano_default_plus_preempt_reclaim_all_flags_on():
    c = default_conf()
    assert c.actions == ["enqueue", "allocate", "preempt", "reclaim", "backfill"]
    assert [p.name for p in c.tiers[0].plugins] == ["priority", "gang", "conformance"]
    assert [p.name for p in c.tiers[1].plugins] == ["overcommit", "drf", "predicates", "proportion", "nodeorder"]
    assert all(p.is_enabled("enabled_job_starving") and p.is_enabled("enabled_preemptive")
               for t in c.tiers for p in t.plugins)
    rt = SchedulerConf.from_dict({k: v for k, v in c.to_dict().items()}, source="rt")
    assert rt.tiers[1].plugins[4].is_enabled("enabled_node_order") and rt.actions == c.actions


def test_conf_from_scenario_file():
    import json
    from pathlib import Path
    p = Path(__file__).parents[1] / "data" / "scenarios" / "preempt__one-task-of-other-job.json"
    c = SchedulerConf.from_scenario(json.loads(p.read_text()), source=p.name)
    assert c.actions == ["preempt"]
    assert c.registered_builders == ("conformance", "gang", "priority", "proportion")
    gang = c.tiers[0].plugins[1]
    assert gang.name == "gang" and gang.enabled_job_pipelined and not gang.is_enabled("enabled_job_ready")
    assert c.action_arguments("preempt").get_bool("enableTopologyAwarePreemption", True) is False


def test_compare_task_reads_name_indexes_the_same_from_its_table():
    from ha.scheduler.framework import util
    a = SimpleNamespace(uid="u2", name="job-a-2", creation_timestamp=5.0)
    b = SimpleNamespace(uid="u1", name="job-a-10", creation_timestamp=1.0)
    c = SimpleNamespace(uid="u0", name="job-a-x", creation_timestamp=3.0)
    d = SimpleNamespace(uid="u3", name="solo", creation_timestamp=3.0)
    for _ in range(2):   # the first round fills the name table, the second reads it
        assert util.compare_task(a, b) is True and util.compare_task(b, a) is False   # 2 < 10, not "10" < "2"
        assert util.compare_task(b, c) is True    # no integer index: creation time decides
        assert util.compare_task(c, d) is True    # same creation time: the uid decides
        assert util._NAME_INDEX["job-a-10"] == 10 and util._NAME_INDEX["job-a-x"] is None
