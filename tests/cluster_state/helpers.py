"""Object builders and a raw dump of an API server's keys (to prove a failed write changed nothing)."""
from __future__ import annotations

import pytest
import redis


def node(name: str, cpu="4", memory="8Gi", pods=110, **labels) -> dict:
    return {"kind": "Node", "metadata": {"name": name, "labels": dict(labels)},
            "spec": {"unschedulable": False},
            "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": pods},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def pod(name: str, ns: str = "default", cpu="1", memory="1Gi", group: str | None = "pg1", **spec) -> dict:
    md = {"name": name, "namespace": ns}
    if group:
        md["annotations"] = {"scheduling.k8s.io/group-name": group}
    return {"kind": "Pod", "metadata": md,
            "spec": {"schedulerName": "volcano",
                     "containers": [{"name": "main", "resources": {"requests": {"cpu": cpu, "memory": memory}}}],
                     **spec},
            "status": {"phase": "Pending"}}


def podgroup(name: str, ns: str = "default", min_member=1, queue="default") -> dict:
    return {"kind": "PodGroup", "metadata": {"name": name, "namespace": ns},
            "spec": {"minMember": min_member, "queue": queue}, "status": {"phase": "Pending"}}


def queue(name: str, weight=1) -> dict:
    return {"kind": "Queue", "metadata": {"name": name}, "spec": {"weight": weight}}


def dump(url: str, prefix: str) -> dict[bytes, bytes]:
    """Every key of the API server under ``prefix`` with its serialized value (DUMP)."""
    r = redis.Redis.from_url(url)
    try:
        return {k: r.dump(k) for k in sorted(r.scan_iter(match=f"{prefix}:*", count=1000))}
    finally:
        r.close()


@pytest.fixture
def api(redis_url, key_prefix):
    """A sync API client with its own key prefix in the shared test Redis."""
    from cluster_state.client import ApiClient
    c = ApiClient.from_url(redis_url, key_prefix)
    yield c
    c.close()
