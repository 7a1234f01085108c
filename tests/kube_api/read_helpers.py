"""Helpers of the read-path tests: plain HTTP against the front, object builders."""
from __future__ import annotations

import http.client
import json
import socket
import time
import urllib.error
import urllib.request
from urllib.parse import urlparse

NS = "default"


def get(url: str, path: str, *, accept: str | None = None, timeout: float = 30) -> tuple[int, dict | str]:
    req = urllib.request.Request(url + path)
    if accept:
        req.add_header("Accept", accept)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            body = r.read()
            code = r.status
            ctype = r.headers.get("Content-Type", "")
    except urllib.error.HTTPError as e:
        body, code, ctype = e.read(), e.code, e.headers.get("Content-Type", "")
    return code, (json.loads(body) if "json" in ctype and body else body.decode())


class WatchReader:
    """A raw HTTP watch: ``next(timeout)`` -> (monotonic arrival, event dict) or None at the end."""

    def __init__(self, url: str, path: str, *, accept: str | None = None, timeout: float = 30):
        u = urlparse(url)
        self.conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
        self.conn.request("GET", path, headers={"Accept": accept} if accept else {})
        self.resp = self.conn.getresponse()
        self.status = self.resp.status

    def next(self, timeout: float = 10.0):
        self.conn.sock.settimeout(timeout)
        try:
            line = self.resp.readline()
        except (socket.timeout, TimeoutError):
            raise TimeoutError(f"no watch event within {timeout}s") from None
        if not line:
            return None
        return time.monotonic(), json.loads(line)

    def take(self, n: int, timeout: float = 10.0) -> list[dict]:
        out = []
        deadline = time.monotonic() + timeout
        while len(out) < n:
            ev = self.next(max(0.05, deadline - time.monotonic()))
            if ev is None:
                break
            out.append(ev[1])
        return out

    def close(self) -> None:
        self.conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def pod(name: str, ns: str = NS, *, labels: dict | None = None, node: str = "", phase: str = "Pending",
        scheduler: str = "volcano") -> dict:
    md = {"name": name, "namespace": ns}
    if labels:
        md["labels"] = labels
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md,
            "spec": {"schedulerName": scheduler, "nodeName": node,
                     "containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]},
            "status": {"phase": phase}}


def node(name: str, *, labels: dict | None = None) -> dict:
    md = {"name": name}
    if labels:
        md["labels"] = labels
    return {"apiVersion": "v1", "kind": "Node", "metadata": md, "spec": {},
            "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"},
                       "capacity": {"cpu": "8", "memory": "16Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def podgroup(name: str, ns: str = NS) -> dict:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"minMember": 1, "queue": "default"}, "status": {"phase": "Pending"}}
