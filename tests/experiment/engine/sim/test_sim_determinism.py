"""Same experiment + seed + code under the sim engine -> byte-identical history, timeseries,
decisions and metrics.json, in separate processes with different PYTHONHASHSEED values (nothing of
the wall clock, thread timing or hash order reaches a result)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[4]
DATA = Path(__file__).resolve().parents[3] / "data" / "sim"


def _run(exp_path: Path, out: Path, hashseed: str) -> None:
    env = dict(os.environ, PYTHONHASHSEED=hashseed, PYTHONPATH=str(ROOT))
    code = ("import sys; from ha.experiment.runner import run_cli; "
            "sys.exit(run_cli(sys.argv[1], out=sys.argv[2], engine='sim', progress=False))")
    subprocess.run([sys.executable, "-c", code, str(exp_path), str(out)], env=env, check=True,
                   capture_output=True, timeout=300)


def _files(out: Path) -> dict[str, bytes]:
    got = {str(p.relative_to(out)): p.read_bytes() for p in sorted((out / "history").iterdir())}
    for name in ("timeseries.csv", "metrics.json", "divergence.jsonl"):
        got[name] = (out / name).read_bytes()
    return got


def _experiments(tmp_path: Path) -> dict[str, Path]:
    small = yaml.safe_load((DATA / "small.yaml").read_text())
    small["chaos"] = [{"at": "3s", "for": "4s", "fault": "watch-delay", "target": "scheduler-2",
                       "kinds": ["Pod"], "delay": {"dist": "exponential", "mean": "200ms"}},
                      {"at": "5s", "fault": "kill", "target": "leader", "restart_after": "2s"},
                      {"at": "6s", "for": "2s", "fault": "api-conflict", "probability": 0.3,
                       "verbs": ["bind", "bind_many"]}]
    quick = yaml.safe_load((ROOT / "examples" / "quickstart.yaml").read_text())
    quick["duration"] = "12s"
    s000 = yaml.safe_load((ROOT / "examples" / "seed000-current-vs-proposed.yaml").read_text())
    s000.update(seed=4, profile="pr5045")   # the PR as coded: pipelines, nominations, re-pipelines
    out = {}
    for name, doc in (("small", small), ("quickstart", quick), ("seed000", s000)):
        p = tmp_path / f"{name}.yaml"
        p.write_text(yaml.safe_dump(doc))
        out[name] = p
    return out


@pytest.mark.parametrize("which", ["small", "quickstart", "seed000"])
def test_byte_identical_across_processes(which, tmp_path):
    exp = _experiments(tmp_path)[which]
    _run(exp, tmp_path / "a", "1")
    _run(exp, tmp_path / "b", "4242")
    a, b = _files(tmp_path / "a"), _files(tmp_path / "b")
    assert sorted(a) == sorted(b)
    different = [k for k in a if a[k] != b[k]]
    assert different == []
    m = json.loads(a["metrics.json"])
    assert m["engine"] == "sim" and m["summary"]["pods_bound_per_s"] > 0
    assert (tmp_path / "a" / "history" / "decisions.jsonl").stat().st_size > 0


def test_a_different_seed_gives_a_different_history(tmp_path):
    """The comparison above can fail: another seed changes the recorded run."""
    exp = _experiments(tmp_path)["small"]
    doc = yaml.safe_load(exp.read_text())
    doc["seed"] = 4
    other = tmp_path / "other.yaml"
    other.write_text(yaml.safe_dump(doc))
    _run(exp, tmp_path / "a", "1")
    _run(other, tmp_path / "b", "1")
    assert _files(tmp_path / "a")["history/events.msgpack"] != _files(tmp_path / "b")["history/events.msgpack"]
