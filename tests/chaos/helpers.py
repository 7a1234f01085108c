"""Shared helpers for the chaos tests: objects, a recording handler, polling, the contract check."""
from __future__ import annotations

import statistics
import time

import pytest

from cluster_state.delivery import WRITE_TIME_ANNOTATION
from cluster_state.informer import Informer
from cluster_state.reflector import Backoff
from tests.runtime.instance_helpers import wait_for

NS = "default"


def make_pod(name: str, ns: str = NS, **ann) -> dict:
    ann = {WRITE_TIME_ANNOTATION: repr(time.time()), **ann}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "annotations": ann},
            "spec": {"schedulerName": "volcano", "nodeName": "",
                     "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m", "memory": "1Gi"}}}]},
            "status": {"phase": "Pending"}}


def touch(api, name: str, ns: str = NS, **ann) -> dict:
    """A write that stamps its wall time (staleness is measured from it)."""
    return api.patch_annotations("Pod", name, ns, {WRITE_TIME_ANNOTATION: repr(time.time()), **ann})


class Recorder:
    """Every notification: (type, key, uid, rv, tombstone, wall time)."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    @staticmethod
    def _k(obj):
        md = obj["metadata"]
        return (md.get("namespace") or "", md["name"]), md.get("uid"), md.get("resourceVersion")

    def on_add(self, obj, is_initial_list=False):
        k, uid, rv = self._k(obj)
        self.calls.append(("add", k, uid, rv, False, time.time()))

    def on_update(self, old, new):
        k, uid, rv = self._k(new)
        self.calls.append(("update", k, uid, rv, False, time.time()))

    def on_delete(self, obj, tombstone=False):
        k, uid, rv = self._k(obj)
        self.calls.append(("delete", k, uid, rv, tombstone, time.time()))


async def eventually(cond, timeout=60.0, what="condition", step=0.01):
    """``wait_for`` that fails the test when ``cond`` does not come true in time."""
    if not await wait_for(cond, timeout, step):
        raise AssertionError(f"timed out waiting for {what}")


def informer(aapi, kind="Pod", **kw) -> Informer:
    kw.setdefault("backoff", Backoff.fast(seed=1))
    kw.setdefault("block_ms", 100)
    return Informer(aapi, kind, **kw)


async def caught_up(inf: Informer, api, timeout=60.0):
    target = api.current_resource_version()
    await eventually(lambda: inf.last_synced_rv >= target and inf.pending() == 0,
                     timeout, f"{inf.name} to reach rv {target}")


def server_state(api, kind="Pod"):
    return {(o["metadata"].get("namespace") or "", o["metadata"]["name"]):
            (o["metadata"]["uid"], o["metadata"]["resourceVersion"]) for o in api.list(kind).items}


def informer_state(inf):
    return {k: (o["metadata"]["uid"], o["metadata"]["resourceVersion"]) for k, o in inf.store._items.items()}


def check_contract(chaos: Recorder, reference: Recorder, *, cross_object_order: bool = True) -> None:
    """client-go's shared informer contract (shared_informer.go), checked on one
    informer's notifications against a reference informer that saw every state:

    * per object, the states it saw are a subsequence of the object's states (RV strictly rising
      per uid; every (uid, rv) it saw is a state that existed);
    * a delete of a uid comes after that uid's adds/updates;
    * with ``cross_object_order`` (runs without watch-reorder and without relists): adds/updates
      come in RV order across objects too.
    """
    real_states = {(c[1], c[2], c[3]) for c in reference.calls if c[0] in ("add", "update")}
    last: dict[tuple, int] = {}
    deleted: set[tuple] = set()
    for typ, key, uid, rv, tomb, _t in chaos.calls:
        if typ in ("add", "update"):
            assert (key, uid) not in deleted, f"{key} uid {uid}: {typ} after its delete"
            assert (key, uid, rv) in real_states, f"{key}: state rv {rv} never existed"
            prev = last.get((key, uid))
            assert prev is None or rv > prev, f"{key}: rv {rv} after {prev} (per-object order broken)"
            last[(key, uid)] = rv
        else:
            deleted.add((key, uid))
    if cross_object_order:
        # watch delivery (no relist in the run): notifications in RV order across objects too
        rvs = [c[3] for c in chaos.calls if c[0] in ("add", "update")]
        assert rvs == sorted(rvs), "cross-object watch order changed"


def staleness(inf) -> list[float]:
    return list(inf.staleness_ms)


def median(xs):
    return statistics.median(xs) if xs else float("nan")


@pytest.fixture
def api(redis_url, key_prefix):
    from cluster_state.client import ApiClient
    c = ApiClient.from_url(redis_url, prefix=key_prefix)
    yield c
    c.close()


@pytest.fixture
async def aapi(redis_url, key_prefix):
    from cluster_state.aio import AsyncApiClient
    c = AsyncApiClient.from_url(redis_url, prefix=key_prefix)
    yield c
    await c.close()


def compact_history(api, kinds) -> dict[str, int]:
    """Server-side 410: compact each kind's history up to the current RV, so every watcher that is
    behind gets a real 410 Gone on its next watch call."""
    rv = api.current_resource_version()
    for k in kinds:
        api.compact(k, rv)
    return {k: rv for k in kinds}
