"""``ha-testbed shrink DIR --when EXPR``: reduce a run whose summary satisfies EXPR to the smallest
experiment that still satisfies it (Hypothesis / Jepsen / VOPR-style test-case reduction).

Contract:

* the run's experiment and seed come from ``DIR/metrics.json`` (else ``DIR/history/run.json``);
* it is re-run on the sim engine with the same seed; if EXPR does not hold there the shrink stops
  with exit 1 and says so (a live run's failure that the sim does not reproduce is reported as such);
* then a greedy loop to a fixpoint: the passes of :mod:`ha.experiment.shrink.passes`, in their fixed
  order, each proposing smaller candidates of the current experiment; every candidate is one sim
  run; the first that still satisfies EXPR becomes the current experiment (an *accepted step*) and
  the same pass is asked again; a round in which no pass is accepted ends the loop. With
  ``seeds_too`` other seeds are tried at the fixpoint: a seed is accepted only if its run is strictly
  smaller (nodes + jobs + pods) and still satisfies EXPR, and the passes start again;
* determinism: the candidates, their order and every run are deterministic (sim engine), so the same
  input gives the same path and the same ``shrunk.yaml``; only ``time_budget`` (wall time) can cut a
  path short at a host-dependent point, and the report says when it did;
* budget: at most ``budget`` sim runs (the confirming re-run included) and ``time_budget`` wall
  seconds; Ctrl-C stops at once; in every case the files are written for the smallest case found;
* output in ``out``: ``shrunk.yaml`` (loads with ``load_experiment``), ``run/`` (the shrunk run's
  results folder), ``shrink.md`` (each accepted step and the size before and after),
  ``shrink.json`` (the same as data) and, when the violation comes from one session's decisions,
  ``repro.json`` (a scenario file, :mod:`ha.experiment.shrink.repro`).
"""
from __future__ import annotations

import io
import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml

from ha.errors import BadInput, CheckFailed
from ha.experiment.config import Experiment, parse_experiment
from ha.experiment.shrink.passes import PASSES, Candidate, smaller_workload
from ha.experiment.shrink.predicate import Predicate, Verdict, parse_predicate

__all__ = ["Shrinker", "ShrinkResult", "Size", "load_source", "shrink_cli", "compact", "run_size"]

SEEDS_TRIED = 8
EXIT_INTERRUPTED = 130


@dataclass(frozen=True)
class Size:
    """How big a run was: nodes, jobs (podgroups), pods, faults (chaos entries), instances and
    virtual seconds, counted from its history (objects created) and its experiment."""
    nodes: int
    jobs: int
    pods: int
    faults: int
    instances: int
    seconds: float

    def weight(self) -> int:
        return self.nodes + self.jobs + self.pods

    def to_json(self) -> dict[str, Any]:
        return {"nodes": self.nodes, "jobs": self.jobs, "pods": self.pods, "faults": self.faults,
                "instances": self.instances, "seconds": self.seconds}


def run_size(out: Path, exp: Experiment) -> Size:
    from ha.experiment.history import History
    counts = {"Node": set(), "PodGroup": set(), "Pod": set()}
    for e in History(out).events():
        kind = e.get("kind")
        if kind in counts and e.get("type") == "ADDED":
            md = (e.get("object") or {}).get("metadata") or {}
            counts[kind].add((md.get("namespace"), md.get("name")))
    return Size(nodes=len(counts["Node"]), jobs=len(counts["PodGroup"]), pods=len(counts["Pod"]),
                faults=len(exp.chaos), instances=exp.schedulers.instances, seconds=float(exp.duration))


def compact(exp: Experiment) -> dict[str, Any]:
    """The experiment as the shortest equivalent file: defaults left out."""
    return exp.model_dump(mode="json", exclude_defaults=True, exclude_none=True, by_alias=True)


def load_source(results_dir: Path) -> tuple[Experiment, str, dict[str, Any]]:
    """(the experiment as run, the engine it ran on, the recorded summary)."""
    d = Path(results_dir)
    if not d.is_dir():
        raise BadInput(f"{d}: not a results folder (no such folder)")
    doc: dict[str, Any] = {}
    src = d / "metrics.json"
    if src.is_file():
        try:
            doc = json.loads(src.read_text(encoding="utf-8"))
        except ValueError as e:
            raise BadInput(f"{src}: not valid JSON: {e}") from None
    if not isinstance(doc.get("experiment"), dict):
        src = d / "history" / "run.json"
        if not src.is_file():
            raise BadInput(f"{d}: neither metrics.json nor history/run.json holds the experiment")
        try:
            hdr = json.loads(src.read_text(encoding="utf-8"))
        except ValueError as e:
            raise BadInput(f"{src}: not valid JSON: {e}") from None
        doc = {"experiment": hdr.get("experiment"), "seed": hdr.get("seed"), "engine": hdr.get("engine"),
               "summary": doc.get("summary") or {}}
        if not isinstance(doc["experiment"], dict):
            raise BadInput(f"{src}: no experiment recorded")
    exp = parse_experiment(doc["experiment"], f"{src}: experiment")
    if doc.get("seed") is not None and int(doc["seed"]) != exp.seed:
        exp = exp.with_overrides(seed=int(doc["seed"]))
    return exp, str(doc.get("engine") or "live"), dict(doc.get("summary") or {})


@dataclass
class Step:
    run: int                # which sim run (1 = the confirming re-run)
    what: str
    verdict: str
    size: Size

    def to_json(self) -> dict[str, Any]:
        return {"run": self.run, "change": self.what, "predicate": self.verdict, "size": self.size.to_json()}


@dataclass
class ShrinkResult:
    out: Path
    original: Size
    final: Size
    steps: list[Step]
    runs: int
    wall_s: float
    stopped: str            # fixpoint | budget | time budget | interrupted
    predicate: str
    verdict: Verdict
    experiment: dict[str, Any]
    repro: dict[str, Any] | None = None
    tried: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"out": str(self.out), "when": self.predicate, "original": self.original.to_json(),
                "final": self.final.to_json(), "steps": [s.to_json() for s in self.steps],
                "runs": self.runs, "wall_s": round(self.wall_s, 2), "stopped": self.stopped,
                "predicate": self.verdict.describe(), "notes": self.verdict.notes,
                "repro": self.repro, "tried": self.tried}


class _Stop(Exception):
    def __init__(self, why: str):
        self.why = why


class Shrinker:
    def __init__(self, exp: Experiment, predicate: Predicate, out: Path, *, budget: int = 200,
                 time_budget: float | None = 900.0, seeds_too: bool = False,
                 on_progress: Callable[[str, int, Size | None], None] | None = None,
                 instance_options: dict[str, Any] | None = None):
        if budget < 1:
            raise BadInput("--budget: must be ≥ 1 (the confirming re-run is one run)")
        self.exp = exp
        self.predicate = predicate
        self.out = Path(out)
        self.budget = budget
        self.time_budget = time_budget
        self.seeds_too = seeds_too
        self.on_progress = on_progress or (lambda what, runs, size: None)
        self.instance_options = instance_options
        self.work = self.out / ".work"
        self.runs = 0
        self.t0 = time.monotonic()
        self.tried: dict[str, bool] = {}
        self.log: list[dict[str, Any]] = []

    # -- one candidate -------------------------------------------------------------------------

    def _check_budget(self) -> None:
        if self.runs >= self.budget:
            raise _Stop("budget")
        # the confirming re-run always runs: without it there is nothing to keep
        if self.runs and self.time_budget is not None and time.monotonic() - self.t0 >= self.time_budget:
            raise _Stop("time budget")

    def run(self, exp: Experiment, what: str) -> tuple[Verdict, Path, Size]:
        from rich.console import Console
        from ha.experiment.runner import ExperimentRunner
        self._check_budget()
        self.runs += 1
        self.on_progress(what, self.runs, None)
        dest = self.work / "candidate"
        if dest.exists():
            shutil.rmtree(dest)
        quiet = Console(file=io.StringIO(), width=120)
        runner = ExperimentRunner(exp, dest, source=f"shrink candidate {self.runs}", console=quiet,
                                  progress=False, engine="sim", instance_options=self.instance_options)
        try:
            outcome = runner.run()
        except KeyboardInterrupt:
            raise
        except Exception as e:  # noqa: BLE001 — a candidate that crashes the run is not kept
            if self.runs == 1:
                raise           # the original itself: the user must see why
            verdict = Verdict(ok=False, notes=[f"the run failed: {type(e).__name__}: {e}"])
            self.log.append({"run": self.runs, "change": what, "holds": False, "predicate": verdict.describe(),
                             "error": verdict.notes[0]})
            return verdict, dest, Size(0, 0, 0, len(exp.chaos), exp.schedulers.instances, float(exp.duration))
        if outcome.interrupted:
            raise _Stop("interrupted")
        verdict = self.predicate.evaluate(outcome.summary)
        size = run_size(dest, exp)
        self.log.append({"run": self.runs, "change": what, "holds": verdict.ok, "predicate": verdict.describe()})
        return verdict, dest, size

    def _keep(self, path: Path) -> Path:
        best = self.work / "best"
        if best.exists():
            shutil.rmtree(best)
        path.rename(best)
        return best

    # -- the loop ------------------------------------------------------------------------------

    def shrink(self) -> ShrinkResult:
        self.work.mkdir(parents=True, exist_ok=True)
        try:
            verdict, path, size = self.run(self.exp, "re-run the original on the sim engine")
        except _Stop as e:
            raise CheckFailed(f"shrink: stopped ({e.why}) before the original was re-run") from None
        if not verdict.ok:
            shutil.rmtree(self.work, ignore_errors=True)
            notes = ("; " + "; ".join(verdict.notes)) if verdict.notes else ""
            raise CheckFailed(f"the failure does not reproduce on the sim engine: {self.predicate} is "
                              f"{verdict.describe()} on the sim re-run (seed {self.exp.seed}){notes}")
        self._keep(path)
        original = size
        cur = compact(self.exp)
        cur_exp, cur_verdict, cur_size = self.exp, verdict, size
        steps = [Step(self.runs, "the original, re-run on the sim engine", verdict.describe(), size)]
        stopped = "fixpoint"
        self.tried[_key(cur)] = True
        try:
            while True:
                progressed = False
                for _name, gen in PASSES:
                    while True:
                        accepted = False
                        for what, cand in self._candidates(gen, cur, cur_size):
                            exp = self._valid(cand)
                            if exp is None:
                                continue
                            v, p, s = self.run(exp, what)
                            self.tried[_key(cand)] = v.ok
                            if v.ok:
                                self._keep(p)
                                cur, cur_exp, cur_verdict, cur_size = compact(exp), exp, v, s
                                steps.append(Step(self.runs, what, v.describe(), s))
                                self.on_progress(what, self.runs, s)
                                accepted = progressed = True
                                break
                        if not accepted:
                            break
                if not progressed and self.seeds_too:
                    progressed = self._try_seeds(cur_exp, cur_size, steps)
                    if progressed:
                        cur_exp, cur_verdict, cur_size = progressed
                        cur = compact(cur_exp)
                        progressed = True
                if not progressed:
                    break
        except _Stop as e:
            stopped = e.why
        except KeyboardInterrupt:
            stopped = "interrupted"
        return self._finish(original, cur_exp, cur_verdict, cur_size, steps, stopped)

    def _candidates(self, gen, cur: dict[str, Any], size: Size):
        # the gangs the workload generated: the run's podgroups less the initial ones
        gangs = size.jobs - len((cur.get("initial") or {}).get("podgroups") or [])
        cands = gen(cur, gangs) if gen is smaller_workload else gen(cur)
        for what, cand in cands:
            if _key(cand) in self.tried:
                continue
            yield what, cand

    def _valid(self, cand: dict[str, Any]) -> Experiment | None:
        try:
            return parse_experiment(cand, "shrink candidate")
        except BadInput:
            self.tried[_key(cand)] = False
            return None

    def _try_seeds(self, exp: Experiment, size: Size, steps: list[Step]):
        for k in range(1, SEEDS_TRIED + 1):
            seed = exp.seed + k
            cand = exp.with_overrides(seed=seed)
            if _key(compact(cand)) in self.tried:
                continue
            what = f"seed {exp.seed} -> {seed}"
            v, p, s = self.run(cand, what)
            self.tried[_key(compact(cand))] = v.ok
            if v.ok and s.weight() < size.weight():
                self._keep(p)
                steps.append(Step(self.runs, what, v.describe(), s))
                return cand, v, s
        return None

    # -- output --------------------------------------------------------------------------------

    def _finish(self, original: Size, exp: Experiment, verdict: Verdict, size: Size,
                steps: list[Step], stopped: str) -> ShrinkResult:
        run_dir = self.out / "run"
        if run_dir.exists():
            shutil.rmtree(run_dir)
        (self.work / "best").rename(run_dir)
        shutil.rmtree(self.work, ignore_errors=True)
        doc = compact(exp)
        (self.out / "shrunk.yaml").write_text(
            f"# shrunk by ha-testbed shrink: {self.predicate}\n"
            + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True), encoding="utf-8")
        res = ShrinkResult(out=self.out, original=original, final=size, steps=steps, runs=self.runs,
                           wall_s=time.monotonic() - self.t0, stopped=stopped, predicate=str(self.predicate),
                           verdict=verdict, experiment=doc, tried=self.log)
        try:
            from ha.experiment.shrink.repro import write_repro
            res.repro = write_repro(run_dir, self.out, self.predicate)
        except Exception as e:  # noqa: BLE001 — the shrunk experiment stands without a scenario
            res.repro = {"written": False, "why": f"{type(e).__name__}: {e}"}
        (self.out / "shrink.md").write_text(render_markdown(res), encoding="utf-8")
        (self.out / "shrink.json").write_text(json.dumps(res.to_json(), indent=2) + "\n", encoding="utf-8")
        return res


def _key(d: dict[str, Any]) -> str:
    return json.dumps(d, sort_keys=True, separators=(",", ":"))


_WHY = {"fixpoint": "no pass finds a smaller experiment that still satisfies the predicate (fixpoint)",
        "budget": "the run budget (--budget) was used up",
        "time budget": "the wall-time budget (--time-budget) was used up",
        "interrupted": "interrupted (Ctrl-C); the smallest case found so far is kept"}


def render_markdown(r: ShrinkResult) -> str:
    lines = [f"# Shrink: `{r.predicate}`", "",
             f"Stopped: {_WHY.get(r.stopped, r.stopped)}. {r.runs} sim runs, {r.wall_s:.1f} s wall time.",
             "", "## Size", "", "| | nodes | jobs | pods | faults | instances | virtual seconds |",
             "|---|---|---|---|---|---|---|"]
    for label, s in (("original", r.original), ("shrunk", r.final)):
        lines.append(f"| {label} | {s.nodes} | {s.jobs} | {s.pods} | {s.faults} | {s.instances} | {s.seconds:g} |")
    lines += ["", "Nodes, jobs and pods are the objects the run created (from its history).", "",
              "## Accepted steps", "", "| # | run | change | predicate | nodes | jobs | pods | faults | s |",
              "|---|---|---|---|---|---|---|---|---|"]
    for i, s in enumerate(r.steps):
        z = s.size
        lines.append(f"| {i} | {s.run} | {s.what} | {s.verdict} | {z.nodes} | {z.jobs} | {z.pods} | "
                     f"{z.faults} | {z.seconds:g} |")
    lines += ["", "## Files", "", "* `shrunk.yaml` — the shrunk experiment "
              "(`ha-testbed run shrunk.yaml --engine sim` reproduces `run/`)",
              "* `run/` — the shrunk run's results folder"]
    rp = r.repro or {}
    if rp.get("written"):
        lines.append(f"* `{rp['file']}` — a scenario file: the caches' state before session "
                     f"{rp['session']} of {rp['instance']} (`{rp['command']}`). {rp.get('note', '')}")
    elif rp:
        lines.append(f"* no scenario file: {rp.get('why')}")
    if r.verdict.notes:
        lines += ["", "Notes on the predicate: " + "; ".join(r.verdict.notes)]
    return "\n".join(lines) + "\n"


# -- the command ----------------------------------------------------------------------------------

def shrink_cli(results_dir: Path, when: str, *, budget: int = 200, time_budget: str | None = "15m",
               seeds_too: bool = False, out: Path | None = None, as_json: bool = False,
               echo: Callable[[str], None] = print, progress: bool = True) -> int:
    from apimachinery.units import parse_duration
    pred = parse_predicate(when)
    tb = None
    if time_budget not in (None, "", "0", "none"):
        try:
            tb = parse_duration(time_budget)
        except ValueError as e:
            raise BadInput(f"--time-budget: {e}") from None
        if tb <= 0:
            raise BadInput("--time-budget: must be > 0")
    exp, engine, summary = load_source(Path(results_dir))
    if summary:
        rec = pred.evaluate(summary)
        if not rec.ok:
            raise CheckFailed(f"{results_dir}: the recorded summary does not satisfy {pred}: "
                              f"{rec.describe()}" + ("; " + "; ".join(rec.notes) if rec.notes else "")
                              + " — nothing to shrink")
    dest = Path(out) if out is not None else Path(str(Path(results_dir)).rstrip("/") + "-shrunk")
    if dest.exists() and any(p.name not in (".work",) for p in dest.iterdir()):
        raise BadInput(f"--out {dest}: exists and is not empty (choose another folder or remove it)")
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
    console = Console(stderr=True)
    with Progress(TextColumn("[bold]shrink"), BarColumn(), TextColumn("{task.completed}/{task.total} runs"),
                  TimeElapsedColumn(), TextColumn("{task.fields[info]}"), console=console,
                  disable=not progress or as_json, transient=False) as bar:
        task = bar.add_task("shrink", total=budget, info="")
        best: list[str] = ["-"]

        def on_progress(what: str, runs: int, size: Size | None) -> None:
            if size is not None:
                best[0] = f"{size.nodes}n {size.jobs}j {size.pods}p {size.faults}f {size.seconds:g}s"
            bar.update(task, completed=runs, info=f"best {best[0]} | {what[:60]}")

        shrinker = Shrinker(exp, pred, dest, budget=budget, time_budget=tb, seeds_too=seeds_too,
                            on_progress=on_progress)
        try:
            res = shrinker.shrink()
        except CheckFailed as e:
            if engine != "sim":
                raise CheckFailed(f"{e} (the recorded run ran on the {engine} engine: its failure may depend "
                                  f"on real timing the sim does not model)") from None
            raise
    if as_json:
        echo(json.dumps(res.to_json(), indent=2))
    else:
        o, f = res.original, res.final
        echo(f"shrunk ({_WHY.get(res.stopped, res.stopped)}): nodes {o.nodes} -> {f.nodes}, jobs {o.jobs} -> "
             f"{f.jobs}, pods {o.pods} -> {f.pods}, faults {o.faults} -> {f.faults}, virtual seconds "
             f"{o.seconds:g} -> {f.seconds:g}; {res.runs} runs, {res.wall_s:.1f} s")
        echo(f"predicate: {res.verdict.describe()}")
        echo(f"wrote {dest / 'shrunk.yaml'}, {dest / 'shrink.md'}, {dest / 'run'}"
             + (f", {dest / res.repro['file']}" if (res.repro or {}).get("written") else ""))
    return EXIT_INTERRUPTED if res.stopped == "interrupted" else 0
