"""A local Ray started by ha.runtime.ray_local listens on loopback only, writes nothing to ~/.ray,
keeps its session files in a private temp folder and leaves no process behind."""
from __future__ import annotations

import os
from pathlib import Path

import psutil
import pytest

from ha.runtime import ray_local

pytestmark = pytest.mark.ray

HOME_TOKEN = Path.home() / ".ray" / "auth_token"


@pytest.fixture(scope="module")
def local_ray():
    token_before = HOME_TOKEN.exists()
    handle = ray_local.start_ray(num_cpus=2)
    yield handle, token_before
    ray_local.stop_ray(handle)


def test_is_loopback_helper():
    assert ray_local.is_loopback("127.0.0.1")
    assert ray_local.is_loopback("::ffff:127.0.0.1")
    assert ray_local.is_loopback("::1")
    assert not ray_local.is_loopback("0.0.0.0")
    assert not ray_local.is_loopback("::")
    assert not ray_local.is_loopback("192.0.2.2")


def test_every_ray_socket_is_on_loopback(local_ray):
    import ray
    handle, _ = local_ray

    @ray.remote
    class Echo:
        async def pid(self):
            return os.getpid()

    # Start actors so that worker processes (and their gRPC servers) exist too.
    actors = [Echo.remote() for _ in range(2)]
    actor_pids = ray.get([a.pid.remote() for a in actors], timeout=120)
    pids = ray_local.ray_process_pids(handle)
    assert set(actor_pids) <= set(pids), "actor workers must be found among Ray's processes"
    names = {psutil.Process(p).name() for p in pids if psutil.pid_exists(p)}
    assert "gcs_server" in names and "raylet" in names, names

    socks = ray_local.listening_sockets(pids)
    owners = {pid for pid, *_ in socks}
    # gcs_server, raylet and each actor worker serve gRPC: they must appear as listeners.
    assert len(socks) >= 4 and set(actor_pids) <= owners, socks
    exposed = [s for s in socks if not ray_local.is_loopback(s[2])]
    assert exposed == [], f"Ray sockets not on loopback: {exposed}"
    assert handle.node_ip == "127.0.0.1"
    for a in actors:
        ray.kill(a)


def test_no_token_in_home_and_private_temp_dir(local_ray):
    handle, token_before = local_ray
    assert os.environ.get("RAY_AUTH_MODE") == "disabled"
    if not token_before:
        assert not HOME_TOKEN.exists(), "Ray wrote an auth token into the home folder"
    assert handle.temp_dir and Path(handle.temp_dir).is_dir()
    assert any(Path(handle.temp_dir).iterdir()), "session files should live in our temp folder"


def test_stop_leaves_no_process_and_removes_temp_dir(local_ray):
    # Runs last in this module: stops the fixture's cluster and checks the aftermath.
    import ray
    handle, _ = local_ray
    pids = [p for p in handle.pids if psutil.pid_exists(p)]
    assert pids, "Ray's processes should be alive before stop"
    tmp = handle.temp_dir
    ray_local.stop_ray(handle)
    assert not ray.is_initialized()
    assert not Path(tmp).exists()
    _, alive = psutil.wait_procs([psutil.Process(p) for p in pids if psutil.pid_exists(p)],
                                timeout=30)
    alive = [p for p in alive if p.status() != psutil.STATUS_ZOMBIE]
    assert alive == [], f"Ray processes left behind: {alive}"
