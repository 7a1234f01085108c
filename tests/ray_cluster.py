"""A real Ray cluster on loopback for the tests that fan work out as Ray tasks (sweep, hunt):
``ray start`` nodes with their own temp dirs, every address 127.0.0.1, stopped by the PIDs they
started (never by name)."""
from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil

__all__ = ["ROOT", "RAY", "free_port", "node_args", "RayNode", "wait_nodes"]

ROOT = Path(__file__).resolve().parents[1]
RAY = str(Path(sys.executable).with_name("ray"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_WORKER_BASES: set[int] = set()


def _worker_port_base() -> int:
    """The first of a node's 61 worker ports, below the kernel's ephemeral range: the ports
    ``free_port`` draws, and those Ray places at random, come from that range and so never fall
    into a node's worker range (Ray refuses to start a node whose ports overlap: seen once, the
    dashboard agent's port inside it); no two nodes of a test share a range."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    rng = random.Random(os.getpid() ^ time.monotonic_ns())
    while True:
        base = rng.randrange(20000, max(20200, low - 100), 100)
        if base not in _WORKER_BASES:
            _WORKER_BASES.add(base)
            return base


def node_args(temp_dir: str) -> list[str]:
    base = _worker_port_base()
    return ["--node-ip-address", "127.0.0.1", "--temp-dir", temp_dir, "--num-cpus", "1",
            "--node-manager-port", str(free_port()), "--object-manager-port", str(free_port()),
            "--min-worker-port", str(base), "--max-worker-port", str(base + 60),
            "--dashboard-agent-listen-port", str(free_port()), "--dashboard-agent-grpc-port", str(free_port()),
            "--runtime-env-agent-port", str(free_port()), "--metrics-export-port", str(free_port()),
            "--object-store-memory", str(100 * 1024 * 1024), "--disable-usage-stats", "--block"]


class RayNode:
    """One ``ray start --block`` and every process below it (found with psutil, stopped by PID)."""

    def __init__(self, args: list[str], env: dict[str, str], log: Path):
        self.log = open(log, "wb")
        self.proc = subprocess.Popen([RAY, "start", *args], env=env, stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        self.pids: set[int] = set()

    def track(self) -> None:
        try:
            p = psutil.Process(self.proc.pid)
            self.pids |= {c.pid for c in p.children(recursive=True)}
        except psutil.NoSuchProcess:
            pass

    def stop(self) -> None:
        self.track()
        procs = []
        for pid in sorted(self.pids | {self.proc.pid}):
            try:
                procs.append(psutil.Process(pid))
            except psutil.NoSuchProcess:
                continue
        for p in procs:
            try:
                p.send_signal(signal.SIGTERM)
            except psutil.NoSuchProcess:
                pass
        _, alive = psutil.wait_procs(procs, timeout=10)
        for p in alive:
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(alive, timeout=5)
        self.log.close()


def wait_nodes(address: str, n: int, env: dict[str, str], timeout: float = 90.0) -> None:
    code = ("import ray,sys; ray.init(address=sys.argv[1], log_to_driver=False); "
            "print(sum(1 for x in ray.nodes() if x['Alive'])); ray.shutdown()")
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        r = subprocess.run([sys.executable, "-c", code, address], env=env, capture_output=True, text=True,
                           timeout=60)
        last = r.stdout.strip() + r.stderr[-500:]
        if r.returncode == 0 and r.stdout.strip().splitlines() and int(r.stdout.strip().splitlines()[-1]) >= n:
            return
        time.sleep(1.0)
    raise AssertionError(f"the Ray cluster did not reach {n} nodes: {last}")


def restore_cluster_env(saved_flag: bool, saved_env: dict[str, str | None]) -> None:
    """Undo what a multi-node test set: Ray's cluster flag and the environment variables it saved
    (a variable that was unset is removed again)."""
    from ray._private import ray_constants
    ray_constants.ENABLE_RAY_CLUSTER = saved_flag
    for k, v in saved_env.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
