"""``ha-testbed serve`` and ``ha-testbed run --kube-api``: the Kubernetes REST front (kube_api) over
an experiment's API server.

* :func:`serve_cli` -- an API server with the living cluster of the experiment (its starting
  objects, then the hollow kubelet, the job controller and the workload generator:
  ``ha.runtime.cluster.ClusterSim``, in process) and **no** scheduler instances, for interactive use
  and external schedulers (kubectl, vc-scheduler, kube-scheduler). It prints the URL, writes a
  kubeconfig (``<out>/kubeconfig``) and runs until Ctrl-C / SIGTERM (or ``duration``); then it
  stops what it started, each by its own handle (the embedded redis-server by its PID through the
  process ledger). ``endpoints``: more listeners, one per external scheduler instance
  (``<out>/kubeconfig-<name>``), each with the watch and API faults the experiment's ``chaos:``
  gives the instance of that name.
* :func:`run_with_kube_api` -- ``ha-testbed run`` with an ``observer`` endpoint open for the whole
  run (live engine) and ``<results>/kubeconfig`` written; the endpoint's logs go to
  ``<results>/kube-api/observer/``.

Loopback only unless an address is given.
"""
from __future__ import annotations

import gc
import signal
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from ha.errors import BadInput

__all__ = ["serve_cli", "run_with_kube_api", "KubeServe"]


class KubeServe:
    """The parts ``serve`` starts, in order, and stops in reverse."""

    def __init__(self, exp, source: str, out: Path, *, address: str, port: int, redis_url: str | None,
                 workload: bool = True, endpoints: tuple[str, ...] = ()):
        from ha.runtime.apiserver import api_server_config
        self.exp = exp
        self.source = source
        self.out = Path(out).absolute()
        self.address = address
        self.port = port
        self.redis_url = redis_url
        self.workload = workload
        self.run_id = uuid.uuid4().hex[:6]
        self.prefix = f"ht-{exp.name}-serve-{self.run_id}"
        self.api_server = api_server_config(exp)
        self.redis = None
        self.api = None
        self.front = None
        self.cluster = None
        self.endpoint = None
        self.kubeconfig: Path | None = None
        self.endpoint_names = tuple(endpoints)
        self.instance_endpoints: dict[str, Any] = {}

    def start(self) -> "KubeServe":
        from ha.experiment.engine.base import workload_config
        from ha.experiment.objects import starting_objects
        from ha.runtime import ledger
        from ha.runtime.cluster import ClusterConfig, ClusterSim
        from kube_api.server import ThreadedFront, write_kubeconfig
        from cluster_state.errors import ApiError
        if self.redis_url is None:
            from cluster_state.embedded import EmbeddedRedis
            self.redis = EmbeddedRedis(on_start=lambda pid: ledger.add(pid, "redis-server")).start()
            self.redis_url = self.redis.url
        self.api = self.api_server.sync_client(self.redis_url, self.prefix)
        objs = starting_objects(self.exp, self.source)
        for obj in objs.in_order():
            try:
                self.api.create(obj)
            except ApiError as e:
                md = obj["metadata"]
                raise BadInput(f"{self.source}: creating {obj['kind']} {md.get('name')}: {e}") from None
        self.front = ThreadedFront(self.redis_url, self.prefix, api_server=self.api_server, host=self.address,
                                   log_dir=self.out / "kube-api", keep_logs=False).start()
        try:
            self.endpoint = self.front.add_endpoint("observer", port=self.port)
        except OSError as e:
            raise BadInput(f"--port {self.port}: cannot listen on {self.address}: {e}") from None
        self.kubeconfig = Path(write_kubeconfig(self.out / "kubeconfig", self.endpoint.url))
        self._open_instance_endpoints(write_kubeconfig)
        cfg = ClusterConfig(redis_url=self.redis_url, prefix=self.prefix, seed=self.exp.seed,
                            workload=workload_config(self.exp) if self.workload else None,
                            api_server=self.api_server)

        async def start_cluster():
            c = ClusterSim(cfg)
            await c.start()
            return c
        self.cluster = self.front.run(start_cluster())
        # what is alive now lives as long as the server: out of the cyclic GC's walks, which then
        # see only what requests and watch events allocate
        gc.freeze()
        return self

    def _open_instance_endpoints(self, write_kubeconfig) -> None:
        """One endpoint per ``--endpoint NAME`` (e.g. one per external scheduler instance), each with
        its chaos door; a name that is one of the experiment's instances gets that instance's watch
        and API faults from the experiment's ``chaos:`` (times count from now). Faults that act on
        processes (kill, pause, ...) have nothing to act on here and are left out."""
        from chaos.schedule import build_schedule
        from kube_api.endpoint import EndpointChaos
        names = self.exp.instance_names()
        schedule = build_schedule(self.exp.chaos, self.exp.seed, names) if self.exp.chaos else None
        for name in self.endpoint_names:
            if name == "observer" or name in self.instance_endpoints:
                raise BadInput(f"--endpoint {name!r}: given twice (or 'observer', which is always open)")
            faults = schedule.for_instance(name) if schedule is not None and name in names else []
            chaos = EndpointChaos(name, faults)
            ep = self.front.add_endpoint(name, chaos=chaos)
            write_kubeconfig(self.out / f"kubeconfig-{name}", ep.url)
            self.instance_endpoints[name] = ep
        t0 = time.time()
        for ep in self.instance_endpoints.values():
            self.front.run(ep.chaos.set_epoch(t0))

    def stop(self) -> None:
        """Stop what was started, each by its handle; never raises."""
        if self.cluster is not None and self.front is not None:
            try:
                self.front.run(self.cluster.stop(10), 30)
            except Exception:  # noqa: BLE001
                pass
            self.cluster = None
        if self.front is not None:
            try:
                self.front.stop()
            except Exception:  # noqa: BLE001
                pass
            self.front = None
        if self.api is not None:
            try:
                self.api.close()
            except Exception:  # noqa: BLE001
                pass
            self.api = None
        if self.redis is not None:
            self.redis.close()
            self.redis = None


def serve_cli(path, *, address: str = "127.0.0.1", port: int = 0, out=None, redis_url: str | None = None,
              duration: float | None = None, workload: bool = True, endpoints: tuple[str, ...] = (),
              echo=print) -> int:
    """The ``ha-testbed serve`` command; returns the exit code (0; 130 after Ctrl-C)."""
    from ha.experiment.config import load_experiment
    from ha.runtime import ledger
    exp = load_experiment(path)
    out_dir = Path(out) if out is not None else Path("results") / f"{exp.name}-serve-{time.strftime('%Y%m%d-%H%M%S')}"
    if not (0 <= port <= 65535):
        raise BadInput(f"--port: must be 0..65535, got {port}")
    out_dir.mkdir(parents=True, exist_ok=True)
    stop = threading.Event()
    interrupted = []

    def on_signal(signum, frame):
        interrupted.append(signum)
        stop.set()
    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    srv = KubeServe(exp, str(path), out_dir, address=address, port=port, redis_url=redis_url, workload=workload,
                    endpoints=tuple(endpoints))
    ledger.begin(srv.run_id)
    try:
        srv.start()
        echo(f"serving {exp.name} at {srv.endpoint.url}")
        echo(f"kubeconfig: {srv.kubeconfig}")
        for name, ep in srv.instance_endpoints.items():
            echo(f"endpoint {name} at {ep.url} (kubeconfig {srv.out / ('kubeconfig-' + name)})")
        echo(f"  export KUBECONFIG={srv.kubeconfig}; kubectl get pods -A -o wide")
        echo("Ctrl-C stops it" + (f" (or after {duration:g}s)" if duration else ""))
        stop.wait(duration)
    finally:
        # no second Ctrl-C may abort the teardown half-way; the caller's handlers come back even
        # when the teardown fails
        for s in old:
            signal.signal(s, signal.SIG_IGN)
        try:
            srv.stop()
            ledger.end()
        finally:
            for s, h in old.items():
                signal.signal(s, h)
    return 130 if interrupted and interrupted[0] == signal.SIGINT else 0


def run_with_kube_api(path, *, address: str = "127.0.0.1", port: int = 0, **run_kw: Any) -> int:
    """``ha-testbed run --kube-api``: the run as ``ha.experiment.runner.run_cli`` makes it, with an
    observer endpoint of the front open from the moment the API server is up until the teardown,
    and ``<results>/kubeconfig`` for it."""
    from ha.experiment.config import load_experiment
    from ha.experiment.runner import EXIT_INTERRUPTED, ExperimentRunner, default_out
    engine = run_kw.pop("engine", "live")
    if engine != "live":
        raise BadInput("--kube-api: needs the live engine (the sim engine has no API server to serve)")
    exp = load_experiment(path).with_overrides(seed=run_kw.pop("seed", None), profile=run_kw.pop("profile", None),
                                               duration=run_kw.pop("duration", None),
                                               implementation=run_kw.pop("implementation", None),
                                               volcano=run_kw.pop("volcano", None),
                                               volcano_source=run_kw.pop("volcano_source", None))
    out = run_kw.pop("out", None)
    out_dir = Path(out) if out is not None else default_out(exp)
    runner = ExperimentRunner(exp, out_dir, redis_url=run_kw.pop("redis_url", None),
                              ray_address=run_kw.pop("ray_address", None), source=str(path), engine="live",
                              console=run_kw.pop("console", None), progress=run_kw.pop("progress", True))
    if run_kw:
        raise TypeError(f"run_with_kube_api: unexpected options {sorted(run_kw)}")
    life = runner.life
    state: dict[str, Any] = {}
    start_redis, cleanup = life.start_redis, life.cleanup

    def start_redis_then_front() -> None:
        start_redis()
        from kube_api.server import ThreadedFront, write_kubeconfig
        front = ThreadedFront(life.redis_url, life.prefix, api_server=life.api_server, host=address,
                              log_dir=runner.out / "kube-api", keep_logs=False).start()
        state["front"] = front
        try:
            ep = front.add_endpoint("observer", port=port)
        except OSError as e:
            raise BadInput(f"--kube-api: cannot listen on {address}:{port}: {e}") from None
        write_kubeconfig(runner.out / "kubeconfig", ep.url)
        runner.console.print(f"kube-api: {ep.url} (kubeconfig {runner.out / 'kubeconfig'})")

    def cleanup_front_too() -> None:
        front = state.pop("front", None)
        if front is not None:
            try:
                front.stop()
            except Exception:  # noqa: BLE001
                pass
        cleanup()

    life.start_redis = start_redis_then_front
    life.cleanup = cleanup_front_too
    outcome = runner.run()
    return EXIT_INTERRUPTED if outcome.interrupted else 0
