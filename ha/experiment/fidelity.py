"""The model against the real scheduler: the same experiment's sweeps on the Python model (sim and
live engine) and on real ``vc-scheduler`` builds, compared metric by metric, paired by seed.

A sweep cell belongs to one **arm**:

* ``real``: the cell ran real vc-scheduler instances (``schedulers.implementation: volcano``, in
  the experiment file or as a ``--set``); its build is what the cell's metrics.json ``scheduler``
  records (``v1.14.1``, or ``source:PATH`` for ``--volcano-source``);
* ``model-sim`` / ``model-live``: the model on that engine.

A real cell also has a profile (the sweep's ``--profiles``): it does not change a vc-scheduler, and
here it names the **model profile the real build stands beside** (sweep the real v1.14.1 with
``--profiles v1.14``, a PR #5045 checkout with ``--profiles pr5045``). Cells with any ``--set``
other than the implementation's own keys (``schedulers.implementation``, ``schedulers.standby``,
``schedulers.volcano.*``) are a different experiment and are left out.

Per metric and profile: each arm's mean with its 95% bootstrap interval over its finished seeds,
and for each model arm the difference **model − real paired by seed** (the seeds both measured)
with its interval. The model **agrees** with the real scheduler on a metric when that interval
contains 0, or when the mean difference is within the metric's stated bound (:data:`BOUNDS`:
how much two runs of the same seed may differ for reasons that are not the scheduler's -- the
live engine's timing on a loaded machine); otherwise it **disagrees**. With fewer than
:data:`MIN_SEEDS` seeds in common the verdict is ``None`` ("—"). A metric an arm did not measure
is shown absent with the reason its cells' metrics.json gives (``absent``).

Besides the checkers' headline numbers, four metrics are read from the cells' own files, so that
the two implementations are measured the same way:

* ``allocation_drift_api``: allocation_drift with only the nominations the API server saw
  (``status.nominatedNodeName`` in the history's events). ``allocation_drift`` also counts the
  model's committed in-cache pipeline decisions, which a real vc-scheduler never shows outside its
  process (its pipeline decisions are read off its nomination writes): the two implementations
  measure ``allocation_drift`` against different sets of nominations, ``allocation_drift_api``
  against the same;
* ``leader_pipelined_max``: the most tasks the leader's cache held Pipelined at one tick
  (timeseries.csv ``tasks_pipelined`` of the alive leader; a real instance's from its cache dump);
* ``fatal_exits``: how many times an instance ended itself with a fatal error -- a real
  vc-scheduler's ``F....`` / ``panic:`` exits other than ``leaderelection lost``
  (history/lives.jsonl ``restart`` with ``internal: true``), the model's modelled ``klog.Fatalf``
  (``fatal_cache_errors``) plus its sessions' assertion panics (metrics.json ``totals.panics``),
  which end a vc-scheduler process but not a model instance;
* ``cache_divergence_mean``: the mean over every sample of every instance's cache of
  ``cache_divergence`` (its summary's ``mean``), beside the headline ``max``. The max is one sample's
  value, the worst of a run, and moves with where the samples fall against the workload's bursts
  (pods created and not yet delivered: a real instance is sampled by a cache dump that takes its
  own time, a model instance at every tick); the mean says whether the caches diverge alike.
"""
from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ha.experiment.stats import derive_seed, describe, paired_difference

__all__ = ["BOUNDS", "FIDELITY_METRICS", "IDENTITY_KEYS", "MIN_SEEDS", "Arm", "arm_of", "arm_values", "fidelity",
           "fidelity_markdown", "derived_values", "api_allocation_drift"]

# the headline rows of README's table (and the three measured from the cells' files)
FIDELITY_METRICS = ("allocation_drift", "allocation_drift_api", "wasted_evictions", "cyclic_evictions",
                    "partial_gang_binds", "leader_pipelined_max", "fatal_exits", "failover_recovery_s", "pods_bound_per_s",
                    "overcommit_violations", "cache_divergence", "cache_divergence_mean")

# |model − real| (per run, mean over seeds) within which a detected difference still counts as
# agreement: differences of this size come from the run, not from the scheduler -- the live
# engine's timing on two loaded cores moves a bind or an eviction by a session, and a failover by
# a lease retry or two
BOUNDS: dict[str, float] = {
    "allocation_drift": 1.0,          # pods bound off their nomination, per run
    "allocation_drift_api": 1.0,
    "wasted_evictions": 0.5,          # evictions per run
    "cyclic_evictions": 0.5,
    "partial_gang_binds": 0.5,
    "leader_pipelined_max": 1.0,      # tasks
    "fatal_exits": 0.5,               # exits per run
    "failover_recovery_s": 1.0,       # seconds: two lease retries (500 ms) of the seed000 files
    "pods_bound_per_s": 0.1,
    "overcommit_violations": 0.5,
    "cache_divergence": 5.0,          # tasks
    "cache_divergence_mean": 2.0,     # tasks, per sample
    "repeat_pipelines": 0.25,
}

# fewer paired seeds than this give no verdict (a bootstrap over one or two values is no interval)
MIN_SEEDS = 3

# --set keys that say which implementation ran, not what the experiment is
IDENTITY_KEYS = ("schedulers.implementation", "schedulers.standby")
IDENTITY_PREFIXES = ("schedulers.volcano.",)

_LEASE_LOST = "leaderelection lost"


@dataclass(frozen=True)
class Arm:
    kind: str            # "model-sim" | "model-live" | "real"
    profile: str         # the model profile (a real arm: the profile it stands beside)

    @property
    def is_real(self) -> bool:
        return self.kind == "real"


def _identity_only(assign: dict[str, Any] | None) -> bool:
    return all(k in IDENTITY_KEYS or k.startswith(IDENTITY_PREFIXES) for k in (assign or {}))


def arm_of(doc: dict[str, Any], cell: dict[str, Any]) -> Arm | None:
    """The arm of one cell of sweep ``doc`` (None: a cell with an experiment-changing --set)."""
    assign = cell.get("set") or {}
    if not _identity_only(assign):
        return None
    impl = assign.get("schedulers.implementation")
    if impl is None:
        impl = (((doc.get("experiment_data") or {}).get("schedulers") or {}).get("implementation")) or "model"
    if impl == "volcano":
        return Arm("real", cell["profile"])
    engine = (doc.get("grid") or {}).get("engine") or "sim"
    return Arm(f"model-{engine}", cell["profile"])


def _read_json(p: Path) -> dict[str, Any]:
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
        return doc if isinstance(doc, dict) else {}
    except (OSError, ValueError, UnicodeDecodeError):
        return {}


class _NoTruth(Exception):
    pass


def api_allocation_drift(folder: Path) -> int:
    """allocation_drift counting only the nominations the API server saw (``status.nominatedNodeName``),
    not the model's in-cache pipeline decisions, which a real vc-scheduler never shows outside."""
    from ha.experiment.checkers._fold import truth_absent, truth_pass
    from ha.experiment.checkers.allocation_drift import AllocationDrift
    from ha.experiment.history import History

    def feed(o: AllocationDrift, st: Any) -> int:
        o.observe_events(st.events)
        return o.count

    from ha.errors import BadInput
    try:
        h = History(folder)
    except (BadInput, OSError, ValueError) as e:
        raise _NoTruth(f"no readable history: {e}") from None
    why = truth_absent(h)
    if why:
        raise _NoTruth(why)
    return truth_pass(h, "allocation_drift_api", AllocationDrift, feed)[0].count


def derived_values(folder: Path, metrics_doc: dict[str, Any], real: bool) -> tuple[dict[str, float], dict[str, str]]:
    """(``{leader_pipelined_max, allocation_drift_api, cache_divergence_mean, fatal_exits}``,
    ``{metric: why absent}``) of one cell."""
    vals: dict[str, float] = {}
    absent: dict[str, str] = {}
    # leader_pipelined_max
    best: int | None = None
    try:
        with open(folder / "timeseries.csv", newline="", encoding="utf-8") as f:
            for r in csv.DictReader(f):
                if r.get("is_leader") == "1" and r.get("alive") == "1" and r.get("tasks_pipelined") not in (None, ""):
                    n = int(float(r["tasks_pipelined"]))
                    best = n if best is None else max(best, n)
    except OSError:
        absent["leader_pipelined_max"] = "no timeseries.csv"
    if best is not None:
        vals["leader_pipelined_max"] = best
    elif "leader_pipelined_max" not in absent:
        why = ((metrics_doc.get("absent") or {}).get("cache_divergence")
               or "no tick sampled a leader's cache")
        absent["leader_pipelined_max"] = f"no leader cache sampled ({why})"
    # allocation_drift_api
    try:
        vals["allocation_drift_api"] = api_allocation_drift(folder)
    except _NoTruth as e:
        absent["allocation_drift_api"] = str(e)
    # cache_divergence_mean
    cd = (metrics_doc.get("summary") or {}).get("cache_divergence")
    if isinstance(cd, dict) and isinstance(cd.get("mean"), (int, float)) and not isinstance(cd.get("mean"), bool):
        vals["cache_divergence_mean"] = float(cd["mean"])
    # fatal_exits
    if real:
        n = 0
        lives = folder / "history" / "lives.jsonl"
        try:
            for line in lives.read_text(encoding="utf-8").splitlines():
                if not line.strip():
                    continue
                ev = json.loads(line)
                reason = str(ev.get("reason") or "")
                if ev.get("event") == "restart" and ev.get("internal") and reason and _LEASE_LOST not in reason \
                        and not reason.startswith(("signal ", "exit 0")):
                    n += 1
            vals["fatal_exits"] = n
        except (OSError, ValueError):
            absent["fatal_exits"] = "no history/lives.jsonl"
    else:
        v = (metrics_doc.get("summary") or {}).get("fatal_cache_errors")
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            # a session's assertion panic (ResourceUnderflow) ends a vc-scheduler process too
            # (runtime.HandleCrash re-panics); the model counts it in its totals
            panics = (metrics_doc.get("totals") or {}).get("panics") or 0
            vals["fatal_exits"] = v + (panics if isinstance(panics, (int, float)) else 0)
        else:
            absent["fatal_exits"] = (metrics_doc.get("absent") or {}).get("fatal_cache_errors") or "not counted"
    return vals, absent


def arm_values(folders: list[Path], docs: list[dict[str, Any]]) -> tuple[
        dict[Arm, dict[int, dict[str, float]]], dict[Arm, dict[str, str]], dict[Arm, set[str]], dict[Arm, list[str]]]:
    """Over every sweep's finished cells: ``values[arm][seed][metric]``, ``absent[arm][metric]`` (a
    reason, from the cells that lack the metric), ``builds[arm]`` (a real arm's builds) and
    ``sources[arm]`` (the sweep folders it came from). An arm's seed found in two sweeps counts once,
from the first sweep given."""
    from ha.experiment.sweep import cell_done
    from ha.experiment.sweep_report import cell_values
    values: dict[Arm, dict[int, dict[str, float]]] = {}
    absent: dict[Arm, dict[str, str]] = {}
    builds: dict[Arm, set[str]] = {}
    sources: dict[Arm, list[str]] = {}
    for path, doc in zip(folders, docs):
        for c in doc.get("cells") or []:
            arm = arm_of(doc, c)
            folder = path / c["path"]
            if arm is None or not cell_done(folder):
                continue
            mdoc = _read_json(folder / "metrics.json")
            vals = dict(cell_values(folder))
            extra, why = derived_values(folder, mdoc, arm.is_real)
            vals.update(extra)
            seed = int(c["seed"])
            if seed in values.get(arm, {}):
                continue          # the same arm and seed in an earlier sweep: the first one counts
            values.setdefault(arm, {})[seed] = vals
            for m, r in list((mdoc.get("absent") or {}).items()) + list(why.items()):
                absent.setdefault(arm, {}).setdefault(m, str(r))
            if arm.is_real:
                s = mdoc.get("scheduler") or {}
                builds.setdefault(arm, set()).add(str(s.get("version") or s.get("source") or "?"))
            if str(path) not in sources.setdefault(arm, []):
                sources[arm].append(str(path))
    return values, absent, builds, sources


def _agrees(d: dict[str, Any], bound: float | None) -> tuple[bool | None, str]:
    if d.get("mean") is None or d.get("ci95") is None:
        return None, "no seed in common"
    if d["n"] < MIN_SEEDS:
        return None, f"n < {MIN_SEEDS}: no interval to judge by"
    lo, hi = d["ci95"]
    if lo <= 0 <= hi:
        return True, "interval holds 0"
    if bound is not None and abs(d["mean"]) <= bound:
        return True, f"|difference| ≤ {bound:g}"
    return False, "differs" + (f" by more than {bound:g}" if bound is not None else "")


def fidelity(folders: list[Path], docs: list[dict[str, Any]], metrics: tuple[str, ...] | None = None,
             seed: int = 0, bounds: dict[str, float] | None = None) -> dict[str, Any] | None:
    """None when no sweep holds a real cell; else ``{"arms": [{kind, profile, builds, sweeps, seeds}],
    "bounds", "metrics": {metric: {profile: {"real_build", "arms": {kind: describe() or
    {"absent": why}}, "differences": {model kind: paired_difference() + {"agrees", "why", "bound"}}}}}}``."""
    if not any(arm.is_real for d in docs for c in d.get("cells") or [] if (arm := arm_of(d, c)) is not None):
        return None
    values, absent, builds, sources = arm_values(folders, docs)
    if not any(a.is_real for a in values):
        return None
    bnd = dict(BOUNDS) | dict(bounds or {})
    profiles = []
    for a in values:
        if a.is_real and a.profile not in profiles:
            profiles.append(a.profile)
    kinds = [k for k in ("model-sim", "model-live", "real") if any(a.kind == k for a in values)]
    out: dict[str, Any] = {
        "arms": [{"kind": a.kind, "profile": a.profile, "builds": sorted(builds.get(a, ())),
                  "sweeps": sources.get(a, []), "seeds": sorted(values[a])} for a in values],
        "kinds": kinds, "profiles": profiles, "bounds": {m: bnd.get(m) for m in (metrics or FIDELITY_METRICS)},
        "metrics": {}}
    for m in metrics or FIDELITY_METRICS:
        per_prof: dict[str, Any] = {}
        for prof in profiles:
            real = Arm("real", prof)
            arms: dict[str, Any] = {}
            series: dict[str, dict[int, float]] = {}
            for k in kinds:
                arm = Arm(k, prof)
                if arm not in values:
                    continue
                xs = {s: v[m] for s, v in values[arm].items() if m in v and math.isfinite(float(v[m]))}
                if xs:
                    series[k] = xs
                    arms[k] = describe(list(xs[s] for s in sorted(xs)), seed=derive_seed(seed, "fidelity", m, k, prof))
                else:
                    arms[k] = {"absent": (absent.get(arm) or {}).get(m) or "not measured"}
            diffs: dict[str, Any] = {}
            for k in kinds:
                if k == "real" or k not in series or "real" not in series:
                    continue
                # model − real: paired_difference gives b − a
                d = paired_difference(series["real"], series[k], seed=derive_seed(seed, "fidelity", m, k, prof, "diff"))
                ok, why = _agrees(d, bnd.get(m))
                diffs[k] = d | {"agrees": ok, "why": why, "bound": bnd.get(m)}
            per_prof[prof] = {"real_build": ", ".join(sorted(builds.get(real, ()))) or None, "arms": arms,
                              "differences": diffs}
        out["metrics"][m] = per_prof
    return out


def _num(v: float) -> str:
    return f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}"


def _desc(d: dict[str, Any] | None) -> str:
    if d is None:
        return ""
    if "absent" in d:
        return f"absent ({d['absent']})"
    if d.get("mean") is None:
        return "—"
    lo, hi = d["ci95"]
    return f"{_num(d['mean'])} [{_num(lo)}, {_num(hi)}] (n={d['n']})"


def _diff(d: dict[str, Any] | None) -> str:
    if d is None:
        return ""
    if d.get("mean") is None:
        return "— (no seed in common)"
    lo, hi = d["ci95"]
    verdict = {True: "agrees", False: "**disagrees**", None: "—"}[d["agrees"]]
    return f"{_num(d['mean'])} [{_num(lo)}, {_num(hi)}] (n={d['n']}): {verdict} ({d['why']})"


def fidelity_markdown(doc: dict[str, Any]) -> str:
    """One table: per metric and profile, each arm's mean [95% interval] (n), the real build, and
    each model arm's paired difference model − real with its verdict; the bounds under it."""
    kinds = doc["kinds"]
    model_kinds = [k for k in kinds if k != "real"]
    head = ["metric", "profile ↔ real build"] + kinds + [f"{k} − real, paired" for k in model_kinds]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for m, per in doc["metrics"].items():
        for prof, x in per.items():
            row = [m, f"{prof} ↔ {x['real_build'] or '?'}"]
            row += [_desc(x["arms"].get(k)) for k in kinds]
            row += [_diff(x["differences"].get(k)) for k in model_kinds]
            lines.append("| " + " | ".join(row) + " |")
    b = doc.get("bounds") or {}
    lines += ["", "Agrees: the paired difference's 95% interval holds 0, or |mean difference| ≤ the bound: "
              + ", ".join(f"{m} {v:g}" for m, v in b.items() if v is not None) + "."]
    return "\n".join(lines)
