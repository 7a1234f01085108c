"""A sim sweep over a real two-node Ray cluster on loopback: every cell is a Ray task, its results
folder comes back to the driver as bytes, the cells land on both nodes (node ids recorded), and the
sweep folder on the driver is complete. The cluster is started with ``ray start`` (a head and a
second node with its own temp dir, every address 127.0.0.1) and stopped by the PIDs it started."""
from __future__ import annotations

import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from ha.runtime.ray_local import LOOPBACK_ENV

DATA = Path(__file__).resolve().parents[1] / "data" / "sweep" / "tiny.yaml"
ROOT = Path(__file__).resolve().parents[2]
RAY = str(Path(sys.executable).with_name("ray"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_WORKER_BASES: set[int] = set()


def _worker_port_base() -> int:
    """The first of a node's 61 worker ports, below the kernel's ephemeral range: the ports
    ``_free_port`` draws, and those Ray places at random, come from that range and so never fall
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


def _node_args(temp_dir: str) -> list[str]:
    base = _worker_port_base()
    return ["--node-ip-address", "127.0.0.1", "--temp-dir", temp_dir, "--num-cpus", "1",
            "--node-manager-port", str(_free_port()), "--object-manager-port", str(_free_port()),
            "--min-worker-port", str(base), "--max-worker-port", str(base + 60),
            "--dashboard-agent-listen-port", str(_free_port()), "--dashboard-agent-grpc-port", str(_free_port()),
            "--runtime-env-agent-port", str(_free_port()), "--metrics-export-port", str(_free_port()),
            "--object-store-memory", str(100 * 1024 * 1024), "--disable-usage-stats", "--block"]


class _Node:
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


def _wait_nodes(address: str, n: int, env: dict[str, str], timeout: float = 90.0) -> None:
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


@pytest.mark.ray
def test_sim_sweep_over_a_two_node_ray_cluster(tmp_path):
    import ray
    from ha.experiment.sweep import load_grid, run_sweep
    from ha.experiment.sweep_report import read_sweep
    if ray.is_initialized():
        ray.shutdown()      # a Ray of an earlier test in this process: the sweep connects to ours
    from ray._private import ray_constants
    # loopback, but a cluster of two nodes: Ray refuses a second node unless told (ray_local's
    # loopback environment turns clusters off for the single-node case)
    cluster_env = dict(LOOPBACK_ENV, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="1")
    env = dict(os.environ, **cluster_env, PYTHONPATH=str(ROOT))
    saved_env = {k: os.environ.get(k) for k in cluster_env}
    saved_flag = ray_constants.ENABLE_RAY_CLUSTER
    head_dir = tempfile.mkdtemp(prefix="htsw-head-")
    worker_dir = tempfile.mkdtemp(prefix="htsw-node-")
    port = _free_port()
    address = f"127.0.0.1:{port}"
    nodes: list[_Node] = []
    try:
        nodes.append(_Node(["--head", "--port", str(port), "--include-dashboard", "false",
                            "--ray-client-server-port", str(_free_port()), *_node_args(head_dir)],
                           env, tmp_path / "head.log"))
        _wait_nodes(address, 1, env)
        nodes.append(_Node(["--address", address, *_node_args(worker_dir)], env, tmp_path / "node2.log"))
        _wait_nodes(address, 2, env)
        for nd in nodes:
            nd.track()

        os.environ.update(cluster_env)
        ray_constants.ENABLE_RAY_CLUSTER = True
        grid = load_grid(str(DATA), "1-4", "v1.14", [])
        out = tmp_path / "sweep"
        doc = run_sweep(grid, out, engine="sim", ray_address=address, progress=False)
        for nd in nodes:
            nd.track()
    finally:
        if ray.is_initialized():
            ray.shutdown()
        for nd in reversed(nodes):
            nd.stop()
        ray_constants.ENABLE_RAY_CLUSTER = saved_flag
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(head_dir, ignore_errors=True)
        shutil.rmtree(worker_dir, ignore_errors=True)

    cells = doc["cells"]
    assert [c["status"] for c in cells] == ["ok"] * 4, [(c["path"], c.get("error")) for c in cells]
    node_ids = {c["node_id"] for c in cells}
    assert None not in node_ids
    assert len(node_ids) == 2, f"cells should land on both nodes, got {node_ids}"
    # the folder on the driver is complete: each cell's results folder, unpacked from its bytes
    for c in cells:
        folder = out / c["path"]
        meta = json.loads((folder / "cell.json").read_text())
        assert meta["node_id"] == c["node_id"]
        summary = json.loads((folder / "metrics.json").read_text())["summary"]
        assert "allocation_drift" in summary and "pods_bound_per_s" in summary
        assert (folder / "history" / "run.json").is_file() and (folder / "timeseries.csv").is_file()
        assert (folder / "cell.log").is_file()
    again = read_sweep(out)
    assert again["metrics"]["pods_bound_per_s"]["base"]["profiles"]["v1.14"]["n"] == 4
    # every process the two nodes started is gone
    for nd in nodes:
        for pid in nd.pids | {nd.proc.pid}:
            assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE, pid
