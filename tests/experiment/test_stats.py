"""ha.experiment.stats (bootstrap intervals, paired differences) and the words summary.md uses."""
from __future__ import annotations

import math
import random

import pytest

from ha.experiment import stats
from ha.experiment.sweep_report import aggregate, difference_sentence, summary_markdown


def _normal(n: int, mu: float, sigma: float, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [rng.gauss(mu, sigma) for _ in range(n)]


def test_interval_contains_the_true_mean_and_excludes_a_far_value():
    xs = _normal(200, 10.0, 1.0, seed=1)
    lo, hi = stats.bootstrap_ci(xs, seed=7)
    assert lo < 10.0 < hi
    assert hi < 10.5 and lo > 9.5          # n=200, sigma 1: half-width ~0.14
    assert not lo <= 11.0 <= hi


def test_interval_narrows_with_n_and_widens_with_level():
    small = stats.bootstrap_ci(_normal(10, 0, 1, 2), seed=3)
    big = stats.bootstrap_ci(_normal(1000, 0, 1, 2), seed=3)
    assert (big[1] - big[0]) < (small[1] - small[0]) / 3
    xs = _normal(50, 0, 1, 4)
    c90 = stats.bootstrap_ci(xs, seed=5, level=0.90)
    c99 = stats.bootstrap_ci(xs, seed=5, level=0.99)
    assert c99[0] < c90[0] and c99[1] > c90[1]


def test_deterministic_given_its_seed():
    xs = _normal(30, 5, 2, 9)
    a = stats.describe(xs, seed=11)
    b = stats.describe(list(xs), seed=11)
    assert a == b
    c = stats.describe(xs, seed=12)
    assert c["ci95"] != a["ci95"]           # another seed, another resampling
    assert c["mean"] == a["mean"] and c["median"] == a["median"]
    assert stats.derive_seed(0, "m", "p") == stats.derive_seed(0, "m", "p") != stats.derive_seed(0, "m", "q")


def test_describe_edge_cases():
    assert stats.describe([], seed=0) == {"n": 0, "mean": None, "median": None, "ci95": None}
    one = stats.describe([4], seed=0)
    assert one == {"n": 1, "mean": 4.0, "median": 4.0, "ci95": [4.0, 4.0]}
    d = stats.describe([1, 2, None, float("nan"), 9], seed=0)
    assert d["n"] == 3 and d["median"] == 2.0 and d["mean"] == 4.0
    with pytest.raises(ValueError):
        stats.bootstrap_ci([1, 2], seed=0, level=1.5)


def test_pairing_matters_when_seeds_differ_more_than_profiles():
    """Seeds spread widely (sd 10); profile b adds exactly 1 ± 0.2 to each seed: the paired
    interval excludes 0 and holds 1; the unpaired one cannot tell."""
    rng = random.Random(5)
    base = {s: rng.gauss(50, 10) for s in range(30)}
    a = {s: v + rng.gauss(0, 0.2) for s, v in base.items()}
    b = {s: v + 1 + rng.gauss(0, 0.2) for s, v in base.items()}
    p = stats.paired_difference(a, b, seed=1)
    assert p["n"] == 30 and p["verdict"] == "increase"
    assert 0 < p["ci95"][0] < 1 < p["ci95"][1]
    u = stats.unpaired_difference(list(a.values()), list(b.values()), seed=1)
    assert u["ci95"][0] < 0 < u["ci95"][1] and u["verdict"] == stats.NO_DIFFERENCE


def test_paired_uses_only_seeds_both_have():
    a = {1: 10, 2: 10, 3: 10, 4: None}
    b = {2: 7, 3: 8, 4: 5, 5: 1}
    p = stats.paired_difference(a, b, seed=0)
    assert p["seeds"] == [2, 3] and p["n"] == 2 and p["mean"] == -2.5
    assert p["verdict"] == "decrease"


def test_verdict():
    assert stats.verdict([-0.6, 0.8]) == stats.NO_DIFFERENCE
    assert stats.verdict([0.0, 0.0]) == stats.NO_DIFFERENCE
    assert stats.verdict([0.1, 0.8]) == "increase"
    assert stats.verdict([-3, -0.1]) == "decrease"


def test_difference_sentences():
    red = {"a": "v1.14", "b": "pr5045-fixed", "n": 30, "mean": -8.1, "ci95": [-9.4, -6.9], "verdict": "decrease"}
    assert difference_sentence("allocation_drift", red) == \
        "pr5045-fixed reduces allocation_drift by 8.1 [6.9, 9.4] per run vs v1.14 (n=30)"
    inc = {"a": "v1.14", "b": "pr5045", "n": 12, "mean": 2.0, "ci95": [0.5, 3.5], "verdict": "increase"}
    assert difference_sentence("wasted_evictions", inc) == \
        "pr5045 increases wasted_evictions by 2 [0.5, 3.5] per run vs v1.14 (n=12)"
    none = {"a": "pr5045", "b": "pr5045-fixed", "n": 30, "mean": 0.1, "ci95": [-0.6, 0.8],
            "verdict": stats.NO_DIFFERENCE}
    assert difference_sentence("allocation_drift", none) == \
        "pr5045 vs pr5045-fixed: no difference detected [-0.6, 0.8] (n=30)"


def test_summary_words_from_cells():
    """Three profiles over 20 seeds: c clearly below a, b equal to a within noise."""
    rng = random.Random(3)
    cells, values = [], {}
    for s in range(1, 21):
        base = rng.uniform(5, 15)
        for p, shift in (("a", 0.0), ("b", 0.0), ("c", -4.0)):
            path = f"cells/{p}/base/seed-{s}"
            cells.append({"profile": p, "seed": s, "set": {}, "set_label": "base", "path": path, "status": "ok"})
            values[path] = {"m": base + shift + rng.gauss(0, 0.3)}
    cells.append({"profile": "a", "seed": 99, "set": {}, "set_label": "base", "path": "x", "status": "failed",
                  "error": "RuntimeError: boom"})
    metrics = aggregate(cells, values, ["a", "b", "c"], [("base", {})], seed=0, resamples=2000)
    grp = metrics["m"]["base"]
    assert grp["profiles"]["a"]["n"] == 20          # the failed cell is not counted
    diffs = {(d["a"], d["b"]): d for d in grp["differences"]}
    assert diffs[("a", "b")]["verdict"] == stats.NO_DIFFERENCE
    assert diffs[("a", "c")]["verdict"] == "decrease" and diffs[("b", "c")]["verdict"] == "decrease"
    assert math.isclose(diffs[("a", "c")]["mean"], -4.0, abs_tol=0.3)
    doc = {"grid": {"experiment": "e.yaml", "profiles": ["a", "b", "c"], "seeds": list(range(1, 21)), "sets": [],
                    "engine": "sim"},
           "bootstrap": {"resamples": 2000, "level": 0.95, "seed": 0}, "cells": cells, "metrics": metrics}
    md = summary_markdown(doc)
    assert "a vs b: no difference detected [" in md
    assert "c reduces m by " in md and "per run vs a (n=20)" in md
    assert "Cells: 61 (60 ok, 1 failed)" in md and "`x`: failed: RuntimeError: boom" in md
