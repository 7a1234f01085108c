"""metadata.finalizers (F9): delete marks the object (deletionTimestamp, MODIFIED) and it stays
until an update removes its last finalizer (then DELETED); no new finalizers once deleting;
update cannot set, change or clear the deletion fields. Pods: the grace period first, then the
finalizers."""
from __future__ import annotations

import threading
import time

import pytest

from cluster_state.client import ApiClient
from cluster_state.errors import Conflict, Invalid, NotFound

from .helpers import api, dump, pod, queue  # noqa: F401


def _fin(obj: dict, *names: str) -> dict:
    obj = dict(obj, metadata=dict(obj["metadata"], finalizers=list(names)))
    return obj


def _types(events):
    return [(e.type, e.resource_version) for e in events]


def test_delete_waits_for_the_last_finalizer(api):
    q = api.create(_fin(queue("q1"), "example.com/a", "example.com/b"))          # rv 1
    t0 = time.time()
    d = api.delete("Queue", "q1", now=t0)                                          # rv 2
    md = d["metadata"]
    assert md["deletionTimestamp"] == t0 and md["deletionGracePeriodSeconds"] == 0
    assert md["finalizers"] == ["example.com/a", "example.com/b"] and md["resourceVersion"] == 2
    assert api.get("Queue", "q1") == d
    assert _types(api.watch("Queue", 1)) == [("MODIFIED", 2)]
    # deleting again changes nothing (no event)
    assert api.delete("Queue", "q1") == d
    assert api.current_resource_version() == 2
    # an update without the deletion fields keeps them (it cannot clear them)
    u = api.update(_fin(queue("q1", weight=3), "example.com/b"))                   # rv 3
    assert u["metadata"]["deletionTimestamp"] == t0 and u["metadata"]["deletionGracePeriodSeconds"] == 0
    assert u["metadata"]["uid"] == q["metadata"]["uid"] and u["spec"]["weight"] == 3
    # removing the last finalizer removes the object: DELETED with its last stored state
    last = api.update(_fin(u))                                                     # rv 4
    assert last["metadata"]["resourceVersion"] == 4 and last["metadata"]["finalizers"] == ["example.com/b"]
    with pytest.raises(NotFound):
        api.get("Queue", "q1")
    ev = api.watch("Queue", 2)
    assert _types(ev) == [("MODIFIED", 3), ("DELETED", 4)]
    assert ev[1].object == last


def test_no_new_finalizers_once_deleting(api, redis_url, key_prefix):
    api.create(_fin(queue("q1"), "a/x"))
    d = api.delete("Queue", "q1")
    before = dump(redis_url, key_prefix)
    with pytest.raises(Invalid) as ei:
        api.update(_fin(d, "a/x", "a/y"))
    e = ei.value
    assert e.code == 422 and e.field == "metadata.finalizers"
    assert "no new finalizers can be added if the object is being deleted, found new finalizers ['a/y']" in e.message
    # swapping one for another is adding one too
    with pytest.raises(Invalid):
        api.update(_fin(d, "a/y"))
    assert dump(redis_url, key_prefix) == before
    # before a delete, finalizers come and go freely
    q2 = api.create(queue("q2"))
    q2 = api.update(_fin(q2, "a/1", "a/2"))
    q2 = api.update(_fin(q2, "a/3"))
    assert q2["metadata"]["finalizers"] == ["a/3"]


def test_update_cannot_set_or_change_the_deletion_fields(api, redis_url, key_prefix):
    q = api.create(queue("q1"))
    before = dump(redis_url, key_prefix)
    for f, v in (("deletionTimestamp", 5.0), ("deletionGracePeriodSeconds", 0)):
        with pytest.raises(Invalid) as ei:
            api.update(dict(q, metadata=dict(q["metadata"], **{f: v})))
        assert ei.value.field == f"metadata.{f}" and "immutable" in ei.value.message
    assert dump(redis_url, key_prefix) == before
    api.update(_fin(q, "a/x"))
    d = api.delete("Queue", "q1")
    # a different deletionTimestamp in the request is overridden by the stored one
    u = api.update(dict(d, metadata=dict(d["metadata"], deletionTimestamp=1.0, resourceVersion=None)))
    assert u["metadata"]["deletionTimestamp"] == d["metadata"]["deletionTimestamp"]


def test_update_with_another_uid_is_a_conflict(api, redis_url, key_prefix):
    q = api.create(queue("q1"))
    api.delete("Queue", "q1")
    api.create(queue("q1"))                                   # re-created: a new uid
    before = dump(redis_url, key_prefix)
    stale = dict(q, metadata=dict(q["metadata"], resourceVersion=None))
    with pytest.raises(Conflict) as ei:
        api.update(stale)
    assert ei.value.field == "metadata.uid" and "precondition failed" in ei.value.message
    assert dump(redis_url, key_prefix) == before


def test_pod_grace_period_then_finalizers(api):
    api.create(_fin(pod("p1", terminationGracePeriodSeconds=10), "a/x"))          # rv 1
    t0 = time.time()
    d = api.delete("Pod", "p1", "default", now=t0)                                 # rv 2
    assert d["metadata"]["deletionGracePeriodSeconds"] == 10
    assert d["metadata"]["deletionTimestamp"] == pytest.approx(t0 + 10)
    assert api.finalize_deletions(now=t0 + 5) == 0
    # the grace period ends: the pod stays (finalizer), its grace becomes 0 (one MODIFIED)
    assert api.finalize_deletions(now=t0 + 11) == 0                                 # rv 3
    kept = api.get("Pod", "p1", "default")
    assert kept["metadata"]["deletionGracePeriodSeconds"] == 0
    assert kept["metadata"]["deletionTimestamp"] == d["metadata"]["deletionTimestamp"]
    assert kept["metadata"]["resourceVersion"] == 3
    assert {k: v for k, v in kept.items() if k != "metadata"} == {k: v for k, v in d.items() if k != "metadata"}
    assert _types(api.watch("Pod", 2)) == [("MODIFIED", 3)]
    # it left the terminating set: later finalize runs do nothing
    assert api.finalize_deletions(now=t0 + 1000) == 0 and api.current_resource_version() == 3
    last = api.update(_fin(kept))                                                  # rv 4
    assert _types(api.watch("Pod", 3)) == [("DELETED", 4)] and last["metadata"]["resourceVersion"] == 4
    with pytest.raises(NotFound):
        api.get("Pod", "p1", "default")


def test_pod_finalizers_removed_during_the_grace_period(api):
    api.create(_fin(pod("p1", terminationGracePeriodSeconds=10), "a/x"))
    t0 = time.time()
    d = api.delete("Pod", "p1", "default", now=t0)
    u = api.update(_fin(d))                       # grace still running: stays, MODIFIED
    assert u["metadata"]["deletionGracePeriodSeconds"] == 10 and "finalizers" in u["metadata"]
    assert api.get("Pod", "p1", "default")["metadata"]["finalizers"] == []
    assert api.finalize_deletions(now=t0 + 11) == 1
    with pytest.raises(NotFound):
        api.get("Pod", "p1", "default")


def test_pod_with_finalizers_force_deleted_stays(api):
    api.create(_fin(pod("p1"), "a/x"))
    api.delete("Pod", "p1", "default", grace_period_seconds=30)                   # rv 2
    t = time.time()
    d = api.delete("Pod", "p1", "default", grace_period_seconds=0, now=t)         # rv 3
    assert d["metadata"]["deletionGracePeriodSeconds"] == 0 and d["metadata"]["deletionTimestamp"] == t
    assert api.delete("Pod", "p1", "default", grace_period_seconds=0) == d        # nothing new
    # its old deadline passes: nothing changes (already 0), the terminating entry goes
    assert api.finalize_deletions(now=t + 100) == 0 and api.current_resource_version() == 3
    # a pod being deleted cannot be bound
    with pytest.raises(Conflict):
        api.bind("default", "p1", "n1")
    api.update(_fin(d))
    assert api.list("Pod").items == []


def test_racing_finalizer_removals_delete_exactly_once(redis_url, key_prefix):
    """Eight controllers each remove their own finalizer (get, edit, RV-checked update, retry on
    409) at the same time: the object is deleted exactly once, after the last one."""
    api = ApiClient.from_url(redis_url, key_prefix)
    names = [f"ctl.example.com/{i}" for i in range(8)]
    api.create(_fin(queue("q1"), *names))
    api.delete("Queue", "q1")
    start = threading.Barrier(len(names))
    results: list = []

    def remove(mine: str) -> None:
        c = ApiClient.from_url(redis_url, key_prefix)
        start.wait()
        try:
            while True:
                try:
                    cur = c.get("Queue", "q1")
                except NotFound:
                    results.append(("gone-before-me", mine))
                    return
                try:
                    out = c.update(_fin(cur, *[f for f in cur["metadata"]["finalizers"] if f != mine]))
                    results.append(("ok", out["metadata"]["finalizers"]))
                    return
                except Conflict:
                    continue
        finally:
            c.close()

    threads = [threading.Thread(target=remove, args=(n,)) for n in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert [r[0] for r in results] == ["ok"] * len(names)
    ev = api.watch("Queue", 0)
    assert [e.type for e in ev] == ["ADDED"] + ["MODIFIED"] * len(names) + ["DELETED"]
    assert ev[-1].object["metadata"]["finalizers"] and len(ev[-1].object["metadata"]["finalizers"]) == 1
    with pytest.raises(NotFound):
        api.get("Queue", "q1")
    api.close()


def test_racing_add_finalizer_and_delete(redis_url, key_prefix):
    """A controller adding a finalizer races a delete, many times: either the finalizer got in
    first (the object stays, marked) or the delete did (the object is gone and the add failed) --
    never a deleted object that was given a finalizer, never a marked object without one."""
    for round_ in range(20):
        prefix = f"{key_prefix}r{round_}"
        api = ApiClient.from_url(redis_url, prefix)
        q = api.create(queue("q1"))
        start = threading.Barrier(2)
        out: dict = {}

        def add():
            c = ApiClient.from_url(redis_url, prefix)
            start.wait()
            try:
                out["add"] = c.update(_fin(q, "a/x"))
            except (Conflict, NotFound, Invalid) as e:
                out["add"] = e
            c.close()

        def delete():
            c = ApiClient.from_url(redis_url, prefix)
            start.wait()
            out["delete"] = c.delete("Queue", "q1")
            c.close()

        ts = [threading.Thread(target=add), threading.Thread(target=delete)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(30)
        if isinstance(out["add"], dict):
            cur = api.get("Queue", "q1")
            assert cur["metadata"]["finalizers"] == ["a/x"] and cur["metadata"]["deletionTimestamp"]
        else:
            with pytest.raises(NotFound):
                api.get("Queue", "q1")
        api.close()


@pytest.mark.parametrize("fins, field", [
    ("a/x", "metadata.finalizers"),
    ([""], "metadata.finalizers[0]"),
    (["ok/x", 3], "metadata.finalizers[1]"),
    (["has space"], "metadata.finalizers[0]"),
])
def test_bad_finalizers(api, redis_url, key_prefix, fins, field):
    before = dump(redis_url, key_prefix)
    with pytest.raises(Invalid) as ei:
        api.create(dict(queue("q1"), metadata={"name": "q1", "finalizers": fins}))
    assert ei.value.field == field and ei.value.kind == "Queue" and ei.value.name == "q1"
    assert dump(redis_url, key_prefix) == before


async def test_async_finalizers(redis_url, key_prefix):
    from cluster_state.aio import AsyncApiClient
    a = AsyncApiClient.from_url(redis_url, key_prefix)
    try:
        await a.create(_fin(pod("p1"), "a/x"))
        d = await a.delete("Pod", "p1", "default", grace_period_seconds=0)
        assert d["metadata"]["deletionGracePeriodSeconds"] == 0
        with pytest.raises(Invalid):
            await a.update(_fin(d, "a/x", "a/y"))
        await a.update(_fin(d))
        with pytest.raises(NotFound):
            await a.get("Pod", "p1", "default")
        assert [e.type for e in await a.watch("Pod", 0)] == ["ADDED", "MODIFIED", "DELETED"]
    finally:
        await a.close()
