"""The gang-aware eviction design's worked examples of victim selection as unit tests: the
Safe/Whole bundles of Job-A and Job-B, the four ROI tables (Local Score, Global Score, Efficiency,
Winner), the 0.05 threshold, and the batched plugin validation with atomic enforcement — on real
JobInfo/TaskInfo built by a real cache and sessions opened with real plugins."""
from __future__ import annotations

import pytest

from ha.scheduler.api import Resource
from ha.scheduler.framework import registry
from ha.scheduler.framework.gang_eviction import (ROI_THRESHOLD, SAFE, WHOLE, Bundle, GangEvictionContext,
                                                  calculate_roi, compare_bundles, create_bundles,
                                                  global_cost_score, local_gain_score, run_bundle_selection,
                                                  sort_bundles)
from tests.scheduler.fw_helpers import PRIORITY_ALL, conf, make_cache, node, pod, podgroup, session

GPU = "nvidia.com/gpu"
GiB = 2**30


def res(cpu: float = 0, mem_gb: float = 0, gpu: float = 0) -> Resource:
    """cpu in cores, memory in GB, GPUs as counts (Resource.from_plain units)."""
    d = {}
    if cpu:
        d["cpu"] = cpu * 1000
    if mem_gb:
        d["memory"] = mem_gb * GiB
    if gpu:
        d[GPU] = gpu
    return Resource.from_plain(d)


def _pod(name: str, pg: str, *, node_name: str, created: float, role: str = "", priority: int | None = None) -> dict:
    p = pod(name, pg, 1000, node_name=node_name, phase="Running", priority=priority)
    p["metadata"]["creationTimestamp"] = created
    if role:
        p["metadata"]["annotations"]["volcano.sh/task-spec"] = role
    return p


def _session(pods: list[dict], pgs: list[dict], tiers=(), nodes=None):
    cache, _ = make_cache(nodes=nodes or [node("n1", 16000), node("n2", 16000)], podgroups=pgs, pods=pods)
    return session(cache, conf(tiers=tiers))


def test_example_1_job_a_five_running_min_three():
    pg = podgroup("job-a", 3)
    pods = [_pod(f"job-a-task-{i}", "job-a", node_name="n1", created=float(i)) for i in range(1, 6)]
    ssn = _session(pods, [pg])
    job = ssn.jobs["ns/job-a"]
    bundles = create_bundles(job, list(job.tasks.values()), res(cpu=1))
    assert [b.kind for b in bundles] == [SAFE, WHOLE]
    safe, whole = bundles
    # Running (5) - MinAvailable (3) = 2 surplus: Task4 and Task5 (the youngest)
    assert sorted(safe.task_names()) == ["job-a-task-4", "job-a-task-5"]
    assert sorted(whole.task_names()) == ["job-a-task-1", "job-a-task-2", "job-a-task-3"]
    assert not safe.broken
    # a Whole bundle's global cost is the whole gang (5 cpu), a Safe bundle's its own tasks (2 cpu)
    assert whole.global_resources.milli_cpu == 5000 and safe.global_resources.milli_cpu == 2000


def test_example_2_job_b_roles():
    pg = podgroup("job-b", 4)
    pg["spec"]["minTaskMember"] = {"driver": 1, "worker": 3}
    pods = [_pod("driver-0", "job-b", node_name="n1", created=0.0, role="driver")]
    pods += [_pod(f"worker-{i}", "job-b", node_name="n1" if i < 2 else "n2", created=float(i + 1), role="worker")
             for i in range(4)]
    ssn = _session(pods, [pg])
    job = ssn.jobs["ns/job-b"]
    assert job.task_min_available_total == 4 and job.min_available == 4
    safe, whole = create_bundles(job, list(job.tasks.values()), res(cpu=1))
    assert safe.kind == SAFE and safe.task_names() == ["worker-3"]
    assert whole.kind == WHOLE
    assert sorted(whole.task_names()) == ["driver-0", "worker-0", "worker-1", "worker-2"]


def test_elastic_job_ignores_role_minimums_and_broken_gang_is_safe():
    pg = podgroup("el", 2)
    pg["spec"]["minTaskMember"] = {"driver": 1, "worker": 3}   # Σ role mins 4 > minAvailable 2
    pods = [_pod("driver-0", "el", node_name="n1", created=0.0, role="driver")]
    pods += [_pod(f"worker-{i}", "el", node_name="n1", created=float(i + 1), role="worker") for i in range(3)]
    broken_pg = podgroup("br", 3)
    pods += [_pod("br-0", "br", node_name="n1", created=0.0)]
    pods += [pod("br-1", "br", 1000), pod("br-2", "br", 1000)]   # Pending: Ready 1 < min 3
    ssn = _session(pods, [pg, broken_pg])
    el = ssn.jobs["ns/el"]
    safe, whole = create_bundles(el, list(el.tasks.values()), res(cpu=1))
    assert len(safe.tasks) == 2 and len(whole.tasks) == 2   # global surplus 4 - 2, roles not enforced
    br = ssn.jobs["ns/br"]
    local = [t for t in br.tasks.values() if t.node_name]
    (only,) = create_bundles(br, local, res(cpu=1))
    assert only.kind == SAFE and only.broken and only.task_names() == ["br-0"]


# -- ROI tables (the gang-aware eviction design's worked examples) ----------------------------------

ROI_TABLES = [
    # (example, needed, victim, local, global, local score, global score, efficiency)
    (1, res(gpu=2), "A", res(gpu=2), res(gpu=4), 1.0, 2.0, 0.5),
    (1, res(gpu=2), "B", res(gpu=2), res(gpu=2), 1.0, 1.0, 1.0),
    (2, res(cpu=10), "C", res(cpu=10), res(cpu=20), 1.0, 2.0, 0.5),
    (2, res(cpu=10), "D", res(cpu=2), res(cpu=2), 0.2, 0.2, 1.0),
    (3, res(cpu=4, mem_gb=16), "E", res(cpu=4, mem_gb=4), res(cpu=4, mem_gb=4), 1.25, 1.25, 1.0),
    (3, res(cpu=4, mem_gb=16), "F", res(cpu=2, mem_gb=8), res(cpu=2, mem_gb=8), 1.0, 1.0, 1.0),
    (4, res(cpu=4), "G", res(cpu=4), res(cpu=4), 1.0, 1.0, 1.0),
    (4, res(cpu=4), "H", res(cpu=4, gpu=1), res(cpu=4, gpu=1), 1.0, 1.0, 1.0),   # GPU not requested: ignored
]


@pytest.mark.parametrize("example,needed,victim,local,global_,ls,gs,eff", ROI_TABLES,
                         ids=[f"ex{r[0]}-{r[2]}" for r in ROI_TABLES])
def test_roi_tables(example, needed, victim, local, global_, ls, gs, eff):
    assert local_gain_score(local, needed) == pytest.approx(ls)
    assert global_cost_score(global_, needed) == pytest.approx(gs)
    assert calculate_roi(local, global_, needed) == pytest.approx(eff)


def _whole(ssn, uid: str, local: Resource, global_: Resource) -> Bundle:
    """A Whole bundle of the session job ``uid`` whose one local task frees ``local``."""
    job = ssn.jobs[uid]
    t = next(iter(job.tasks.values())).clone()
    t.resreq = local.clone()
    return Bundle(WHOLE, job, [t], global_.clone())


@pytest.mark.parametrize("needed,winner,a,b", [
    (res(gpu=2), "B", ("A", res(gpu=2), res(gpu=4)), ("B", res(gpu=2), res(gpu=2))),
    (res(cpu=10), "D", ("C", res(cpu=10), res(cpu=20)), ("D", res(cpu=2), res(cpu=2))),
    (res(cpu=4, mem_gb=16), None, ("E", res(cpu=4, mem_gb=4), res(cpu=4, mem_gb=4)),
     ("F", res(cpu=2, mem_gb=8), res(cpu=2, mem_gb=8))),
    (res(cpu=4), None, ("G", res(cpu=4), res(cpu=4)), ("H", res(cpu=4, gpu=1), res(cpu=4, gpu=1))),
], ids=["ex1", "ex2", "ex3-tie", "ex4-tie"])
def test_roi_winner_column(needed, winner, a, b):
    """Winner: the higher ROI goes first; a Tie (within 0.05) falls through to job order and then
    creation time, so swapping the creation times swaps the order."""
    pgs = []
    for i, (name, _, _) in enumerate((a, b)):
        pg = podgroup(name.lower(), 1)
        pg["metadata"]["creationTimestamp"] = float(i)
        pgs.append(pg)
    pods = [_pod(f"{p['metadata']['name']}-0", p["metadata"]["name"], node_name="n1", created=0.0) for p in pgs]
    ssn = _session(pods, pgs, tiers=[[PRIORITY_ALL]])
    ba = _whole(ssn, f"ns/{a[0].lower()}", a[1], a[2])
    bb = _whole(ssn, f"ns/{b[0].lower()}", b[1], b[2])
    order = sort_bundles([ba, bb], needed, ssn=ssn)
    if winner is not None:
        assert order[0].job.name == winner.lower()
        assert sort_bundles([bb, ba], needed, ssn=ssn)[0].job.name == winner.lower()
    else:
        assert abs(ba.roi(needed) - bb.roi(needed)) <= ROI_THRESHOLD
        assert [x.job.name for x in order] == [a[0].lower(), b[0].lower()]   # older job first
        ba.job.creation_timestamp, bb.job.creation_timestamp = 5.0, 1.0
        assert [x.job.name for x in sort_bundles([ba, bb], needed, ssn=ssn)] == [b[0].lower(), a[0].lower()]


def test_roi_threshold_against_job_priority():
    """ROI overrides job order only when the two ROIs differ by more than 0.05."""
    pgs = [podgroup("lowp", 1, pc="low"), podgroup("highp", 1, pc="high")]
    pcs = [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": n, "uid": n, "resourceVersion": 1, "creationTimestamp": 0.0,
                         "labels": {}, "annotations": {}}, "value": v, "globalDefault": False,
            "preemptionPolicy": "PreemptLowerPriority"} for n, v in (("low", 10), ("high", 1000))]
    pods = [_pod("lowp-0", "lowp", node_name="n1", created=0.0), _pod("highp-0", "highp", node_name="n1", created=0.0)]
    cache, _ = make_cache(nodes=[node("n1", 16000)], podgroups=pgs, pods=pods, priority_classes=pcs)
    ssn = session(cache, conf(tiers=[[PRIORITY_ALL]]))
    needed = res(cpu=10)
    # lowp ROI 0.97, highp ROI 1.0: within the threshold -> the lower-priority job is evicted first
    low = _whole(ssn, "ns/lowp", res(cpu=9.7), res(cpu=10))
    high = _whole(ssn, "ns/highp", res(cpu=10), res(cpu=10))
    assert abs(low.roi(needed) - high.roi(needed)) == pytest.approx(0.03)
    assert compare_bundles(low, high, needed, ssn=ssn) < 0
    # lowp ROI 0.9: a 0.1 gap -> the efficient (higher-priority) bundle goes first
    low = _whole(ssn, "ns/lowp", res(cpu=9), res(cpu=10))
    assert compare_bundles(low, high, needed, ssn=ssn) > 0
    # with priority before ROI (the gang-aware design's preempt ordering) priority wins again
    assert compare_bundles(low, high, needed, ssn=ssn, priority_before_roi=True) < 0
    # gang state beats everything: a Safe bundle of the high-priority job comes first
    safe_high = Bundle(SAFE, high.job, list(high.tasks), high.local_resources)
    assert compare_bundles(safe_high, low, needed, ssn=ssn) < 0


# -- phases 3-5: one batched plugin call, atomic enforcement, greedy cover ------------------------

class _RejectNamed:
    """A real plugin (registered in the framework registry) whose Preemptable approves every
    candidate except the named pods, and counts its calls."""

    calls: list[list[str]] = []
    reject: set[str] = set()

    def __init__(self, arguments=None):
        pass

    def name(self) -> str:
        return "test-reject-named"

    def on_session_open(self, ssn) -> None:
        def preemptable(preemptor, preemptees):
            _RejectNamed.calls.append([t.name for t in preemptees])
            return [t for t in preemptees if t.name not in _RejectNamed.reject], 1
        ssn.add_preemptable_fn(self.name(), preemptable)

    def on_session_close(self, ssn) -> None:
        pass


registry.register_plugin_builder("test-reject-named", _RejectNamed)


def test_batched_validation_atomic_enforcement_and_greedy_selection():
    # job-a: 5 running, min 3 -> Safe {4,5}, Whole {1,2,3}; job-w: 2 running, min 2 -> Whole {w-0, w-1}
    pga, pgw = podgroup("job-a", 3), podgroup("job-w", 2)
    pgw["metadata"]["creationTimestamp"] = 1.0
    pods = [_pod(f"job-a-task-{i}", "job-a", node_name="n1", created=float(i)) for i in range(1, 6)]
    pods += [_pod(f"job-w-{i}", "job-w", node_name="n2", created=0.0) for i in range(2)]
    pods += [pod("hp-0", "hp", 1000)]
    ssn = _session(pods, [pga, pgw, podgroup("hp", 1)],
                   tiers=[[{"name": "test-reject-named", "enabledPreemptable": True}]])
    _RejectNamed.calls.clear()
    _RejectNamed.reject = {"job-a-task-5", "job-a-task-2"}   # one Safe task, one Whole (core) task
    local = {uid: list(j.tasks.values()) for uid, j in ssn.jobs.items() if uid != "ns/hp"}
    preemptor = ssn.jobs["ns/hp"].tasks["ns-hp-0"]
    ctx = GangEvictionContext(kind="preempt", preemptor_task=preemptor, domain=list(ssn.node_list),
                              local_tasks=local, ssn=ssn,
                              evictable=lambda p, ts: ssn.gang_evictable("preempt", p, ts))
    needed = res(cpu=3)
    sel = run_bundle_selection(ssn.jobs["ns/hp"], needed, [ssn.jobs["ns/job-a"], ssn.jobs["ns/job-w"]], ctx)
    # phase 2 order: Safe(job-a) first; Whole bundles by ROI: job-w (2/2 local/global -> 2/3 / 2/3 = 1.0)
    # before job-a's core (3 local of 5 global: 1.0 / 1.67 = 0.6)
    assert [(b.kind, b.job.name) for b in sel.initial] == [(SAFE, "job-a"), (WHOLE, "job-w"), (WHOLE, "job-a")]
    # ONE batched call with every candidate, flattened in bundle order
    assert len(_RejectNamed.calls) == 1
    assert _RejectNamed.calls[0][:2] == ["job-a-task-5", "job-a-task-4"] and len(_RejectNamed.calls[0]) == 7
    # Safe shrinks to task-4; job-a's Whole bundle (task-2 rejected) is dropped
    assert [(b.kind, b.job.name, b.task_names()) for b in sel.valid] == [
        (SAFE, "job-a", ["job-a-task-4"]), (WHOLE, "job-w", ["job-w-1", "job-w-0"])]
    # greedy: 1 cpu (safe) + 2 cpu (job-w whole) covers 3 cpu
    assert sel.covered and sel.freed.milli_cpu == 3000
    assert sel.victims == {"ns/job-a": ["ns-job-a-task-4"], "ns/job-w": ["ns-job-w-1", "ns-job-w-0"]}
    # a Safe bundle is taken only as far as the need goes
    _RejectNamed.reject = set()
    sel = run_bundle_selection(ssn.jobs["ns/hp"], res(cpu=1), [ssn.jobs["ns/job-a"]], ctx)
    assert sel.victims == {"ns/job-a": ["ns-job-a-task-5"]}   # only as much of a Safe bundle as needed


def test_session_extension_points_first_plugin_wins():
    from ha.scheduler.framework.gang_eviction import PURPOSE_EVICT, SearchSpace
    cache, _ = make_cache(nodes=[node("n1", 4000), node("n2", 4000)], podgroups=[podgroup("j", 1)],
                          pods=[pod("j-0", "j", 1000)])
    ssn = session(cache, conf(tiers=[[PRIORITY_ALL]]))
    job = ssn.jobs["ns/j"]
    assert ssn.gang_valid_domains(job, PURPOSE_EVICT) == []
    ssn.add_gang_search_space_fn("priority", lambda j, s, p: [[s.nodes["n2"]]])
    got = ssn.gang_valid_domains(job, PURPOSE_EVICT)
    assert isinstance(got, SearchSpace) and [[n.name for n in d] for d in got] == [["n2"]]
    ssn.add_gang_victim_selector_fn("priority", lambda pj, need, cands, ctx: {"x": ["y"]})
    assert ssn.gang_victim_selector(job, res(cpu=1), [], None) == {"x": ["y"]}
