"""The codec (stored shape <-> Kubernetes JSON) and the Status mapping of store errors."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cluster_state import errors as E
from kube_api.codec import from_kube, micro_time, parse_time, rfc3339, to_kube
from kube_api.resources import RESOURCES, for_store_kind, lookup
from kube_api.status import KubeError, from_store_error

PODS = lookup("", "v1", "pods")
LEASES = lookup("coordination.k8s.io", "v1", "leases")


def stored_pod(t: float) -> dict:
    return {"status": {"phase": "Running", "conditions": [{"type": "PodScheduled", "status": "True",
                                                           "lastTransitionTime": t}]},
            "apiVersion": "v1", "kind": "Pod", "spec": {"nodeName": "n1", "x-unmodelled": {"keep": [1, 2]}},
            "metadata": {"name": "a", "namespace": "d", "uid": "u", "creationTimestamp": t,
                         "deletionTimestamp": t + 30, "resourceVersion": 42}}


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=0, max_value=4_000_000_000))
def test_round_trip_of_whole_second_times(sec):
    s = stored_pod(float(sec))
    k = to_kube(s, PODS)
    assert k["metadata"]["resourceVersion"] == "42"
    assert k["metadata"]["creationTimestamp"] == rfc3339(sec)
    assert from_kube(k, PODS) == s
    assert s["metadata"]["resourceVersion"] == 42      # to_kube leaves its input alone


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=0, max_value=4_000_000_000), st.integers(min_value=0, max_value=999_999))
def test_micro_time_round_trip(sec, us):
    t = sec + us / 1e6
    s = micro_time(t)
    assert s.endswith("Z") and len(s) == 27
    assert abs(parse_time(s, "f") - t) < 2e-6


def test_lease_times_and_untouched_fields():
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
             "metadata": {"name": "l", "namespace": "n", "resourceVersion": 3},
             "spec": {"holderIdentity": "a", "acquireTime": 10.5, "renewTime": 11.25, "leaseDurationSeconds": 15}}
    k = to_kube(lease, LEASES)
    assert k["spec"]["acquireTime"] == "1970-01-01T00:00:10.500000Z"
    assert k["spec"]["holderIdentity"] == "a" and k["spec"]["leaseDurationSeconds"] == 15
    assert from_kube(k, LEASES) == lease


@pytest.mark.parametrize("bad, field", [
    ({"metadata": {"resourceVersion": "12a"}}, "metadata.resourceVersion"),
    ({"metadata": {"creationTimestamp": "yesterday"}}, "metadata.creationTimestamp"),
    ({"metadata": "x"}, "metadata"),
    ({"status": {"conditions": [{"lastTransitionTime": "soon"}]}}, "status.conditions[0].lastTransitionTime"),
])
def test_bad_input_is_400_naming_the_field(bad, field):
    with pytest.raises(KubeError) as e:
        from_kube(bad, PODS)
    assert e.value.code == 400 and field in e.value.message


def test_store_errors_map_to_kubernetes_reasons():
    cases = [(E.NotFound("get: not found", kind="Pod", name="a"), 404, "NotFound", 'pods "a" not found'),
             (E.AlreadyExists("exists", kind="Pod", name="a"), 409, "AlreadyExists", 'pods "a" already exists'),
             (E.Conflict("the object has been modified", kind="Pod", name="a"), 409, "Conflict",
              'Operation cannot be fulfilled on pods "a": the object has been modified'),
             (E.Invalid("must be >= 0", kind="Pod", name="a", field="spec.priority"), 422, "Invalid",
              'Pod "a" is invalid: spec.priority: must be >= 0'),
             (E.Gone("too old", kind="Pod"), 410, "Expired", "too old"),
             (E.TooLargeResourceVersion("Too large resource version: 9, current: 3", kind="Pod",
                                        retry_after_seconds=1), 504, "Timeout", "Too large")]
    for err, code, reason, msg in cases:
        k = from_store_error(err, PODS, getattr(err, "name", None))
        assert (k.code, k.reason) == (code, reason)
        assert k.message.startswith(msg), k.message
        body = k.body()
        assert body["kind"] == "Status" and body["status"] == "Failure" and body["code"] == code
    k = from_store_error(E.Invalid("bad", kind="Pod", name="a", field="spec.x"), PODS, "a")
    assert k.body()["details"]["causes"] == [{"reason": "FieldValueInvalid", "message": "bad", "field": "spec.x"}]
    k = from_store_error(ConnectionError("refused"), PODS, None)
    assert (k.code, k.reason) == (503, "ServiceUnavailable")


def test_registry_is_consistent():
    seen = set()
    for r in RESOURCES:
        assert (r.group, r.version, r.plural) not in seen
        seen.add((r.group, r.version, r.plural))
        assert lookup(r.group, r.version, r.plural) is r
    for kind in ("Pod", "Node", "PodGroup", "Queue", "PriorityClass", "Lease", "HyperNode", "Namespace", "Event"):
        assert for_store_kind(kind).kind == kind
    with pytest.raises(KeyError, match="not served"):
        for_store_kind("Widget")
    assert lookup("events.k8s.io", "v1", "events") is None
