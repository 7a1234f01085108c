"""kube_api.patch: the three patch types on Kubernetes JSON documents, pure functions.

The strategic merge patch cases are the patches schedulers send (kube-scheduler's PatchPodStatus:
a PodScheduled condition with ``$setElementOrder/conditions``, a ``nominatedNodeName`` set or
cleared with null) and apimachinery's documented list rules (merge key, replace without one,
``$patch: delete`` elements, scalar unions, ``$deleteFromPrimitiveList``, ``$retainKeys``)."""
from __future__ import annotations

import copy

import pytest

from kube_api.patch import (MERGE_KEYS, PatchError, apply_patch, json_patch, merge_patch,
                            strategic_merge_patch)

SMP = "application/strategic-merge-patch+json"


def pod() -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "d", "labels": {"a": "1"}, "finalizers": ["x/a", "x/b"]},
            "spec": {"containers": [{"name": "main", "image": "i:1", "env": [{"name": "A", "value": "1"}]},
                                    {"name": "side", "image": "s:1"}],
                     "tolerations": [{"key": "k1", "operator": "Exists"}]},
            "status": {"phase": "Pending", "nominatedNodeName": "n1",
                       "conditions": [{"type": "Ready", "status": "False"},
                                      {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"},
                                      {"type": "Initialized", "status": "True"}]}}


def smp(doc, patch):
    before = copy.deepcopy(doc)
    out = strategic_merge_patch(doc, patch, MERGE_KEYS["Pod"])
    assert doc == before, "the input document must not change"
    return out


def test_merge_patch_merges_maps_deletes_nulls_replaces_lists():
    out = merge_patch(pod(), {"metadata": {"labels": {"b": "2", "a": None}},
                              "status": {"nominatedNodeName": None, "conditions": [{"type": "X"}]}})
    assert out["metadata"]["labels"] == {"b": "2"}
    assert "nominatedNodeName" not in out["status"]
    assert out["status"]["conditions"] == [{"type": "X"}]       # a merge patch replaces lists
    assert out["spec"] == pod()["spec"]
    with pytest.raises(PatchError) as e:
        merge_patch(pod(), [{"op": "add"}])
    assert e.value.code == 400


def test_json_patch_ops_and_pointer_escapes():
    doc = pod()
    out = json_patch(doc, [
        {"op": "add", "path": "/metadata/annotations", "value": {"a/b~c": "1"}},
        {"op": "replace", "path": "/metadata/annotations/a~1b~0c", "value": "2"},
        {"op": "add", "path": "/spec/containers/-", "value": {"name": "third"}},
        {"op": "remove", "path": "/status/conditions/0"},
        {"op": "copy", "from": "/metadata/labels", "path": "/metadata/copied"},
        {"op": "move", "from": "/status/nominatedNodeName", "path": "/status/moved"},
        {"op": "test", "path": "/status/moved", "value": "n1"},
        {"op": "add", "path": "/spec/tolerations/0", "value": {"key": "first"}},
    ])
    assert out["metadata"]["annotations"] == {"a/b~c": "2"}
    assert [c["name"] for c in out["spec"]["containers"]] == ["main", "side", "third"]
    assert [c["type"] for c in out["status"]["conditions"]] == ["PodScheduled", "Initialized"]
    assert out["metadata"]["copied"] == {"a": "1"} and out["status"]["moved"] == "n1"
    assert "nominatedNodeName" not in out["status"]
    assert out["spec"]["tolerations"][0] == {"key": "first"}
    assert doc == pod()


@pytest.mark.parametrize("patch, code", [
    ({"op": "add"}, 400),                                                     # not a list
    ([{"op": "frobnicate", "path": "/a"}], 400),                              # unknown op
    ([{"op": "add", "path": "a", "value": 1}], 400),                          # not a pointer
    ([{"op": "add", "path": "/a"}], 400),                                     # no value
    ([7], 400),
    ([{"op": "remove", "path": "/status/missing"}], 422),
    ([{"op": "replace", "path": "/nope/x", "value": 1}], 422),
    ([{"op": "test", "path": "/status/phase", "value": "Running"}], 422),
    ([{"op": "add", "path": "/spec/containers/9", "value": {}}], 422),
    ([{"op": "add", "path": "/spec/containers/01", "value": {}}], 422),
    ([{"op": "remove", "path": ""}], 422),
])
def test_json_patch_errors(patch, code):
    with pytest.raises(PatchError) as e:
        json_patch(pod(), patch)
    assert e.value.code == code, e.value.message


def test_smp_kube_scheduler_pod_status_patch():
    # what PatchPodStatus sends: the changed condition, the order of all conditions, NNN set
    patch = {"status": {"$setElementOrder/conditions": [{"type": "Ready"}, {"type": "PodScheduled"},
                                                         {"type": "Initialized"}],
                        "conditions": [{"type": "PodScheduled", "status": "False", "reason": "SchedulerError",
                                        "message": "boom"}],
                        "nominatedNodeName": "n2"}}
    out = smp(pod(), patch)
    conds = out["status"]["conditions"]
    assert [c["type"] for c in conds] == ["Ready", "PodScheduled", "Initialized"]
    assert conds[1] == {"type": "PodScheduled", "status": "False", "reason": "SchedulerError", "message": "boom"}
    assert conds[0] == {"type": "Ready", "status": "False"}
    assert out["status"]["nominatedNodeName"] == "n2"
    # clearing NNN: null deletes
    out = smp(pod(), {"status": {"nominatedNodeName": None}})
    assert "nominatedNodeName" not in out["status"] and out["status"]["phase"] == "Pending"


def test_smp_new_condition_order_follows_apimachinery():
    # without $setElementOrder, mergeSortedSlice puts a patch item not in the live list first
    out = smp(pod(), {"status": {"conditions": [{"type": "DisruptionTarget", "status": "True"}]}})
    assert [c["type"] for c in out["status"]["conditions"]] == ["DisruptionTarget", "Ready", "PodScheduled",
                                                                "Initialized"]
    # with it (what CreateTwoWayMergePatch sends), the order is the directive's
    out = smp(pod(), {"status": {"$setElementOrder/conditions": [{"type": "Ready"}, {"type": "PodScheduled"},
                                                                  {"type": "Initialized"}, {"type": "DisruptionTarget"}],
                                 "conditions": [{"type": "DisruptionTarget", "status": "True"}]}})
    assert [c["type"] for c in out["status"]["conditions"]] == ["Ready", "PodScheduled", "Initialized",
                                                                "DisruptionTarget"]
    # a patched existing item keeps its place among the live items
    out = smp(pod(), {"status": {"conditions": [{"type": "Initialized", "status": "False"}]}})
    assert [c["type"] for c in out["status"]["conditions"]] == ["Ready", "PodScheduled", "Initialized"]


def test_smp_delete_element_and_replace_directives():
    out = smp(pod(), {"status": {"conditions": [{"$patch": "delete", "type": "Ready"}]}})
    assert [c["type"] for c in out["status"]["conditions"]] == ["PodScheduled", "Initialized"]
    out = smp(pod(), {"status": {"conditions": [{"type": "Only", "status": "True"}, {"$patch": "replace"}]}})
    assert out["status"]["conditions"] == [{"type": "Only", "status": "True"}]
    out = smp(pod(), {"metadata": {"labels": {"$patch": "replace", "z": "9"}}})
    assert out["metadata"]["labels"] == {"z": "9"}
    out = smp(pod(), {"metadata": {"labels": {"$patch": "delete"}}})
    assert out["metadata"]["labels"] == {}


def test_smp_lists_without_merge_key_are_replaced_and_nested_keys_merge():
    out = smp(pod(), {"spec": {"tolerations": [{"key": "k2", "operator": "Exists"}],
                               "containers": [{"name": "main", "image": "i:2", "env": [{"name": "B", "value": "2"}]}]}})
    assert out["spec"]["tolerations"] == [{"key": "k2", "operator": "Exists"}]
    main = out["spec"]["containers"][0]
    assert main["image"] == "i:2" and main["env"] == [{"name": "B", "value": "2"}, {"name": "A", "value": "1"}]
    assert [c["name"] for c in out["spec"]["containers"]] == ["main", "side"]


def test_smp_scalar_union_and_delete_from_primitive_list():
    out = smp(pod(), {"metadata": {"finalizers": ["x/c", "x/a"]}})
    assert sorted(out["metadata"]["finalizers"]) == ["x/a", "x/b", "x/c"]
    out = smp(pod(), {"metadata": {"$deleteFromPrimitiveList/finalizers": ["x/a"]}})
    assert out["metadata"]["finalizers"] == ["x/b"]


def test_smp_retain_keys():
    out = smp(pod(), {"status": {"$retainKeys": ["phase", "conditions"], "phase": "Running"}})
    assert set(out["status"]) == {"phase", "conditions"} and out["status"]["phase"] == "Running"


@pytest.mark.parametrize("patch", [
    [{"status": {}}],
    {"status": {"conditions": [{"status": "True"}]}},                       # no merge key
    {"status": {"conditions": [{"$patch": "delete"}]}},                     # delete without the key
    {"status": {"conditions": [{"$patch": "merge", "type": "Ready"}]}},
    {"status": {"$patch": "frob"}},
    {"status": {"$setElementOrder/conditions": [{"type": "Ready"}],
                "conditions": [{"type": "PodScheduled", "status": "True"}]}},   # item missing from the order
    {"status": {"$setElementOrder/phase": ["x"]}},                          # not a merging list
    {"status": {"$unknownDirective": 1}},
])
def test_smp_malformed_patches_are_400(patch):
    with pytest.raises(PatchError) as e:
        smp(pod(), patch)
    assert e.value.code == 400, e.value.message


def test_apply_patch_dispatches_and_refuses_what_kubernetes_refuses():
    assert apply_patch(pod(), {"status": {"phase": "Running"}}, SMP, "Pod")["status"]["phase"] == "Running"
    pg = {"kind": "PodGroup", "spec": {"minMember": 1}}
    with pytest.raises(PatchError) as e:
        apply_patch(pg, {"spec": {"minMember": 2}}, SMP, "PodGroup")
    assert e.value.code == 415 and "custom resource" in e.value.message
    assert apply_patch(pg, {"spec": {"minMember": 2}}, "application/merge-patch+json", "PodGroup")["spec"] == {"minMember": 2}
    with pytest.raises(PatchError) as e:
        apply_patch(pod(), {}, "application/apply-patch+yaml", "Pod")
    assert e.value.code == 415 and "server-side apply" in e.value.message
    with pytest.raises(PatchError) as e:
        apply_patch(pod(), {}, "text/plain", "Pod")
    assert e.value.code == 415
