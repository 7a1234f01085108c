"""Shared fixtures: a real redis-server (the embedded one, or $REDIS_URL), isolated per test by
key prefix so tests never see each other's objects."""
from __future__ import annotations

import os
import uuid

import pytest

from cluster_state.embedded import EmbeddedRedis

# Every snapshot that reuses a node clone kept from the last session also clones the node afresh
# and compares the two (ha/scheduler/snapshot_reuse.py): the whole suite checks the reuse. Set
# before any cache exists; subprocesses and Ray workers started by tests inherit it.
os.environ.setdefault("HA_VERIFY_SNAPSHOT_REUSE", "1")


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


@pytest.fixture(scope="module")
def ray_session():
    """A local Ray (loopback only) for the tests of one module that run experiments; stopped by
    its handle at the end of the module."""
    from ha.runtime.ray_local import start_ray, stop_ray
    handle = start_ray(None)
    yield handle
    stop_ray(handle)


class SignalLeakWarning(pytest.PytestWarning):
    """A test left SIGINT or SIGTERM ignored or blocked in the pytest process."""


@pytest.fixture(autouse=True)
def _no_ignored_signal_left_behind(request):
    """An ignored SIGINT, like a blocked one, is inherited across exec: every program a later test
    starts (a hunt, a run it interrupts with Ctrl-C) would not see Ctrl-C either. A test that leaves
    SIGINT or SIGTERM ignored or blocked is named in the warnings summary, and the disposition and
    mask it found are put back."""
    import signal
    import warnings
    watched = (signal.SIGINT, signal.SIGTERM)
    before = {s: signal.getsignal(s) for s in watched}
    mask_before = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    yield
    for s, h in before.items():
        if h is not signal.SIG_IGN and signal.getsignal(s) is signal.SIG_IGN:
            signal.signal(s, h)
            warnings.warn(SignalLeakWarning(f"{request.node.nodeid} left {signal.Signals(s).name} ignored"))
    newly_blocked = [s for s in watched if s in signal.pthread_sigmask(signal.SIG_BLOCK, []) and s not in mask_before]
    if newly_blocked:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, newly_blocked)
        names = ", ".join(signal.Signals(s).name for s in newly_blocked)
        warnings.warn(SignalLeakWarning(f"{request.node.nodeid} left {names} blocked"))
