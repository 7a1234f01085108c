"""A hunt whose runs and shrinks are Ray tasks on a real Ray cluster (``ray start`` on loopback,
stopped by the PIDs it started): each task works in a temporary folder of its node and ships its
folder back as bytes, so the hunt folder on the driver is complete — the failing run's results, the
shrink's shrunk.yaml and run — without a shared disk; the same findings as the local pool's."""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from ha.runtime.ray_local import LOOPBACK_ENV
from tests.ray_cluster import ROOT, RayNode, free_port, node_args, restore_cluster_env, wait_nodes


@pytest.mark.ray
def test_hunt_over_a_ray_cluster_ships_every_folder_back(tmp_path):
    import ray
    from ha.hunt.search import Hunt, HuntConfig
    from ray._private import ray_constants
    if ray.is_initialized():
        ray.shutdown()
    # as tests/experiment/test_sweep_ray.py: a cluster on loopback (Ray refuses one unless told)
    cluster_env = dict(LOOPBACK_ENV, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="1")
    env = dict(os.environ, **cluster_env, PYTHONPATH=str(ROOT))
    saved_env = {k: os.environ.get(k) for k in cluster_env}
    saved_flag = ray_constants.ENABLE_RAY_CLUSTER
    head_dir = tempfile.mkdtemp(prefix="hthunt-head-")
    port = free_port()
    address = f"127.0.0.1:{port}"
    node = None
    try:
        node = RayNode(["--head", "--port", str(port), "--include-dashboard", "false",
                      "--ray-client-server-port", str(free_port()), *node_args(head_dir)],
                     env, tmp_path / "head.log")
        wait_nodes(address, 1, env)
        node.track()
        os.environ.update(cluster_env)
        ray_constants.ENABLE_RAY_CLUSTER = True
        cfg = HuntConfig(profile="v1.14", switches={"planted_skip_fit": True}, seed=0, intensity="low", runs=2,
                         jobs=1, ray_address=address, shrink_budget=8)
        out = tmp_path / "hunt"
        doc = Hunt(cfg, out).run()
        node.track()
    finally:
        if ray.is_initialized():
            ray.shutdown()
        if node is not None:
            node.stop()
        restore_cluster_env(saved_flag, saved_env)
        shutil.rmtree(head_dir, ignore_errors=True)
    assert doc["runs"] == 2 and not doc["crashed"], doc
    over = [s for s in doc["signatures"] if s["oracle"] == "overcommit"]
    assert len(over) == 1 and over[0]["shrunk"] is not None, doc["signatures"]
    src = out / "runs" / f"run-{over[0]['source_run']:05d}"
    summary = json.loads((src / "results" / "metrics.json").read_text())["summary"]
    assert summary["overcommit_violations"]["count"] > 0
    shrink = Path(over[0]["shrunk"]["folder"])
    assert shrink.parent == out / "shrinks"
    assert (shrink / "shrunk.yaml").is_file() and (shrink / "run" / "metrics.json").is_file()
    assert json.loads((shrink / "task.json").read_text())["status"] == "done"
    passing = [i for i in (0, 1) if i != over[0]["source_run"]]
    for i in passing:
        rec = json.loads((out / "runs" / f"run-{i:05d}" / "run.json").read_text())
        if not rec["violations"]:
            assert not (out / "runs" / f"run-{i:05d}" / "results").exists()
