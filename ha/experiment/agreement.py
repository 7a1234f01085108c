"""Two or more sweeps of one experiment side by side — typically the same grid on the live and the
sim engine: do they agree?

For every metric and profile, each sweep's mean with its 95% bootstrap interval over the seeds that
**every** sweep finished for that profile (a 10-seed live sweep beside a 30-seed sim sweep compares
seeds 1–10 of both), and whether the intervals overlap. For every pair of profiles, each sweep's
verdict on the paired difference (increase, decrease, "no difference detected"); the sweeps
*contradict* each other on a pair only when one says increase and another decrease — a difference
one sweep detects and another does not is a matter of power, not a disagreement.

When a sweep holds real vc-scheduler cells (``schedulers.implementation: volcano``), the model's
sweeps are also compared with the real scheduler (``ha.experiment.fidelity``: model-sim,
model-live and real side by side per metric and profile, the paired difference model − real and
whether it agrees, docs/fidelity.md); the profile-level comparison above covers the model's sweeps
only.

``ha-testbed compare SWEEP_A SWEEP_B ...`` prints this after the sweeps' own tables (markdown, as
docs/simulation.md shows it); ``--json`` adds it as ``"agreement"`` (with ``"fidelity"`` when a
sweep is real).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ha.experiment.stats import NO_DIFFERENCE, describe, derive_seed, paired_difference

__all__ = ["agreement", "agreement_markdown", "DEFAULT_METRICS"]

# the metrics the engines are compared on (headline numbers, as compare and sweep show them)
DEFAULT_METRICS = ("allocation_drift", "wasted_evictions", "cyclic_evictions", "partial_gang_binds",
                   "cache_divergence", "failover_recovery_s", "pods_bound_per_s", "repeat_pipelines")


def _label(path: Path, doc: dict[str, Any]) -> str:
    engine = (doc.get("grid") or {}).get("engine") or "?"
    return f"{engine} ({path.name})"


def _base_values(path: Path, doc: dict[str, Any]) -> dict[str, dict[int, dict[str, float]]]:
    """{profile: {seed: {metric: headline}}} of the sweep's finished cells without --set values
    (finished by the cell's own files, so a sweep still running counts what it has done)."""
    from ha.experiment.sweep import cell_done
    from ha.experiment.sweep_report import cell_values
    from ha.experiment.fidelity import arm_of
    out: dict[str, dict[int, dict[str, float]]] = {}
    for c in doc.get("cells") or []:
        if c.get("set") or not cell_done(path / c["path"]):
            continue
        arm = arm_of(doc, c)
        if arm is None or arm.is_real:
            continue
        vals = cell_values(path / c["path"])
        if vals:
            out.setdefault(c["profile"], {})[int(c["seed"])] = vals
    return out


def agreement(folders: list[Path], docs: list[dict[str, Any]], metrics: tuple[str, ...] | None = None,
              seed: int = 0) -> dict[str, Any]:
    """``{"sweeps": [label], "metrics": {metric: {"profiles": {profile: {"seeds", "per_sweep":
    [describe()], "overlap"}}, "pairs": [{"a", "b", "verdicts": [..], "contradiction"}]}}}``."""
    from ha.experiment.fidelity import fidelity
    real = fidelity(folders, docs, seed=seed)
    every = list(zip(folders, docs))
    # the profile-level comparison is the model's: a sweep of real cells only takes no part
    model = [(p, d) for p, d in every if _base_values(p, d) or not has_real_cells(d)] if real else every
    folders, docs = [p for p, _ in model], [d for _, d in model]
    labels = [_label(p, d) for p, d in zip(folders, docs)]
    values = [_base_values(p, d) for p, d in zip(folders, docs)]
    profiles = [p for p in ((docs[0].get("grid") or {}).get("profiles") or [] if docs else [])
                if all(p in v for v in values)] if len(docs) >= 2 else []
    names = list(metrics or DEFAULT_METRICS)
    out: dict[str, Any] = {"sweeps": labels, "profiles": profiles, "metrics": {}}
    for m in names:
        entry: dict[str, Any] = {"profiles": {}, "pairs": []}
        common: dict[str, list[int]] = {}
        for prof in profiles:
            seeds = sorted(set.intersection(*[{s for s, vals in v[prof].items() if m in vals} for v in values]))
            common[prof] = seeds
            per = [describe([v[prof][s][m] for s in seeds], seed=derive_seed(seed, m, prof, i))
                   for i, v in enumerate(values)]
            cis = [d["ci95"] for d in per if d["ci95"] is not None]
            overlap = (len(cis) == len(per) and max(lo for lo, _ in cis) <= min(hi for _, hi in cis)) if cis else None
            entry["profiles"][prof] = {"seeds": seeds, "per_sweep": per, "overlap": overlap}
        for i, a in enumerate(profiles):
            for b in profiles[i + 1:]:
                verdicts = []
                seeds = sorted(set(common[a]) & set(common[b]))
                for k, v in enumerate(values):
                    d = paired_difference({s: v[a][s][m] for s in seeds}, {s: v[b][s][m] for s in seeds},
                                          seed=derive_seed(seed, m, a, b, k))
                    verdicts.append({"mean": d["mean"], "ci95": d["ci95"], "verdict": d["verdict"], "n": d["n"]})
                signs = {x["verdict"] for x in verdicts} - {NO_DIFFERENCE}
                entry["pairs"].append({"a": a, "b": b, "verdicts": verdicts, "contradiction": len(signs) > 1})
        if any(x["seeds"] for x in entry["profiles"].values()):
            out["metrics"][m] = entry
    if real is not None:
        out["fidelity"] = real
    return out


def has_real_cells(doc: dict[str, Any]) -> bool:
    from ha.experiment.fidelity import arm_of
    return any((a := arm_of(doc, c)) is not None and a.is_real for c in doc.get("cells") or [])


def _num(v: float) -> str:
    return f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}"


def _desc(d: dict[str, Any]) -> str:
    if d.get("mean") is None:
        return "—"
    lo, hi = d["ci95"]
    return f"{_num(d['mean'])} [{_num(lo)}, {_num(hi)}]"


def agreement_markdown(doc: dict[str, Any]) -> str:
    """Two markdown tables: means per metric, profile and sweep (with overlap), and the pairs of
    profiles each sweep orders (with contradictions)."""
    sw = doc["sweeps"]
    lines: list[str] = []
    if doc.get("fidelity"):
        from ha.experiment.fidelity import fidelity_markdown
        lines += ["The model against the real scheduler (model − real paired by seed; 95% intervals):", "",
                  fidelity_markdown(doc["fidelity"]), ""]
    if not doc["metrics"]:
        return "\n".join(lines)
    lines += ["| metric | profile | n | " + " | ".join(sw) + " | intervals overlap |",
             "|---|---|---|" + "---|" * len(sw) + "---|"]
    for m, e in doc["metrics"].items():
        for prof, x in e["profiles"].items():
            ov = {True: "yes", False: "**no**", None: "—"}[x["overlap"]]
            lines.append(f"| {m} | {prof} | {len(x['seeds'])} | " + " | ".join(_desc(d) for d in x["per_sweep"])
                         + f" | {ov} |")
    lines += ["", "| metric | b − a | " + " | ".join(sw) + " | contradiction |",
              "|---|---|" + "---|" * len(sw) + "---|"]
    for m, e in doc["metrics"].items():
        for p in e["pairs"]:
            cells = []
            for v in p["verdicts"]:
                if v["mean"] is None:
                    cells.append("—")
                else:
                    word = NO_DIFFERENCE if v["verdict"] == NO_DIFFERENCE else _num(v["mean"])
                    cells.append(f"{word} [{_num(v['ci95'][0])}, {_num(v['ci95'][1])}]")
            lines.append(f"| {m} | {p['b']} − {p['a']} | " + " | ".join(cells)
                         + f" | {'**yes**' if p['contradiction'] else 'no'} |")
    return "\n".join(lines)

