"""Shared fixtures: a real redis-server (the embedded one, or $REDIS_URL), isolated per test by
key prefix so tests never see each other's objects."""
from __future__ import annotations

import os
import uuid

import pytest

from cluster_state.embedded import EmbeddedRedis


@pytest.fixture(scope="session")
def redis_url():
    """URL of a real Redis: $REDIS_URL if set, else a private embedded redis-server."""
    url = os.environ.get("REDIS_URL")
    if url:
        yield url
        return
    with EmbeddedRedis() as server:
        yield server.url


@pytest.fixture
def key_prefix() -> str:
    """A fresh key prefix, so each test has its own API server in the shared Redis."""
    return f"t{uuid.uuid4().hex[:10]}"
