"""examples/sweep_set_diff.py: the two values of a sweep's one ``--set`` key paired by seed within
each profile — a shift shows as a difference whose interval excludes 0, equal values within noise
as "no difference detected"; a sweep of another shape is refused."""
from __future__ import annotations

import importlib.util
import json
import random
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "sweep_set_diff.py"
spec = importlib.util.spec_from_file_location("sweep_set_diff", SCRIPT)
sweep_set_diff = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sweep_set_diff)


def _sweep(out: Path, values=("old", "new")) -> Path:
    """A sweep folder as ``ha-testbed sweep`` writes it: sweep.json and each cell's metrics.json.
    Profile a: bind_conflicts 3 higher under "new"; profile b: the same under both (noise only)."""
    rng = random.Random(5)
    cells = []
    for s in range(1, 21):
        base = rng.randint(5, 15)
        for p in ("a", "b"):
            for v in values:
                path = f"cells/{p}/k={v}/seed-{s}"
                shift = 3 if (p, v) == ("a", "new") else 0
                (out / path).mkdir(parents=True)
                (out / path / "metrics.json").write_text(json.dumps(
                    {"summary": {"bind_conflicts": base + shift + rng.choice((0, 0, 1))}}))
                cells.append({"profile": p, "seed": s, "set": {"k": v}, "set_label": f"k={v}", "path": path,
                              "status": "ok"})
    doc = {"version": 1, "grid": {"experiment": "e.yaml", "seeds": list(range(1, 21)), "profiles": ["a", "b"],
                                  "sets": [{"key": "k", "values": list(values)}], "engine": "sim"},
           "bootstrap": {"method": "percentile", "statistic": "mean", "resamples": 2000, "level": 0.95,
                         "seed": 0},
           "cells": cells, "metrics": {}}
    (out / "sweep.json").write_text(json.dumps(doc))
    return out


def test_a_shift_is_found_and_noise_is_not(tmp_path):
    key, values, rows = sweep_set_diff.set_differences(_sweep(tmp_path / "s"), ["bind_conflicts"])
    assert (key, values) == ("k", ["old", "new"])
    diff = {r["profile"]: r["difference"] for r in rows}
    assert diff["a"]["verdict"] == "increase" and diff["a"]["n"] == 20 and 2.5 < diff["a"]["mean"] < 3.5
    assert diff["a"]["ci95"][0] > 0
    assert diff["b"]["verdict"] == "no difference detected"
    md = sweep_set_diff.markdown(key, values, rows)
    assert "| bind_conflicts | b |" in md and "no difference detected [" in md and "(n=20)" in md


def test_a_sweep_without_one_two_valued_key_is_refused(tmp_path):
    with pytest.raises(SystemExit, match="one --set key with two values"):
        sweep_set_diff.set_differences(_sweep(tmp_path / "s", values=("x", "y", "z")), ["bind_conflicts"])


def test_pair_picks_two_combinations_by_their_folder_name(tmp_path):
    folder = _sweep(tmp_path / "s", values=("x", "old", "new"))   # three values: needs --pair
    key, values, rows = sweep_set_diff.set_differences(folder, ["bind_conflicts"], pair=("k=old", "k=new"))
    assert (key, values) == ("set", ["k=old", "k=new"])
    diff = {r["profile"]: r["difference"] for r in rows}
    assert diff["a"]["verdict"] == "increase" and diff["b"]["verdict"] == "no difference detected"
    with pytest.raises(SystemExit, match="no combination named 'k=nope'"):
        sweep_set_diff.set_differences(folder, ["bind_conflicts"], pair=("k=old", "k=nope"))
