"""``update_status_many``: many /status writes in one request give, item by item, what the same
writes give one ``update_status`` call at a time -- the stored objects, the errors (stale, gone,
invalid), the resourceVersions and the watch events -- on Redis (several pipelined scripts) and on
the in-memory server."""
from __future__ import annotations

import copy

import pytest

from cluster_state.client import ApiClient
from cluster_state.errors import ApiError, BadRequest, Conflict, Invalid, NotFound
from cluster_state.memstore import MemoryServer
from cluster_state.store import STATUS_CHUNK

from .helpers import api, pod  # noqa: F401  (api is a fixture)


def _norm(x):
    if isinstance(x, ApiError):
        return ("error", type(x).__name__, x.code, x.message, x.kind, x.namespace, x.name, x.field)
    return ("object", x)


def _writes(api) -> list[dict]:
    """The objects of one write-back: fresh, stale, gone, invalid, and one pod written twice."""
    n = STATUS_CHUNK * 2 + 7         # three scripts, the last one short
    stored = [api.create(pod(f"p{i}")) for i in range(n)]
    out = []
    for i, p in enumerate(stored):
        new = copy.deepcopy(p)
        new["status"]["conditions"] = [{"type": "PodScheduled", "status": "False",
                                        "reason": "Unschedulable", "message": f"m{i}"}]
        new["spec"]["priority"] = 7          # /status ignores the spec
        out.append(new)
    api.update_status(copy.deepcopy(out[3]))          # out[3] is stale now
    api.delete("Pod", "p5", "default", grace_period_seconds=0)    # out[5] is gone
    out[8]["metadata"]["name"] = ""                   # invalid: no name
    out[9]["metadata"].pop("resourceVersion")         # no precondition: last write wins
    out.append(copy.deepcopy(out[10]))                # p10 twice: the second is stale
    return out


def _events(api, rv: int) -> list:
    return [(e.type, e.object) for e in api.watch("Pod", rv, block_ms=1, count=10_000)]


def _run(make_api, many: bool):
    api = make_api()
    writes = _writes(api)
    rv = api.current_resource_version()
    if many:
        got = api.update_status_many(copy.deepcopy(writes))
    else:
        got = []
        for w in copy.deepcopy(writes):
            try:
                got.append(api.update_status(w))
            except ApiError as e:
                got.append(e)
    return [_norm(x) for x in got], _events(api, rv), api


@pytest.mark.parametrize("server", ["redis", "memory"])
def test_many_status_writes_are_the_same_writes_one_at_a_time(server, redis_url, key_prefix):
    def make(tag: str):
        if server == "redis":
            return lambda: ApiClient.from_url(redis_url, f"{key_prefix}{tag}", new_uid=_uids("u"),
                                              clock=lambda: 1_700_000_000.0)
        return lambda: MemoryServer(f"{key_prefix}{tag}", clock=lambda: 1_700_000_000.0).client()
    one, ev_one, a1 = _run(make("one"), many=False)
    many, ev_many, a2 = _run(make("many"), many=True)
    try:
        assert many == one
        assert ev_many == ev_one
        kinds = [x[1] if x[0] == "error" else "ok" for x in many]
        assert kinds.count("Conflict") == 2 and kinds.count("NotFound") == 1
        assert kinds.count("Invalid") + kinds.count("BadRequest") == 1
        assert kinds.count("ok") == len(many) - 4
        ok = [x[1] for x in many if x[0] == "object"]
        assert all("priority" not in o["spec"] for o in ok)
        assert [o["status"]["conditions"][0]["message"] for o in ok[:3]] == ["m0", "m1", "m2"]
        # one event per write that landed, in the order written
        assert [t for t, _ in ev_many].count("MODIFIED") == len(ok)
    finally:
        for a in (a1, a2):
            a.close()


def _uids(tag: str):
    n = iter(range(10**9))
    return lambda: f"{tag}-uid-{next(n)}"


def test_a_bad_request_and_an_empty_batch(api):
    assert api.update_status_many([]) == []
    with pytest.raises(BadRequest):
        api.update_status_many({"kind": "Pod"})
    p = api.create(pod("lone"))
    res = api.update_status_many([p, b"\xc1not msgpack", {"kind": "Pod", "metadata": {"name": "ghost",
                                                                                       "namespace": "default"}}])
    assert res[0]["metadata"]["resourceVersion"] == p["metadata"]["resourceVersion"] + 1
    assert isinstance(res[1], BadRequest)
    assert isinstance(res[2], (NotFound, Invalid))
    with pytest.raises(Conflict):
        api.update_status(p)      # the batch's write landed: p's RV is stale
