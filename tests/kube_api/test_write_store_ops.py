"""The store-side pieces the write path of the API front stands on: ``replace`` (a whole-object
write with update's preconditions) on Redis and in memory alike, and the Namespace / Event kinds
(an Event is stored folded under one field and served back in its own shape)."""
from __future__ import annotations

import pytest

from cluster_state.client import ApiClient
from cluster_state.errors import Conflict, Invalid, NotFound
from cluster_state.memstore import MemoryServer
from cluster_state.objects import normalise, served_shape

from tests.cluster_state.helpers import podgroup


@pytest.fixture(params=["redis", "memory"])
def client(request, redis_url, key_prefix):
    if request.param == "redis":
        c = ApiClient.from_url(redis_url, key_prefix)
        yield c
        c.close()
    else:
        yield MemoryServer(key_prefix).client()


def test_replace_writes_status_and_the_rest_in_one_write(client):
    pg = client.create(podgroup("pg1"))
    rv0 = pg["metadata"]["resourceVersion"]
    pg["status"] = {"phase": "Running", "running": 2}
    pg["metadata"]["annotations"] = {"volcano.sh/job-allocated-hypernode": "hn-1"}
    out = client.replace(pg)
    assert out["metadata"]["resourceVersion"] == rv0 + 1   # one write, one RV
    got = client.get("PodGroup", "pg1", "default")
    assert got["status"]["phase"] == "Running" and got["status"]["running"] == 2
    assert got["metadata"]["annotations"] == {"volcano.sh/job-allocated-hypernode": "hn-1"}
    assert got["metadata"]["uid"] == pg["metadata"]["uid"]
    assert got == out


def test_replace_with_a_stale_resource_version_is_a_conflict_and_changes_nothing(client, redis_url, key_prefix):
    pg = client.create(podgroup("pg1"))
    client.update_status({**pg, "status": {"phase": "Inqueue"}})
    before = client.get("PodGroup", "pg1", "default")
    with pytest.raises(Conflict):
        client.replace({**pg, "status": {"phase": "Running"}})
    assert client.get("PodGroup", "pg1", "default") == before
    with pytest.raises(NotFound):
        client.replace(podgroup("missing"))
    with pytest.raises(Invalid):   # update's checks hold: no deletionTimestamp by a write
        client.replace({**before, "metadata": {**before["metadata"], "deletionTimestamp": 5.0}})


def test_namespace_and_event_kinds(client):
    ns = client.create({"kind": "Namespace", "metadata": {"name": "team-a"}})
    assert ns["status"] == {"phase": "Active"} and "namespace" not in ns["metadata"]
    ev = {"kind": "Event", "apiVersion": "v1", "metadata": {"name": "p1.1", "namespace": "team-a"},
          "involvedObject": {"kind": "Pod", "name": "p1", "namespace": "team-a"}, "reason": "Scheduled",
          "message": "bound", "source": {"component": "volcano"}, "firstTimestamp": "2026-11-27T19:00:00Z",
          "lastTimestamp": "2026-11-27T19:00:00Z", "count": 1, "type": "Normal", "eventTime": None,
          "series": None, "action": "Binding", "related": None, "reportingComponent": "volcano",
          "reportingInstance": "h1"}   # 17 top-level fields: more than the layout's 15
    stored = client.create(ev)
    assert set(stored) == {"status", "kind", "apiVersion", "spec", "metadata"}
    served = served_shape(client.get("Event", "p1.1", "team-a"))
    for k, v in ev.items():
        if k != "metadata":
            assert served[k] == v, k
    assert "spec" not in served and "status" not in served
    assert normalise(stored)[0] == stored     # folding is idempotent
    with pytest.raises(Invalid) as e:
        client.create({**ev, "metadata": {"name": "p1.2", "namespace": "team-a"}, "count": "one"})
    assert e.value.field == "count"


def test_replace_and_the_new_kinds_are_the_same_on_redis_and_in_memory(redis_url, key_prefix):
    """The memstore differential's lockstep driver, on a scripted sequence of the new pieces: the
    same results, errors and watch histories from both servers."""
    from tests.cluster_state.test_memstore_differential import Driver, _pair
    pair = _pair(redis_url, key_prefix)
    try:
        d = Driver(pair, 0)
        pg = d.both("create", podgroup("pg1"))
        d.both("replace", {**pg, "status": {"phase": "Running", "running": 1},
                           "metadata": {**pg["metadata"], "annotations": {"a": "1"}}})
        d.both("replace", {**pg, "status": {"phase": "Inqueue"}})                      # stale: Conflict
        d.both("replace", podgroup("nope"))                                            # NotFound
        fin = d.both("create", {**podgroup("pg2"), "metadata": {"name": "pg2", "namespace": "default",
                                                                 "finalizers": ["example.com/x"]}})
        pair.clock.t += 1
        held = d.both("delete", "PodGroup", "pg2", "default")
        d.both("replace", {**held, "metadata": {**held["metadata"], "finalizers": []}})   # last one: gone
        d.both("create", {"kind": "Namespace", "metadata": {"name": "ns1"}})
        d.both("create", {"kind": "Event", "metadata": {"name": "e1", "namespace": "default"},
                          "involvedObject": {"kind": "PodGroup", "name": "pg1"}, "reason": "Scheduled",
                          "count": 1})
        d.both("create", {"kind": "Event", "metadata": {"name": "e2", "namespace": "default"}, "count": -1})
        for k in ("PodGroup", "Namespace", "Event"):
            d.both("watch", k, 0, block_ms=0, count=1000)
            d.both("list", k)
        assert fin["metadata"]["finalizers"] == ["example.com/x"]
        assert d.outcomes.get("Conflict:metadata.resourceVersion") == 1
        assert d.outcomes.get("watch:DELETED") == 1 and d.outcomes.get("Invalid:count") == 1, d.outcomes
    finally:
        pair.redis.close()
