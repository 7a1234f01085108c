"""create / get / list / update / delete against the real embedded Redis."""
from __future__ import annotations

import msgpack
import pytest

from cluster_state.client import ApiClient
from cluster_state.errors import AlreadyExists, BadRequest, Conflict, Invalid, NotFound

from .helpers import api, dump, node, pod, podgroup, queue  # noqa: F401  (api is a fixture)


def test_create_assigns_uid_rv_timestamp_and_normalises(api):
    n = api.create(node("n1", cpu="1.5", memory="1Gi"))
    md = n["metadata"]
    assert md["uid"] and isinstance(md["uid"], str)
    assert md["resourceVersion"] == 1
    assert isinstance(md["creationTimestamp"], float)
    assert n["apiVersion"] == "v1"
    assert n["status"]["allocatable"] == {"cpu": "1500m", "memory": str(2**30), "pods": "110"}
    p = api.create(pod("p1", cpu=0.25, memory="128Mi"))
    assert p["metadata"]["resourceVersion"] == 2
    assert p["metadata"]["uid"] != md["uid"]
    assert p["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "250m", "memory": str(128 * 2**20)}
    assert p["spec"]["nodeName"] == "" and p["status"]["phase"] == "Pending"
    assert api.get("Pod", "p1", "default") == p
    assert api.get("Node", "n1") == n


def test_stored_bytes_are_one_plain_msgpack_map(api, redis_url, key_prefix):
    api.create(queue("q1", weight=3))
    import redis
    raw = redis.Redis.from_url(redis_url).hget(f"{key_prefix}:obj:Queue", "q1")
    obj = msgpack.unpackb(raw)
    assert obj["metadata"]["name"] == "q1" and obj["metadata"]["resourceVersion"] == 1
    assert obj["spec"]["weight"] == 3 and obj["status"]["state"] == "Open"


def test_create_twice_is_already_exists_and_changes_nothing(api, redis_url, key_prefix):
    api.create(pod("p1"))
    before = dump(redis_url, key_prefix)
    with pytest.raises(AlreadyExists) as ei:
        api.create(pod("p1", cpu="2"))
    assert ei.value.code == 409 and ei.value.name == "p1" and ei.value.namespace == "default"
    assert dump(redis_url, key_prefix) == before
    # same name in another namespace is another object
    assert api.create(pod("p1", ns="other"))["metadata"]["namespace"] == "other"


def test_get_missing_is_not_found(api):
    with pytest.raises(NotFound) as ei:
        api.get("Pod", "nope", "default")
    assert ei.value.code == 404 and ei.value.kind == "Pod" and ei.value.name == "nope"


def test_namespaced_and_cluster_scoped(api):
    with pytest.raises(Invalid) as ei:
        api.create({"kind": "Pod", "metadata": {"name": "x"}})
    assert ei.value.field == "metadata.namespace"
    with pytest.raises(Invalid) as ei:
        api.create({"kind": "Node", "metadata": {"name": "x", "namespace": "default"}})
    assert ei.value.field == "metadata.namespace"
    n = api.create({"kind": "Node", "metadata": {"name": "x", "namespace": ""}})
    assert "namespace" not in n["metadata"]


def test_list_returns_items_and_consistent_rv(api):
    for i in range(3):
        api.create(pod(f"p{i}", ns="a"))
    api.create(pod("p9", ns="b"))
    api.create(node("n1"))
    lr = api.list("Pod")
    assert sorted(p["metadata"]["name"] for p in lr.items) == ["p0", "p1", "p2", "p9"]
    assert lr.resource_version == api.current_resource_version() == 5
    assert [p["metadata"]["name"] for p in api.list("Pod", namespace="b").items] == ["p9"]
    assert api.list("Queue").items == [] and api.list("Queue").resource_version == 5
    with pytest.raises(BadRequest):
        api.list("Node", namespace="a")


def test_list_skips_and_reports_corrupt_stored_values(api, redis_url, key_prefix):
    api.create(pod("good"))
    import redis
    redis.Redis.from_url(redis_url).hset(f"{key_prefix}:obj:Pod", "default/bad", b"\xc1not msgpack")
    lr = api.list("Pod")
    assert [p["metadata"]["name"] for p in lr.items] == ["good"]
    assert lr.corrupt and lr.corrupt[0][0] == "default/bad"
    from cluster_state.errors import CorruptObject
    with pytest.raises(CorruptObject) as ei:
        api.get("Pod", "bad", "default")
    assert ei.value.name == "bad"


def test_update_with_rv_precondition_and_status_ignored(api):
    p = api.create(pod("p1"))
    p["spec"]["priority"] = 7
    p["metadata"]["labels"] = {"a": "b"}
    p["status"]["phase"] = "Running"            # plain update must ignore status
    u = api.update(p)
    assert u["metadata"]["resourceVersion"] == 2
    assert u["spec"]["priority"] == 7 and u["metadata"]["labels"] == {"a": "b"}
    assert u["status"]["phase"] == "Pending"
    assert u["metadata"]["uid"] == p["metadata"]["uid"]
    assert api.get("Pod", "p1", "default") == u
    # the old RV is stale now
    with pytest.raises(Conflict) as ei:
        api.update(p)
    assert ei.value.code == 409 and ei.value.details["resource_version"] == 2


def test_update_without_rv_is_unconditional_and_keeps_server_fields(api):
    p = api.create(pod("p1"))
    fresh = pod("p1", cpu="3")                  # no uid / rv / creationTimestamp
    u = api.update(fresh)
    assert u["metadata"]["uid"] == p["metadata"]["uid"]
    assert u["metadata"]["creationTimestamp"] == p["metadata"]["creationTimestamp"]
    assert u["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "3000m"
    with pytest.raises(NotFound):
        api.update(pod("ghost"))


def test_update_status_ignores_spec(api):
    p = api.create(pod("p1"))
    p["spec"]["priority"] = 99
    p["status"]["nominatedNodeName"] = "n1"
    s = api.update_status(p)
    assert s["status"]["nominatedNodeName"] == "n1"
    assert "priority" not in s["spec"]
    assert s["metadata"]["resourceVersion"] == 2
    with pytest.raises(Conflict):
        api.update_status(p)  # stale RV 1


def test_delete_non_pod_and_forced_pod(api):
    api.create(queue("q1"))
    last = api.delete("Queue", "q1")
    assert last["metadata"]["name"] == "q1" and last["metadata"]["resourceVersion"] == 2
    with pytest.raises(NotFound):
        api.get("Queue", "q1")
    with pytest.raises(NotFound):
        api.delete("Queue", "q1")
    api.create(pod("p1"))
    gone = api.delete("Pod", "p1", "default", grace_period_seconds=0)
    assert gone["metadata"]["resourceVersion"] == 4
    assert api.list("Pod").items == []
    # the name can be reused; the new object has a new uid
    again = api.create(queue("q1"))
    assert again["metadata"]["uid"] != last["metadata"]["uid"]


def test_delete_with_stale_rv_precondition(api):
    q = api.create(queue("q1"))
    api.update(dict(q, spec={"weight": 5}))
    with pytest.raises(Conflict):
        api.delete("Queue", "q1", resource_version=q["metadata"]["resourceVersion"])
    assert api.get("Queue", "q1")["spec"]["weight"] == 5


def test_all_kinds_round_trip(api):
    objs = [node("n1"), pod("p1"), podgroup("pg1", min_member=2), queue("q1"),
            {"kind": "PriorityClass", "metadata": {"name": "high"}, "value": 1000},
            {"kind": "Lease", "metadata": {"name": "sched", "namespace": "kube-system"},
             "spec": {"holderIdentity": "scheduler-1", "leaseDurationSeconds": 15, "renewTime": 1.5}}]
    for o in objs:
        c = api.create(o)
        md = c["metadata"]
        assert api.get(c["kind"], md["name"], md.get("namespace")) == c
    pc = api.get("PriorityClass", "high")
    assert pc["value"] == 1000 and pc["globalDefault"] is False
    assert pc["preemptionPolicy"] == "PreemptLowerPriority"
    assert api.get("PodGroup", "pg1", "default")["spec"]["minMember"] == 2


def test_lease_renew_is_rv_checked(api):
    lease = api.create({"kind": "Lease", "metadata": {"name": "l", "namespace": "ns"},
                        "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15}})
    a = dict(lease, spec=dict(lease["spec"], renewTime=2.0))
    b = dict(lease, spec=dict(lease["spec"], holderIdentity="b"))
    api.update(a)
    with pytest.raises(Conflict):
        api.update(b)
    assert api.get("Lease", "l", "ns")["spec"]["holderIdentity"] == "a"


def test_resource_version_is_global_and_monotonic(api):
    rvs = [api.create(node(f"n{i}"))["metadata"]["resourceVersion"] for i in range(3)]
    rvs += [api.create(pod(f"p{i}"))["metadata"]["resourceVersion"] for i in range(3)]
    rvs.append(api.create(queue("q"))["metadata"]["resourceVersion"])
    assert rvs == list(range(1, 8))


def test_two_api_servers_share_a_redis_by_prefix(redis_url, key_prefix):
    a = ApiClient.from_url(redis_url, key_prefix + "a")
    b = ApiClient.from_url(redis_url, key_prefix + "b")
    a.create(queue("q"))
    assert b.list("Queue").items == [] and b.current_resource_version() == 0


def test_decode_responses_client_is_refused(redis_url):
    import redis
    with pytest.raises(ValueError):
        ApiClient(redis.Redis.from_url(redis_url, decode_responses=True))


def test_failed_writes_do_not_consume_resource_versions(api):
    api.create(queue("q"))
    for call in (lambda: api.create(queue("q")), lambda: api.update(dict(api.get("Queue", "q"), metadata={
            "name": "q", "resourceVersion": 99})), lambda: api.delete("Queue", "ghost")):
        try:
            call()
        except (AlreadyExists, Conflict, NotFound):
            pass
    assert api.current_resource_version() == 1
    assert api.create(queue("q2"))["metadata"]["resourceVersion"] == 2


def test_scripts_are_reloaded_after_a_script_flush(api):
    # e.g. a redis-server restart: EVALSHA gets NOSCRIPT, the client loads the script and retries
    api.create(queue("q1"))
    api.redis.script_flush()
    assert api.create(queue("q2"))["metadata"]["resourceVersion"] == 2
    api.redis.script_flush()
    assert [e.resource_version for e in api.watch("Queue", 0)] == [1, 2]
    api.redis.script_flush()
    api.create(pod("p1"))
    api.redis.script_flush()
    assert api.bind_many([("default", "p1", "n1")])[0]["spec"]["nodeName"] == "n1"


def test_uids_are_unique_across_a_fork(api):
    import os
    from cluster_state import store
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: report its next uid and leave without running any test machinery
        os.write(w, store._new_uid().encode())
        os._exit(0)
    os.close(w)
    child_uid = os.read(r, 200).decode()
    os.waitpid(pid, 0)
    assert child_uid and child_uid != store._new_uid()
    assert child_uid.rsplit("-", 1)[0] != store._new_uid().rsplit("-", 1)[0]
