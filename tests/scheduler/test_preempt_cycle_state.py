"""A task's cycle state: preempt's nomination check on a task allocate skipped this session.

Volcano v1.14 gives each pending task an empty k8s CycleState per session; only PrePredicate fills
it. Preempt's ``taskEligibleToPreempt`` predicates the task's nominated node *before* its own
PrePredicate, so for a task that allocate skipped (queue overused: ``Allocatable`` is checked before
``PrePredicateFn``) the state-reading filters (NodePorts, InterPodAffinity, PodTopologySpread,
VolumeBinding) answer ``Error`` ("reading ... from cycleState: not found"). That is a FitError that
is not UnschedulableAndUnresolvable, so the task stays eligible and preempts again -- possibly on
another node, which moves its nomination. Seen on real vc-scheduler v1.14.1 at ``-v 3``
(examples/seed000-current-vs-proposed.yaml, cold standbys): of 207 preempt attempts by tasks whose
pod carried a nomination, the 171 whose task allocate had skipped went on to preempt (170; 1 stopped
by a terminating victim on the nominated node) and the 36 whose task allocate had predicated were
"not eligible ... already schedulable".
The model used to run the InterPodAffinity PreFilter on demand and pass, so such a task was never
eligible again: its nomination never moved while its copy of the pod was fresh (docs/fidelity.md,
allocation drift).
"""
from __future__ import annotations

from ha.scheduler.api import StatusCode
from ha.scheduler.scheduler import run_session

from .fw_helpers import conf, make_cache, node, pod, podgroup, queue

PRIORITY_CLASSES = [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                     "metadata": {"name": n, "resourceVersion": 1}, "value": v, "globalDefault": False}
                    for n, v in (("high", 1000), ("low", 10))]



def seed000_conf(predicate_args: dict | None = None):
    """examples/seed000-current-vs-proposed.yaml's scheduler_conf with Volcano's defaults (every
    unset flag on); enqueue is left out (the groups are Inqueue already)."""
    predicates = {"name": "predicates"} if predicate_args is None else {"name": "predicates",
                                                                         "arguments": predicate_args}
    return conf(actions=("allocate", "preempt"),
                tiers=(({"name": "priority"}, {"name": "gang"}, {"name": "conformance"}),
                       ({"name": "drf"}, predicates, {"name": "proportion"}, {"name": "nodeorder"}))
                ).with_defaults()


def full_queue(*, n1_victims_preemptable: bool, predicate_args: dict | None = None):
    """One queue, two 4-cpu nodes filled by the low-priority job ``low`` (2 cpu a pod); ``h1`` of
    the high-priority job ``high`` (same queue, minMember 1) waits, nominated on n1 by an earlier
    session. The queue has its whole share allocated, so allocate skips h1 (overused)."""
    low = [pod(f"l{i}", "pg-low", 2000, node_name=n, phase="Running", priority=10,
               preemptable=n1_victims_preemptable or n != "n1")
           for i, n in enumerate(("n1", "n1", "n2", "n2"), 1)]
    cache, io = make_cache(
        "v1.14", nodes=[node("n1", 4000), node("n2", 4000)], queues=[queue("q1")],
        podgroups=[podgroup("pg-low", 1, "q1", phase="Running", pc="low"),
                   podgroup("pg-high", 1, "q1", pc="high")],
        pods=low + [pod("h1", "pg-high", 2000, priority=1000, nominated="n1")],
        priority_classes=PRIORITY_CLASSES)
    return cache, io, seed000_conf(predicate_args)


def test_a_skipped_task_with_a_nomination_preempts_again():
    cache, io, c = full_queue(n1_victims_preemptable=True)
    res = run_session(cache, c, seed=1)
    assert res.ok, res.to_dict()
    # before the fix: no eviction, h1 "not eligible: the pod's nominated node is already schedulable"
    assert len(res.evictions) == 1 and res.evictions[0] in ("ns/l1", "ns/l2", "ns/l3", "ns/l4"), res.to_dict()
    assert res.committed_pipelines.get("ns/h1") in ("n1", "n2"), res.to_dict()


def test_the_nomination_moves_when_the_nominated_node_has_no_victims_left():
    # n1's pods may not be preempted any more; n2's may: Volcano preempts on n2 and writes the new
    # nomination (the model, before the fix, kept h1 ineligible and its nomination on n1)
    cache, io, c = full_queue(n1_victims_preemptable=False)
    res = run_session(cache, c, seed=1)
    assert res.ok, res.to_dict()
    assert res.evictions and all(k in ("ns/l3", "ns/l4") for k in res.evictions), res.to_dict()
    assert res.committed_pipelines.get("ns/h1") == "n2", res.to_dict()
    assert io.nominated_node_name("ns/h1") == "n2"


def test_without_a_state_reading_filter_the_nominated_node_still_blocks():
    # all four state-reading filters switched off: the predicate on n1 passes, as in Volcano, and
    # the nomination keeps h1 from preempting ("already schedulable")
    off = {"predicate.NodePortsEnable": False, "predicate.PodAffinityEnable": False,
           "predicate.PodTopologySpreadEnable": False, "predicate.VolumeBindingEnable": False}
    cache, io, c = full_queue(n1_victims_preemptable=True, predicate_args=off)
    res = run_session(cache, c, seed=1)
    assert res.ok, res.to_dict()
    assert res.evictions == [] and "ns/h1" not in res.committed_pipelines, res.to_dict()
    assert io.nominated_node_name("ns/h1") in (None, "n1")


def test_the_predicate_before_pre_predicate_is_an_error_and_after_it_passes():
    from ha.scheduler.framework import close_session, open_session
    cache, _io, c = full_queue(n1_victims_preemptable=True)
    ssn = open_session(cache, c, seed=1)
    try:
        h1 = next(t for j in ssn.jobs.values() for t in j.tasks.values() if t.name == "h1")
        err = ssn.predicate_fn(h1, ssn.nodes["n1"])
        assert err is not None and [s.code for s in err.status] == [StatusCode.ERROR]
        assert err.reasons() == ['reading "PreFilterNodePorts" from cycleState: not found']
        assert not err.status.contains_unschedulable_and_unresolvable()
        assert ssn.pre_predicate_fn(h1) is None
        assert ssn.predicate_fn(h1, ssn.nodes["n1"]) is None
    finally:
        close_session(ssn)
    # the state lives for one session: the next one starts empty again
    ssn = open_session(cache, c, seed=2)
    try:
        h1 = next(t for j in ssn.jobs.values() for t in j.tasks.values() if t.name == "h1")
        assert ssn.predicate_fn(h1, ssn.nodes["n1"]) is not None
    finally:
        close_session(ssn)
