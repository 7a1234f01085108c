"""The model against the real scheduler (``ha.experiment.fidelity`` through ``agreement`` and
``ha-testbed compare``), on sweep folders written here: a model sweep and a real one whose cells'
metrics.json, timeseries.csv and lives.jsonl say exactly what each seed measured, so every mean,
paired difference and verdict can be checked against numbers the test chose.

* a disagreement is detected (the interval of model − real excludes 0 and exceeds the bound);
* a small but consistent difference within the metric's stated bound "agrees";
* a metric the real cells did not measure is shown absent with their reason;
* the real build comes from the cells' metrics.json; cells with another --set are left out;
* one sweep with the implementation axis (``--set schedulers.implementation=model,volcano``).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ha.cli import app
from ha.experiment.agreement import agreement, agreement_markdown
from ha.experiment.fidelity import BOUNDS, fidelity
from ha.experiment.sweep_report import read_sweep

SEEDS = list(range(1, 11))


def _cell(root: Path, rel: str, summary: dict, *, absent: dict | None = None, scheduler: dict | None = None,
          pipelined: list[int] | None = None, lives: list[dict] | None = None, totals: dict | None = None) -> None:
    d = root / rel
    d.mkdir(parents=True)
    doc = {"summary": summary, "absent": absent or {}, "totals": totals or {}}
    if scheduler:
        doc["scheduler"] = scheduler
    (d / "metrics.json").write_text(json.dumps(doc))
    rows = ["t,instance,alive,is_leader,tasks_pipelined"]
    for i, n in enumerate(pipelined or []):
        rows.append(f"{i * 0.5},scheduler-1,1,1,{n}")
        rows.append(f"{i * 0.5},scheduler-2,1,0,{n + 50}")      # a standby's count never counts
    (d / "timeseries.csv").write_text("\n".join(rows) + "\n")
    (d / "history").mkdir()
    (d / "history" / "lives.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lives or []))


def _sweep(root: Path, *, engine: str, impl: str | None, profile: str, cells: dict[int, dict],
           sets: dict | None = None, extra_set_cells: bool = False) -> Path:
    """A sweep folder of one profile; ``cells[seed]`` = keyword arguments of :func:`_cell`."""
    recs = []
    label = "base" if not sets else "+".join(f"{k}={v}" for k, v in sets.items())
    for s, kw in cells.items():
        rel = f"cells/{profile}/{label}/seed-{s}"
        _cell(root, rel, **kw)
        recs.append({"profile": profile, "seed": s, "set": sets or {}, "set_label": label, "path": rel,
                     "status": "ok"})
    if extra_set_cells:
        # another experiment (a --set that changes it): never part of the comparison
        for s in cells:
            rel = f"cells/{profile}/chaos=x/seed-{s}"
            _cell(root, rel, {"allocation_drift": {"count": 999}})
            recs.append({"profile": profile, "seed": s, "set": {"chaos[0].delay.mean": "9s"},
                         "set_label": "chaos=x", "path": rel, "status": "ok"})
    sched = {"instances": 3} | ({"implementation": impl} if impl else {})
    (root / "sweep.json").write_text(json.dumps({
        "version": 1, "grid": {"experiment": "x.yaml", "seeds": list(cells), "profiles": [profile],
                               "sets": [], "engine": engine},
        "experiment_data": {"schedulers": sched}, "cells": recs}))
    return root


REAL = {"version": "v1.14.1", "note": "closest to v1.14.0"}


def _model_cells(drift: dict[int, float], wasted: dict[int, float]) -> dict[int, dict]:
    return {s: {"summary": {"allocation_drift": {"count": drift[s]}, "wasted_evictions": {"count": wasted[s]},
                            "failover_recovery_s": 3.0 + 0.1 * s, "fatal_cache_errors": 1 if s % 2 else 0},
                # a session's assertion panic, which would end a vc-scheduler process
                "totals": {"panics": 2 if s == 2 else 0},
                "pipelined": [0, 2, 3]} for s in SEEDS}


def _real_cells(drift: dict[int, float], wasted: dict[int, float]) -> dict[int, dict]:
    return {s: {"summary": {"allocation_drift": {"count": drift[s]}, "wasted_evictions": {"count": wasted[s]},
                            "fatal_cache_errors": 0},
                "absent": {"failover_recovery_s": "no leader loss the history shows"},
                "scheduler": REAL, "pipelined": [0, 0],
                "lives": [{"t": 3, "instance": "scheduler-1", "event": "restart", "internal": True,
                           "reason": "leaderelection lost"}]
                + ([{"t": 9, "instance": "scheduler-2", "event": "restart", "internal": True,
                     "reason": "F1127 12:00:00.1 cache.go:1 failed to update task"}] if s == 3 else [])}
            for s in SEEDS}


@pytest.fixture()
def sweeps(tmp_path):
    # the model drifts 10 ± 1 per run, the real scheduler 2 ± 1: a disagreement of ~8
    drift_model = {s: 10 + (s % 3) - 1 for s in SEEDS}
    drift_real = {s: 2 + (s % 2) for s in SEEDS}
    # wasted evictions: the model exactly 0.3 above the real scheduler in every seed -- a difference
    # the interval detects (it is [0.3, 0.3]) but within the bound 0.5
    wasted_real = {s: float(s % 4) for s in SEEDS}
    wasted_model = {s: wasted_real[s] + 0.3 for s in SEEDS}
    model = _sweep(tmp_path / "model-live", engine="live", impl=None, profile="v1.14",
                   cells=_model_cells(drift_model, wasted_model), sets={"schedulers.standby": "cold"},
                   extra_set_cells=True)
    real = _sweep(tmp_path / "real", engine="live", impl=None, profile="v1.14",
                  cells=_real_cells(drift_real, wasted_real), sets={"schedulers.implementation": "volcano"})
    return model, real, drift_model, drift_real


def test_a_disagreement_is_detected(sweeps):
    model, real, dm, dr = sweeps
    doc = fidelity([model, real], [read_sweep(model), read_sweep(real)])
    x = doc["metrics"]["allocation_drift"]["v1.14"]
    assert x["real_build"] == "v1.14.1"
    assert x["arms"]["model-live"]["mean"] == pytest.approx(sum(dm.values()) / 10)
    assert x["arms"]["real"]["mean"] == pytest.approx(sum(dr.values()) / 10)
    d = x["differences"]["model-live"]
    assert d["n"] == 10 and d["mean"] == pytest.approx(sum(dm[s] - dr[s] for s in SEEDS) / 10)
    assert d["ci95"][0] > BOUNDS["allocation_drift"] and d["agrees"] is False
    md = agreement_markdown(agreement([model, real], [read_sweep(model), read_sweep(real)]))
    row = next(line for line in md.splitlines() if line.startswith("| allocation_drift | v1.14 ↔ v1.14.1 |"))
    assert "**disagrees**" in row and "(n=10)" in row
    # the cells of another experiment (chaos=x: drift 999) took no part
    assert x["arms"]["model-live"]["mean"] < 20


def test_within_the_bound_agrees_and_absent_says_why(sweeps):
    model, real, _, _ = sweeps
    doc = fidelity([model, real], [read_sweep(model), read_sweep(real)])
    w = doc["metrics"]["wasted_evictions"]["v1.14"]["differences"]["model-live"]
    assert w["ci95"][0] == pytest.approx(0.3) and w["ci95"][1] == pytest.approx(0.3)
    assert w["agrees"] is True and "≤ 0.5" in w["why"]
    # with a tighter bound the same difference disagrees
    tight = fidelity([model, real], [read_sweep(model), read_sweep(real)], bounds={"wasted_evictions": 0.1})
    assert tight["metrics"]["wasted_evictions"]["v1.14"]["differences"]["model-live"]["agrees"] is False
    f = doc["metrics"]["failover_recovery_s"]["v1.14"]
    assert f["arms"]["real"] == {"absent": "no leader loss the history shows"}
    assert "model-live" not in f["differences"]
    # measured from the cells' own files: the leader's Pipelined tasks (never a standby's), and the
    # real scheduler's fatal exits (a Fatalf, not a lost lease) beside the model's fatal_cache_errors
    p = doc["metrics"]["leader_pipelined_max"]["v1.14"]
    assert p["arms"]["model-live"]["mean"] == 3 and p["arms"]["real"]["mean"] == 0
    fx = doc["metrics"]["fatal_exits"]["v1.14"]
    assert fx["arms"]["real"]["mean"] == pytest.approx(0.1) and fx["arms"]["model-live"]["mean"] == pytest.approx(0.7)


def test_one_sweep_with_the_implementation_axis(tmp_path):
    root = tmp_path / "mixed"
    recs = []
    for impl in ("model", "volcano"):
        for s in (1, 2, 3):
            rel = f"cells/v1.14/schedulers.implementation={impl}/seed-{s}"
            kw = {"scheduler": REAL} if impl == "volcano" else {}
            _cell(root, rel, {"cyclic_evictions": {"count": 4 if impl == "model" else 0}}, **kw)
            recs.append({"profile": "v1.14", "seed": s, "set": {"schedulers.implementation": impl},
                         "set_label": f"schedulers.implementation={impl}", "path": rel, "status": "ok"})
    (root / "sweep.json").write_text(json.dumps({
        "version": 1, "grid": {"experiment": "x.yaml", "seeds": [1, 2, 3], "profiles": ["v1.14"],
                               "sets": [{"key": "schedulers.implementation", "values": ["model", "volcano"]}],
                               "engine": "live"},
        "experiment_data": {"schedulers": {"instances": 3}}, "cells": recs}))
    r = CliRunner().invoke(app, ["compare", str(root), "--json"])
    assert r.exit_code == 0, r.output
    fid = json.loads(r.output)["agreement"]["fidelity"]
    c = fid["metrics"]["cyclic_evictions"]["v1.14"]
    assert c["arms"]["model-live"]["mean"] == 4 and c["arms"]["real"]["mean"] == 0
    assert c["differences"]["model-live"]["mean"] == 4 and c["differences"]["model-live"]["agrees"] is False
    r = CliRunner().invoke(app, ["compare", str(root)])
    assert r.exit_code == 0, r.output
    assert "| cyclic_evictions | v1.14 ↔ v1.14.1 |" in r.output and "**disagrees**" in r.output


def test_no_real_cells_no_fidelity(sweeps, tmp_path):
    model, _, _, _ = sweeps
    assert fidelity([model], [read_sweep(model)]) is None
    assert "fidelity" not in agreement([model, model], [read_sweep(model), read_sweep(model)])


def test_too_few_common_seeds_give_no_verdict(sweeps):
    model, real, _, _ = sweeps
    for s in SEEDS[2:]:
        (real / f"cells/v1.14/schedulers.implementation=volcano/seed-{s}/metrics.json").unlink()
    doc = fidelity([model, real], [read_sweep(model), read_sweep(real)])
    d = doc["metrics"]["allocation_drift"]["v1.14"]["differences"]["model-live"]
    assert d["n"] == 2 and d["agrees"] is None and "n < 3" in d["why"]
    assert doc["metrics"]["allocation_drift"]["v1.14"]["arms"]["real"]["n"] == 2


@pytest.fixture(scope="module")
def sim_run(tmp_path_factory):
    """examples/seed000-current-vs-proposed.yaml under v1.14 on the sim engine, seed 1 (the leader is
    killed at 12 s)."""
    root = Path(__file__).resolve().parents[2]
    out = tmp_path_factory.mktemp("sim") / "run"
    r = CliRunner().invoke(app, ["run", str(root / "examples" / "seed000-current-vs-proposed.yaml"), "--engine", "sim",
                                 "--seed", "1", "--profile", "v1.14", "--out", str(out)])
    assert r.exit_code == 0, r.output
    return out


def test_api_drift_counts_only_the_nominations_the_api_server_saw(sim_run):
    """A sim run of examples/seed000-current-vs-proposed.yaml under v1.14: the model's
    allocation_drift also counts its committed in-cache pipeline decisions; allocation_drift_api
    only binds off the last status.nominatedNodeName the API server held -- recounted here from
    the history's pod objects."""
    from ha.experiment.checkers._fold import steps
    from ha.experiment.fidelity import api_allocation_drift
    from ha.experiment.history import History
    out = sim_run
    api = api_allocation_drift(out)
    nominated: dict[str, str] = {}
    bound: set[str] = set()
    recount = 0
    for st in steps(History(out)):
        for e in st.events:
            if e.type == "nominated" and e.pod not in bound:
                nominated[e.pod] = e.node
            elif e.type == "bound" and e.pod not in bound:
                bound.add(e.pod)
                recount += int(e.pod in nominated and nominated.pop(e.pod) != e.node)
    assert api == recount and api > 0
    drift = json.loads((out / "metrics.json").read_text())["summary"]["allocation_drift"]["count"]
    assert drift > api          # the in-cache pipelines add drifts no API nomination shows


def test_failover_timed_by_the_lease_not_by_the_tick_that_saw_it(sim_run, tmp_path):
    """failover_recovery_s starts a failover at the Lease's acquireTime: a measuring tick that read
    the new holder only after the new leader's first binds (a real vc-scheduler binds at once on
    winning) does not push the recovery to a later session."""
    import shutil

    from ha.experiment.checkers import failover_recovery_s as frs
    from ha.experiment.history import History
    run = tmp_path / "run"
    shutil.copytree(sim_run, run)
    before = frs.check(History(run))
    kill = next(r for r in History(run).lives() if r.get("event") == "kill")
    first = kill["t"] + before
    # the tick that saw the takeover comes 0.2 s after the new leader's first bind
    p = run / "history" / "leases.jsonl"
    recs = [json.loads(x) for x in p.read_text().splitlines() if x.strip()]
    i = next(k for k, r in enumerate(recs) if r["t"] > kill["t"])
    assert recs[i]["t"] < first
    recs[i]["t"] = round(first + 0.2, 4)
    p.write_text("".join(json.dumps(r) + "\n" for r in recs))
    assert frs.check(History(run)) == pytest.approx(before)
    # without the Lease's acquireTime the tick is all there is: the bind before it is missed
    for r in recs:
        r.pop("acquire_time", None)
    p.write_text("".join(json.dumps(r) + "\n" for r in recs))
    assert frs.check(History(run)) > before + 0.2


def test_cache_divergence_mean_beside_its_max(tmp_path):
    """The headline max is one sample's worst; the per-sample mean is compared beside it, so a
    difference in the tail (here 8 tasks at the worst sample) is told apart from caches that
    diverge differently all along (the means, 22.0 against 22.3, agree)."""
    def cells(mx, mean, real):
        return {s: {"summary": {"cache_divergence": {"max": mx + (s % 3), "mean": mean + 0.1 * (s % 2)}},
                    **({"scheduler": REAL} if real else {})} for s in SEEDS}
    model = _sweep(tmp_path / "m", engine="live", impl=None, profile="v1.14", cells=cells(60, 22.0, False))
    real = _sweep(tmp_path / "r", engine="live", impl=None, profile="v1.14", cells=cells(68, 22.3, True),
                  sets={"schedulers.implementation": "volcano"})
    doc = fidelity([model, real], [read_sweep(model), read_sweep(real)])
    mx = doc["metrics"]["cache_divergence"]["v1.14"]["differences"]["model-live"]
    mean = doc["metrics"]["cache_divergence_mean"]["v1.14"]
    assert mx["mean"] == pytest.approx(-8) and mx["agrees"] is False
    assert mean["arms"]["model-live"]["mean"] == pytest.approx(22.05)
    assert mean["differences"]["model-live"]["mean"] == pytest.approx(-0.3)
    assert mean["differences"]["model-live"]["agrees"] is True and doc["bounds"]["cache_divergence_mean"] == 2.0
