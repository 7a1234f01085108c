"""The ``kube_front`` fixture: a Kubernetes API front on a free loopback port over the real Redis
of tests/conftest.py (its own key prefix per test), on a private event-loop thread so sync tests
(kubectl, the ``kubernetes`` client) and async tests can use it alike.

It yields a :class:`FrontHandle`:

* ``url`` -- the ``observer`` endpoint's URL (``http://127.0.0.1:PORT``);
* ``api`` -- a sync ``cluster_state.client.ApiClient`` on the same store, for seeding objects;
* ``kubeconfig`` -- the path of a kubeconfig for ``url`` (``kubectl --kubeconfig``, or
  ``kubernetes.config.load_kube_config(config_file=...)``);
* ``redis_url``, ``prefix`` -- the store;
* ``front`` -- the ``ThreadedFront`` (``front.run(coro)`` runs a coroutine on the server's loop);
* ``endpoint`` -- the observer ``Endpoint``; ``add_endpoint(name, chaos=...)`` opens another
  listener and returns its ``Endpoint`` (``.url``);
* ``kubernetes_client()`` -- an official-client ``ApiClient`` for ``url``.
"""
from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cluster_state.client import ApiClient
from kube_api.server import ThreadedFront, write_kubeconfig


@dataclass
class FrontHandle:
    url: str
    api: ApiClient
    kubeconfig: str
    redis_url: str
    prefix: str
    front: ThreadedFront
    endpoint: Any

    def add_endpoint(self, name: str, **kw):
        return self.front.add_endpoint(name, **kw)

    def kubernetes_client(self):
        import kubernetes
        cfg = kubernetes.client.Configuration()
        cfg.host = self.url
        return kubernetes.client.ApiClient(cfg)


@pytest.fixture
def kube_front(redis_url, key_prefix, tmp_path):
    front = ThreadedFront(redis_url, key_prefix, bookmark_interval=1.0).start()
    api = ApiClient.from_url(redis_url, key_prefix)
    try:
        ep = front.add_endpoint("observer")
        kc = write_kubeconfig(tmp_path / "kubeconfig", ep.url)
        yield FrontHandle(ep.url, api, kc, redis_url, key_prefix, front, ep)
    finally:
        front.stop()
        api.close()


def kubectl_binary() -> str | None:
    """kubectl 1.33 (called directly: the dispatcher first asks /version for a client version)."""
    for c in ("/usr/lib/google-cloud-sdk/bin/kubectl.1.33", shutil.which("kubectl.1.33"), shutil.which("kubectl")):
        if c and shutil.os.path.exists(c):
            return c
    return None


def go_program(module_dir: Path, name: str | None = None) -> Path:
    """The binary of one of the repository's Go programs, built into the user cache on first use.
    Skips where Go is missing and it was never built; where Go is present and the build fails,
    fails with Go's error (a broken build must not pass as a skip)."""
    from kube_api import protobuf as pb
    if pb.go_binary() is None and not pb.binary_path(module_dir, name).exists():
        pytest.skip(f"Go is not installed (no `go` on PATH) and {module_dir.name} is not built")
    try:
        return pb.build_go_program(module_dir, name)
    except pb.GoBuildError as e:
        pytest.fail(str(e))
