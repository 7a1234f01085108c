"""The fast paths of the pod-event path give what the plain code gives.

* ``TaskInfo.__init__`` inlines getTaskStatus's commonest case (a Pending pod without node,
  nominated node, deletion or pipelined-status annotation), the revocable-zone and preemptable
  look-ups: random pods (every field those read, odd values included) are checked against the
  helpers ``get_task_status``, ``get_pod_revocable_zone``, ``get_pod_preemptable``,
  ``get_task_role``, ``get_job_id`` and the parsed request, under every profile;
* ``get_pod_resource_request`` answers pods with plain containers from a memo keyed by their
  requests: the same Resource as parsing (a fresh one each time), or the same error;
* ``SchedulerCache.update_pod`` reuses the old pod's look-up only when the new pod has its ids.
"""
from __future__ import annotations

import copy

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cluster_state.quantity import QuantityError
from ha.scheduler.api import task_info as ti_mod
from ha.scheduler.api.helpers import (EVICTION_OCCURRED_ANNOTATION, PIPELINED_NODE_ANNOTATION,
                                      PIPELINED_STATUS_ANNOTATION, PREEMPTABLE_KEY, REVOCABLE_ZONE_KEY,
                                      TASK_PRIORITY_ANNOTATION, TASK_SPEC_KEY, _truthy, get_task_status)
from ha.scheduler.api.task_info import (TaskInfo, get_job_id, get_pod_preemptable, get_pod_resource_request,
                                        get_pod_revocable_zone, get_task_role)
from ha.scheduler.api.types import TaskStatus
from ha.scheduler.profiles import profile

PROFILES = ["v1.14", "pr5045", "pr5045-fixed", "annotations", "nomination-only"]
maybe = st.one_of(st.none(), st.just(""), st.sampled_from(["true", "false", "1", "yes", "x", "n1"]))
quantity = st.sampled_from(["1", "500m", "0.3333", "1Gi", "2", "1.7Gi", 3, 0.5, "100"])
requests = st.one_of(st.none(), st.just({}), st.dictionaries(
    st.sampled_from(["cpu", "memory", "pods", "nvidia.com/gpu", "count/foo", "ephemeral-storage"]),
    quantity, max_size=4))
container = st.builds(lambda r, rp: {"name": "c", **({"resources": {"requests": r}} if r is not None else {}),
                                     **({"restartPolicy": rp} if rp else {})},
                      requests, st.sampled_from([None, "Always"]))


@st.composite
def pods(draw):
    ann = {}
    for key in (PIPELINED_STATUS_ANNOTATION, PIPELINED_NODE_ANNOTATION, EVICTION_OCCURRED_ANNOTATION,
                REVOCABLE_ZONE_KEY, PREEMPTABLE_KEY, TASK_SPEC_KEY, TASK_PRIORITY_ANNOTATION,
                "scheduling.k8s.io/group-name"):
        v = draw(maybe)
        if v is not None:
            ann[key] = v if key != TASK_PRIORITY_ANNOTATION else draw(st.sampled_from([v, "7", " 3 "]))
    labels = {}
    for key in (PREEMPTABLE_KEY, TASK_SPEC_KEY):
        v = draw(maybe)
        if v is not None:
            labels[key] = v
    md = {"name": "p", "namespace": draw(st.sampled_from(["", "ns"])), "annotations": ann, "labels": labels}
    if draw(st.booleans()):
        md["uid"] = "u1"
    if draw(st.booleans()):
        md["deletionTimestamp"] = 1.0
    spec = {"nodeName": draw(st.sampled_from(["", "n1", None])),
            "priority": draw(st.sampled_from([None, 0, 5])),
            "containers": draw(st.lists(container, max_size=3))}
    if draw(st.booleans()):
        spec["initContainers"] = draw(st.lists(container, max_size=2))
    if draw(st.booleans()):
        spec["overhead"] = draw(requests)
    if draw(st.booleans()):
        spec["schedulingGates"] = [{"name": "g"}]
    status = {"phase": draw(st.sampled_from([None, "Pending", "Running", "Succeeded", "Failed", "Unknown", "Odd"])),
              "nominatedNodeName": draw(st.sampled_from(["", "n2", None]))}
    return {"metadata": md, "spec": spec, "status": status}


def _res(r):
    return (r.milli_cpu, r.memory, r.scalar_resources, r.max_task_num)


def _pending(**md_extra) -> dict:
    return {"metadata": {"name": "p", "namespace": "ns", "annotations": {}, "labels": {}, **md_extra},
            "spec": {"nodeName": "", "containers": []}, "status": {"phase": "Pending"}}


@settings(max_examples=400, deadline=None)
@given(pod=pods(), name=st.sampled_from(PROFILES))
# the cases just outside the inlined Pending: the annotation-persistence design's annotations,
# PR #5045's nominated node
@example(pod=_pending(annotations={PIPELINED_STATUS_ANNOTATION: "true", PIPELINED_NODE_ANNOTATION: "n1"}),
         name="annotations")
@example(pod=dict(_pending(), status={"phase": "Pending", "nominatedNodeName": "n2"}), name="pr5045")
@example(pod=_pending(deletionTimestamp=1.0), name="v1.14")
def test_task_info_equals_the_helpers(pod, name):
    sw = profile(name)
    t = TaskInfo(copy.deepcopy(pod), sw)
    want = get_task_status(pod, sw)
    assert t.status == want
    md, spec, status = pod["metadata"], pod["spec"], pod["status"]
    ann = md["annotations"]
    node = spec.get("nodeName") or ""
    if want == TaskStatus.PIPELINED and not node:
        node = (ann[PIPELINED_NODE_ANNOTATION] if sw.annotation_persistence and ann.get(PIPELINED_NODE_ANNOTATION)
                else status.get("nominatedNodeName") or "")
    assert t.node_name == node
    assert t.eviction_occurred is bool(sw.annotation_persistence and _truthy(ann.get(EVICTION_OCCURRED_ANNOTATION)))
    assert t.revocable_zone == get_pod_revocable_zone(pod)
    assert t.preemptable == get_pod_preemptable(pod)
    assert t.task_role == get_task_role(pod)
    assert t.job == get_job_id(pod)
    assert t.uid == (md.get("uid") or f"{md['namespace']}-p")
    assert _res(t.resreq) == _res(ti_mod._pod_resource_request(spec))
    assert t.best_effort == ti_mod._pod_resource_request(spec).is_empty()


canonical = st.one_of(
    st.integers(0, 10**6).map(lambda n: f"{n}m"), st.integers(0, 10**12).map(str),
    st.sampled_from(["0m", "007m", "1", "m", "", "5M", "+5m", "-5m", " 5m", "1e3", "0.5", "1Gi", "\u0665m"]),
    st.integers(0, 2**40), st.floats(0, 1e6))
memo_requests = st.one_of(st.none(), st.just({}), st.dictionaries(
    st.sampled_from(["cpu", "memory", "pods", "nvidia.com/gpu", "count/foo"]), canonical, max_size=3))
memo_container = st.builds(lambda r: {"name": "c", **({"resources": {"requests": r}} if r is not None else {})},
                           memo_requests)


def _outcome(fn, *args):
    try:
        return ("ok", _res(fn(*args)))
    except Exception as e:   # the same error, as text, from both
        return ("error", type(e).__name__, str(e))


@settings(max_examples=300, deadline=None)
@given(specs=st.lists(st.lists(memo_container, max_size=3), min_size=1, max_size=6), init=st.booleans())
def test_request_memo_equals_parsing(specs, init):
    """get_pod_resource_request answers pods with plain containers from a memo keyed by their
    requests: exactly what parsing gives (or the same error), a fresh object each time."""
    ti_mod._REQUEST_MEMO.clear()
    for containers in specs + specs:   # every shape twice: the second answer comes from the memo
        spec = {"containers": containers}
        if init:
            spec["initContainers"] = [{"name": "i", "resources": {"requests": {"cpu": "100m"}}}]
        want = _outcome(ti_mod._pod_resource_request, spec)
        try:
            r = get_pod_resource_request({"spec": spec})
        except Exception as e:
            assert want == ("error", type(e).__name__, str(e))
            continue
        assert ("ok", _res(r)) == want
        r.milli_cpu += 1   # the caller owns what it gets (memo hit or miss): the memo keeps its own
        r.add_scalar("x", 1.0)
        assert _outcome(get_pod_resource_request, {"spec": spec}) == want
    assert not init or not ti_mod._REQUEST_MEMO   # init containers: always parsed


def test_request_memo_is_bounded_and_survives_unhashable_values():
    ti_mod._REQUEST_MEMO.clear()
    for i in range(ti_mod._REQUEST_MEMO_MAX + 10):
        get_pod_resource_request({"spec": {"containers": [{"resources": {"requests": {"cpu": f"{i}m"}}}]}})
    assert 0 < len(ti_mod._REQUEST_MEMO) <= ti_mod._REQUEST_MEMO_MAX
    odd = {"spec": {"containers": [{"resources": {"requests": {"cpu": ["1"]}}}]}}
    with pytest.raises(QuantityError) as memo_path:
        get_pod_resource_request(odd)
    with pytest.raises(QuantityError) as plain:   # parsed (and rejected) as without the memo
        ti_mod._pod_resource_request(odd["spec"])
    assert str(memo_path.value) == str(plain.value)


@pytest.mark.parametrize("change", ["uid", "group", "none"])
@pytest.mark.parametrize("name", ["v1.14", "pr5045"])
def test_update_ids_of_an_allocated_task(change, name):
    """update_pod reuses the old pod's look-up for the allocated-in-cache guard only when the new
    pod has the same ids: a new uid or group is looked up as itself (as delete + add does)."""
    from ha.scheduler.cache import SchedulerCache
    from ha.scheduler.interfaces import RecordingIO
    from tests.scheduler.cachekit import make_node, make_pod, make_pod_group, make_queue
    from tests.scheduler.test_cache_update_fastpath import DeleteAddCache, state

    caches = []
    for cls in (SchedulerCache, DeleteAddCache):
        io = RecordingIO(evict_deletes=False)
        c = cls(profile(name), binder=io, evictor=io, status_updater=io)
        c.add_queue(make_queue("default"))
        c.add_node(make_node("n0"))
        for g in ("g0", "g1"):
            c.add_pod_group(make_pod_group(g, min_member=2))
        caches.append(c)
    pods = [make_pod("p0", group="g0"), make_pod("p1", group="g0")]
    for c in caches:
        for p in pods:
            c.add_pod(copy.deepcopy(p))
        t = c.jobs["ns/g0"].tasks["ns-p0"].clone()
        t.node_name = "n0"
        c.add_bind_task(t)                                    # the cache holds p0 Binding
        c.pipeline(c.jobs["ns/g0"].tasks["ns-p1"].clone(), "n0")   # and p1 Pipelined
    for p in pods:
        new = copy.deepcopy(p)
        if change == "uid":
            new["metadata"]["uid"] += "-2"
        elif change == "group":
            new["metadata"]["annotations"]["scheduling.k8s.io/group-name"] = "g1"
        new["metadata"]["annotations"]["x"] = "y"
        for c in caches:
            c.update_pod(copy.deepcopy(p), copy.deepcopy(new))
    a, b = state(caches[0]), state(caches[1])
    assert a == b
    assert caches[0].stats["ignored_updates"] == {"none": 1 + (name == "pr5045"), "uid": 0, "group": 0}[change]
