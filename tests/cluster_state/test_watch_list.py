"""watch_list (a watch with sendInitialEvents=true, KEP-3157): synthetic ADDED events for the
state, a BOOKMARK annotated k8s.io/initial-events-end, then watch() from the bookmark's RV
continues with every later event once (no gap, no duplicate)."""
from __future__ import annotations

import random
import threading
import time

import pytest
import redis

from cluster_state.client import ApiClient
from cluster_state.errors import BadRequest, Invalid, TooLargeResourceVersion
from cluster_state.store import INITIAL_EVENTS_END

from .helpers import api, dump, node, pod  # noqa: F401


def _key(o: dict) -> str:
    return f"{o['metadata']['namespace']}/{o['metadata']['name']}"


def test_initial_events_then_the_end_bookmark(api):
    a = api.create(pod("b"))
    api.create(node("n1"))
    b = api.create(pod("a"))
    a = api.update(dict(a, spec=dict(a["spec"], priority=2)))          # rv 4
    api.create(pod("c"))
    api.delete("Pod", "c", "default", grace_period_seconds=0)         # rv 6
    ev = api.watch_list("Pod")
    assert [(e.type, e.resource_version) for e in ev] == [("ADDED", 3), ("ADDED", 4), ("BOOKMARK", 6)]
    assert [e.object for e in ev[:2]] == [b, a]                       # key order, stored objects
    end = ev[-1]
    assert end.kind == "Pod" and end.object["metadata"]["resourceVersion"] == 6
    assert end.object["metadata"]["annotations"] == {INITIAL_EVENTS_END: "true"}
    # the live stream continues from the bookmark: nothing before it comes again
    api.create(pod("d"))
    assert [(e.type, e.resource_version) for e in api.watch("Pod", end.resource_version)] == [("ADDED", 7)]
    # an empty kind: just the bookmark
    ev = api.watch_list("Queue")
    assert [(e.type, e.resource_version) for e in ev] == [("BOOKMARK", 7)]


def test_resource_version_semantics_and_bad_options(api, redis_url, key_prefix):
    api.create(pod("p"))
    api.create(pod("q"))
    for rv in (None, 0, 1, 2, "2"):
        assert [e.type for e in api.watch_list("Pod", rv)] == ["ADDED", "ADDED", "BOOKMARK"]
    before = dump(redis_url, key_prefix)
    with pytest.raises(TooLargeResourceVersion) as ei:
        api.watch_list("Pod", 3)
    assert ei.value.code == 504 and "Too large resource version: 3, current: 2" in ei.value.message
    for match in ("Exact", None, ""):
        with pytest.raises(Invalid) as ei:
            api.watch_list("Pod", resource_version_match=match)
        assert ei.value.field == "resourceVersionMatch"
        assert "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan" in ei.value.message
    with pytest.raises(BadRequest) as ei:
        api.watch_list("Pod", -1)
    assert ei.value.field == "resourceVersion"
    with pytest.raises(BadRequest) as ei:
        api.watch_list("Gadget")
    assert ei.value.field == "kind"
    assert dump(redis_url, key_prefix) == before


def test_watch_with_send_initial_events_option(api):
    api.create(pod("p"))
    api.create(node("n"))
    ev = api.watch("Pod", None, send_initial_events=True, resource_version_match="NotOlderThan")
    assert [(e.type, e.resource_version) for e in ev] == [("ADDED", 1), ("BOOKMARK", 2)]
    assert ev == api.watch_list("Pod")
    # Kubernetes' validateWatchOptions: the two go together
    with pytest.raises(Invalid) as ei:
        api.watch("Pod", 0, send_initial_events=True)
    assert "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan" in ei.value.message
    with pytest.raises(Invalid) as ei:
        api.watch("Pod", 0, resource_version_match="NotOlderThan")
    assert "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided" in ei.value.message
    # without the option, watch is the plain history replay it always was
    assert [(e.type, e.resource_version) for e in api.watch("Pod", 0)] == [("ADDED", 1)]


def test_corrupt_stored_value_is_a_corrupt_event_not_an_error(api, redis_url):
    api.create(pod("a"))
    api.create(pod("b"))
    r = redis.Redis.from_url(redis_url)
    r.hset(api.keys.obj("Pod"), "default/a", b"\xc1not msgpack")
    r.close()
    ev = api.watch_list("Pod")
    assert [e.type for e in ev] == ["CORRUPT", "ADDED", "BOOKMARK"]
    assert "default/a" in ev[0].error and ev[0].object is None
    assert ev[1].object["metadata"]["name"] == "b"


def test_watch_list_then_watch_misses_nothing_and_repeats_nothing(redis_url, key_prefix):
    """Writers create, update and delete pods while a client does watch_list and then follows the
    stream from the bookmark; the state it builds equals the final list, and every event it sees
    after the bookmark is newer than the bookmark and than the one before (none twice)."""
    api = ApiClient.from_url(redis_url, key_prefix)
    writer = ApiClient.from_url(redis_url, key_prefix)
    for i in range(30):
        api.create(pod(f"p{i}"))
    done = threading.Event()
    errors: list[BaseException] = []

    def write():
        rnd = random.Random(11)
        try:
            for i in range(400):
                k = f"p{rnd.randrange(60)}"
                try:
                    if rnd.random() < 0.5:
                        writer.create(pod(k))
                    elif rnd.random() < 0.6:
                        cur = writer.get("Pod", k, "default")
                        writer.update(dict(cur, spec=dict(cur["spec"], priority=i)))
                    else:
                        writer.delete("Pod", k, "default", grace_period_seconds=0)
                except Exception as e:  # noqa: BLE001 -- AlreadyExists / NotFound / Conflict are expected
                    if type(e).__name__ not in ("AlreadyExists", "NotFound", "Conflict"):
                        raise
        except BaseException as e:  # noqa: BLE001
            errors.append(e)
        finally:
            done.set()

    t = threading.Thread(target=write, daemon=True)
    t.start()
    deadline = time.monotonic() + 30
    while api.current_resource_version() < 60 and time.monotonic() < deadline:
        time.sleep(0.001)                                   # the writer is under way
    initial = api.watch_list("Pod")
    assert initial[-1].type == "BOOKMARK"
    state = {_key(e.object): e.object for e in initial if e.type == "ADDED"}
    rv = initial[-1].resource_version
    initial_rvs = {o["metadata"]["resourceVersion"] for o in state.values()}
    assert max(initial_rvs) <= rv
    seen_rvs = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        finished = done.is_set()
        for e in api.watch("Pod", rv, block_ms=20, count=50):
            if e.type == "BOOKMARK":
                rv = e.resource_version
                continue
            assert e.resource_version > rv and e.resource_version not in initial_rvs
            seen_rvs.append(e.resource_version)
            rv = e.resource_version
            if e.type == "DELETED":
                del state[_key(e.object)]
            else:
                state[_key(e.object)] = e.object
        if finished and rv >= api.current_resource_version():
            break
    t.join(30)
    assert not errors, errors
    assert seen_rvs and seen_rvs[0] > initial[-1].resource_version      # writes came after
    assert len(seen_rvs) == len(set(seen_rvs))
    final = api.list("Pod")
    assert state == {_key(o): o for o in final.items}
    api.close()
    writer.close()


async def test_async_watch_list(redis_url, key_prefix):
    from cluster_state.aio import AsyncApiClient
    a = AsyncApiClient.from_url(redis_url, key_prefix)
    try:
        await a.create(pod("y"))
        await a.create(pod("x"))
        ev = await a.watch_list("Pod", 0)
        assert [(e.type, e.resource_version) for e in ev] == [("ADDED", 2), ("ADDED", 1), ("BOOKMARK", 2)]
        assert ev[-1].object["metadata"]["annotations"][INITIAL_EVENTS_END] == "true"
        assert await a.watch("Pod", None, send_initial_events=True, resource_version_match="NotOlderThan") == ev
        with pytest.raises(Invalid):
            await a.watch("Pod", 0, resource_version_match="NotOlderThan")
        await a.create(pod("z"))
        assert [e.resource_version for e in await a.watch("Pod", 2, block_ms=0)] == [3]
        with pytest.raises(TooLargeResourceVersion):
            await a.watch_list("Pod", 9)
    finally:
        await a.close()
