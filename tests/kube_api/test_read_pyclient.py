"""The official ``kubernetes`` Python client against the front: list, watch from a resourceVersion
with bookmarks, 410 then relist (real Redis)."""
from __future__ import annotations

import threading
import time

import pytest
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

from .read_helpers import NS, node, pod, podgroup


@pytest.fixture
def core(kube_front):
    config.load_kube_config(config_file=kube_front.kubeconfig)
    return client.CoreV1Api()


def test_list_typed_objects(kube_front, core):
    api = kube_front.api
    api.create(node("n1"))
    api.create(pod("a", labels={"app": "web"}))
    api.bind(NS, "a", "n1")
    pods = core.list_pod_for_all_namespaces()
    assert [p.metadata.name for p in pods.items] == ["a"]
    p = pods.items[0]
    assert p.spec.node_name == "n1" and p.status.conditions[0].type == "PodScheduled"
    assert p.metadata.creation_timestamp.tzinfo is not None
    assert pods.metadata.resource_version == str(api.current_resource_version())
    assert core.read_namespaced_pod("a", NS).metadata.labels == {"app": "web"}
    assert [n.metadata.name for n in core.list_node().items] == ["n1"]
    with pytest.raises(ApiException) as e:
        core.read_namespaced_pod("missing", NS)
    assert e.value.status == 404
    api.create(podgroup("pg"))
    pgs = client.CustomObjectsApi().list_namespaced_custom_object("scheduling.volcano.sh", "v1beta1", NS, "podgroups")
    assert [g["metadata"]["name"] for g in pgs["items"]] == ["pg"]


def test_watch_from_rv_with_bookmarks(kube_front, core):
    api = kube_front.api
    api.create(pod("a"))
    rv = core.list_namespaced_pod(NS).metadata.resource_version

    def writer():
        time.sleep(0.3)
        api.create(pod("b"))
        api.create(pod("c"))
    t = threading.Thread(target=writer)
    t.start()
    seen, bookmarks = [], 0
    for ev in watch.Watch().stream(core.list_namespaced_pod, NS, resource_version=rv, allow_watch_bookmarks=True,
                                   timeout_seconds=4):
        if ev["type"] == "BOOKMARK":
            bookmarks += 1
        else:
            seen.append((ev["type"], ev["object"].metadata.name))
    t.join()
    assert seen == [("ADDED", "b"), ("ADDED", "c")]
    assert bookmarks >= 1


def test_expired_watch_raises_410_then_relist_works(kube_front, core):
    api = kube_front.api
    api.create(pod("a"))
    rv = core.list_namespaced_pod(NS).metadata.resource_version
    api.create(pod("b"))
    api.compact("Pod", api.current_resource_version())
    with pytest.raises(ApiException) as e:
        for _ in watch.Watch().stream(core.list_namespaced_pod, NS, resource_version=rv, timeout_seconds=5):
            pass
    assert e.value.status == 410
    relist = core.list_namespaced_pod(NS)
    assert sorted(p.metadata.name for p in relist.items) == ["a", "b"]
    # and a watch from the relist's RV runs
    api.create(pod("c"))
    got = [ev["object"].metadata.name for ev in watch.Watch().stream(
        core.list_namespaced_pod, NS, resource_version=relist.metadata.resource_version, timeout_seconds=2)]
    assert got == ["c"]
