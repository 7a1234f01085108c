"""The session benchmark's workload and both of its placements are correct on a small cluster
(no timing assertions: the benchmark holds the speed target)."""
from __future__ import annotations

from collections import Counter

from ha.bench import session as bench
from ha.scenario.runner import _io_ops


def test_model_and_baseline_place_whole_gangs():
    nodes, queues, pgs, pods = bench.workload(n_nodes=6, n_pods=120, n_queues=3, seed=1)
    assert len(pods) == 120 and {p["spec"]["queue"] for p in pgs} == {"q0", "q1", "q2"}
    sizes = Counter(p["metadata"]["annotations"]["scheduling.k8s.io/group-name"] for p in pods)
    assert all(1 <= n <= 16 for n in sizes.values())

    cache, io = bench.build_cluster(nodes, queues, pgs, pods)
    base_placed, base_s = bench.first_fit_baseline(cache)
    placed, secs, phases = bench.model_session(cache, io)
    assert secs > 0 and set(phases) == {"open_s", "allocate_s", "close_s", "fastpath"}

    binds = [(k, n) for op, k, n in (o for o in _io_ops(io) if o[0] == "bind")]
    assert placed == len(binds) > 0
    # every bound job is bound whole (minMember = gang size): gang semantics held
    bound_per_job = Counter(k.split("/")[1].rsplit("-task-", 1)[0] for k, _ in binds)
    for job, n in bound_per_job.items():
        assert n == sizes[job], (job, n, sizes[job])
    # no node is over its allocatable cpu (32 cores)
    per_node = Counter()
    req = {f"{p['metadata']['namespace']}/{p['metadata']['name']}":
           int(p["spec"]["containers"][0]["resources"]["requests"]["cpu"][:-1]) for p in pods}
    for k, n in binds:
        per_node[n] += req[k]
    assert max(per_node.values()) <= 32_000
    # the baseline is a real placement too: whole gangs only, never more pods than exist
    assert 0 < base_placed <= len(pods)


def test_hypernode_topology_variant_keeps_hard_gangs_in_one_spine():
    nodes, queues, pgs, pods = bench.workload(n_nodes=80, n_pods=600, n_queues=2, seed=3)
    hns = bench.hypernode_topology(nodes, pgs)
    racks = [h for h in hns if h["spec"]["tier"] == 1]
    spines = [h for h in hns if h["spec"]["tier"] == 2]
    assert len(racks) == 4 and len(spines) == 1
    topo = {f"{g['metadata']['namespace']}/{g['metadata']['name']}" for g in pgs if g["spec"].get("networkTopology")}
    assert len(topo) == bench.TOPOLOGY_JOBS
    cache, io = bench.build_cluster(nodes, queues, pgs, pods, hyper_nodes=hns)
    assert cache.hyper_nodes_info.real_nodes["rack-0001"] == frozenset(
        n["metadata"]["name"] for n in nodes[bench.RACK_SIZE:2 * bench.RACK_SIZE])
    placed, _, phases = bench.model_session(cache, io, hypernodes=True)
    assert phases["fastpath"] and placed > 0
    rack_of = {n["metadata"]["name"]: n["metadata"]["labels"][bench.RACK_LABEL] for n in nodes}
    by_job: dict = {}
    for _, k, n in (o for o in _io_ops(io) if o[0] == "bind"):
        job = k.rsplit("-task-", 1)[0]
        if job in topo:
            by_job.setdefault(job, set()).add(rack_of[n])
    assert by_job, "no hard-topology gang was placed"
    # tier 2 allows the whole spine; the gradient tries racks first, so each fits in one rack
    assert all(len(r) == 1 for r in by_job.values()), by_job


def test_tainted_workload_respects_taints_and_tolerations():
    """``--param taints=F``: that fraction of the nodes is tainted; no pod lands on a
    NoSchedule-tainted node unless it tolerates the taint, and tolerating jobs exist."""
    import pytest
    from ha.bench import parse_params
    from ha.errors import BadInput
    nodes, queues, pgs, pods = bench.workload(n_nodes=20, n_pods=300, n_queues=2, seed=3, taints=0.5)
    tainted = {n["metadata"]["name"]: n["spec"]["taints"][0] for n in nodes if n["spec"].get("taints")}
    assert len(tainted) == 10 and {t["effect"] for t in tainted.values()} == {"NoSchedule", "PreferNoSchedule"}
    tolerating = {f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in pods if p["spec"].get("tolerations")}
    assert tolerating
    cache, io = bench.build_cluster(nodes, queues, pgs, pods)
    placed, _, _ = bench.model_session(cache, io)
    binds = [(k, n) for op, k, n in (o for o in _io_ops(io) if o[0] == "bind")]
    assert placed == len(binds) > 0
    no_schedule = {n for n, t in tainted.items() if t["effect"] == "NoSchedule"}
    by_key = {f"{p['metadata']['namespace']}/{p['metadata']['name']}": p for p in pods}
    on_tainted = [(k, n) for k, n in binds if n in no_schedule]
    for k, n in on_tainted:
        tol = by_key[k]["spec"].get("tolerations") or []
        assert any(t.get("key") == "dedicated" for t in tol), (k, n)
    assert parse_params("session", bench.run, ["taints=0.2"]) == {"taints": "0.2"}
    for bad in (["taint=0.2"], ["taints"]):
        with pytest.raises(BadInput):
            parse_params("session", bench.run, bad)
    with pytest.raises(BadInput):
        bench.run(quick=True, taints=1.5)
