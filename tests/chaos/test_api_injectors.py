"""api-latency and api-conflict on a real API client (real redis-server)."""
from __future__ import annotations

import time

import pytest

from chaos.injectors.api import ApiChaos, AsyncChaosApiClient, ChaosApiClient
from chaos.schedule import build_schedule
from cluster_state.errors import Conflict

from .helpers import NS, api, aapi, make_pod  # noqa: F401

I1 = "scheduler-1"


def sched(*entries, seed=1):
    return build_schedule(list(entries), seed, [I1, "scheduler-2"])


def test_latency_delays_writes_not_reads(api):
    s = sched({"at": 0, "fault": "api-latency", "target": I1, "delay": {"dist": "fixed", "value": "150ms"}})
    chaos = ApiChaos(I1, s.faults, epoch=time.time())
    c = ChaosApiClient(api, chaos)
    t0 = time.monotonic()
    c.create(make_pod("a"))
    assert time.monotonic() - t0 >= 0.15
    assert chaos.stats["delayed"] == 1
    c.get("Pod", "a", NS)
    c.list("Pod")
    assert chaos.stats["delayed"] == 1           # reads are not covered by default
    assert c.prefix == api.prefix                # other attributes pass through


def test_conflict_rejects_the_write_and_changes_nothing(api):
    s = sched({"at": 0, "fault": "api-conflict", "target": I1, "probability": 1.0})
    chaos = ApiChaos(I1)
    c = ChaosApiClient(api, chaos)
    api.create(make_pod("p"))
    before = api.get("Pod", "p", NS)
    chaos.activate(s.faults[0])
    with pytest.raises(Conflict) as ei:
        c.bind(NS, "p", "node-1")
    assert ei.value.code == 409 and ei.value.name == "p"
    with pytest.raises(Conflict):
        c.patch_annotations("Pod", "p", NS, {"x": "y"})
    assert api.get("Pod", "p", NS) == before      # nothing was written
    chaos.deactivate(0)
    assert c.bind(NS, "p", "node-1")["spec"]["nodeName"] == "node-1"


def test_conflict_draws_are_seeded_and_bind_many_is_per_binding(api):
    def run(seed, tag):
        s = sched({"at": 0, "fault": "api-conflict", "target": I1, "probability": 0.5,
                   "verbs": ["bind_many"]}, seed=seed)
        prefix_api = api
        chaos = ApiChaos(I1, s.faults, epoch=time.time())
        c = ChaosApiClient(prefix_api, chaos)
        names = [f"{tag}-{i}" for i in range(12)]
        for n in names:
            api.create(make_pod(n))
        res = c.bind_many([(NS, n, "node-1") for n in names])
        lost = [isinstance(r, Conflict) for r in res]
        # the winners were really bound, the losers not
        for n, l in zip(names, lost):
            assert (api.get("Pod", n, NS)["spec"].get("nodeName") or None) == (None if l else "node-1")
        return lost

    a, b, c = run(4, "a"), run(4, "b"), run(5, "c")
    assert a == b                       # same seed, same conflicts
    assert a != c                       # another seed, other conflicts
    assert 0 < sum(a) < len(a)


def test_bind_many_keeps_uid_preconditions_parallel_to_the_surviving_bindings(api):
    """The instance binds with ``uids=`` (one precondition per binding): the injected losers must
    be cut from both lists, or the winners are checked against the wrong uids."""
    s = sched({"at": 0, "fault": "api-conflict", "target": I1, "probability": 0.5,
               "verbs": ["bind_many"]}, seed=4)
    c = ChaosApiClient(api, ApiChaos(I1, s.faults, epoch=time.time()))
    names = [f"u-{i}" for i in range(12)]
    uids = [api.create(make_pod(n))["metadata"]["uid"] for n in names]
    res = c.bind_many([(NS, n, "node-1") for n in names], uids=uids)
    lost = [isinstance(r, Conflict) for r in res]
    assert 0 < sum(lost) < len(lost)
    for n, l, r in zip(names, lost, res):
        bound = api.get("Pod", n, NS)["spec"].get("nodeName") or None
        assert bound == (None if l else "node-1"), (n, r)


async def test_async_client_latency_and_conflict_windows(api, aapi):
    s = sched({"at": 0, "for": "60s", "fault": "api-latency", "target": "all",
               "delay": {"dist": "uniform", "min": "50ms", "max": "60ms"}, "verbs": ["get"]},
              {"at": 0, "fault": "api-conflict", "target": I1, "probability": 1.0, "verbs": ["create"]})
    shift = [0.0]
    chaos = ApiChaos(I1, s.faults, epoch=time.time(), clock=lambda: time.time() + shift[0])
    c = AsyncChaosApiClient(aapi, chaos)
    api.create(make_pod("a"))
    t0 = time.monotonic()
    assert (await c.get("Pod", "a", NS))["metadata"]["name"] == "a"
    assert time.monotonic() - t0 >= 0.05
    with pytest.raises(Conflict):
        await c.create(make_pod("b"))
    shift[0] += 120                     # the latency window is over; the conflict has no end
    t0 = time.monotonic()
    await c.get("Pod", "a", NS)
    assert chaos.stats["delayed"] == 1
    with pytest.raises(Conflict):
        await c.create(make_pod("b"))


# ------------------------------------------------------------------------- crash-point

def _armed(point, crashes):
    s = sched({"at": 0, "fault": "crash-point", "target": I1, "point": point})
    return ApiChaos(I1, s.faults, epoch=time.time(), crash=crashes.append)


def test_crash_before_the_nomination_write_sends_nothing(api):
    crashes: list[str] = []
    chaos = _armed("before-nomination-write", crashes)
    c = ChaosApiClient(api, chaos)
    api.create(make_pod("p"))
    pod = api.get("Pod", "p", NS)
    pod["status"]["conditions"] = [{"type": "PodScheduled", "status": "False"}]
    c.update_status(pod)                            # a status write without a nomination: sent
    assert crashes == []
    pod = api.get("Pod", "p", NS)
    pod["status"]["nominatedNodeName"] = "node-1"
    c.update_status(pod)                            # the recording crash returns: the write goes on
    assert crashes == ["before-nomination-write"] and chaos.stats["crashes"] == 1


def test_crash_after_the_evictions_comes_before_the_next_write(api):
    crashes: list[str] = []
    chaos = _armed("after-evictions", crashes)
    c = ChaosApiClient(api, chaos)
    for n in ("v1", "v2", "p"):
        api.create(make_pod(n))
    c.delete("Pod", "v1", NS)
    c.delete("Pod", "v2", NS)                       # evictions in a row: no crash yet
    assert crashes == []
    c.patch_annotations("Pod", "p", NS, {"x": "y"})
    assert crashes == ["after-evictions"]


def test_crash_between_gang_binds_binds_only_the_first(api):
    crashes: list[str] = []

    def crash(point):
        crashes.append(point)
        raise SystemExit(137)                       # the process would be gone here

    s = sched({"at": 0, "fault": "crash-point", "target": I1, "point": "between-gang-binds"})
    c = ChaosApiClient(api, ApiChaos(I1, s.faults, epoch=time.time(), crash=crash))
    for n in ("g-0", "g-1", "g-2"):
        api.create(make_pod(n))
    with pytest.raises(SystemExit):
        c.bind_many([(NS, n, "node-1") for n in ("g-0", "g-1", "g-2")])
    assert crashes == ["between-gang-binds"]
    bound = {n: api.get("Pod", n, NS)["spec"].get("nodeName") for n in ("g-0", "g-1", "g-2")}
    assert bound == {"g-0": "node-1", "g-1": None, "g-2": None} or \
        bound == {"g-0": "node-1", "g-1": "", "g-2": ""}


def test_an_unarmed_crash_point_does_nothing(api):
    crashes: list[str] = []
    s = sched({"at": "60m", "fault": "crash-point", "target": I1, "point": "between-gang-binds"})
    c = ChaosApiClient(api, ApiChaos(I1, s.faults, epoch=time.time(), crash=crashes.append))
    for n in ("h-0", "h-1"):
        api.create(make_pod(n))
    c.bind_many([(NS, n, "node-1") for n in ("h-0", "h-1")])
    assert crashes == []


def test_a_batch_of_status_writes_meets_the_update_status_faults_item_by_item(api):
    """``update_status_many`` is no way round the faults: under chaos each item is one
    ``update_status`` call -- the same coins, in the same order, as the writes one at a time."""
    def run(tag: str, batch: bool) -> list[bool]:
        s = sched({"at": 0, "fault": "api-conflict", "target": I1, "probability": 0.5,
                   "verbs": ["update_status"]}, seed=7)
        c = ChaosApiClient(api, ApiChaos(I1, s.faults, epoch=time.time()))
        pods = [api.create(make_pod(f"{tag}-{i}")) for i in range(12)]
        for p in pods:
            p["status"]["nominatedNodeName"] = "node-1"
        if batch:
            res = c.update_status_many(pods)
        else:
            res = []
            for p in pods:
                try:
                    res.append(c.update_status(p))
                except Conflict as e:
                    res.append(e)
        lost = [isinstance(r, Conflict) for r in res]
        for p, l in zip(pods, lost):      # the losers were not written, the rest were
            got = api.get("Pod", p["metadata"]["name"], NS)["status"].get("nominatedNodeName") or None
            assert got == (None if l else "node-1")
        return lost

    one, many = run("one", False), run("many", True)
    assert many == one
    assert 0 < sum(many) < len(many)
