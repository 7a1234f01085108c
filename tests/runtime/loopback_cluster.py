"""docker-compose.yml's topology without Docker, on one machine, every socket on 127.0.0.1: a Ray
head (``ray start --head`` with the Ray Client server) and worker nodes (``ray start --address``),
each with its own ``--resources`` and temp folder, plus an external redis-server.

Every node runs ``ray start --block``: the processes a node spawns (gcs_server, raylet, agents,
workers) are then descendants of a process we hold; we record them (PID + start time) and stop
them by PID, never by name.

Loopback for a multi-node cluster takes one trick. Ray binds its gRPC servers to 127.0.0.1 only
when the node's IP is 127.0.0.1, which needs ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` (otherwise
``127.0.0.1`` is rewritten to the machine's routable IP and everything binds ``*``); but with that
setting ``ray start --address`` refuses to join ("Multi-node Ray clusters are not supported on
Windows and OSX"). So worker nodes run Ray's own CLI from a launcher that lets the join through and
keeps the given loopback addresses as they are (``WORKER_LAUNCHER``); every process the node
starts inherits the loopback setting. On real machines none of this applies: nodes join with
their real addresses (README, "Beyond one machine").
"""
from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from ha.runtime import ledger

RAY_BIN = str(Path(sys.executable).with_name("ray"))

WORKER_LAUNCHER = (
    "import sys\n"
    "from ray._private import ray_constants, services\n"
    "ray_constants.ENABLE_RAY_CLUSTER = True\n"
    "services.resolve_ip_for_localhost = lambda host: host\n"
    "from ray.scripts.scripts import main\n"
    "sys.argv = ['ray'] + sys.argv[1:]\n"
    "main()\n"
)

ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_AUTH_MODE": "disabled",
       "RAY_USAGE_STATS_ENABLED": "0"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class RayNode:
    name: str
    proc: subprocess.Popen
    temp_dir: str
    log: Path

    def started(self) -> bool:
        return "Ray runtime started" in self.log.read_text(errors="replace")


@dataclass
class LoopbackCluster:
    nodes: list[RayNode] = field(default_factory=list)
    gcs_port: int = 0
    client_port: int = 0
    redis: object = None
    records: list[ledger.ProcessRecord] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)   # extra environment of every node's processes

    @property
    def ray_address(self) -> str:
        return f"ray://127.0.0.1:{self.client_port}"

    @property
    def gcs_address(self) -> str:
        return f"127.0.0.1:{self.gcs_port}"

    def _start_node(self, name: str, argv: list[str], resources: str, worker: bool) -> RayNode:
        tmp = tempfile.mkdtemp(prefix=f"htlc{name[-1]}-")   # short: socket paths <= 107 bytes
        log = Path(tmp) / "ray-start.out"
        cmd = ([sys.executable, "-c", WORKER_LAUNCHER] if worker else [RAY_BIN])
        cmd += ["start", "--block", "--disable-usage-stats", "--node-ip-address=127.0.0.1",
                f"--temp-dir={tmp}", f"--dashboard-agent-listen-port={free_port()}",
                "--num-cpus=1", "--object-store-memory=100000000", f"--resources={resources}"] + argv
        with open(log, "w") as out:
            proc = subprocess.Popen(cmd, env={**os.environ, **ENV, **self.env}, stdout=out,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        node = RayNode(name=name, proc=proc, temp_dir=tmp, log=log)
        self.nodes.append(node)
        self.records.append(ledger.process_record(proc.pid, name))
        return node

    def _wait(self, node: RayNode, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while not node.started():
            if node.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"ray node {node.name} did not start:\n"
                                   + node.log.read_text(errors="replace")[-3000:])
            time.sleep(0.2)
        self._record_descendants()

    def _record_descendants(self) -> None:
        import psutil
        known = {(r.pid, r.create_time) for r in self.records}
        for node in self.nodes:
            try:
                kids = psutil.Process(node.proc.pid).children(recursive=True)
            except psutil.NoSuchProcess:
                continue
            for k in kids:
                rec = ledger.process_record(k.pid, f"{node.name} child")
                if rec is not None and (rec.pid, rec.create_time) not in known:
                    self.records.append(rec)
                    known.add((rec.pid, rec.create_time))

    def start(self, workers: int = 2, timeout_s: float = 90.0) -> "LoopbackCluster":
        from cluster_state.embedded import EmbeddedRedis
        self.redis = EmbeddedRedis().start()
        self.records.append(ledger.process_record(self.redis.pid, "redis-server"))
        self.gcs_port, self.client_port = free_port(), free_port()
        head = self._start_node("ray-head", ["--head", f"--port={self.gcs_port}",
                                             f"--ray-client-server-port={self.client_port}",
                                             "--include-dashboard=false"],
                                '{"ray-head": 1}', worker=False)
        self._wait(head, timeout_s)
        ws = [self._start_node(f"ray-worker-{i}", [f"--address={self.gcs_address}"],
                               f'{{"ray-worker-{i}": 1}}', worker=True)
              for i in range(1, workers + 1)]
        for w in ws:
            self._wait(w, timeout_s)
        return self

    def pids(self) -> list[int]:
        """Every process of the cluster now (new Ray workers included)."""
        self._record_descendants()
        return [r.pid for r in self.records if r.alive()]

    def stop(self) -> list[ledger.ProcessRecord]:
        """SIGTERM each ``ray start --block`` (it stops its node's processes), then stop by PID
        whatever recorded process is still running. Returns what had to be stopped that way."""
        self._record_descendants()
        for node in reversed(self.nodes):
            if node.proc.poll() is None:
                node.proc.terminate()
        for node in reversed(self.nodes):
            try:
                node.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
        left, _ = ledger.stop_processes(self.records, grace_s=5)
        if self.redis is not None:
            self.redis.close()
        import shutil
        for node in self.nodes:
            shutil.rmtree(node.temp_dir, ignore_errors=True)
        return left


@contextlib.contextmanager
def running_cluster(workers: int, env: dict[str, str] | None = None):
    """A started :class:`LoopbackCluster` for a module's tests; on the way out it is stopped and
    every process it recorded must be gone."""
    c = LoopbackCluster(env=env) if env is not None else LoopbackCluster()
    try:
        c.start(workers=workers)
        yield c
    finally:
        recorded = list(c.records)
        c.stop()
        alive = [r for r in recorded if r.alive()]
        assert alive == [], f"left running: {alive}"
