"""The ``ha-testbed`` command line (typer). Commands import their machinery lazily so that
``ha-testbed --help`` stays fast and a broken corner of the tree cannot break the others."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import List, Optional

import typer

from ha.errors import BadInput, CheckFailed

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="HA scheduler testbed: several Volcano-model schedulers, informer caches on "
                       "Redis Streams, watch-level chaos, drift measured.")
scenario_app = typer.Typer(add_completion=False, no_args_is_help=True,
                           help="Run scenario files through one in-memory scheduling session.")
app.add_typer(scenario_app, name="scenario")


def _fail(e: Exception) -> None:
    code = getattr(e, "exit_code", 2)
    typer.echo(f"error: {e}", err=True)
    raise typer.Exit(code)


@scenario_app.command("run")
def scenario_run(
    paths: List[Path] = typer.Argument(..., help="scenario files (JSON) or folders of them"),
    profile: str = typer.Option("v1.14", "--profile", "-p", help="behaviour profile"),
    check: bool = typer.Option(False, "--check", help="compare with each file's `expected`; exit 1 on a mismatch"),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
    switch: List[str] = typer.Option([], "--switch", help="turn a behaviour switch on (NAME) or set it "
                                                        "(NAME=false) on top of the profile; repeatable"),
) -> None:
    """Run scenario files (docs/design.md) and print what was bound, evicted and pipelined."""
    from ha.scenario.cli import run_scenarios
    try:
        code = run_scenarios([str(p) for p in paths], profile=profile, check=check, as_json=as_json,
                             switches=switch)
    except (BadInput, CheckFailed) as e:
        _fail(e)
    raise typer.Exit(code)


@app.command("run")
def run_experiment(
    experiment: Path = typer.Argument(..., help="experiment file (YAML)"),
    out: Optional[Path] = typer.Option(None, "--out", help="results folder (default results/<name>-<time>)"),
    seed: Optional[int] = typer.Option(None, "--seed", help="override the experiment's seed"),
    profile: Optional[str] = typer.Option(None, "--profile", help="override the experiment's profile"),
    redis_url: Optional[str] = typer.Option(None, "--redis-url", help="use this Redis instead of the embedded one"),
    ray_address: Optional[str] = typer.Option(None, "--ray-address", help="use this Ray cluster instead of a local one"),
    duration: Optional[str] = typer.Option(None, "--duration", help="override the experiment's duration (e.g. 20s)"),
    engine: str = typer.Option("live", "--engine", help="live (Redis + Ray, real time) or sim (one process, "
                                                         "virtual time, deterministic)"),
    kube_api: bool = typer.Option(False, "--kube-api", help="keep a Kubernetes API endpoint (kubectl, "
                                                             "client-go) open during the run; writes <out>/kubeconfig"),
    implementation: Optional[str] = typer.Option(None, "--implementation", help="model (the Python model) or "
                                                 "volcano (each instance a real vc-scheduler process)"),
    volcano: Optional[str] = typer.Option(None, "--volcano", help="the vc-scheduler version (e.g. v1.14.1); "
                                          "implies --implementation volcano"),
    volcano_source: Optional[Path] = typer.Option(None, "--volcano-source", help="a local Volcano checkout to "
                                                  "build and run; implies --implementation volcano"),
) -> None:
    """Run an experiment: several scheduler instances, a living cluster, chaos; writes a results folder."""
    from ha.experiment.runner import run_cli
    sched = dict(implementation=implementation, volcano=volcano,
                 volcano_source=str(volcano_source) if volcano_source is not None else None)
    try:
        if kube_api:
            from ha.experiment.serve import run_with_kube_api
            code = run_with_kube_api(experiment, out=out, seed=seed, profile=profile, redis_url=redis_url,
                                     ray_address=ray_address, duration=duration, engine=engine, **sched)
        else:
            code = run_cli(experiment, out=out, seed=seed, profile=profile, redis_url=redis_url,
                           ray_address=ray_address, duration=duration, engine=engine, **sched)
    except (BadInput, CheckFailed) as e:
        _fail(e)
    raise typer.Exit(code)


@app.command("serve")
def serve(
    experiment: Path = typer.Argument(..., help="experiment file (YAML): its cluster and workload are served"),
    address: str = typer.Option("127.0.0.1", "--address", help="listen address (loopback unless given)"),
    port: int = typer.Option(0, "--port", help="listen port (0: a free one)"),
    out: Optional[Path] = typer.Option(None, "--out", help="folder for the kubeconfig and the request logs"),
    redis_url: Optional[str] = typer.Option(None, "--redis-url", help="use this Redis instead of the embedded one"),
    duration: Optional[float] = typer.Option(None, "--duration", help="stop after this many seconds"),
    no_workload: bool = typer.Option(False, "--no-workload", help="serve the starting objects only"),
    endpoint: List[str] = typer.Option([], "--endpoint", help="open another endpoint NAME (one per external "
                                       "scheduler; the experiment's watch/API faults for NAME act on it); repeatable"),
) -> None:
    """Serve the Kubernetes API over a living cluster (kubelet, job controller, workload) with no
    scheduler instances, for kubectl and external schedulers; prints the URL, writes a kubeconfig."""
    from ha.experiment.serve import serve_cli
    try:
        code = serve_cli(experiment, address=address, port=port, out=out, redis_url=redis_url,
                         duration=duration, workload=not no_workload, endpoints=tuple(endpoint),
                         echo=typer.echo)
    except (BadInput, CheckFailed) as e:
        _fail(e)
    raise typer.Exit(code)


@app.command("demo")
def demo(
    redis_url: Optional[str] = typer.Option(None, "--redis-url", help="use this Redis instead of the embedded one"),
) -> None:
    """A short live demo of the API server: create nodes and pods, watch them, bind one."""
    from cluster_state.demo import run_demo
    try:
        code = run_demo(redis_url)
    except (BadInput, CheckFailed) as e:
        _fail(e)
    raise typer.Exit(code)


@app.command("cleanup")
def cleanup(
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
) -> None:
    """Stop what runs killed without their teardown (e.g. by SIGKILL) left running: the processes
    each run recorded in its ledger, by PID and start time, never by name. Living runs are left alone."""
    from dataclasses import asdict
    from ha.runtime import ledger
    reports = ledger.reap()
    if as_json:
        typer.echo(json.dumps([{"run_id": r.run_id, "ledger": r.path, "driver_pid": r.driver_pid,
                                "stopped": [asdict(p) for p in r.stopped],
                                "survived": [asdict(p) for p in r.survived]} for r in reports]))
    else:
        for r in reports:
            what = ", ".join(f"{p.pid} ({p.what})" for p in r.stopped) or "nothing was still running"
            typer.echo(f"run {r.run_id} (driver {r.driver_pid} gone): stopped {what}")
            for p in r.survived:
                typer.echo(f"run {r.run_id}: pid {p.pid} ({p.what}) would not stop", err=True)
        if not reports:
            typer.echo(f"no dead runs in {ledger.runs_dir()}")
    raise typer.Exit(1 if any(r.survived for r in reports) else 0)


@app.command("bench")
def bench(
    name: str = typer.Argument(..., help="api-write | informer | session | e2e | scale | sim | kube-api | hunt"),
    quick: bool = typer.Option(False, "--quick", help="a shorter run (CI smoke)"),
    as_json: bool = typer.Option(False, "--json", help="print the result as JSON"),
    hypernodes: bool = typer.Option(False, "--hypernodes",
                                    help="session: nodes under rack/spine HyperNodes, some hard-topology gangs"),
    param: list[str] = typer.Option([], "--param",
                                    help="KEY=VALUE workload parameter of the benchmark (repeatable), "
                                         "e.g. session: taints=0.2"),
) -> None:
    """Run one benchmark; print its figure beside its baseline measured in the same run, and the ratio."""
    from ha import bench as benches
    mod = benches.load(name)
    if mod is None:
        _fail(BadInput(f"bench: unknown benchmark {name!r}; known: {', '.join(benches.BENCHMARKS)}"))
    if hypernodes and name != "session":
        _fail(BadInput(f"bench: --hypernodes applies to the session benchmark only, not {name!r}"))
    try:
        result = mod.run(quick=quick, **({"hypernodes": True} if hypernodes else {}),
                         **benches.parse_params(name, mod.run, param))
    except BadInput as e:
        _fail(e)
    if as_json:
        typer.echo(json.dumps(result.to_json()))
        return
    from rich.console import Console
    from rich.table import Table
    t = Table(title=f"bench {name}")
    for col in ("figure", "value", "baseline", "ratio"):
        t.add_column(col)
    rows = [result.to_json()] + list(result.extra)
    for r in rows:
        base = "" if r.get("baseline") is None else f"{r['baseline']:,.1f} {r['unit']}"
        ratio = "" if r.get("ratio") is None else f"{r['ratio']:.2f}x"
        t.add_row(r["name"], f"{r['value']:,.1f} {r['unit']}", base, ratio)
    Console().print(t)
    typer.echo("params: " + json.dumps(result.params))


@app.command("replay")
def replay(
    results_dir: Path = typer.Argument(..., help="results folder of a run"),
    instance: str = typer.Option(..., "--instance", help="instance name, e.g. scheduler-1"),
    until: Optional[int] = typer.Option(None, "--until", help="stop at this resourceVersion"),
    until_seq: Optional[int] = typer.Option(None, "--until-seq",
                                            help="stop after this delivery-log record (a digest's log_seq)"),
) -> None:
    """Rebuild an instance's cache from its delivery log, deterministically, and print its digest."""
    from ha.experiment.replay import replay_cli
    try:
        code = replay_cli(results_dir, instance, until, until_seq=until_seq, echo=typer.echo)
    except (BadInput, CheckFailed) as e:
        _fail(e)
    raise typer.Exit(code)


@app.command("report")
def report(
    results_dir: Path = typer.Argument(..., help="results folder of a run"),
) -> None:
    """(Re)write report.md and its plots (PNG) from a results folder."""
    from ha.experiment.report import report_cli
    try:
        code = report_cli(results_dir, echo=typer.echo)
    except (BadInput, CheckFailed) as e:
        _fail(e)
    raise typer.Exit(code)


@app.command("analyze")
def analyze(
    results_dir: Path = typer.Argument(..., help="results folder of a run (with its history/), or a sweep "
                                                 "folder (every cell, then sweep.json and summary.md)"),
    as_json: bool = typer.Option(False, "--json", help="print the summary as JSON"),
    checkers: List[Path] = typer.Option([], "--checkers",
                                        help="a folder (or .py file) of further checker modules; repeatable"),
) -> None:
    """Recompute every metric from the folder's recorded history/ alone; rewrite metrics.json's
    summary, timeseries.csv, divergence.jsonl and report.md."""
    from ha.experiment.analyze import analyze_cli
    try:
        code = analyze_cli(results_dir, as_json=as_json, echo=typer.echo, extra_checkers=checkers)
    except (BadInput, CheckFailed) as e:
        _fail(e)
    raise typer.Exit(code)


@app.command("compare")
def compare(
    results_dirs: List[Path] = typer.Argument(..., help="results folders to put side by side, or sweep folders"),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
) -> None:
    """Side-by-side table of several runs' summaries; a sweep folder: its confidence-interval table.

    E.g. one seed under v1.14 and pr5045; a sweep folder prints per metric and profile the mean
    with its 95% interval and n, and the differences paired by seed."""
    from ha.experiment.compare import compare_cli
    try:
        code = compare_cli(results_dirs, as_json=as_json, echo=typer.echo)
    except (BadInput, CheckFailed) as e:
        _fail(e)
    raise typer.Exit(code)


@app.command("sweep")
def sweep(
    experiment: Path = typer.Argument(..., help="experiment file (YAML)"),
    seeds: str = typer.Option(..., "--seeds", help="seeds: A-B, a list 1,3,5, or both (1-3,7)"),
    profiles: str = typer.Option(..., "--profiles", help="profiles, comma-separated (v1.14,pr5045,pr5045-fixed); "
                                                        "differences are paired by seed between every two"),
    sets: List[str] = typer.Option([], "--set", help="KEY=V1,V2,...: a path into the experiment "
                                                    "(chaos[0].delay.mean, chaos[*].delay.mean, "
                                                    "schedulers.instances) and its values; repeatable "
                                                    "(the grid takes every combination)"),
    engine: str = typer.Option("sim", "--engine", help="sim (one process per cell, virtual time: cheap) or live"),
    jobs: Optional[int] = typer.Option(None, "--jobs", help="cells at once, each in its own process (default: the "
                                                           "core count with sim; 1 with live, because a live cell "
                                                           "starts its own Redis and Ray and two on a small machine "
                                                           "starve each other's actors and lease timing)"),
    ray_address: Optional[str] = typer.Option(None, "--ray-address", help="run every cell as a Ray task on this "
                                                                        "cluster (sim only); results shipped back"),
    out: Optional[Path] = typer.Option(None, "--out", help="sweep folder (default results/sweep-<name>-<time>); "
                                                          "rerunning into it resumes"),
    as_json: bool = typer.Option(False, "--json", help="print sweep.json"),
    cell_reports: bool = typer.Option(False, "--cell-reports", help="each cell also writes its report.md and plots "
                                                                   "(~1 s per cell; `ha-testbed report CELL` "
                                                                   "writes one later)"),
) -> None:
    """Run the grid seeds x profiles x --set values; per metric: 95% intervals and paired differences.

    One results folder per cell; sweep.json (n, mean, median, 95% bootstrap interval per metric and
    profile; differences between profiles paired by seed), summary.md, plots/. Resumable. Exit 1 if
    a cell failed."""
    from ha.experiment.sweep import sweep_cli
    try:
        code = sweep_cli(experiment, seeds=seeds, profiles=profiles, sets=sets, engine=engine, jobs=jobs,
                         ray_address=ray_address, out=out, as_json=as_json, echo=typer.echo,
                         cell_reports=cell_reports)
    except (BadInput, CheckFailed) as e:
        _fail(e)
    raise typer.Exit(code)


@app.command("shrink")
def shrink(
    results_dir: Path = typer.Argument(..., help="results folder of a run whose summary satisfies --when"),
    when: str = typer.Option(..., "--when", help="predicate over the summary, e.g. 'cyclic_evictions>0', "
                                                 "'convergence.ok==false', 'a>0 and (b>=3 or not c==0)'"),
    budget: int = typer.Option(200, "--budget", help="at most this many sim runs"),
    time_budget: str = typer.Option("15m", "--time-budget", help="at most this much wall time (e.g. 5m)"),
    seeds_too: bool = typer.Option(False, "--seeds-too", help="also try other seeds at the fixpoint"),
    out: Optional[Path] = typer.Option(None, "--out", help="output folder (default RESULTS_DIR-shrunk)"),
    as_json: bool = typer.Option(False, "--json", help="print the result as JSON"),
) -> None:
    """Reduce a failing run to the smallest experiment (sim engine) that still satisfies --when.

    Writes shrunk.yaml, the shrunk run, shrink.md and, where it can, a scenario file."""
    from ha.experiment.shrink.shrinker import shrink_cli
    try:
        code = shrink_cli(results_dir, when, budget=budget, time_budget=time_budget, seeds_too=seeds_too,
                          out=out, as_json=as_json, echo=typer.echo)
    except (BadInput, CheckFailed) as e:
        _fail(e)
    raise typer.Exit(code)


@app.command("hunt")
def hunt(
    profile: str = typer.Option(..., "--profile", help="behaviour profile every run uses"),
    runs: Optional[int] = typer.Option(None, "--runs", help="how many randomized runs"),
    time_budget: Optional[str] = typer.Option(None, "--time", help="search this long instead (e.g. 30m)"),
    seed: int = typer.Option(0, "--seed", help="the hunt's seed: run i's experiment is drawn from (seed, i)"),
    intensity: str = typer.Option("medium", "--intensity", help="fault intensity: low | medium | high"),
    jobs: Optional[int] = typer.Option(None, "--jobs", help="runs and shrinks at once (default: the core count)"),
    ray_address: Optional[str] = typer.Option(None, "--ray-address", help="run every run and shrink as a Ray task"),
    out: Optional[Path] = typer.Option(None, "--out", help="hunt folder (default results/hunt-<profile>-<time>); "
                                                          "rerunning into it resumes"),
    when: Optional[str] = typer.Option(None, "--when", help="a property of your own: a run fails when it holds"),
    switch: List[str] = typer.Option([], "--switch", help="a behaviour switch on top of the profile (NAME or "
                                                        "NAME=false); repeatable"),
    shrink_budget: int = typer.Option(60, "--shrink-budget", help="sim runs per shrink"),
    shrink_time: str = typer.Option("5m", "--shrink-time", help="wall time per shrink"),
    no_shrink: bool = typer.Option(False, "--no-shrink", help="judge and group only (no shrunk cases)"),
    as_json: bool = typer.Option(False, "--json", help="print hunt.json"),
) -> None:
    """Search randomized HA chaos runs (sim) for safety violations; shrink each distinct one.

    Writes hunt.md and hunt.json: per signature (oracle, roles, fault kinds) how often, the smallest
    experiment and the command that reproduces it. Exit 1 when a property failed."""
    from ha.hunt.search import hunt_cli
    try:
        code = hunt_cli(profile=profile, runs=runs, time_budget=time_budget, seed=seed, intensity=intensity,
                        jobs=jobs, ray_address=ray_address, out=out, when=when, switches=switch,
                        shrink_budget=shrink_budget, shrink_time=shrink_time, shrink=not no_shrink,
                        as_json=as_json, echo=typer.echo)
    except (BadInput, CheckFailed) as e:
        _fail(e)
    raise typer.Exit(code)


@app.command("schema")
def schema() -> None:
    """Print the JSON Schema of experiment files (per-fault rules of `chaos:` entries included)."""
    from ha.experiment.config import json_schema
    typer.echo(json.dumps(json_schema(), indent=2, ensure_ascii=False))


volcano_app = typer.Typer(add_completion=False, no_args_is_help=True, help="The real vc-scheduler.")
app.add_typer(volcano_app, name="volcano")


@volcano_app.command("build")
def volcano_build(
    version: Optional[str] = typer.Argument(None, help="a pinned version (go/volcano/<version>), e.g. v1.14.1"),
    source: Optional[str] = typer.Option(None, "--source", help="build a local Volcano checkout instead"),
    force: bool = typer.Option(False, "--force", help="rebuild even if the binary is in the cache"),
) -> None:
    """Build vc-scheduler unmodified from its Go module into the user cache (exit 2 on failure)."""
    from ha.volcano.build import VolcanoBuildError, build_cli
    try:
        code = build_cli(version, source, force=force, echo=lambda m: typer.echo(m, err=True), out=typer.echo)
    except (BadInput, VolcanoBuildError) as e:
        _fail(e)
    raise typer.Exit(code)


def main() -> None:
    app()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
