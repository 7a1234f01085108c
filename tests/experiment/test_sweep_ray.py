"""A sim sweep over a real two-node Ray cluster on loopback: every cell is a Ray task, its results
folder comes back to the driver as bytes, the cells land on both nodes (node ids recorded), and the
sweep folder on the driver is complete. The cluster is started with ``ray start`` (a head and a
second node with its own temp dir, every address 127.0.0.1) and stopped by the PIDs it started."""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import psutil
import pytest

from ha.runtime.ray_local import LOOPBACK_ENV
from tests.ray_cluster import ROOT, RayNode, free_port, node_args, restore_cluster_env, wait_nodes

DATA = Path(__file__).resolve().parents[1] / "data" / "sweep" / "tiny.yaml"


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
    port = free_port()
    address = f"127.0.0.1:{port}"
    nodes: list[RayNode] = []
    try:
        nodes.append(RayNode(["--head", "--port", str(port), "--include-dashboard", "false",
                            "--ray-client-server-port", str(free_port()), *node_args(head_dir)],
                           env, tmp_path / "head.log"))
        wait_nodes(address, 1, env)
        nodes.append(RayNode(["--address", address, *node_args(worker_dir)], env, tmp_path / "node2.log"))
        wait_nodes(address, 2, env)
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
        restore_cluster_env(saved_flag, saved_env)
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
