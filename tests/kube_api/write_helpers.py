"""Helpers of the write-path tests: raw HTTP requests against the front, and store snapshots."""
from __future__ import annotations

import json

import requests

from tests.cluster_state.helpers import dump

POD = "/api/v1/namespaces/default/pods"
PG = "/apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups"
QUEUES = "/apis/scheduling.volcano.sh/v1beta1/queues"
MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
SMP = "application/strategic-merge-patch+json"


def call(url: str, method: str, path: str, body=None, *, ctype: str = "application/json", raw: bytes | None = None,
         timeout: float = 30) -> tuple[int, dict]:
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    headers = {"Content-Type": ctype} if data is not None else {}
    r = requests.request(method, url + path, data=data, headers=headers, timeout=timeout)
    try:
        return r.status_code, r.json()
    except ValueError:
        return r.status_code, {"_text": r.text}


def snapshot(redis_url: str, prefix: str) -> dict:
    """Every key of the store with its value: equal before and after means nothing changed."""
    return dump(redis_url, prefix)


def pod_json(name: str, *, node: str = "", **status) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": {"app": "a"},
                         "annotations": {"scheduling.k8s.io/group-name": "pg1"}},
            "spec": {"schedulerName": "volcano", "nodeName": node,
                     "containers": [{"name": "main", "image": "busybox",
                                     "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]},
            "status": {"phase": "Pending", **status}}


def assert_status(body: dict, code: int, reason: str | None = None) -> None:
    assert body.get("kind") == "Status" and body.get("apiVersion") == "v1", body
    assert body.get("code") == code, body
    if reason is not None:
        assert body.get("reason") == reason, body
