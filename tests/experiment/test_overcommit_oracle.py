"""overcommit_violations on the episode that the pr5045 run of examples/seed000-current-vs-proposed.yaml
showed (examples/README.md, "The 2 overcommitted node-ticks of pr5045"):
node-1 (8 cpu) at t≈18 s held four live 2-cpu pods plus job-00006-0-r1, evicted in the same
session and still terminating; the new leader (scheduler-3, whose pod watch lagged ~1 s) had bound
job-00031-0 there without having seen scheduler-2's last bind (job-00026-0). The oracle must
count that (a terminating pod holds its node until it is gone), say it was over only because of
the terminating pod, name who bound what, and stay quiet on the states around it."""
from __future__ import annotations

from ha.experiment.checkers.overcommit_violations import OvercommitViolations
from ha.experiment.oracles import Truth, overcommitted_nodes


def node(name, cpu="8000m"):
    return {"kind": "Node", "metadata": {"name": name},
            "status": {"allocatable": {"cpu": cpu, "memory": "34359738368", "pods": "110"}}}


def pod(name, node_name="", phase="Running", terminating=False, nnn=""):
    md = {"name": name, "namespace": "default", "uid": f"u-{name}", "annotations": {}}
    if terminating:
        md["deletionTimestamp"] = 1795324684.36
    return {"kind": "Pod", "metadata": md,
            "spec": {"nodeName": node_name,
                     "containers": [{"name": "c", "resources": {"requests": {"cpu": "2000m", "memory": "4Gi"}}}]},
            "status": {"phase": phase, "nominatedNodeName": nnn}}


def bind(name, instance, session, generation=0):
    return {"op": "bind", "pod": f"default/{name}", "node": "node-1", "ok": True, "dry_run": False,
            "instance": instance, "session": session, "generation": generation, "t": 0.0}


NODES = {"node-1": node("node-1")}
LIVE = ["job-00009-0", "job-00012-0", "job-00026-0"]


def episode(victim_state: str):
    """node-1's pods; the victim job-00006-0-r1 'running', 'terminating' or 'gone'."""
    pods = [pod(n, "node-1") for n in LIVE] + [pod("job-00031-0", "node-1", phase="Pending")]
    if victim_state != "gone":
        pods.append(pod("job-00006-0-r1", "node-1", terminating=victim_state == "terminating"))
    return pods


def test_the_seed000_episode_is_counted_with_its_cause():
    o = OvercommitViolations()
    o.observe_decisions([bind("job-00006-0-r1", "scheduler-2", 0), bind("job-00009-0", "scheduler-2", 0),
                         bind("job-00012-0", "scheduler-2", 0), bind("job-00026-0", "scheduler-2", 1),
                         bind("job-00031-0", "scheduler-3", 0)])
    assert o.observe(episode("terminating"), NODES, t=18.001) == 1
    assert o.observe(episode("terminating"), NODES, t=18.5) == 1
    assert o.observe(episode("gone"), NODES, t=19.0) == 0
    s = o.summary()
    assert s["count"] == 2 and s["nodes"] == {"node-1": 2} and s["resources"] == {"cpu": 2}
    # only over because the evicted pod has not gone yet; one episode, not two
    assert s["terminating_only"] == 2 and s["episodes"] == 1 and len(s["examples"]) == 1
    ex = s["examples"][0]
    assert ex["t"] == 18.001 and ex["node"] == "node-1"
    assert ex["requested"] == {"cpu": 10000.0} and ex["allocatable"] == {"cpu": 8000.0}
    by = {p["pod"]: (p["bound_by"], p["terminating"]) for p in ex["pods"]}
    assert by["default/job-00031-0"] == (["scheduler-3", 0, 0], False)
    assert by["default/job-00026-0"] == (["scheduler-2", 0, 1], False)
    assert by["default/job-00006-0-r1"] == (["scheduler-2", 0, 0], True)


def test_a_live_double_booking_is_not_terminating_only():
    o = OvercommitViolations()
    assert o.observe(episode("running"), NODES, t=1.0) == 1
    s = o.summary()
    assert s["terminating_only"] == 0 and s["examples"][0]["pods"][0]["bound_by"] is None


def test_no_false_positives_around_the_episode():
    o = OvercommitViolations()
    full = [pod(n, "node-1") for n in LIVE] + [pod("x", "node-1")]             # exactly 8 of 8 cpu
    nominated_only = full + [pod("h", nnn="node-1", phase="Pending")]          # a nomination holds nothing
    finished = [pod(n, "node-1") for n in LIVE] + [pod("done", "node-1", phase="Succeeded"),
                                                    pod("failed", "node-1", phase="Failed"), pod("y", "node-1")]
    # the victim deleted, the replacement bound before the kubelet reported anything
    replaced = episode("gone")
    for pods in (full, nominated_only, finished, replaced, []):
        assert overcommitted_nodes(pods, NODES) == {}
        assert o.observe(pods, NODES, t=2.0) == 0
    s = o.summary()
    assert s["count"] == 0 and s["episodes"] == 0 and s["examples"] == [] and s["terminating_only"] == 0


