"""API chaos acts on the front's writes: every store call of the write path goes through the
endpoint (``Endpoint.call``), so an ``api-conflict`` on one instance's endpoint turns its writes
into 409s that store nothing, while another endpoint's writes go through."""
from __future__ import annotations

import time

from chaos.schedule import build_schedule
from kube_api.endpoint import EndpointChaos
from tests.kube_api.write_helpers import MERGE, POD, assert_status, call, pod_json, snapshot

I1, I2 = "scheduler-1", "scheduler-2"


def test_api_conflict_on_one_endpoint_fails_its_writes_only(kube_front):
    s = build_schedule([{"at": 0, "fault": "api-conflict", "target": I1, "probability": 1.0}], 7, [I1, I2])
    c1, c2 = EndpointChaos(I1, s.for_instance(I1)), EndpointChaos(I2, s.for_instance(I2))
    e1, e2 = kube_front.add_endpoint(I1, chaos=c1), kube_front.add_endpoint(I2, chaos=c2)
    now = time.time()
    kube_front.front.run(c1.set_epoch(now))
    kube_front.front.run(c2.set_epoch(now))
    time.sleep(0.2)
    kube_front.api.create(pod_json("p1"))
    before = snapshot(kube_front.redis_url, kube_front.prefix)
    _, got = call(e1.url, "GET", POD + "/p1")
    got["metadata"]["labels"]["x"] = "1"
    code, body = call(e1.url, "PUT", POD + "/p1", got)
    assert_status(body, 409, "Conflict")
    code, body = call(e1.url, "POST", POD + "/p1/binding", {"metadata": {"name": "p1"}, "target": {"name": "n1"}})
    assert_status(body, 409, "Conflict")
    code, body = call(e1.url, "POST", POD, pod_json("p2"))
    assert_status(body, 409, "Conflict")
    assert snapshot(kube_front.redis_url, kube_front.prefix) == before
    code, body = call(e2.url, "PATCH", POD + "/p1", {"metadata": {"labels": {"y": "2"}}}, ctype=MERGE)
    assert code == 200, body
    assert kube_front.api.get("Pod", "p1", "default")["metadata"]["labels"]["y"] == "2"
    assert c1.stats()["api"], c1.stats()
