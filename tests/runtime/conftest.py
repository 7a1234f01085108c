"""Fixtures of the runtime tests."""
from __future__ import annotations

import pytest

from ha.runtime.workload import make_nodes, make_queue


@pytest.fixture
def api(redis_url, key_prefix):
    """A sync client of this test's API server, seeded with 3 nodes (8 cpu, 32Gi, 110 pods) and
    the default queue: the cluster the scheduler-instance tests run against."""
    from cluster_state.client import ApiClient
    c = ApiClient.from_url(redis_url, prefix=key_prefix)
    for n in make_nodes(3, cpu="8", memory="32Gi", pods=110):
        c.create(n)
    c.create(make_queue("default"))
    yield c
    c.close()
