"""Start (and stop) a local Ray bound to 127.0.0.1, or connect to a given Ray cluster.

Why the environment dance (measured on Ray 2.60 with ``ss -ltnp``):

* Ray 2.60 on Linux binds gcs_server, raylet and workers on ``*:<port>`` and advertises the VM's
  IP; ``_node_ip_address="127.0.0.1"`` is rewritten. Only ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``
  (which makes ``services.get_node_ip_address()`` answer the loopback IP) makes every socket bind
  127.0.0.1. Ray reads it into ``ray_constants.ENABLE_RAY_CLUSTER`` at import time, so we set the
  variable *and* the already-imported constant, before ``ray.init``; child processes inherit the
  variable.
* Ray 2.60 turns token auth on by default and writes ``~/.ray/auth_token``: ``RAY_AUTH_MODE=disabled``
  keeps files out of the home folder (loopback-only makes the token pointless here).
* Session files go to a private temp folder (``_temp_dir``), removed at stop. It is short because
  Unix socket paths are limited to 107 bytes.
* ``local_mode`` no longer exists; actors hold 0 CPU, so ``num_cpus`` only caps tasks.
* A driver killed with SIGKILL takes the GCS and the raylet with it, but ``ray::DashboardAgent`` and
  ``ray::RuntimeEnvAgent`` live on (parent 1): every process a local start spawns is recorded in
  the run's process ledger (``ha.runtime.ledger``) so that the next run or ``ha-testbed cleanup``
  stops them. A given ``ray_address`` starts nothing here, so nothing is recorded.
"""
from __future__ import annotations

import importlib.util
import logging
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field

__all__ = ["LocalRay", "start_ray", "stop_ray", "loopback_env", "ray_process_pids",
           "listening_sockets", "is_loopback"]

log = logging.getLogger(__name__)

# Environment that keeps a local Ray on loopback and out of ~ (set before ray starts anything).
LOOPBACK_ENV = {
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    "RAY_AUTH_MODE": "disabled",
    # Quieter drivers on a loaded 2-core machine; the usage-stats prompt/thread is not wanted.
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_DEDUP_LOGS": "1",
}


def loopback_env() -> dict[str, str]:
    """Set (and return) the environment that binds a local Ray to 127.0.0.1."""
    os.environ.update(LOOPBACK_ENV)
    try:  # Ray may already be imported: its constant was computed from the old environment.
        from ray._private import ray_constants
        ray_constants.ENABLE_RAY_CLUSTER = False
    except Exception:  # pragma: no cover - private module moved in a future Ray
        log.warning("could not patch ray_constants.ENABLE_RAY_CLUSTER; relying on the env var")
    return dict(LOOPBACK_ENV)


@dataclass
class LocalRay:
    """Handle of a Ray session started (or joined) by :func:`start_ray`."""
    address: str | None                 # None: we started a local cluster
    temp_dir: str | None = None         # our private session folder (local only)
    started_here: bool = False
    node_ip: str | None = None
    pids: list[int] = field(default_factory=list)

    def stop(self) -> None:
        stop_ray(self)

    def __enter__(self) -> "LocalRay":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


# what the Ray Client's connection error says when the head failed to start this client's server
_CLIENT_START_FAILED = ("client server failed", "Initialization failure from server")


def start_ray(ray_address: str | None = None, *, num_cpus: int = 2,
              object_store_memory: int | None = 200 * 1024 * 1024,
              log_to_driver: bool = False, namespace: str = "ha-testbed") -> LocalRay:
    """Start a local Ray bound to 127.0.0.1 (``ray_address`` None) or connect to ``ray_address``
    (``ray://host:10001`` or ``host:6379``). Idempotent if Ray is already initialised."""
    if ray_address is None:
        loopback_env()
    import ray
    if ray.is_initialized():
        ctx = ray.get_runtime_context()
        return LocalRay(address=ray_address, started_here=False,
                        node_ip=getattr(ctx, "gcs_address", None))
    if ray_address is not None:
        if ray_address.startswith("ray://") and importlib.util.find_spec("grpc") is None:
            raise ConnectionError(
                "the Ray Client (ray://) needs the `client` extra of ray: pip install 'ray[client]'"
                " (or give the GCS address host:6379 from a machine that runs a Ray node)")
        for attempt in (1, 2, 3):
            try:
                ray.init(address=ray_address, namespace=namespace, log_to_driver=log_to_driver,
                         logging_level=logging.WARNING)
                break
            except ConnectionError as e:
                # the head's client proxy starts one server process per client; on a loaded
                # machine that start has been seen to fail ("Starting Ray client server failed";
                # or "Initialization failure from server" when the proxy's own wait for the new
                # process met it as a zombie) and work on the next connection: two more tries
                if attempt == 3 or not any(m in str(e) for m in _CLIENT_START_FAILED):
                    raise
                log.warning("Ray Client at %s: %s; connecting once more", ray_address,
                            str(e).strip().splitlines()[-1] if str(e).strip() else e)
                time.sleep(2.0)
        return LocalRay(address=ray_address, started_here=False)
    temp_dir = tempfile.mkdtemp(prefix="htray-")
    before = set(_child_pids())
    kw = {}
    if object_store_memory:
        kw["object_store_memory"] = object_store_memory
    ray.init(num_cpus=num_cpus, include_dashboard=False, namespace=namespace,
             log_to_driver=log_to_driver, logging_level=logging.WARNING,
             _temp_dir=temp_dir, _node_ip_address="127.0.0.1", **kw)
    node = ray._private.worker._global_node
    handle = LocalRay(address=None, temp_dir=temp_dir, started_here=True,
                      node_ip=getattr(node, "node_ip_address", None))
    # Ray's processes are the children that appeared during init (not, e.g., an embedded Redis).
    handle.pids = sorted(set(_child_pids()) - before)
    from ha.runtime import ledger
    for pid in handle.pids:
        ledger.add(pid, "ray")
    if handle.node_ip not in ("127.0.0.1", None):  # defensive: refuse to run exposed
        stop_ray(handle)
        raise RuntimeError(f"local Ray advertises {handle.node_ip}, not 127.0.0.1; refusing to run")
    return handle


def stop_ray(handle: LocalRay | None = None) -> None:
    """``ray.shutdown()``; remove our private session folder if we made one."""
    import ray
    if ray.is_initialized():
        ray.shutdown()
    if handle is not None and handle.temp_dir:
        shutil.rmtree(handle.temp_dir, ignore_errors=True)
        handle.temp_dir = None


def _child_pids() -> list[int]:
    import psutil
    return [p.pid for p in psutil.Process().children(recursive=True)]


def ray_process_pids(handle: LocalRay | None = None) -> list[int]:
    """PIDs of the local Ray session started from this driver, found by parentage (not by name):
    this driver (its core worker listens too) plus every descendant except those that existed
    before ``ray.init`` (``handle.pids`` minus processes alive then) — new workers included."""
    import psutil
    me = psutil.Process()
    kids = [p.pid for p in me.children(recursive=True)]
    if handle is not None and handle.started_here:
        known = set(handle.pids)
        # Workers started later are children of the raylet: keep descendants of Ray's own PIDs.
        extra = set()
        for pid in handle.pids:
            try:
                extra.update(c.pid for c in psutil.Process(pid).children(recursive=True))
            except psutil.NoSuchProcess:
                continue
        kids = sorted(known | extra)
    return [me.pid] + sorted(kids)


def is_loopback(ip: str) -> bool:
    """127.0.0.0/8, ::1 or their IPv4-mapped form (Ray's gRPC servers bind ``[::ffff:127.0.0.1]``)."""
    import ipaddress
    addr = ipaddress.ip_address(ip.split("%")[0])
    if getattr(addr, "ipv4_mapped", None):
        addr = addr.ipv4_mapped
    return addr.is_loopback


def listening_sockets(pids: list[int]) -> list[tuple[int, str, str, int]]:
    """(pid, process name, ip, port) of every TCP/UDP socket in LISTEN state (TCP) or bound (UDP)
    owned by these PIDs."""
    import psutil
    out = []
    for pid in pids:
        try:
            p = psutil.Process(pid)
            name = p.name()
            conns = p.net_connections(kind="inet")
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
        for c in conns:
            if not c.laddr:
                continue
            if c.type == 1 and c.status != psutil.CONN_LISTEN:  # SOCK_STREAM: listeners only
                continue
            if c.type == 2 and c.raddr:  # connected UDP sockets are not listeners
                continue
            out.append((pid, name, c.laddr.ip, c.laddr.port))
    return out
