"""Reads serve each kind in its API's shape: an Event's fields at the top level (the store keeps
them under spec), and a Table's row objects as ``includeObject`` asks."""
from __future__ import annotations

import requests

from tests.kube_api.write_helpers import POD, call, pod_json

EVENTS = "/api/v1/namespaces/default/events"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"


def _event(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "namespace": "default"},
            "involvedObject": {"kind": "Pod", "namespace": "default", "name": "p1"},
            "reason": "Scheduled", "message": "bound to n1", "type": "Normal", "count": 1}


def test_events_are_served_with_their_fields_at_the_top(kube_front):
    code, body = call(kube_front.url, "POST", EVENTS, _event("e1"))
    assert code == 201, body
    for got in (call(kube_front.url, "GET", EVENTS + "/e1")[1],
                call(kube_front.url, "GET", EVENTS)[1]["items"][0]):
        assert got["reason"] == "Scheduled" and got["involvedObject"]["name"] == "p1", got
        assert "spec" not in got
    # the stored form keeps them under spec: the shaping is the front's alone
    assert kube_front.api.get("Event", "e1", "default")["spec"]["reason"] == "Scheduled"


def test_table_rows_carry_the_object_include_object_asks_for(kube_front):
    assert call(kube_front.url, "POST", POD, pod_json("p1"))[0] == 201
    rows = {}
    for include in ("None", "Metadata", "Object"):
        r = requests.get(kube_front.url + POD, params={"includeObject": include},
                         headers={"Accept": TABLE}, timeout=30)
        assert r.status_code == 200, r.text
        rows[include] = r.json()["rows"][0]
    assert rows["None"].get("object") is None
    assert rows["Metadata"]["object"]["kind"] == "PartialObjectMetadata"
    assert "spec" not in rows["Metadata"]["object"]
    assert rows["Object"]["object"]["spec"]["containers"][0]["image"] == "busybox"
    r = requests.get(kube_front.url + POD, params={"includeObject": "Everything"},
                     headers={"Accept": TABLE}, timeout=30)
    assert r.status_code == 400 and r.json()["reason"] == "BadRequest"
