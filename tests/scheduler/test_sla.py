"""The sla plugin (Volcano plugins/sla): a job that has waited its SLA waiting time is permitted
into the queue (and pipelined) even where a later tier would reject it, and jobs are ordered by
their SLA deadline; the waiting time comes from the PodGroup annotation or the plugin argument
(Go durations). "now" is the session's clock."""
from __future__ import annotations

import copy
from typing import Any

import pytest

from ha.scenario.loader import load_scenario
from ha.scenario.runner import ScenarioCluster, make_conf, resolve_profile
from ha.scheduler.api.duration import GoDurationError, parse_go_duration
from ha.scheduler.plugins.sla import global_waiting_time


class Clock:
    def __init__(self, t: float):
        self.t = t

    def now(self) -> float:
        return self.t


def doc(jobs: list[tuple[str, float, str | None]], *, sla_tier: int, capability_cpu: int,
        wait: str | None = "10m") -> dict:
    """Jobs (name, creationTimestamp, own sla-waiting-time) of 1 cpu each in one queue with the
    given capability; sla in tier ``sla_tier`` (0 or 1), capacity's enqueue check in tier 1."""
    sla: dict[str, Any] = {"name": "sla", "enabledJobEnqueued": True, "enabledJobOrder": True}
    if wait is not None:
        sla["arguments"] = {"sla-waiting-time": wait}
    cap = {"name": "capacity", "enabledJobEnqueued": True}
    tiers = [[sla], [cap]] if sla_tier == 0 else [[{"name": "gang", "enabledJobOrder": True}], [cap, sla]]
    return {"name": "sla", "nodes": [{"name": "n1", "allocatable": {"cpu": 8000, "memory": 2**40, "pods": 100}}],
            "queues": [{"name": "q1", "capability": {"cpu": capability_cpu, "memory": 2**40}}],
            "podgroups": [{"name": n, "namespace": "ns", "queue": "q1", "minMember": 1, "phase": "Pending",
                           "minResources": {"cpu": 1000}} for n, _, _ in jobs],
            "pods": [{"namespace": "ns", "name": f"{n}-0", "podgroup": n, "request": {"cpu": 1000}}
                     for n, _, _ in jobs],
            "actions": ["enqueue"], "plugins": {"tiers": tiers}}


def run(d: dict, jobs: list[tuple[str, float, str | None]], now: float) -> dict[str, str]:
    scn = load_scenario("sla.json", copy.deepcopy(d))
    times = {n: (t, w) for n, t, w in jobs}
    for g in scn.objects.podgroups:
        t, w = times[g["metadata"]["name"]]
        g["metadata"]["creationTimestamp"] = t
        if w is not None:
            g["metadata"]["annotations"]["sla-waiting-time"] = w
    from ha.scheduler.actions import get_action
    from ha.scheduler.framework import close_session, open_session
    cluster = ScenarioCluster(scn.objects, resolve_profile("v1.14"), source="sla.json")
    conf = make_conf(scn.actions, scn.tiers, scn.action_arguments, source="sla.json")
    ssn = open_session(cluster.cache, conf)
    ssn.clock = Clock(now)
    action = get_action("enqueue")
    action.initialize()
    action.execute(ssn)
    phases = {str(j.name): str(j.pod_group_phase) for j in ssn.jobs.values()}
    close_session(ssn)
    return phases


def test_go_durations():
    assert parse_go_duration("3m") == 180.0
    assert parse_go_duration("1h2m3s4ms5us6ns") == pytest.approx(3723.004005006)
    assert parse_go_duration("1.5h") == 5400.0 and parse_go_duration("-2s") == -2.0
    assert parse_go_duration("0") == 0.0
    for bad in ("", "3", "m", "3 m", "3d", "1h-2m"):
        with pytest.raises(GoDurationError):
            parse_go_duration(bad)
    assert global_waiting_time({"sla-waiting-time": "3m"}) == 180.0
    # unparsable, non-positive or not a string: no global waiting time (Volcano logs and goes on)
    for v in ("abc", "0s", "-1m", 3):
        assert global_waiting_time({"sla-waiting-time": v}) is None
    assert global_waiting_time({}) is None


def test_waited_job_is_permitted_past_a_rejecting_later_tier():
    jobs = [("a", 1000.0, None)]
    d = doc(jobs, sla_tier=0, capability_cpu=0)  # capacity rejects every job (no cpu room)
    d["queues"][0]["capability"] = {"cpu": 500, "memory": 2**40}
    assert run(d, jobs, now=1000.0 + 600.0) == {"a": "Inqueue"}   # waited exactly 10m
    assert run(d, jobs, now=1000.0 + 599.0) == {"a": "Pending"}   # sla abstains, capacity rejects
    # without the sla argument the job has no waiting time: abstain
    d_nowait = doc(jobs, sla_tier=0, capability_cpu=500, wait=None)
    assert run(d_nowait, jobs, now=1e9) == {"a": "Pending"}


def test_own_waiting_time_annotation_wins_over_the_argument():
    jobs = [("a", 0.0, "30s"), ("b", 0.0, None)]
    d = doc(jobs, sla_tier=0, capability_cpu=500, wait="1h")
    assert run(d, jobs, now=60.0) == {"a": "Inqueue", "b": "Pending"}
    # an unparsable annotation falls back to the argument
    jobs = [("a", 0.0, "soon")]
    assert run(doc(jobs, sla_tier=0, capability_cpu=500, wait="1h"), jobs, now=60.0) == {"a": "Pending"}


def test_job_order_by_deadline():
    """Room for one job; sla's job order (the only job-order plugin with an opinion) enqueues
    the job whose deadline (creation + waiting time) comes first — not the older job."""
    jobs = [("old", 0.0, "1h"), ("new", 100.0, "1m")]
    d = doc(jobs, sla_tier=1, capability_cpu=1000, wait=None)
    assert run(d, jobs, now=110.0) == {"old": "Pending", "new": "Inqueue"}
    jobs = [("old", 0.0, "1m"), ("new", 100.0, "1h")]
    assert run(d, jobs, now=110.0) == {"old": "Inqueue", "new": "Pending"}
