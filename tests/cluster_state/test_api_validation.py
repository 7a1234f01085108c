"""Bad input gets a typed error naming the object and the field; nothing stored changes."""
from __future__ import annotations

import copy

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cluster_state.client import ApiClient
from cluster_state.errors import ApiError, BadRequest, Invalid

from .helpers import api, dump, node, pod, podgroup, queue  # noqa: F401


@pytest.mark.parametrize("obj, cls, field", [
    ({"kind": "Dog", "metadata": {"name": "x"}}, BadRequest, "kind"),
    ({"metadata": {"name": "x"}}, BadRequest, "kind"),
    ({"kind": "Pod", "metadata": {"namespace": "ns"}}, Invalid, "metadata.name"),
    ({"kind": "Pod", "metadata": {"name": "", "namespace": "ns"}}, Invalid, "metadata.name"),
    ({"kind": "Pod", "metadata": {"name": "a/b", "namespace": "ns"}}, Invalid, "metadata.name"),
    ({"kind": "Pod", "metadata": {"name": "x"}}, Invalid, "metadata.namespace"),
    ({"kind": "Pod", "metadata": {"name": "x", "namespace": "ns"}, "spec": []}, Invalid, "spec"),
    ({"kind": "PodGroup", "metadata": {"name": "x", "namespace": "ns"}, "spec": {"minMember": "3"}},
     Invalid, "spec.minMember"),
    ({"kind": "PodGroup", "metadata": {"name": "x", "namespace": "ns"}, "spec": {"minMember": True}},
     Invalid, "spec.minMember"),
    ({"kind": "Node", "metadata": {"name": "x"}, "status": {"allocatable": {"cpu": "-1"}}},
     Invalid, "status.allocatable.cpu"),
    ({"kind": "Node", "metadata": {"name": "x"}, "status": {"allocatable": {"memory": "12Qi"}}},
     Invalid, "status.allocatable.memory"),
    ({"kind": "Queue", "metadata": {"name": "x"}, "spec": {"weight": 1.5}}, Invalid, "spec.weight"),
    ({"kind": "Queue", "metadata": {"name": "x"}, "status": {"state": "Sleepy"}}, Invalid, "status.state"),
    ({"kind": "Pod", "metadata": {"name": "x", "namespace": "ns", "labels": {"a": 1}}}, Invalid,
     "metadata.labels.a"),
    ({"kind": "PriorityClass", "metadata": {"name": "x"}, "value": "high"}, Invalid, "value"),
    ({"kind": "Node", "apiVersion": "v2", "metadata": {"name": "x"}}, Invalid, "apiVersion"),
])
def test_bad_objects_get_typed_errors_naming_object_and_field(api, redis_url, key_prefix, obj, cls, field):
    api.create(node("existing"))
    before = dump(redis_url, key_prefix)
    with pytest.raises(cls) as ei:
        api.create(obj)
    e = ei.value
    assert e.field == field, e
    assert e.code in (400, 422)
    md = obj.get("metadata", {})
    if isinstance(md.get("name"), str) and md["name"]:
        assert e.name == md["name"] and md["name"] in str(e)
    if obj.get("kind") in ("Pod", "PodGroup", "Node", "Queue", "PriorityClass"):
        assert e.kind == obj["kind"] and obj["kind"] in str(e)
    assert dump(redis_url, key_prefix) == before


def test_pod_quantity_error_names_the_container_path(api):
    p = pod("p1", cpu="-500m")
    with pytest.raises(Invalid) as ei:
        api.create(p)
    assert ei.value.field == "spec.containers[0].resources.requests.cpu"
    assert "negative" in str(ei.value) and "default/p1" in str(ei.value)


def test_non_msgpack_bytes_are_bad_request(api, redis_url, key_prefix):
    before = dump(redis_url, key_prefix)
    for body in (b"\xc1", b"not msgpack at all \xff", msgpack.packb([1, 2, 3]), b""):
        with pytest.raises(BadRequest):
            api.create(body)
        with pytest.raises(BadRequest):
            api.update(body)
    # valid msgpack of a valid object is accepted
    ok = api.create(msgpack.packb(queue("q1")))
    assert ok["metadata"]["name"] == "q1"
    assert before == {}


def test_unencodable_values_are_bad_request(api, redis_url, key_prefix):
    p = pod("p1")
    p["spec"]["weird"] = {1, 2}
    with pytest.raises(BadRequest):
        api.create(p)
    assert dump(redis_url, key_prefix) == {}


def test_errors_are_bad_input_for_the_cli(api):
    from ha.errors import BadInput
    with pytest.raises(BadInput):
        api.create({"kind": "Dog"})


def test_caller_object_is_not_mutated(api):
    p = pod("p1", cpu="1")
    snapshot = copy.deepcopy(p)
    api.create(p)
    assert p == snapshot


# --- property tests -------------------------------------------------------------------------

BAD_QUANTITIES = ["-1", "abc", "1.2.3", -5, True, [1], {"a": 1}, float("nan"), float("inf"), "1Qi", "", None]
WRONG_TYPES = [[], "x", 3, 1.5, True, b"bytes"]
NOT_INT = ["3", 1.5, True, [], {"a": 1}]


def _set(obj: dict, path: list, value) -> dict:
    obj = copy.deepcopy(obj)
    cur = obj
    for p in path[:-1]:
        cur = cur[p]
    cur[path[-1]] = value
    return obj


BASES = {"pod": pod("p1"), "node": node("n1"), "pg": podgroup("pg1"), "queue": queue("q1")}

# (base, path, bad values): every combination is invalid
MUTATIONS = [
    ("pod", ["spec", "containers", 0, "resources", "requests", "cpu"], BAD_QUANTITIES[:-1]),
    ("pod", ["spec", "containers", 0, "resources", "requests", "memory"], BAD_QUANTITIES[:-1]),
    ("pod", ["spec"], WRONG_TYPES),
    ("pod", ["spec", "containers"], ["x", 3, {"a": 1}]),
    ("pod", ["spec", "nodeSelector"], [[], "x", {"a": 1}]),
    ("pod", ["spec", "terminationGracePeriodSeconds"], ["30", -1, 1.5, True]),
    ("pod", ["status"], WRONG_TYPES),
    ("pod", ["status", "phase"], ["Bogus", 3, True]),
    ("pod", ["metadata", "namespace"], [None, "", 5, "a/b"]),
    ("pod", ["metadata", "name"], [None, "", 3, "a/b", "with space"]),
    ("pod", ["metadata"], WRONG_TYPES + [None]),
    ("pod", ["metadata", "annotations"], [[], "x", {"k": 1}]),
    ("pod", ["kind"], ["Dog", None, 5, "pod"]),
    ("node", ["status", "allocatable"], [[], "x", 3]),
    ("node", ["status", "allocatable", "cpu"], BAD_QUANTITIES[:-1]),
    ("node", ["spec", "unschedulable"], ["yes", 1]),
    ("node", ["metadata", "namespace"], ["ns"]),
    ("pg", ["spec", "minMember"], NOT_INT + [-1]),
    ("pg", ["spec", "minResources"], [[], "x", {"cpu": "-1"}]),
    ("pg", ["spec", "queue"], [3, []]),
    ("queue", ["spec", "weight"], NOT_INT + [-1]),
    ("queue", ["spec", "capability"], [[], {"cpu": "lots"}]),
]


@st.composite
def invalid_objects(draw):
    base, path, values = draw(st.sampled_from(MUTATIONS))
    return _set(BASES[base], path, draw(st.sampled_from(values)))


@pytest.fixture
def seeded(redis_url, key_prefix):
    c = ApiClient.from_url(redis_url, key_prefix)
    stored = {k: c.create(v) for k, v in BASES.items()}
    yield c, stored
    c.close()


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(obj=invalid_objects(), op=st.sampled_from(["create", "update", "update_status"]))
def test_property_invalid_objects_typed_error_store_unchanged(seeded, redis_url, key_prefix, obj, op):
    api, _ = seeded
    before = dump(redis_url, key_prefix)
    with pytest.raises(BadRequest) as ei:
        getattr(api, op)(obj)
    assert ei.value.code in (400, 422) and ei.value.field
    assert dump(redis_url, key_prefix) == before


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.one_of(st.binary(max_size=200),
                      st.recursive(st.none() | st.booleans() | st.integers(-2**63, 2**64 - 1) | st.text(max_size=5),
                                   lambda c: st.lists(c, max_size=3)
                                   | st.dictionaries(st.text(max_size=5), c, max_size=3),
                                   max_leaves=10).map(msgpack.packb)),
       op=st.sampled_from(["create", "update", "update_status"]))
def test_property_garbage_bytes_typed_error_store_unchanged(seeded, redis_url, key_prefix, body, op):
    api, _ = seeded
    before = dump(redis_url, key_prefix)
    with pytest.raises(BadRequest):
        getattr(api, op)(body)
    assert dump(redis_url, key_prefix) == before


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(obj=st.fixed_dictionaries({
    "kind": st.sampled_from(["Pod", "Node", "PodGroup", "Queue", "Lease", "PriorityClass", "Dog"]),
    "metadata": st.one_of(st.none(), st.fixed_dictionaries(
        {"name": st.sampled_from(["p1", "n1", "pg1", "q1", "", None, 3])},
        optional={"namespace": st.sampled_from(["default", "", None, 1])})),
    "spec": st.one_of(st.none(), st.dictionaries(st.sampled_from(["minMember", "weight", "nodeName", "x"]),
                                                 st.one_of(st.integers(-3, 3), st.text(max_size=3),
                                                           st.none()), max_size=3)),
}))
def test_property_arbitrary_updates_either_succeed_or_fail_cleanly(seeded, redis_url, key_prefix, obj):
    """Random (possibly valid) updates: a failure is always a typed ApiError and changes nothing."""
    api, _ = seeded
    before = dump(redis_url, key_prefix)
    try:
        api.update(obj)
    except ApiError as e:
        assert e.code in (400, 404, 409, 422)
        assert dump(redis_url, key_prefix) == before
