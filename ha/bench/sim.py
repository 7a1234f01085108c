"""``ha-testbed bench sim``: how much faster than real time the sim engine runs an experiment.

Figure: virtual seconds per wall second over the experiment's own duration (the driver's loop from
run time 0 to the end: instances, cluster, chaos and the per-tick recording; the start-up — the
instances' first lists — and the checkers afterwards are in ``total_wall_s``). Baseline: real time (1 virtual second per wall second, what the live
engine runs at), so the ratio is the speed-up. Three experiments: ``examples/seed000-current-vs-
proposed.yaml`` (the headline figure), ``examples/quickstart.yaml`` and a 200-node, 20 pods/s,
3-instance one. Targets: >= 20x on the examples, >= 5x at 200 nodes (on a 2-core machine).
``--quick`` shortens every run to 10 s of virtual time.
"""
from __future__ import annotations

import io
import os
import tempfile
import time
from pathlib import Path

from ha.bench import BenchResult

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ("seed000-current-vs-proposed.yaml", "quickstart.yaml")

SCALE = {
    "name": "sim-scale-200", "seed": 7, "duration": "30s", "profile": "v1.14",
    "cluster": {"nodes": 200, "node": {"cpu": 32, "memory": "128Gi", "pods": 110}},
    "queues": [{"name": "q1", "weight": 1}, {"name": "q2", "weight": 1}],
    "workload": {"arrivals": "poisson", "rate": "5/s", "gang_size": [2, 6], "runtime": ["10s", "30s"],
                 "queues": ["q1", "q2"], "request": {"cpu": 1, "memory": "2Gi"}},
    "schedulers": {"instances": 3, "mode": "leader-elected", "period": "1s", "standby": "warm"},
    "chaos": [{"at": "5s", "for": "20s", "fault": "watch-delay", "target": "scheduler-2", "kinds": ["Pod"],
               "delay": {"dist": "exponential", "mean": "200ms"}},
              {"at": "8s", "fault": "kill", "target": "leader"}],   # lease 15 s: failover ~23 s
    "measure": {"every": "500ms"},
}


def _timed_run(exp, out: Path) -> dict:
    from rich.console import Console
    from ha.experiment.runner import ExperimentRunner
    t0 = time.perf_counter()
    r = ExperimentRunner(exp, out, engine="sim", progress=False, console=Console(file=io.StringIO()))
    outcome = r.run()
    total = time.perf_counter() - t0
    d = r.driver
    virtual, wall = (d.elapsed_s, d.wall_s) if d is not None else (0.0, 0.0)
    return {"experiment": exp.name, "virtual_s": round(virtual, 3), "loop_wall_s": round(wall, 3),
            "total_wall_s": round(total, 3), "speed": round(virtual / wall, 2) if wall else None,
            "pods_bound_per_s": outcome.summary.get("pods_bound_per_s")}


def run(quick: bool = False) -> BenchResult:
    from ha.experiment.config import load_experiment, parse_experiment
    exps = [load_experiment(ROOT / "examples" / f) for f in EXAMPLES]
    exps.append(parse_experiment(dict(SCALE), source="bench sim"))
    if quick:
        exps = [e.with_overrides(duration="10s") for e in exps]
    rows = []
    with tempfile.TemporaryDirectory(prefix="ha-bench-sim-") as d:
        for i, exp in enumerate(exps):
            rows.append(_timed_run(exp, Path(d) / f"run-{i}"))
    load = os.getloadavg()[0]

    def fig(r):
        return {"name": f"sim {r['experiment']}", "value": r["speed"], "unit": "virtual s / wall s",
                "baseline": 1.0, "ratio": r["speed"]}
    head, *rest = rows
    return BenchResult(name=fig(head)["name"], value=head["speed"], unit="virtual s / wall s",
                       baseline=1.0, ratio=head["speed"],
                       params={"runs": rows, "load_average_1m": round(load, 2), "quick": quick},
                       extra=[fig(r) for r in rest])
