"""The private redis-server: loopback only, stopped by its PID, never orphaned."""
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest
import redis

from cluster_state.embedded import EmbeddedRedis


def _listening(pid):
    return [c.laddr for c in psutil.Process(pid).net_connections(kind="inet") if c.status == psutil.CONN_LISTEN]


def test_starts_on_loopback_and_stops_by_pid():
    with EmbeddedRedis() as server:
        pid = server.pid
        assert redis.Redis.from_url(server.url).ping()
        addrs = _listening(pid)
        assert addrs and all(a.ip == "127.0.0.1" for a in addrs), addrs
        cfg = redis.Redis.from_url(server.url).config_get("save")
        assert cfg["save"] == ""
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_restart_keeps_data_only_with_persistence():
    with EmbeddedRedis(persistence=True) as server:
        r = redis.Redis.from_url(server.url)
        r.set("k", "v")
        time.sleep(1.2)  # appendfsync everysec
        port = server.port
        server.restart()
        assert server.port == port
        assert redis.Redis.from_url(server.url).get("k") == b"v"
    with EmbeddedRedis() as server:
        redis.Redis.from_url(server.url).set("k", "v")
        server.restart()
        assert redis.Redis.from_url(server.url).get("k") is None


def test_server_dies_with_its_parent():
    """A parent killed with SIGKILL (no atexit) must not leave an orphaned redis-server."""
    code = ("from cluster_state.embedded import EmbeddedRedis; import sys, time; "
            "s = EmbeddedRedis().start(); print(s.pid, flush=True); time.sleep(60)")
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        child_pid = int(parent.stdout.readline())
        assert psutil.pid_exists(child_pid)
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and psutil.pid_exists(child_pid):
            try:
                if psutil.Process(child_pid).status() == psutil.STATUS_ZOMBIE:
                    break
            except psutil.NoSuchProcess:
                break
            time.sleep(0.05)
        alive = psutil.pid_exists(child_pid) and psutil.Process(child_pid).status() != psutil.STATUS_ZOMBIE
        assert not alive, "redis-server outlived its parent"
    finally:
        if parent.poll() is None:
            parent.kill()


def test_bad_port_fails_with_a_clear_error():
    from cluster_state.embedded import EmbeddedRedisError
    with EmbeddedRedis() as first:
        # the same port, explicitly: the retry loop moves to a free port instead of failing
        second = EmbeddedRedis(port=first.port)
        try:
            second.start()
            assert second.port != first.port
        finally:
            second.close()
    with pytest.raises(EmbeddedRedisError):
        EmbeddedRedis(extra_args=["--no-such-option", "x"]).start()
