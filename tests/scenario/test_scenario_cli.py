"""``ha-testbed scenario run`` through the real console script (subprocess): JSON output, exit
codes 0 / 1 / 2, and bad input named by file and field."""
from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[1] / "data" / "scenarios"
ONE = DATA / "allocate__one-job-two-pods-one-node.json"
PREEMPT = DATA / "preempt__one-task-of-other-job.json"
UNIT = DATA / "nodeinfo__add-two-running-pods.json"


def _cli() -> list[str]:
    script = Path(sys.executable).parent / "ha-testbed"
    return [str(script)] if script.exists() else [sys.executable, "-m", "ha.cli"]


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(_cli() + ["scenario", "run", *args], capture_output=True, text=True,
                          timeout=300)


def write(tmp_path: Path, name: str, doc) -> Path:
    p = tmp_path / name
    p.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return p


def test_json_one_file_is_one_object():
    r = run_cli(str(ONE), "--profile", "v1.14", "--check", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert isinstance(doc, dict)
    assert set(doc) == {"name", "profile", "binds", "evicted", "pipelined", "bind_count",
                        "evict_count", "ok", "mismatches"}
    assert doc["name"] == "allocate/one-job-two-pods-one-node"
    assert doc["profile"] == "v1.14"
    assert doc["binds"] == {"c1/p1": "n1", "c1/p2": "n1"}
    assert doc["bind_count"] == 2 and doc["evict_count"] == 0
    assert doc["ok"] is True and doc["mismatches"] == []


def test_json_several_files_is_a_list_and_no_check_fields_without_check():
    r = run_cli(str(ONE), str(PREEMPT), "--json")
    assert r.returncode == 0, r.stderr
    docs = json.loads(r.stdout)
    assert isinstance(docs, list) and len(docs) == 2
    assert [d["name"] for d in docs] == ["allocate/one-job-two-pods-one-node", "preempt/one-task-of-other-job"]
    assert all("ok" not in d and "mismatches" not in d for d in docs)
    assert docs[1]["evicted"] == ["c1/preemptee1"] and docs[1]["evict_count"] == 1


def test_text_output_and_directory_expansion(tmp_path: Path):
    d = tmp_path / "set"
    d.mkdir()
    (d / "a.json").write_text(ONE.read_text())
    (d / "u.json").write_text(UNIT.read_text())     # unit files inside a folder are skipped
    r = run_cli(str(d), "--check")
    assert r.returncode == 0, r.stderr
    assert "allocate/one-job-two-pods-one-node" in r.stdout and "OK" in r.stdout
    assert "c1/p1 -> n1" in r.stdout
    assert "1/1 scenarios match" in r.stdout
    assert "skipped" in r.stderr and "u.json" in r.stderr


def test_check_mismatch_exits_1(tmp_path: Path):
    doc = json.loads(ONE.read_text())
    doc["expected"]["binds"]["c1/p2"] = "n9"
    p = write(tmp_path, "wrong.json", doc)
    r = run_cli(str(p), "--check", "--json")
    assert r.returncode == 1, r.stdout + r.stderr
    out = json.loads(r.stdout)
    assert out["ok"] is False
    assert any("c1/p2 -> n9" in m for m in out["mismatches"])
    # without --check the same file is just run
    assert run_cli(str(p)).returncode == 0


@pytest.mark.parametrize("case", ["malformed", "missing", "negative", "profile", "action", "plugin", "unit"])
def test_bad_input_exits_2_naming_file_and_field(tmp_path: Path, case: str):
    base = json.loads(ONE.read_text())
    args: list[str] = []
    if case == "malformed":
        p = write(tmp_path, "bad.json", ONE.read_text()[:-40])
        want = ["bad.json", "malformed JSON", "line"]
    elif case == "missing":
        doc = copy.deepcopy(base)
        del doc["pods"][1]["name"]
        p = write(tmp_path, "bad.json", doc)
        want = ["bad.json", "pods[1].name", "missing"]
    elif case == "negative":
        doc = copy.deepcopy(base)
        doc["pods"][1]["request"]["cpu"] = -500
        p = write(tmp_path, "bad.json", doc)
        want = ["bad.json", "pods[1].request.cpu", "negative quantity"]
    elif case == "profile":
        p = ONE
        args = ["--profile", "no-such-profile"]
        want = ["--profile", "no-such-profile", "pr5045"]
    elif case == "action":
        doc = copy.deepcopy(base)
        doc["actions"] = ["allocate", "teleport"]
        p = write(tmp_path, "bad.json", doc)
        want = ["bad.json", "actions[1]", "teleport"]
    elif case == "plugin":
        doc = copy.deepcopy(base)
        doc["plugins"]["tiers"][0][1]["name"] = "magic"
        p = write(tmp_path, "bad.json", doc)
        want = ["bad.json", "plugins.tiers[0][1].name", "magic"]
    else:
        p = UNIT
        want = [UNIT.name, "kind", "unit"]
    r = run_cli(str(p), "--check", *args)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    for w in want:
        assert w in r.stderr, (w, r.stderr)
    assert "Traceback" not in r.stderr
