"""What a reused job clone keeps for the next session: its close verdict
(ha/scheduler/framework/settled_close.py) and its queue account (plugins/queue_attrs.py
QueueAccount). Kept only while what they were worked out from is the same; the same writes and
queue figures as working everything out again; the verifier (on in the suite) finds a kept one
that went stale."""
from __future__ import annotations

import pytest

from ha.scheduler.framework.settled_close import SettledCloseMismatch
from ha.scheduler.scheduler import run_session

from .fw_helpers import GANG_ALL, PREDICATES, conf, make_cache, node, pod, podgroup

PROPORTION = {"name": "proportion", "enabledQueueOrder": True, "enabledReclaimable": True,
              "enabledAllocatable": True, "enabledOverused": True, "enabledJobEnqueued": True}
CONF = conf(["enqueue", "allocate"], [[GANG_ALL, PREDICATES], [PROPORTION]])


def _cache():
    """n1 (big) and n2; two running jobs on n2; a pending gang of one that fits n1 only."""
    return make_cache("v1.14", nodes=[node("n1", 4000), node("n2", 2000)],
                      podgroups=[podgroup("pgr", 1, phase="Running"), podgroup("pgs", 1, phase="Running"),
                                 podgroup("pgp", 1)],
                      pods=[pod("r1", "pgr", 500, node_name="n2", phase="Running"),
                            pod("s1", "pgs", 500, node_name="n2", phase="Running"),
                            pod("p1", "pgp", 3000)])


def _feed_back(cache, io, seen: list) -> None:
    """The session's writes as the informer would deliver them (PodGroups, pod statuses, binds)."""
    for _key, pg in io.pod_group_writes[seen[0]:]:
        md = pg["metadata"]
        old = cache.jobs[f"{md['namespace']}/{md['name']}"].pod_group
        new = dict(pg, metadata=dict(pg["metadata"], resourceVersion=pg["metadata"]["resourceVersion"] + 1))
        cache.update_pod_group(old, new)
    seen[0] = len(io.pod_group_writes)


def _sessions(cache, io, n: int) -> list:
    seen = [0]
    out = []
    for _ in range(n):
        out.append(run_session(cache, CONF, seed=1))
        _feed_back(cache, io, seen)
    return out


def _writes(io) -> list:
    return [(k, (pg.get("status") or {}).get("phase"), len((pg.get("status") or {}).get("conditions") or ()))
            for k, pg in io.pod_group_writes] + [(k, None, None) for k, _ in io.status_writes]


def test_a_job_nothing_changed_keeps_its_close_verdict_and_its_queue_account():
    cache, io = _cache()
    _sessions(cache, io, 3)             # the first writes the gangs' conditions; they come back
    st = cache.job_clones.stats
    before_settled, before_writes = st["settled_close"], len(_writes(io))
    kept = {u: (j.settled_close, j.queue_account) for u, j in _session_jobs(cache).items()}
    # the running jobs and the bound gang: nothing to write, each verdict and account kept
    assert st["settled_close"] - before_settled == 3
    assert len(_writes(io)) == before_writes
    again = _session_jobs(cache)
    for uid in ("ns/pgr", "ns/pgs", "ns/pgp"):
        assert kept[uid][0] is not None and kept[uid][1] is not None
        assert again[uid].settled_close is kept[uid][0]
        assert again[uid].queue_account is kept[uid][1]


def _session_jobs(cache) -> dict:
    seen: dict = {}
    run_session(cache, CONF, seed=1, session_hook=lambda ssn: seen.update(ssn.jobs))
    return seen


@pytest.mark.parametrize("reuse", ["1", "0"])
def test_the_binds_and_writes_are_those_of_working_everything_out(monkeypatch, reuse):
    """Sessions over a changing cluster, with clones kept (and so verdicts and accounts) and with
    every clone fresh: the same writes, session by session."""
    def run(flag: str) -> list:
        monkeypatch.setenv("HA_SNAPSHOT_REUSE", flag)
        cache, io = _cache()
        seen = [0]
        out = []
        for k in range(6):
            if k == 2:      # a job arrives, another's pod finishes
                cache.add_pod_group(podgroup("pgn", 1, phase="Running"))
                cache.add_pod(pod("n1", "pgn", 300, node_name="n2", phase="Running"))
            if k == 4:
                t = cache.find_task("ns", "s1")
                done = dict(t.pod, status=dict(t.pod["status"], phase="Succeeded"))
                cache.update_pod(t.pod, done)
            res = run_session(cache, CONF, seed=1)
            _feed_back(cache, io, seen)
            out.append((sorted(res.binds.items()), _writes(io)))
        return out
    assert run(reuse) == run("0" if reuse == "1" else "1")


def test_a_replaced_podgroup_is_worked_out_again():
    cache, io = _cache()
    _sessions(cache, io, 3)
    n = len(io.pod_group_writes)
    job = cache.jobs["ns/pgr"]
    pg = job.pod_group   # the informer delivers a status with a wrong count: a new object
    cache.update_pod_group(pg, dict(pg, status=dict(pg["status"], running=5),
                                    metadata=dict(pg["metadata"], resourceVersion=99)))
    _sessions(cache, io, 1)
    assert [k for k, _ in io.pod_group_writes[n:]] == ["ns/pgr"]
    assert io.pod_group_writes[-1][1]["status"]["running"] == 1


def test_the_verifier_finds_a_close_verdict_kept_past_an_unreported_change(monkeypatch):
    monkeypatch.setenv("HA_VERIFY_SNAPSHOT_REUSE", "1")
    cache, io = _cache()
    _sessions(cache, io, 3)
    # written into the cache's PodGroup in place (against the contract): the kept verdict cannot
    # see it; the job updater would write the phase (1 of 5 members: Pending)
    cache.jobs["ns/pgr"].pod_group["spec"]["minMember"] = 5
    with pytest.raises(SettledCloseMismatch, match=r"ns/pgr.*PodGroup status"):
        run_session(cache, CONF, seed=1)


def test_the_verifier_finds_a_queue_account_kept_past_an_unreported_change(monkeypatch):
    monkeypatch.setenv("HA_VERIFY_SNAPSHOT_REUSE", "1")
    cache, io = _cache()
    _sessions(cache, io, 3)
    spec = cache.jobs["ns/pgr"].pod_group["spec"]
    spec["minResources"] = {"cpu": "3"}   # in place: the kept account's spec is the same object
    with pytest.raises(AssertionError, match=r"ns/pgr: the queue account kept"):
        run_session(cache, CONF, seed=1)


def test_without_the_verifier_a_kept_verdict_is_trusted(monkeypatch):
    """The verifier's counterpart: the same unreported change, unchecked, goes unseen -- which is
    why the contract forbids writing into a cache PodGroup and the suite runs the verifier."""
    monkeypatch.setenv("HA_VERIFY_SNAPSHOT_REUSE", "0")
    cache, io = _cache()
    _sessions(cache, io, 3)
    n = len(io.pod_group_writes)
    cache.jobs["ns/pgr"].pod_group["spec"]["minMember"] = 5
    run_session(cache, CONF, seed=1)
    assert len(io.pod_group_writes) == n
