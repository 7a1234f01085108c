"""Property: whatever malformed write reaches the front -- bodies that are not JSON, patches of the
wrong shape, wrong kinds and apiVersions, bad names, negative quantities, fields of the wrong type,
bad DeleteOptions, Bindings and Evictions -- the answer is a Kubernetes ``Status`` with a 4xx code
(never a 500, never a hang) and nothing stored changes (every key of the store, the global RV
included, is byte-equal before and after)."""
from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.cluster_state.helpers import podgroup, queue
from tests.kube_api.write_helpers import JSON_PATCH, MERGE, PG, POD, QUEUES, SMP, call, pod_json, snapshot

NAME_OK = st.from_regex(r"[a-z0-9]([-a-z0-9]{0,8}[a-z0-9])?", fullmatch=True)


def _not_json(b: bytes) -> bool:
    try:
        json.loads(b)
    except (ValueError, UnicodeDecodeError):
        return True
    return False


garbage = st.binary(min_size=1, max_size=60).filter(lambda b: b.strip() != b"" and _not_json(b))
scalars = st.one_of(st.integers(-10**6, 10**6), st.text(max_size=12), st.booleans(), st.floats(allow_nan=False))
not_object = st.one_of(scalars, st.lists(scalars, max_size=3))
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
bad_names = st.text(min_size=1, max_size=40).filter(lambda s: not _SUBDOMAIN.fullmatch(s))
negative_qty = st.one_of(st.integers(-10**9, -1).map(str), st.integers(-10**6, -1).map(lambda n: f"{n}m"),
                         st.integers(-999, -1).map(lambda n: f"{n}Gi"))
other_kind = st.text(min_size=1, max_size=12).filter(lambda s: s not in ("Pod",))
other_version = st.text(min_size=1, max_size=12).filter(lambda s: s != "v1")


def _with(obj: dict, path: tuple, value) -> dict:
    out = json.loads(json.dumps(obj))
    cur = out
    for p in path[:-1]:
        cur = cur.setdefault(p, {})
    cur[path[-1]] = value
    return out


def cases():
    pod = pod_json("p-new")
    stored_pod_path = POD + "/p0"
    return st.one_of(
        # bodies that are not JSON, on every write verb
        st.tuples(st.sampled_from([("POST", POD), ("PUT", stored_pod_path), ("PUT", stored_pod_path + "/status"),
                                   ("POST", stored_pod_path + "/binding"), ("POST", stored_pod_path + "/eviction"),
                                   ("DELETE", stored_pod_path), ("POST", QUEUES)]),
                  st.just("application/json"), garbage),
        st.tuples(st.sampled_from([("PATCH", stored_pod_path), ("PATCH", PG + "/pg0")]),
                  st.sampled_from([MERGE, JSON_PATCH, SMP]), garbage),
        # JSON that is not an object where an object is needed
        st.tuples(st.sampled_from([("POST", POD), ("PUT", stored_pod_path), ("POST", stored_pod_path + "/binding")]),
                  st.just("application/json"), not_object.map(lambda v: json.dumps(v).encode())),
        st.tuples(st.just(("PATCH", stored_pod_path)), st.sampled_from([MERGE, SMP]),
                  not_object.map(lambda v: json.dumps(v).encode())),
        # JSON patches with bad operations
        st.tuples(st.just(("PATCH", stored_pod_path)), st.just(JSON_PATCH),
                  st.lists(st.fixed_dictionaries({"op": st.text(max_size=8).filter(
                      lambda s: s not in ("add", "remove", "replace", "move", "copy", "test")),
                      "path": st.text(max_size=10)}), min_size=1, max_size=3).map(lambda v: json.dumps(v).encode())),
        st.tuples(st.just(("PATCH", stored_pod_path)), st.just(JSON_PATCH),
                  st.lists(st.fixed_dictionaries({"op": st.sampled_from(["remove", "replace", "test"]),
                                                  "path": st.from_regex(r"/nope/[a-z]{1,5}", fullmatch=True),
                                                  "value": scalars}), min_size=1, max_size=3)
                  .map(lambda v: json.dumps(v).encode())),
        # strategic merge patches with bad directives; CRDs refuse strategic merge patch
        st.tuples(st.just(("PATCH", stored_pod_path + "/status")), st.just(SMP),
                  st.text(min_size=1, max_size=8).filter(lambda s: s not in ("replace", "delete"))
                  .map(lambda d: json.dumps({"status": {"$patch": d}}).encode())),
        st.tuples(st.just(("PATCH", PG + "/pg0")), st.just(SMP),
                  st.dictionaries(st.text(max_size=5), scalars, max_size=2).map(lambda v: json.dumps(v).encode())),
        # merge patches that make the object invalid
        st.tuples(st.just(("PATCH", PG + "/pg0")), st.just(MERGE),
                  st.integers(-10**6, -1).map(lambda n: json.dumps({"spec": {"minMember": n}}).encode())),
        st.tuples(st.just(("PATCH", stored_pod_path + "/status")), st.just(MERGE),
                  st.text(max_size=10).filter(lambda s: s not in ("Pending", "Running", "Succeeded", "Failed",
                                                                 "Unknown", ""))
                  .map(lambda s: json.dumps({"status": {"phase": s}}).encode())),
        # wrong kinds / apiVersions, bad names, negative quantities, wrong types
        st.tuples(st.just(("POST", POD)), st.just("application/json"),
                  other_kind.map(lambda kd: json.dumps({**pod, "kind": kd}).encode())),
        st.tuples(st.just(("POST", POD)), st.just("application/json"),
                  other_version.map(lambda v: json.dumps({**pod, "apiVersion": v}).encode())),
        st.tuples(st.just(("POST", POD)), st.just("application/json"),
                  bad_names.map(lambda n: json.dumps(_with(pod, ("metadata", "name"), n)).encode())),
        st.tuples(st.just(("POST", POD)), st.just("application/json"),
                  negative_qty.map(lambda q: json.dumps(_with(pod, ("spec", "containers"),
                                                              [{"name": "c", "resources": {"requests": {"cpu": q}}}]))
                                   .encode())),
        st.tuples(st.just(("POST", POD)), st.just("application/json"),
                  st.sampled_from([("spec", "containers"), ("metadata", "labels"), ("spec", "nodeSelector"),
                                   ("metadata", "finalizers"), ("spec", "priority")])
                  .flatmap(lambda p: st.one_of(st.text(max_size=8), st.floats(allow_nan=False, allow_infinity=False)
                                               .filter(lambda f: not f.is_integer())).map(
                      lambda v: json.dumps(_with(pod, p, v)).encode()))),
        st.tuples(st.just(("PUT", stored_pod_path)), st.just("application/json"),
                  st.integers(1, 10**6).map(lambda rv: json.dumps(
                      _with(_with(pod, ("metadata", "name"), "p0"), ("metadata", "resourceVersion"),
                            str(rv + 10**6))).encode())),
        st.tuples(st.just(("POST", QUEUES)), st.just("application/json"),
                  st.integers(-100, -1).map(lambda w: json.dumps({"kind": "Queue", "metadata": {"name": "q-new"},
                                                                  "spec": {"weight": w}}).encode())),
        st.tuples(st.just(("POST", "/api/v1/namespaces/default/events")), st.just("application/json"),
                  st.integers(-10**6, -1).map(lambda c: json.dumps({"kind": "Event", "metadata": {"name": "e1"},
                                                                    "count": c}).encode())),
        st.tuples(st.just(("POST", "/api/v1/namespaces")), st.just("application/json"),
                  st.one_of(bad_names, st.just("a.b"), st.text(min_size=64, max_size=70, alphabet="abc"))
                  .map(lambda n: json.dumps({"kind": "Namespace", "metadata": {"name": n}}).encode())),
        st.tuples(st.just(("PUT", PG + "/pg0")), st.just("application/json"),
                  st.integers(-10**6, -1).map(lambda n: json.dumps(
                      {"kind": "PodGroup", "apiVersion": "scheduling.volcano.sh/v1beta1",
                       "metadata": {"name": "pg0", "namespace": "default"}, "spec": {"minMember": n}}).encode())),
        # DeleteOptions, Bindings, Evictions
        st.tuples(st.just(("DELETE", stored_pod_path)), st.just("application/json"),
                  st.one_of(st.integers(-10**6, -1).map(lambda g: {"gracePeriodSeconds": g}),
                            st.text(min_size=1, max_size=6).filter(lambda s: not s.lstrip("-").isdigit())
                            .map(lambda g: {"gracePeriodSeconds": g}),
                            st.text(min_size=1, max_size=8).filter(lambda s: s not in ("Orphan", "Background",
                                                                                        "Foreground"))
                            .map(lambda p: {"propagationPolicy": p}),
                            st.text(min_size=1, max_size=8).map(lambda u: {"preconditions": {"uid": "x" + u}}),
                            other_kind.filter(lambda s: s != "DeleteOptions").map(lambda kd: {"kind": kd}))
                  .map(lambda v: json.dumps(v).encode())),
        st.tuples(st.just(("POST", stored_pod_path + "/binding")), st.just("application/json"),
                  st.one_of(st.text(min_size=1, max_size=6).filter(lambda s: s != "Node")
                            .map(lambda kd: {"metadata": {"name": "p0"}, "target": {"kind": kd, "name": "n1"}}),
                            st.just({"metadata": {"name": "p0"}, "target": {"kind": "Node"}}),
                            NAME_OK.filter(lambda n: n != "p0")
                            .map(lambda n: {"metadata": {"name": n}, "target": {"name": "n1"}}),
                            st.text(min_size=1, max_size=8).map(
                                lambda u: {"metadata": {"name": "p0", "uid": "x" + u}, "target": {"name": "n1"}}))
                  .map(lambda v: json.dumps(v).encode())),
        st.tuples(st.just(("POST", stored_pod_path + "/eviction")), st.just("application/json"),
                  st.one_of(st.integers(-10**6, -1).map(
                      lambda g: {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p0"},
                                 "deleteOptions": {"gracePeriodSeconds": g}}),
                            other_version.filter(lambda v: v not in ("policy/v1", "policy/v1beta1")).map(
                                lambda v: {"apiVersion": v, "kind": "Eviction", "metadata": {"name": "p0"}}))
                  .map(lambda v: json.dumps(v).encode())),
        # bodies nesting deeper than the front takes (what is stored must stay servable)
        st.tuples(st.sampled_from([("POST", POD), ("PUT", stored_pod_path), ("PATCH", stored_pod_path)]),
                  st.just("application/json"),
                  st.integers(101, 600).map(lambda n: ('{"metadata": {"name": "p0"}, "spec": '
                                                       + '{"a": ' * n + "1" + "}" * n + "}").encode()))
        .map(lambda c: (c[0], MERGE if c[0][0] == "PATCH" else c[1], c[2])),
        # content types nobody accepts
        st.tuples(st.sampled_from([("POST", POD), ("PUT", stored_pod_path), ("PATCH", stored_pod_path)]),
                  st.sampled_from(["text/plain", "application/xml", "application/apply-patch+yaml",
                                   "application/cbor"]),
                  st.just(json.dumps(pod).encode())),
    )


@pytest.fixture
def seeded(kube_front):
    kube_front.api.create(pod_json("p0", node="n1"))
    kube_front.api.create(podgroup("pg0"))
    kube_front.api.create(queue("default"))
    return kube_front


@settings(max_examples=300, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(case=cases())
def test_malformed_writes_answer_4xx_status_and_store_nothing(seeded, case):
    (method, path), ctype, raw = case
    before = snapshot(seeded.redis_url, seeded.prefix)
    code, body = call(seeded.url, method, path, ctype=ctype, raw=raw, timeout=20)
    assert 400 <= code < 500, (method, path, ctype, raw[:200], code, body)
    assert body.get("kind") == "Status" and body.get("status") == "Failure" and body.get("code") == code, body
    assert body.get("reason") and body.get("message"), body
    assert snapshot(seeded.redis_url, seeded.prefix) == before, (method, path, raw[:200])
