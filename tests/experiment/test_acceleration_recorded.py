"""Every run records in metrics.json the acceleration settings it ran with."""
from __future__ import annotations

from tests.experiment.engine.sim.test_sim_engine import run, small


def test_metrics_json_names_the_acceleration_settings(tmp_path, monkeypatch):
    monkeypatch.setenv("HA_ALLOCATE_FASTPATH", "0")
    monkeypatch.delenv("HA_PROFILE_SESSIONS", raising=False)
    _, metrics = run(small(), tmp_path / "out")
    assert metrics["acceleration"]["allocate_fastpath"] is False
    assert metrics["acceleration"]["snapshot_reuse"] is True
    assert metrics["acceleration"]["profile_sessions"] == ""
