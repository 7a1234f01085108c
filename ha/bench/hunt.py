"""``ha-testbed bench hunt``: how many randomized runs a hunt judges per minute on this machine.

Figure: runs per minute of ``ha-testbed hunt --profile v1.14 --seed 0 --intensity medium --runs N
--no-shrink`` (the search alone: each run drawn, run on the sim engine in a fresh process of the
local pool, judged by every safety property and classified; shrinking is left out, it is one more
search per failure). Baseline: the same N experiments run one after another in this process
(``ExperimentRunner``, no pool, no judging) — what a loop over ``ha-testbed run --engine sim`` gives
at best, without paying an interpreter start per run. The ratio is what the pool (``jobs``, default
the core count) and the per-run overhead together give. ``--quick``: N = 4 (default 12).
"""
from __future__ import annotations

import io
import os
import tempfile
import time
from pathlib import Path

from ha.bench import BenchResult


def run(quick: bool = False, runs: str = "", jobs: str = "") -> BenchResult:
    from rich.console import Console

    from ha.experiment.config import parse_experiment
    from ha.experiment.runner import ExperimentRunner
    from ha.hunt.draw import draw_experiment
    from ha.hunt.search import Hunt, HuntConfig
    n = int(runs) if runs else (4 if quick else 12)
    j = int(jobs) if jobs else (os.cpu_count() or 1)
    with tempfile.TemporaryDirectory(prefix="ha-bench-hunt-") as d:
        cfg = HuntConfig(profile="v1.14", seed=0, intensity="medium", runs=n, jobs=j, shrink=False)
        t0 = time.perf_counter()
        doc = Hunt(cfg, Path(d) / "hunt").run()
        hunt_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        virtual = 0.0
        for i in range(n):
            exp = parse_experiment(draw_experiment(0, i, "v1.14", None, "medium"), f"bench hunt run {i}")
            ExperimentRunner(exp, Path(d) / f"seq-{i}", engine="sim", progress=False, report=False,
                             console=Console(file=io.StringIO())).run()
            virtual += exp.duration
        seq_s = time.perf_counter() - t0
    rate, base = 60.0 * n / hunt_s, 60.0 * n / seq_s
    load = os.getloadavg()[0]
    return BenchResult(name="hunt runs per minute", value=round(rate, 2), unit="runs / min", baseline=round(base, 2),
                       ratio=round(rate / base, 2),
                       params={"runs": n, "jobs": j, "hunt_wall_s": round(hunt_s, 1), "sequential_wall_s": round(seq_s, 1),
                               "virtual_s": virtual, "failing_runs": doc["failing_runs"],
                               "signatures": len(doc["signatures"]), "load_average_1m": round(load, 2),
                               "cpus": os.cpu_count(), "quick": quick})
