"""One endpoint per scheduler instance: a fault on one endpoint acts on that endpoint's HTTP watch
streams and requests, not on another's (real Redis, raw HTTP streams, the chaos injectors)."""
from __future__ import annotations

import threading
import time

import pytest

from chaos.schedule import build_schedule
from kube_api.endpoint import EndpointChaos

from .read_helpers import NS, WatchReader, get, pod

I1, I2 = "scheduler-1", "scheduler-2"


def schedule(*entries):
    return build_schedule(list(entries), 7, [I1, I2])


def _arrivals(reader: WatchReader, n: int, out: dict, timeout=15.0):
    end = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < end:
        got = reader.next(max(0.05, end - time.monotonic()))
        if got is None:
            return
        t, ev = got
        if ev["type"] == "ADDED":
            out[ev["object"]["metadata"]["name"]] = t


def test_watch_delay_on_one_endpoint_delays_only_its_watch_events(kube_front):
    s = schedule({"at": 0, "fault": "watch-delay", "target": I1, "kinds": ["Pod"],
                  "delay": {"dist": "fixed", "value": "600ms"}})
    c1, c2 = EndpointChaos(I1, s.for_instance(I1)), EndpointChaos(I2, s.for_instance(I2))
    e1 = kube_front.add_endpoint(I1, chaos=c1)
    e2 = kube_front.add_endpoint(I2, chaos=c2)
    kube_front.front.run(c1.set_epoch(time.time()))
    kube_front.front.run(c2.set_epoch(time.time()))
    api = kube_front.api
    rv = api.current_resource_version()
    path = f"/api/v1/namespaces/{NS}/pods?watch=true&resourceVersion={rv}&timeoutSeconds=30"
    w1, w2 = WatchReader(e1.url, path), WatchReader(e2.url, path)
    got1: dict = {}
    got2: dict = {}
    readers = [threading.Thread(target=_arrivals, args=(w1, 5, got1)),
               threading.Thread(target=_arrivals, args=(w2, 5, got2))]
    for t in readers:
        t.start()
    written = {}
    for i in range(5):
        api.create(pod(f"p{i}"))
        written[f"p{i}"] = time.monotonic()
        time.sleep(0.1)
    for t in readers:
        t.join(20)
    w1.close()
    w2.close()
    assert sorted(got1) == sorted(got2) == sorted(written)
    lag1 = [got1[k] - written[k] for k in written]
    lag2 = [got2[k] - written[k] for k in written]
    assert min(lag1) >= 0.55, lag1                 # the fixed 600 ms, measured at the HTTP client
    assert max(lag2) < 0.3, lag2                   # the other endpoint: no delay
    st = c1.stats()["Pod"]
    assert st["delayed"] == 5 and st["emitted"] == 5
    assert c2.stats()["Pod"]["delayed"] == 0
    # the delivery logs tell the same: delivered - received
    held = [r["delivered"] - r["recv"] for r in e1.delivery_log.records if r["type"] == "ADDED"]
    assert len(held) == 5 and min(held) >= 0.55


def test_nemesis_activation_reaches_open_and_later_streams(kube_front):
    s = schedule({"at": "60m", "fault": "watch-stall", "target": I1, "for": "1s"})
    sf = s.faults[0]
    c1 = EndpointChaos(I1)
    e1 = kube_front.add_endpoint(I1, chaos=c1)
    api = kube_front.api
    rv = api.current_resource_version()
    path = f"/api/v1/namespaces/{NS}/pods?watch=true&resourceVersion={rv}&timeoutSeconds=30"
    with WatchReader(e1.url, path) as w:
        t0 = time.monotonic()
        out = kube_front.front.run(c1.activate(sf))      # the door a nemesis uses
        assert out.get("Pod") == 1
        api.create(pod("a"))
        t, ev = w.next(10)
        assert ev["object"]["metadata"]["name"] == "a"
        assert t - t0 >= 0.9                             # held until the stall's window ended
    # a watch opened after the window gets nothing held
    with WatchReader(e1.url, f"/api/v1/namespaces/{NS}/pods?watch=true&resourceVersion={api.current_resource_version()}") as w:
        t0 = time.monotonic()
        api.create(pod("b"))
        t, ev = w.next(10)
        assert t - t0 < 0.5


def test_expire_now_ends_the_streams_with_410(kube_front):
    c1 = EndpointChaos(I1)
    e1 = kube_front.add_endpoint(I1, chaos=c1)
    rv = kube_front.api.current_resource_version()
    with WatchReader(e1.url, f"/api/v1/pods?watch=true&resourceVersion={rv}&timeoutSeconds=30") as w, \
            WatchReader(kube_front.url, f"/api/v1/pods?watch=true&resourceVersion={rv}&timeoutSeconds=3") as other:
        deadline = time.monotonic() + 5
        while not e1.open_watches and time.monotonic() < deadline:
            time.sleep(0.02)
        assert kube_front.front.run(c1.expire_now(["Pod"])) == {"Pod": 1}
        _, ev = w.next(5)
        assert ev["type"] == "ERROR" and ev["object"]["code"] == 410 and ev["object"]["reason"] == "Expired"
        assert w.next(5) is None
        assert other.next(10) is None                     # the observer's stream just times out


def test_api_latency_on_one_endpoint_delays_its_requests(kube_front):
    s = schedule({"at": 0, "fault": "api-latency", "target": I1, "verbs": ["list", "get"],
                  "delay": {"dist": "fixed", "value": "400ms"}})
    c1 = EndpointChaos(I1, s.for_instance(I1))
    e1 = kube_front.add_endpoint(I1, chaos=c1)
    e2 = kube_front.add_endpoint(I2, chaos=EndpointChaos(I2))
    kube_front.front.run(c1.set_epoch(time.time()))
    kube_front.api.create(pod("a"))

    def took(url, path):
        t0 = time.monotonic()
        code, _ = get(url, path)
        assert code == 200
        return time.monotonic() - t0
    assert took(e1.url, "/api/v1/pods") >= 0.4
    assert took(e1.url, f"/api/v1/namespaces/{NS}/pods/a") >= 0.4
    assert took(e2.url, "/api/v1/pods") < 0.3
    assert c1.stats()["api"]["delayed"] == 2


def test_api_conflict_is_a_409_status(kube_front):
    """api-conflict answers the write with a 409 before the store sees it (here through a store
    call made on the endpoint, the path every write takes)."""
    from kube_api.status import from_store_error
    from kube_api.resources import lookup
    s = schedule({"at": 0, "fault": "api-conflict", "target": I1, "probability": 1.0})
    c1 = EndpointChaos(I1, s.for_instance(I1))
    e1 = kube_front.add_endpoint(I1, chaos=c1)
    kube_front.front.run(c1.set_epoch(time.time()))

    async def create():
        try:
            await e1.call("create", pod("x"))
        except Exception as e:  # noqa: BLE001
            return from_store_error(e, lookup("", "v1", "pods"), "x")
    err = kube_front.front.run(create())
    assert err is not None and err.code == 409 and err.reason == "Conflict"
    with pytest.raises(Exception):
        kube_front.api.get("Pod", "x", NS)


def test_partition_cuts_one_endpoint_from_the_store(kube_front):
    e1 = kube_front.add_endpoint(I1, partition_proxy=True)
    kube_front.api.create(pod("a"))
    assert get(e1.url, "/api/v1/pods")[0] == 200
    kube_front.front.run(_call(e1.partition))
    code, st = get(e1.url, "/api/v1/pods", timeout=30)
    assert code == 503 and st["reason"] == "ServiceUnavailable"
    assert get(kube_front.url, "/api/v1/pods")[0] == 200     # the observer is not partitioned
    kube_front.front.run(_call(e1.heal))
    deadline = time.monotonic() + 10
    while get(e1.url, "/api/v1/pods")[0] != 200:
        assert time.monotonic() < deadline
        time.sleep(0.1)


async def _call(fn):
    return fn()


def test_request_log_file(kube_front, tmp_path):
    import json
    from kube_api.server import ThreadedFront
    f = ThreadedFront(kube_front.redis_url, kube_front.prefix, log_dir=tmp_path / "kube-api").start()
    try:
        ep = f.add_endpoint(I1)
        get(ep.url, "/api/v1/nodes")
        get(ep.url, "/api/v1/nodes/zz")
    finally:
        f.stop()
    lines = [json.loads(x) for x in (tmp_path / "kube-api" / I1 / "requests.jsonl").read_text().splitlines()]
    assert [(r["verb"], r["resource"], r["name"], r["code"]) for r in lines] == [
        ("list", "nodes", None, 200), ("get", "nodes", "zz", 404)]
    from cluster_state.delivery import read_delivery_log
    header, recs = read_delivery_log(tmp_path / "kube-api" / I1 / "delivery.log")
    assert header["instance"] == I1 and [r["type"] for r in recs] == ["LIST"]


def test_partition_ends_the_endpoints_watches_and_a_rewatch_after_heal_resumes(kube_front):
    e1 = kube_front.add_endpoint(I1, partition_proxy=True)
    api = kube_front.api
    rv = api.current_resource_version()
    with WatchReader(e1.url, f"/api/v1/pods?watch=true&resourceVersion={rv}&timeoutSeconds=30") as w:
        api.create(pod("a"))
        _, ev = w.next(10)
        assert ev["type"] == "ADDED"
        last = ev["object"]["metadata"]["resourceVersion"]
        kube_front.front.run(_call(e1.partition))
        api.create(pod("b"))                       # written while the endpoint is cut off
        _, ev = w.next(15)
        assert ev["type"] == "ERROR" and ev["object"]["code"] == 503
        assert w.next(10) is None
    kube_front.front.run(_call(e1.heal))
    deadline = time.monotonic() + 10
    while True:                                    # the client's retry, as client-go's reflector does
        r = WatchReader(e1.url, f"/api/v1/pods?watch=true&resourceVersion={last}&timeoutSeconds=10")
        try:
            got = r.next(10)
        finally:
            r.close()
        if got and got[1]["type"] == "ADDED":
            assert got[1]["object"]["metadata"]["name"] == "b"   # nothing missed
            break
        assert time.monotonic() < deadline, got
        time.sleep(0.2)
