"""pods/binding, bind_many, annotations patch, graceful deletion, eviction."""
from __future__ import annotations

import time

import pytest

from cluster_state.client import ApiClient
from cluster_state.errors import ApiError, BadRequest, Conflict, Invalid, NotFound

from .helpers import api, dump, node, pod  # noqa: F401


def _scheduled(p: dict):
    return [c for c in p["status"].get("conditions", []) if c["type"] == "PodScheduled"]


def test_bind_sets_node_and_condition_in_one_modified_event(api):
    p = api.create(pod("p1"))
    p["status"]["nominatedNodeName"] = "n1"
    api.update_status(p)
    b = api.bind("default", "p1", "n1")
    assert b["spec"]["nodeName"] == "n1"
    assert [c["status"] for c in _scheduled(b)] == ["True"]
    assert b["status"]["nominatedNodeName"] == "n1"          # switch off: NNN stays
    assert api.get("Pod", "p1", "default") == b
    ev = api.watch("Pod", 2)
    assert [(e.type, e.resource_version) for e in ev] == [("MODIFIED", 3)]
    assert ev[0].object["spec"]["nodeName"] == "n1"


def test_bind_clears_nominated_node_name_when_switched_on(redis_url, key_prefix):
    api = ApiClient.from_url(redis_url, key_prefix, clear_nnn_on_binding=True)
    p = api.create(pod("p1"))
    p["status"]["nominatedNodeName"] = "n2"
    api.update_status(p)
    b = api.bind("default", "p1", "n1")
    assert b["spec"]["nodeName"] == "n1" and b["status"]["nominatedNodeName"] == ""
    ev = api.watch("Pod", 2)
    # one MODIFIED where nodeName appears and the nomination disappears together
    assert len(ev) == 1 and ev[0].type == "MODIFIED"
    assert ev[0].object["spec"]["nodeName"] == "n1" and ev[0].object["status"]["nominatedNodeName"] == ""


def test_bind_preconditions(api):
    api.create(pod("p1"))
    api.bind("default", "p1", "n1")
    with pytest.raises(Conflict) as ei:
        api.bind("default", "p1", "n2")
    assert "already assigned" in str(ei.value) and ei.value.code == 409
    assert api.get("Pod", "p1", "default")["spec"]["nodeName"] == "n1"
    with pytest.raises(NotFound):
        api.bind("default", "ghost", "n1")
    p2 = api.create(pod("p2"))
    with pytest.raises(Conflict):
        api.bind("default", "p2", "n1", uid="not-the-uid")
    assert api.bind("default", "p2", "n1", uid=p2["metadata"]["uid"])["spec"]["nodeName"] == "n1"
    api.create(pod("p3"))
    api.delete("Pod", "p3", "default", grace_period_seconds=30)
    with pytest.raises(Conflict) as ei:
        api.bind("default", "p3", "n1")
    assert "being deleted" in str(ei.value)
    with pytest.raises(BadRequest):
        api.bind("default", "p3", "")


def test_bind_many_per_item_results(api):
    for i in range(5):
        api.create(pod(f"p{i}"))
    api.bind("default", "p4", "n9")
    rv0 = api.current_resource_version()
    res = api.bind_many([("default", "p0", "n1"), ("default", "p1", "n2"), ("default", "ghost", "n1"),
                         ("default", "p4", "n1"), ("default", "p2", "n1"), ("default", "p2", "n3"),
                         ("default", "bad/name", "n1")])
    assert res[0]["spec"]["nodeName"] == "n1" and res[1]["spec"]["nodeName"] == "n2"
    assert isinstance(res[2], NotFound)
    assert isinstance(res[3], Conflict)
    # the same pod twice in one batch: the first wins, the second sees it bound
    assert res[4]["spec"]["nodeName"] == "n1" and isinstance(res[5], Conflict)
    assert isinstance(res[6], Invalid)
    assert api.current_resource_version() == rv0 + 3
    ok = [r for r in res if not isinstance(r, ApiError)]
    assert sorted(r["metadata"]["resourceVersion"] for r in ok) == [rv0 + 1, rv0 + 2, rv0 + 3]
    for r in ok:
        assert api.get("Pod", r["metadata"]["name"], "default") == r
    ev = api.watch("Pod", rv0)
    assert [e.type for e in ev] == ["MODIFIED"] * 3


def test_bind_many_large_batch_is_one_event_per_pod(api):
    n = 250
    for i in range(n):
        api.create(pod(f"p{i}"))
    rv0 = api.current_resource_version()
    res = api.bind_many([("default", f"p{i}", f"n{i % 7}") for i in range(n)])
    assert all(isinstance(r, dict) for r in res)
    assert api.current_resource_version() == rv0 + n
    nodes = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in api.list("Pod").items}
    assert nodes == {f"p{i}": f"n{i % 7}" for i in range(n)}


def test_patch_annotations(api):
    api.create(pod("p1"))
    p = api.patch_annotations("Pod", "p1", "default", {"a": "1", "b": "2"})
    assert p["metadata"]["annotations"]["a"] == "1" and p["metadata"]["resourceVersion"] == 2
    p = api.patch_annotations("Pod", "p1", "default", {"a": None, "b": "3"})
    assert "a" not in p["metadata"]["annotations"] and p["metadata"]["annotations"]["b"] == "3"
    assert p["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == "pg1"
    same = api.patch_annotations("Pod", "p1", "default", {"a": None})
    assert same["metadata"]["resourceVersion"] == 3          # no-op: no write
    api.create(node("n1"))
    assert api.patch_annotations("Node", "n1", None, {"x": "y"})["metadata"]["annotations"] == {"x": "y"}
    with pytest.raises(Invalid) as ei:
        api.patch_annotations("Pod", "p1", "default", {"a": 3})
    assert ei.value.field == "metadata.annotations.a"
    with pytest.raises(NotFound):
        api.patch_annotations("Pod", "ghost", "default", {"a": "1"})


def test_graceful_delete_then_finalize(api):
    p = api.create(pod("p1", terminationGracePeriodSeconds=10))
    api.create(pod("p2"))
    t0 = time.time()
    d = api.delete("Pod", "p1", "default", now=t0)
    md = d["metadata"]
    assert md["deletionGracePeriodSeconds"] == 10 and md["deletionTimestamp"] == pytest.approx(t0 + 10)
    assert api.get("Pod", "p1", "default") == d              # still there, terminating
    assert [e.type for e in api.watch("Pod", 2)] == ["MODIFIED"]
    # a second delete with a longer grace does not extend it
    assert api.delete("Pod", "p1", "default", grace_period_seconds=60) == d
    assert api.finalize_deletions(now=t0 + 5) == 0
    assert api.finalize_deletions(now=t0 + 10.5) == 1
    with pytest.raises(NotFound):
        api.get("Pod", "p1", "default")
    ev = api.watch("Pod", 3)
    assert [e.type for e in ev] == ["DELETED"]
    assert ev[0].object["metadata"]["uid"] == p["metadata"]["uid"]
    assert ev[0].object["metadata"]["deletionTimestamp"] == md["deletionTimestamp"]
    assert api.finalize_deletions(now=t0 + 1000) == 0
    assert [x["metadata"]["name"] for x in api.list("Pod").items] == ["p2"]


def test_force_delete_of_a_terminating_pod(api):
    api.create(pod("p1"))
    api.delete("Pod", "p1", "default", grace_period_seconds=30)
    last = api.delete("Pod", "p1", "default", grace_period_seconds=0)
    assert last["metadata"]["deletionGracePeriodSeconds"] == 30
    assert api.list("Pod").items == []
    assert api.finalize_deletions(now=time.time() + 100) == 0   # removed from the terminating set


def test_zero_termination_grace_deletes_at_once(api):
    api.create(pod("p1", terminationGracePeriodSeconds=0))
    api.delete("Pod", "p1", "default")
    assert [e.type for e in api.watch("Pod", 1)] == ["DELETED"]


def test_evict(api):
    api.create(pod("p1"))
    api.bind("default", "p1", "n1")
    e = api.evict("default", "p1", grace_period_seconds=5)
    assert e["metadata"]["deletionGracePeriodSeconds"] == 5 and e["spec"]["nodeName"] == "n1"
    with pytest.raises(NotFound):
        api.evict("default", "ghost")
    with pytest.raises(BadRequest):
        api.evict("default", "p1", grace_period_seconds=-1)


def test_failed_subresource_writes_change_nothing(api, redis_url, key_prefix):
    api.create(pod("p1"))
    api.bind("default", "p1", "n1")
    before = dump(redis_url, key_prefix)
    for call in (lambda: api.bind("default", "p1", "n2"),
                 lambda: api.bind_many([("default", "p1", "n2"), ("default", "ghost", "n1")]),
                 lambda: api.patch_annotations("Pod", "p1", "default", {"k": 1}),
                 lambda: api.evict("default", "ghost"),
                 lambda: api.delete("Pod", "p1", "default", resource_version=1)):
        try:
            r = call()
            assert all(isinstance(x, ApiError) for x in r)
        except ApiError:
            pass
    assert dump(redis_url, key_prefix) == before
