"""The real vc-scheduler (v1.14.1, built unmodified) as the testbed's scheduler instances.

Each test runs an experiment with ``schedulers.implementation: volcano`` on the live engine: three
vc-scheduler processes, each supervised by its Ray actor and talking to its own endpoint of the
Kubernetes API front, over the suite's real Redis. What is asserted is read from what the run left:
the truth (every API event), the Lease history, the lives, each endpoint's request and delivery logs.

Skipped, with the reason, when Go is missing or the binary is not built and
``HA_TESTBED_BUILD_VOLCANO`` is unset (with it set, the binary is built first: a cold build takes
many minutes).
"""
from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from rich.console import Console

from ha.experiment.config import parse_experiment
from ha.experiment.history import History
from ha.experiment.runner import ExperimentRunner
from tests.runtime.real_volcano import binary_or_skip


def _binary_or_skip() -> None:
    binary_or_skip("v1.14.1")


BASE = {
    "seed": 5,
    "cluster": {"nodes": 4, "node": {"cpu": 8, "memory": "32Gi", "pods": 110}},
    "queues": [{"name": "q1", "weight": 1}],
    "workload": {"arrivals": "poisson", "rate": "2/s", "gang_size": [2, 4], "runtime": ["1s", "3s"],
                 "queues": ["q1"], "request": {"cpu": 1, "memory": "1Gi"}},
    "schedulers": {"instances": 3, "implementation": "volcano", "period": "300ms",
                   "lease": {"duration": "3s", "renew_deadline": "2s", "retry": "500ms"}},
    "measure": {"every": "500ms"},
}


def _run(tmp_path: Path, redis_url: str, name: str, **more) -> Path:
    _binary_or_skip()
    doc = {**BASE, "name": name, **more}
    exp = parse_experiment(doc, source=f"<{name}>")
    out = tmp_path / name
    outcome = ExperimentRunner(exp, out, redis_url=redis_url, source=f"<{name}>",
                               console=Console(record=True, width=120), progress=False, report=False).run()
    assert not outcome.interrupted
    return out


def _requests(out: Path, instance: str) -> list[dict]:
    p = out / "kube-api" / instance / "requests.jsonl"
    return [json.loads(ln) for ln in p.read_text().splitlines() if ln.strip()]


def _binds(out: Path, instance: str) -> list[dict]:
    return [r for r in _requests(out, instance) if r.get("subresource") == "binding" and r.get("code") == 201]


def _pods(history: History) -> tuple[dict[str, dict], dict[str, str]]:
    """Every pod's last state and, per pod, its PodGroup (from the truth)."""
    last: dict[str, dict] = {}
    for ev in history.events():
        if ev["kind"] != "Pod":
            continue
        md = ev["object"]["metadata"]
        last[f"{md['namespace']}/{md['name']}"] = ev["object"]
    group = {k: (o["metadata"].get("annotations") or {}).get("scheduling.k8s.io/group-name", "")
             for k, o in last.items()}
    return last, group


def _identity_map(history: History) -> dict[str, str]:
    return {r["identity"]: r["instance"] for r in history.lives() if r.get("event") == "leading"}


def test_three_instances_bind_every_pod_of_a_gang_workload(tmp_path, redis_url, ray_session):
    out = _run(tmp_path, redis_url, "volcano-binds", duration="14s")
    h = History(out)
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["scheduler"]["version"] == "v1.14.1"
    assert "closest release to v1.14.0" in metrics["scheduler"]["note"]

    # every pod of the workload that had time to be scheduled (created 3 s before the end) is bound,
    # and no gang is bound in part
    last, group = _pods(h)
    assert len(last) >= 20
    t_end = max(float(o["metadata"]["creationTimestamp"]) for o in last.values())
    old = {k: o for k, o in last.items() if float(o["metadata"]["creationTimestamp"]) < t_end - 3}
    unbound = sorted(k for k, o in old.items() if not o["spec"].get("nodeName"))
    assert not unbound, f"never bound: {unbound}"
    by_group: dict[str, list[bool]] = defaultdict(list)
    for k, o in last.items():
        by_group[group[k]].append(bool(o["spec"].get("nodeName")))
    partial = {g: b for g, b in by_group.items() if any(b) and not all(b)}
    assert not partial, f"gangs bound in part: {partial}"

    # one leader bound them all; the standbys stayed cold: they never listed or watched pods
    names = ["scheduler-1", "scheduler-2", "scheduler-3"]
    ids = _identity_map(h)
    assert len(ids) == 1, ids
    leader = next(iter(ids.values()))
    assert next(iter(ids)).startswith(f"{leader}_")
    assert len(_binds(out, leader)) == sum(1 for o in last.values() if o["spec"].get("nodeName"))
    for n in names:
        reqs = _requests(out, n)
        # every instance creates the root and default queues at start, before its lease calls
        first_lease = next(i for i, r in enumerate(reqs) if r.get("resource") == "leases")
        queue_posts = [r for r in reqs[:first_lease] if r.get("resource") == "queues" and r["verb"] == "create"]
        assert len(queue_posts) == 2 and all(r["code"] in (201, 409) for r in queue_posts), queue_posts
        pod_reads = [r for r in reqs if r.get("resource") == "pods" and r["verb"] in ("list", "watch")]
        if n == leader:
            assert pod_reads
        else:
            assert not pod_reads and not _binds(out, n), f"standby {n} read or bound pods"
    # vc-scheduler loaded the configuration translated from the experiment's (the model's) one
    from ha.scheduler.conf import default_conf
    conf = default_conf()
    loaded = [ln for ln in (out / "volcano" / f"{leader}.log").read_text().splitlines()
              if "Finished loading scheduler config" in ln]
    assert loaded and loaded[-1].endswith(f"actions=[{' '.join(conf.actions)}], "
                                          f"plugins=[{' '.join(conf.plugin_names())}]"), loaded
    # the Lease history names the leader's identity, and the history has its life
    assert [rec["holder"] for rec in h.leases()][:1] == [next(iter(ids))]
    # the leader's decisions carry the sessions its log names (one "Start scheduling" per session),
    # not sessions inferred from gaps between its writes
    log = (out / "volcano" / f"{leader}.log").read_text()
    starts = log.count("Start scheduling ...")
    ds = [json.loads(ln) for ln in (out / "history" / "decisions.jsonl").read_text().splitlines() if ln.strip()]
    mine = [d for d in ds if d["instance"] == leader and d["op"] in ("bind", "pipeline", "status", "evict")]
    assert mine and not any(d["session_inferred"] for d in mine)
    sessions = [d["session"] for d in mine]
    assert sessions == sorted(sessions) and 1 <= sessions[0] and sessions[-1] <= starts


def test_leader_kill_fails_over_and_a_watch_delay_shows_in_that_endpoints_delivery_log(
        tmp_path, redis_url, ray_session):
    chaos = [
        # the leader's pod watch is held back 1.5 s per event, from 1 s until the end
        {"at": "1s", "for": "30s", "fault": "watch-delay", "target": "leader", "kinds": ["Pod"],
         "delay": {"dist": "fixed", "value": "1500ms"}},
        {"at": "7s", "fault": "kill", "target": "leader"},
    ]
    out = _run(tmp_path, redis_url, "volcano-failover", duration="20s", chaos=chaos)
    h = History(out)
    lives = h.lives()
    kill = next(r for r in lives if r["event"] == "kill")
    assert kill["was_leader"] is True
    old = kill["instance"]
    ids = _identity_map(h)
    assert ids.get([r for r in lives if r["event"] == "leading" and r["instance"] == old][0]["identity"]) == old
    # a new leader: another instance's identity took the Lease after the kill ...
    after = [rec for rec in h.leases() if rec["t"] > kill["t"]]
    assert after, "nobody took the Lease after the leader was killed"
    new = ids.get(after[0]["holder"])
    assert new is not None and new != old, (after[0], ids)
    # each process's hostname is its instance's name, so the Lease names the instance as a model's
    # does, and the model's checkers read the failover from the history as they are
    assert after[0]["holder"].startswith(f"{new}_")
    summary = json.loads((out / "metrics.json").read_text())["summary"]
    assert isinstance(summary["failover_recovery_s"], float)
    assert summary["failover_recovery_s"] >= 2.0          # not before the killed leader's 3 s lease ran out
    assert summary["split_brain_writes"]["count"] == 0
    # ... and bound pods through its own endpoint, all after the kill
    new_binds = _binds(out, new)
    assert new_binds, f"the new leader {new} bound nothing"
    first_new = min(r["t"] for r in new_binds)
    old_binds = _binds(out, old)
    assert old_binds and max(r["t"] for r in old_binds) < first_new

    # the watch delay acted at the killed leader's endpoint only: its pod events were delivered
    # 1.5 s after the endpoint read them; the new leader's endpoint delivered at once
    from cluster_state.delivery import read_delivery_log

    def delays(instance: str) -> list[float]:
        _, recs = read_delivery_log(out / "kube-api" / instance / "delivery.log")
        return [r["delivered"] - r["recv"] for r in recs
                if r.get("kind") == "Pod" and r.get("type") in ("ADDED", "MODIFIED", "DELETED")
                and not r.get("initial") and r.get("recv") is not None and r.get("delivered") is not None]
    d_old, d_new = delays(old), delays(new)
    assert d_old and d_new
    held = [d for d in d_old if d >= 1.4]
    assert len(held) >= len(d_old) // 2, (len(held), len(d_old))
    assert max(d_new) < 1.0, max(d_new)


def test_a_leader_paused_past_its_lease_exits_on_resume_and_is_started_again(tmp_path, redis_url, ray_session):
    # stopped (SIGSTOP) for longer than the 3 s lease: another instance leads; when it resumes,
    # vc-scheduler finds its lease gone and exits (klog.Fatalf "leaderelection lost"); its
    # supervisor starts it again, as the kubelet restarts a container
    chaos = [{"at": "3s", "for": "6s", "fault": "pause", "target": "leader"}]
    out = _run(tmp_path, redis_url, "volcano-pause", duration="16s", chaos=chaos)
    h = History(out)
    lives = h.lives()
    pause = next(r for r in lives if r["event"] == "pause")
    name = pause["instance"]
    assert pause["was_leader"] is True
    ids = _identity_map(h)
    # someone else took the Lease while it was stopped
    during = [rec for rec in h.leases() if pause["t"] < rec["t"]]
    assert during and ids.get(during[0]["holder"]) not in (None, name), (during, ids)
    # the resumed process exited because it lost the lease, and was started again (a new life)
    resume = next(r for r in lives if r["event"] == "resume" and r["instance"] == name)
    restart = [r for r in lives if r["event"] == "restart" and r["instance"] == name and r.get("internal")]
    assert restart, lives
    assert restart[0]["reason"] == "leaderelection lost" and restart[0]["t"] >= resume["t"]
    assert restart[0]["incarnation"] == 1
    log = (out / "volcano" / f"{name}.log").read_text()
    assert f"=== {name} life 1 at" in log
    assert "leaderelection lost" in log.split(f"=== {name} life 1 at")[0]
    # the metrics name the exit too
    inst = json.loads((out / "metrics.json").read_text())["instances"][name]
    assert inst["restarts"] >= 1 and any(e["reason"] == "leaderelection lost" for e in inst["exits"])


def test_api_conflicts_at_the_leaders_endpoint_fail_its_binds_which_it_retries(tmp_path, redis_url, ray_session):
    # half of the leader's bind calls answer 409 Conflict at its endpoint (nothing is written);
    # vc-scheduler's resync retries them, so the pods are bound in the end all the same
    chaos = [{"at": "1s", "for": "8s", "fault": "api-conflict", "target": "leader", "probability": 0.5,
              "verbs": ["bind", "bind_many"]}]
    out = _run(tmp_path, redis_url, "volcano-api-conflict", duration="16s", chaos=chaos)
    h = History(out)
    ids = _identity_map(h)
    leader = next(iter(ids.values()))
    reqs = _requests(out, leader)
    binds = [r for r in reqs if r.get("subresource") == "binding"]
    refused = [r for r in binds if r["code"] == 409]
    assert refused and len([r for r in binds if r["code"] == 201]) > 0, len(binds)
    # only the leader's endpoint refused anything; the refused pods were bound by a later call
    for n in ("scheduler-1", "scheduler-2", "scheduler-3"):
        if n != leader:
            assert not [r for r in _requests(out, n) if r["code"] == 409 and r.get("subresource") == "binding"]
    last, _ = _pods(h)
    retried = {f"{r['namespace']}/{r['name']}" for r in refused}
    bound_later = {k for k in retried if last.get(k, {}).get("spec", {}).get("nodeName")}
    assert bound_later, "no refused bind was retried"


def test_a_conf_vc_scheduler_refuses_ends_its_lives_instead_of_running_its_default(tmp_path, redis_url,
                                                                                  ray_session):
    """v1.14.1 does not know v1.15's gangpreempt: given a conf naming it (``schedulers.volcano.conf``,
    handed over as it is), it logs that the configuration is invalid and would go on with its
    built-in default. Each such life is ended, with vc-scheduler's own reason."""
    conf = {"actions": "enqueue, allocate, gangpreempt, backfill",
            "tiers": [{"plugins": [{"name": "priority"}, {"name": "gang"}]},
                      {"plugins": [{"name": "proportion"}, {"name": "predicates"}]}]}
    out = _run(tmp_path, redis_url, "volcano-conf-refused", duration="6s",
               schedulers={**BASE["schedulers"], "volcano": {"conf": conf}})
    insts = json.loads((out / "metrics.json").read_text())["instances"]
    refused = [i for i in insts.values() if i.get("conf_refused")]
    assert refused, {n: (i.get("last_error"), i.get("exits")) for n, i in insts.items()}
    for inst in refused:
        assert "failed to find Action gangpreempt" in inst["conf_refused"]
        assert any(e["reason"].startswith("vc-scheduler refused the scheduler configuration")
                   for e in inst["exits"]), inst["exits"]
    lives = History(out).lives()
    assert any(r["event"] == "restart" and "refused the scheduler configuration" in (r.get("reason") or "")
               for r in lives), lives

