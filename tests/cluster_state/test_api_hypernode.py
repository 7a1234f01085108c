"""The HyperNode kind (topology.volcano.sh/v1alpha1) on the real API server: validation with errors
naming the field, cluster scope, and informers feeding a scheduler cache that resolves the tree
and re-resolves it when nodes and hypernodes change."""
from __future__ import annotations

import time

import pytest

from cluster_state.aio import AsyncApiClient
from cluster_state.errors import Invalid
from cluster_state.informer import ThreadedInformer
from cluster_state.reflector import Backoff
from ha.scheduler.api.hypernode_info import hyper_node_object
from ha.scheduler.cache import SchedulerCache

from .helpers import api, dump, node  # noqa: F401


def hn(name, tier, *members, tier_name=""):
    o = hyper_node_object(name, tier, members, tier_name=tier_name)
    o["metadata"] = {"name": name}
    return o


def nm(name):
    return {"type": "Node", "selector": {"exactMatch": {"name": name}}}


@pytest.mark.parametrize("obj, field, words", [
    (hn("a", -1), "spec.tier", "must be >= 0"),
    ({"kind": "HyperNode", "metadata": {"name": "a"}, "spec": {}}, "spec.tier", "tier"),
    (hn("a", 1, {"type": "Rack", "selector": {"exactMatch": {"name": "x"}}}), "spec.members[0].type", "Rack"),
    (hn("a", 1, {"type": "Node", "selector": {}}), "spec.members[0].selector", "exactly one"),
    (hn("a", 1, {"type": "Node", "selector": {"exactMatch": {"name": "x"}, "regexMatch": {"pattern": "y"}}}),
     "spec.members[0].selector", "exactly one"),
    (hn("a", 1, {"type": "Node", "selector": {"regexMatch": {"pattern": "(("}}}),
     "spec.members[0].selector.regexMatch.pattern", "regular expression"),
    (hn("a", 1, {"type": "Node", "selector": {"labelMatch": {"matchExpressions": [
        {"key": "k", "operator": "In"}]}}}), "spec.members[0].selector.labelMatch.matchExpressions[0].values",
     "at least one value"),
    (hn("a", 1, {"type": "Node", "selector": {"exactMatch": {}}}), "spec.members[0].selector.exactMatch.name",
     "name is required"),
])
def test_bad_hypernodes_are_refused_naming_the_field(api, redis_url, key_prefix, obj, field, words):
    api.create(node("n1"))
    before = dump(redis_url, key_prefix)
    with pytest.raises(Invalid) as ei:
        api.create(obj)
    assert ei.value.field == field and words in str(ei.value) and "HyperNode a" in str(ei.value)
    assert dump(redis_url, key_prefix) == before


def test_hypernodes_are_cluster_scoped_and_listed(api):
    api.create(hn("s0", 1, nm("n1"), tier_name="switch"))
    o = api.get("HyperNode", "s0")
    assert o["spec"] == {"tier": 1, "tierName": "switch", "members": [nm("n1")]}
    assert "namespace" not in o["metadata"] and o["apiVersion"] == "topology.volcano.sh/v1alpha1"
    assert [x["metadata"]["name"] for x in api.list("HyperNode").items] == ["s0"]


def _wait(pred, what, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


class _Handlers:
    def __init__(self, cache, kind):
        self._add, self._update, self._delete = cache.handlers(kind)

    def on_add(self, obj, is_initial_list=False):
        self._add(obj)

    def on_update(self, old, new):
        self._update(old, new)

    def on_delete(self, obj):
        self._delete(obj)


def test_informers_feed_the_cache_tree(api, redis_url, key_prefix):
    api.create(node("s0-a", rack="r0"))
    api.create(node("s0-b", rack="r0"))
    api.create(hn("s0", 1, {"type": "Node", "selector": {"labelMatch": {"matchLabels": {"rack": "r0"}}}}))
    api.create(hn("top", 2, {"type": "HyperNode", "selector": {"exactMatch": {"name": "s0"}}}))
    cache = SchedulerCache()
    infs = []
    for kind in ("Node", "HyperNode"):
        inf = ThreadedInformer(lambda: AsyncApiClient.from_url(redis_url, prefix=key_prefix), kind,
                               block_ms=100, backoff=Backoff.fast())
        inf.add_event_handler(_Handlers(cache, kind))
        inf.start()
        assert inf.wait_for_sync(30)
        infs.append(inf)
    try:
        info = cache.hyper_nodes_info
        _wait(lambda: info.real_nodes.get("top") == frozenset({"s0-a", "s0-b"}), "the tree")
        assert info.hyper_nodes["s0"].parent == "top"
        api.create(node("s0-c", rack="r0"))                          # a new node joins by label
        _wait(lambda: "s0-c" in info.real_nodes.get("top", ()), "the new node")
        n = api.get("Node", "s0-a")
        n["metadata"]["labels"] = {"rack": "r9"}
        api.update(n)                                                # a label change leaves
        _wait(lambda: info.real_nodes.get("s0") == frozenset({"s0-b", "s0-c"}), "the relabelled node")
        api.create(hn("s1", 1, {"type": "Node", "selector": {"regexMatch": {"pattern": "^s0-a$"}}}))
        t = api.get("HyperNode", "top")
        t["spec"]["members"].append({"type": "HyperNode", "selector": {"exactMatch": {"name": "s1"}}})
        api.update(t)                                                # a hypernode update rebuilds
        _wait(lambda: info.real_nodes.get("top") == frozenset({"s0-a", "s0-b", "s0-c"}), "the new member")
        assert info.set_by_tier == {1: {"s0", "s1"}, 2: {"top"}}
        snap = cache.snapshot()
        assert snap.real_nodes_set["s1"] == frozenset({"s0-a"}) and snap.hyper_nodes_ready_to_schedule
    finally:
        for inf in infs:
            inf.stop()
