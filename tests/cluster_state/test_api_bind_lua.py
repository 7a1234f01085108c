"""pods/binding inside Redis (lua/bind.lua) gives byte for byte what the Python binder
(Store._bind_pod + codec.encode) gives, for a spread of pod shapes; odd shapes fall back to the
Python read-modify-write path with the same result; uid preconditions of bind_many."""
from __future__ import annotations

import copy

import msgpack
import pytest
import redis

from cluster_state.client import ApiClient
from cluster_state.codec import decode, encode
from cluster_state.errors import Conflict, NotFound

from .helpers import api, pod  # noqa: F401


def _cond_time(bound: dict) -> float:
    return bound["status"]["conditions"][-1]["lastTransitionTime"]   # appended last


def _python_bind(api: ApiClient, stored: bytes, node: str, key: str, now: float) -> bytes:
    """What the Python binder would store (without the RV tail)."""
    p = api.store._bind_pod(decode(stored), node, None, key, now)
    return encode(p)[0][:-8]


def _put_raw(r: redis.Redis, api: ApiClient, obj: dict) -> None:
    """Store an object exactly as given (bypassing normalise), in the stored layout, as the
    apply script would: object bytes + status length field."""
    obj = copy.deepcopy(obj)
    obj["metadata"]["resourceVersion"] = 1
    blob, slen = encode(obj, rv=1)
    key = f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"
    r.hset(api.keys.obj("Pod"), mapping={key: blob, b"\0" + key.encode(): slen})


def _shapes() -> list[tuple[str, dict]]:
    base = pod("x")
    out = []

    def variant(name, fn):
        p = copy.deepcopy(base)
        p["metadata"]["name"] = name
        fn(p)
        out.append((name, p))

    variant("plain", lambda p: None)
    variant("no-status-fields", lambda p: p.__setitem__("status", {}))
    variant("conds-other", lambda p: p["status"].__setitem__(
        "conditions", [{"type": "Ready", "status": "False", "lastTransitionTime": 5.0}]))
    variant("conds-scheduled-false", lambda p: p["status"].__setitem__(
        "conditions", [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/3"},
                       {"type": "Ready", "status": "False"}, "not-a-map", ["an", "array"],
                       {"type": "PodScheduled", "status": "False"}]))
    variant("conds-empty-list", lambda p: p["status"].__setitem__("conditions", []))
    variant("conds-none", lambda p: p["status"].__setitem__("conditions", None))
    variant("many-conds", lambda p: p["status"].__setitem__(
        "conditions", [{"type": f"C{i}", "status": "True", "n": i} for i in range(20)]))
    variant("nnn-set", lambda p: p["status"].__setitem__("nominatedNodeName", "n9"))
    variant("nnn-empty", lambda p: p["status"].__setitem__("nominatedNodeName", ""))
    variant("nnn-before-conds", lambda p: p.__setitem__("status", {
        "nominatedNodeName": "n3", "phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False"}]}))
    variant("gates-empty", lambda p: p["spec"].__setitem__("schedulingGates", []))
    variant("gates-none", lambda p: p["spec"].__setitem__("schedulingGates", None))
    variant("node-none", lambda p: p["spec"].__setitem__("nodeName", None))
    variant("node-missing", lambda p: p["spec"].pop("nodeName", None))
    variant("floats-ints-nils-empties", lambda p: (
        p["spec"].update({"priority": None, "nodeSelector": {}, "tolerations": [], "ratio": 2.0,
                          "neg": -7, "big": 2**40, "f": 0.1, "nested": {"a": [{}, [], None, 1.0]}}),
        p["metadata"].update({"labels": {}, "annotations": {"k": ""}, "generation": 3}),
        p["status"].update({"x": 1.5, "empty": {}})))
    variant("unicode-long", lambda p: (
        p["metadata"].setdefault("annotations", {}).update({"note": "ü∑" * 200, "k" * 40: "v" * 70000}),
        p["spec"].update({"schedulerName": "s" * 300})))
    variant("map16-spec-status", lambda p: (
        p["spec"].update({f"extra{i}": i for i in range(20)}),
        p["status"].update({f"s{i}": str(i) for i in range(20)})))
    return out


@pytest.mark.parametrize("clear_nnn", [False, True])
def test_lua_bind_equals_python_bind_byte_for_byte(redis_url, key_prefix, clear_nnn, monkeypatch):
    api = ApiClient.from_url(redis_url, key_prefix, clear_nnn_on_binding=clear_nnn)

    def no_fallback(*a, **kw):
        raise AssertionError("the Lua binder handed a pod back to the Python path")
        yield  # pragma: no cover

    monkeypatch.setattr(api.store, "_bind_many_rmw", no_fallback)
    r = redis.Redis.from_url(redis_url)
    shapes = _shapes()
    stored = {}
    for name, p in shapes:
        _put_raw(r, api, p)
        stored[name] = r.hget(api.keys.obj("Pod"), f"default/{name}")
    nodes = {name: ("n" * 40 if i % 3 == 0 else f"node-{i}") for i, (name, _) in enumerate(shapes)}
    res = api.bind_many([("default", name, nodes[name]) for name, _ in shapes])
    for (name, _), got in zip(shapes, res):
        assert isinstance(got, dict), (name, got)
        now = _cond_time(got)
        want = _python_bind(api, stored[name], nodes[name], f"default/{name}", now)
        new = r.hget(api.keys.obj("Pod"), f"default/{name}")
        assert new[:-8] == want, name                       # stored bytes identical
        assert msgpack.unpackb(new) == got                  # the returned object is the stored one
        # the status length field still splits the object where update/update_status expect it
        slen = int(r.hget(api.keys.obj("Pod"), b"\0" + f"default/{name}".encode()))
        assert slen == len(msgpack.packb(got["status"], use_bin_type=True)), name
    # the stored objects still take status / spec updates correctly
    got = api.get("Pod", "plain", "default")
    got["status"]["phase"] = "Running"
    after = api.update_status(got)
    assert after["spec"]["nodeName"] == nodes["plain"] and after["status"]["phase"] == "Running"
    r.close()
    api.close()


def test_odd_shapes_fall_back_to_the_python_binder(redis_url, key_prefix, api):
    r = redis.Redis.from_url(redis_url)
    odd = {
        "conds-map": lambda p: p["status"].__setitem__("conditions", {}),          # falsy map
        "conds-zero": lambda p: p["status"].__setitem__("conditions", 0),
        "node-zero": lambda p: p["spec"].__setitem__("nodeName", 0),             # falsy non-string
        "bin-annotation": lambda p: p["metadata"].__setitem__("annotations", {"b": b"\x00\x01"}),
    }
    stored = {}
    for name, fn in odd.items():
        p = pod(name)
        fn(p)
        _put_raw(r, api, p)
        stored[name] = r.hget(api.keys.obj("Pod"), f"default/{name}")
    # the script itself hands them back (code 422) ...
    raw = api._run(_raw_bind(api, [f"default/{n}" for n in odd]))
    assert raw[0::3] == [422] * len(odd)
    # ... and bind_many binds them through the Python path, same result as the Python binder
    res = api.bind_many([("default", n, "n1") for n in odd])
    for name, got in zip(odd, res):
        assert isinstance(got, dict), (name, got)
        want = _python_bind(api, stored[name], "n1", f"default/{name}", _cond_time(got))
        assert r.hget(api.keys.obj("Pod"), f"default/{name}")[:-8] == want
    r.close()


def _raw_bind(api: ApiClient, fields: list[str]):
    from cluster_state.store import Script
    flat = [msgpack.packb({"type": "PodScheduled"}), 0]
    for f in fields:
        flat += [f, "n1", False]
    return (yield Script("bind", [api.prefix, api.store.history, msgpack.packb(flat, use_bin_type=False)]))


def test_bind_many_uid_preconditions(api):
    a = api.create(pod("a"))
    api.create(pod("b"))
    api.create(pod("c"))
    res = api.bind_many([("default", "a", "n1"), ("default", "b", "n1"), ("default", "c", "n2"),
                         ("default", "zz", "n1")],
                        uids=[a["metadata"]["uid"], "not-the-uid", None, "u"])
    assert res[0]["spec"]["nodeName"] == "n1"
    assert isinstance(res[1], Conflict) and "precondition" in str(res[1]) and "not-the-uid" in str(res[1])
    assert res[2]["spec"]["nodeName"] == "n2"
    assert isinstance(res[3], NotFound)
    # the failed precondition changed nothing
    assert not api.get("Pod", "b", "default")["spec"].get("nodeName")
    # the same pod twice in one call: the second sees the first's binding
    api.create(pod("d"))
    res = api.bind_many([("default", "d", "n1"), ("default", "d", "n2")])
    assert res[0]["spec"]["nodeName"] == "n1"
    assert isinstance(res[1], Conflict) and "already assigned to node 'n1'" in str(res[1])
    # a deleting pod cannot be bound
    api.create(pod("e"))
    api.delete("Pod", "e", "default", grace_period_seconds=30)
    res = api.bind_many([("default", "e", "n1")])
    assert isinstance(res[0], Conflict) and "being deleted" in str(res[0])
    with pytest.raises(Exception):
        api.bind_many([("default", "a", "n1")], uids=["x", "y"])   # wrong length


def test_async_bind_many_uids(redis_url, key_prefix):
    import asyncio

    from cluster_state.aio import AsyncApiClient

    async def main():
        c = AsyncApiClient.from_url(redis_url, key_prefix)
        try:
            p = await c.create(pod("a"))
            await c.create(pod("b"))
            return p, await c.bind_many([("default", "a", "n1"), ("default", "b", "n1")],
                                        uids=[p["metadata"]["uid"], "nope"])
        finally:
            await c.close()

    p, res = asyncio.run(main())
    assert res[0]["spec"]["nodeName"] == "n1" and isinstance(res[1], Conflict)


def test_bind_many_after_script_flush_and_in_chunks(redis_url, key_prefix, api):
    """Pipelined chunks (50 per script) after Redis lost its script cache: every reply is
    NOSCRIPT, each chunk is loaded and re-run, results still land in order."""
    n = 120
    for i in range(n):
        api.create(pod(f"c{i}"))
    r = redis.Redis.from_url(redis_url)
    r.script_flush()
    r.close()
    res = api.bind_many([("default", f"c{i}", f"n{i % 7}") for i in range(n)] + [("default", "c3", "n1")])
    assert [x["spec"]["nodeName"] for x in res[:n]] == [f"n{i % 7}" for i in range(n)]
    assert isinstance(res[n], Conflict)                     # c3 was bound by an earlier chunk
    rvs = [x["metadata"]["resourceVersion"] for x in res[:n]]
    assert rvs == sorted(rvs) and len(set(rvs)) == n
    assert [e.resource_version for e in api.watch("Pod", n, count=10_000)] == rvs
