"""``start_ray(address)``: the head's Ray Client proxy starts a server process per client, and on a
loaded machine that start fails now and then (the proxy's wait for it meets a dead process); the
next connection works. Those two failures are tried again (three connections at most); any other
connection error is the user's, at once."""
from __future__ import annotations

import pytest

import ray
from ha.runtime import ray_local

ZOMBIE = ("Initialization failure from server:\nTraceback (most recent call last):\n ...\n"
          "psutil.ZombieProcess: PID still exists but it's a zombie (pid=20754)")
START = "ray client connection timeout: Starting Ray client server failed. See ray_client_server_23000.err"


@pytest.fixture
def fake_ray(monkeypatch):
    calls: list[str] = []
    failures: list[str] = []

    def init(address=None, **kw):
        calls.append(address)
        if failures:
            raise ConnectionError(failures.pop(0))

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", init)
    monkeypatch.setattr(ray_local.time, "sleep", lambda s: None)
    return calls, failures


@pytest.mark.parametrize("message", [ZOMBIE, START])
def test_a_failed_client_server_start_is_tried_again(fake_ray, message):
    calls, failures = fake_ray
    failures += [message, message]
    handle = ray_local.start_ray("ray://127.0.0.1:10001")
    assert calls == ["ray://127.0.0.1:10001"] * 3 and handle.started_here is False


def test_three_failed_starts_give_up(fake_ray):
    calls, failures = fake_ray
    failures += [ZOMBIE] * 3
    with pytest.raises(ConnectionError, match="Initialization failure from server"):
        ray_local.start_ray("ray://127.0.0.1:10001")
    assert len(calls) == 3


def test_any_other_connection_error_is_raised_at_once(fake_ray):
    calls, failures = fake_ray
    failures.append("Failed to connect to GCS at address 10.0.0.9:6379 within 60 seconds")
    with pytest.raises(ConnectionError, match="Failed to connect to GCS"):
        ray_local.start_ray("10.0.0.9:6379")
    assert len(calls) == 1
