"""Statistics of a sweep: bootstrap confidence intervals and paired differences between profiles.

Pure and deterministic: every function takes plain numbers and an explicit seed; the same input and
seed give the same interval on every call and every machine (numpy's PCG64 generator, seeded).

* :func:`bootstrap_ci`: the percentile bootstrap interval of a statistic (mean by default):
  ``resamples`` samples of size n drawn with replacement, the statistic of each, the
  ``(1-level)/2`` and ``(1+level)/2`` quantiles of those.
* :func:`describe`: ``{"n", "mean", "median", "ci95"}`` of one group of runs.
* :func:`paired_difference`: ``b - a`` over the seeds both have (the runs of a seed share their
  workload and faults, so the per-seed difference removes what the seeds have in common);
  :func:`unpaired_difference`: the same question answered as if the runs were independent (what
  pairing gains; the tests show the gap).
* :func:`verdict`: "no difference detected" when the interval contains 0, else the sign.
"""
from __future__ import annotations

import hashlib
import math
from typing import Callable, Mapping, Sequence

import numpy as np

__all__ = ["RESAMPLES", "LEVEL", "bootstrap_ci", "describe", "paired_difference", "unpaired_difference",
           "verdict", "derive_seed", "NO_DIFFERENCE"]

RESAMPLES = 10_000
LEVEL = 0.95
NO_DIFFERENCE = "no difference detected"


def derive_seed(seed: int, *parts: object) -> int:
    """A seed per group, stable across processes (sha256 of the parts: never ``hash()``, which
    Python salts per process)."""
    h = hashlib.sha256(repr((int(seed),) + tuple(str(p) for p in parts)).encode()).digest()
    return int.from_bytes(h[:8], "big")


def _clean(values: Sequence[float]) -> np.ndarray:
    return np.asarray([float(v) for v in values if v is not None and math.isfinite(float(v))], dtype=float)


def bootstrap_ci(values: Sequence[float], *, seed: int, resamples: int = RESAMPLES, level: float = LEVEL,
                 statistic: Callable[[np.ndarray], np.ndarray] | None = None) -> tuple[float, float] | None:
    """The percentile bootstrap interval of ``statistic`` (default the mean) over ``values``;
    None for no values, ``(v, v)`` for one. ``statistic`` maps a (resamples, n) array to one value
    per row."""
    x = _clean(values)
    if x.size == 0:
        return None
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")
    rng = np.random.default_rng(int(seed))
    idx = rng.integers(0, x.size, size=(int(resamples), x.size))
    samples = x[idx]
    stats = samples.mean(axis=1) if statistic is None else statistic(samples)
    lo, hi = np.quantile(stats, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def describe(values: Sequence[float], *, seed: int, resamples: int = RESAMPLES, level: float = LEVEL) -> dict:
    """``{"n", "mean", "median", "ci95": [lo, hi]}`` (``ci95`` None without values)."""
    x = _clean(values)
    ci = bootstrap_ci(x, seed=seed, resamples=resamples, level=level)
    return {"n": int(x.size),
            "mean": float(x.mean()) if x.size else None,
            "median": float(np.median(x)) if x.size else None,
            "ci95": [ci[0], ci[1]] if ci is not None else None}


def verdict(ci: Sequence[float] | None) -> str:
    """"no difference detected" when the interval holds 0; "increase" / "decrease" otherwise."""
    if ci is None:
        return NO_DIFFERENCE
    lo, hi = ci
    if lo <= 0 <= hi:
        return NO_DIFFERENCE
    return "increase" if lo > 0 else "decrease"


def paired_difference(a: Mapping[object, float], b: Mapping[object, float], *, seed: int,
                      resamples: int = RESAMPLES, level: float = LEVEL) -> dict:
    """``b - a`` paired by key (the seed): only keys both hold a finite value for count.
    ``{"n", "mean", "median", "ci95", "verdict", "seeds"}``."""
    keys = sorted((k for k in a.keys() & b.keys()
                   if a[k] is not None and b[k] is not None
                   and math.isfinite(float(a[k])) and math.isfinite(float(b[k]))), key=_sort_key)
    diffs = [float(b[k]) - float(a[k]) for k in keys]
    d = describe(diffs, seed=seed, resamples=resamples, level=level)
    d["verdict"] = verdict(d["ci95"])
    d["seeds"] = keys
    return d


def unpaired_difference(a: Sequence[float], b: Sequence[float], *, seed: int, resamples: int = RESAMPLES,
                        level: float = LEVEL) -> dict:
    """``mean(b) - mean(a)`` with each group resampled on its own (ignores any pairing):
    ``{"n_a", "n_b", "mean", "ci95", "verdict"}``."""
    xa, xb = _clean(a), _clean(b)
    if xa.size == 0 or xb.size == 0:
        return {"n_a": int(xa.size), "n_b": int(xb.size), "mean": None, "ci95": None, "verdict": NO_DIFFERENCE}
    rng = np.random.default_rng(int(seed))
    ma = xa[rng.integers(0, xa.size, size=(int(resamples), xa.size))].mean(axis=1)
    mb = xb[rng.integers(0, xb.size, size=(int(resamples), xb.size))].mean(axis=1)
    lo, hi = np.quantile(mb - ma, [(1 - level) / 2, (1 + level) / 2])
    ci = [float(lo), float(hi)]
    return {"n_a": int(xa.size), "n_b": int(xb.size), "mean": float(xb.mean() - xa.mean()), "ci95": ci,
            "verdict": verdict(ci)}


def _sort_key(k: object) -> tuple:
    return (0, k, "") if isinstance(k, (int, float)) else (1, 0, str(k))
