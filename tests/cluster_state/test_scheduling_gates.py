"""Pod spec.schedulingGates: pods/binding rejects a gated pod (409, in the Lua binder and the
Python one alike); updates may only remove gates; the shape is validated."""
from __future__ import annotations

import copy

import pytest
import redis

from cluster_state.codec import decode
from cluster_state.errors import Conflict, Invalid, NotFound

from .helpers import api, dump, pod  # noqa: F401
from .test_api_bind_lua import _put_raw, _raw_bind


def _gated(name: str, *gates: str, **kw) -> dict:
    return pod(name, schedulingGates=[{"name": g} for g in gates], **kw)


def test_binding_a_gated_pod_is_a_conflict_and_changes_nothing(api, redis_url, key_prefix):
    p = api.create(_gated("p1", "example.com/quota"))
    assert p["spec"]["schedulingGates"] == [{"name": "example.com/quota"}]
    api.create(pod("p2"))
    before = dump(redis_url, key_prefix)
    with pytest.raises(Conflict) as ei:
        api.bind("default", "p1", "n1")
    e = ei.value
    assert e.code == 409 and e.field == "spec.schedulingGates" and e.name == "p1"
    assert "pod default/p1 has non-empty .spec.schedulingGates" in e.message
    assert dump(redis_url, key_prefix) == before
    res = api.bind_many([("default", "p1", "n1"), ("default", "p2", "n1"), ("default", "p3", "n1")])
    assert isinstance(res[0], Conflict) and res[0].message == e.message
    assert res[1]["spec"]["nodeName"] == "n1" and isinstance(res[2], NotFound)


def test_gates_may_only_be_removed_then_the_pod_binds(api, redis_url, key_prefix):
    p = api.create(_gated("p1", "a/one", "a/two"))
    before = dump(redis_url, key_prefix)
    grown = copy.deepcopy(p)
    grown["spec"]["schedulingGates"].append({"name": "a/three"})
    with pytest.raises(Invalid) as ei:
        api.update(grown)
    e = ei.value
    assert e.code == 422 and e.field == "spec.schedulingGates[2].name"
    assert "only deletion is allowed, but found new scheduling gate 'a/three'" in e.message
    swapped = copy.deepcopy(p)
    swapped["spec"]["schedulingGates"] = [{"name": "a/one"}, {"name": "a/other"}]
    with pytest.raises(Invalid):
        api.update(swapped)
    assert dump(redis_url, key_prefix) == before
    p["spec"]["schedulingGates"] = [{"name": "a/two"}]
    p = api.update(p)
    with pytest.raises(Conflict):
        api.bind("default", "p1", "n1")
    p["spec"]["schedulingGates"] = []
    p = api.update(p)
    b = api.bind("default", "p1", "n1")
    assert b["spec"]["nodeName"] == "n1" and b["spec"]["schedulingGates"] == []
    # a pod created without gates cannot get one later
    q = api.create(pod("q1"))
    with pytest.raises(Invalid):
        api.update(dict(q, spec=dict(q["spec"], schedulingGates=[{"name": "late"}])))


def test_python_binder_rejects_gated_pods_too(api, redis_url):
    """The read-modify-write binder (for shapes the Lua binder hands back) has the same rule."""
    r = redis.Redis.from_url(redis_url)
    odd = _gated("odd", "g")
    odd["metadata"]["annotations"] = {"b": b"\x00\x01"}          # a bin string: Lua hands it back
    _put_raw(r, api, odd)
    raw = r.hget(api.keys.obj("Pod"), "default/odd")
    assert api._run(_raw_bind(api, ["default/odd"]))[0] == 422   # the Lua binder hands it back
    with pytest.raises(Conflict) as ei:
        api.store._bind_pod(decode(raw), "n1", None, "default/odd", 0.0)
    assert ei.value.field == "spec.schedulingGates"
    res = api.bind_many([("default", "odd", "n1")])
    assert isinstance(res[0], Conflict) and "non-empty .spec.schedulingGates" in res[0].message
    assert r.hget(api.keys.obj("Pod"), "default/odd") == raw
    # empty or null gates do not block, in either binder
    for name, gates in (("empty", []), ("null", None)):
        p = pod(name)
        p["spec"]["schedulingGates"] = gates
        _put_raw(r, api, p)
    res = api.bind_many([("default", "empty", "n1"), ("default", "null", "n2")])
    assert [x["spec"]["nodeName"] for x in res] == ["n1", "n2"]
    r.close()


@pytest.mark.parametrize("gates, field, words", [
    ("g", "spec.schedulingGates", "expected a list"),
    (["g"], "spec.schedulingGates[0]", "expected a map"),
    ([{"name": ""}], "spec.schedulingGates[0].name", "non-empty name"),
    ([{}], "spec.schedulingGates[0].name", "non-empty name"),
    ([{"name": "a"}, {"name": "a"}], "spec.schedulingGates[1].name", "Duplicate value: 'a'"),
])
def test_bad_gates(api, redis_url, key_prefix, gates, field, words):
    before = dump(redis_url, key_prefix)
    with pytest.raises(Invalid) as ei:
        api.create(pod("p1", schedulingGates=gates))
    assert ei.value.field == field and words in ei.value.message and ei.value.name == "p1"
    assert dump(redis_url, key_prefix) == before


def test_node_name_with_gates_is_invalid(api):
    with pytest.raises(Invalid) as ei:
        api.create(_gated("p1", "g", nodeName="n1"))
    assert ei.value.field == "spec.nodeName"
    assert "cannot be set until all schedulingGates have been cleared" in ei.value.message


async def test_async_gated_bind(redis_url, key_prefix):
    from cluster_state.aio import AsyncApiClient
    a = AsyncApiClient.from_url(redis_url, key_prefix)
    try:
        p = await a.create(_gated("p1", "g"))
        with pytest.raises(Conflict):
            await a.bind("default", "p1", "n1")
        await a.update(dict(p, spec=dict(p["spec"], schedulingGates=[])))
        assert (await a.bind("default", "p1", "n1"))["spec"]["nodeName"] == "n1"
    finally:
        await a.close()
