"""Process-level chaos a driver's :class:`chaos.targets.Targets` uses: ``kill`` / ``pause`` of a
process by its PID (never by name), ``node-kill`` of a Ray node that runs on this machine (its
raylet, found by the port it listens on, and every process under it) and ``redis-restart`` of an
embedded Redis with persistence.
"""
from __future__ import annotations

import os
import signal
import time
from typing import Any

__all__ = ["pause_pid", "resume_pid", "kill_pid", "pid_alive", "pid_state", "wait_pid_state",
           "restart_redis", "NotHere", "raylet_process", "kill_ray_node"]


def _check_pid(pid: Any) -> int:
    if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 1:
        raise ValueError(f"not a process id we may signal: {pid!r}")
    if pid == os.getpid():
        raise ValueError(f"refusing to signal our own process ({pid})")
    return pid


def pause_pid(pid: int) -> None:
    """SIGSTOP: the process stops dead (no cleanup, its lease renewals stop: Jepsen's :pause)."""
    os.kill(_check_pid(pid), signal.SIGSTOP)


def resume_pid(pid: int) -> None:
    os.kill(_check_pid(pid), signal.SIGCONT)


def kill_pid(pid: int, sig: int = signal.SIGKILL) -> None:
    """SIGKILL by default: a crash, not a shutdown (the lease is not released)."""
    os.kill(_check_pid(pid), sig)


def pid_alive(pid: int) -> bool:
    st = pid_state(pid)
    return st is not None and st not in ("Z", "X")


def pid_state(pid: int) -> str | None:
    """The process state letter from /proc (R, S, T = stopped, Z = zombie ...), None if gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            data = fh.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # the command name is in parentheses and may contain spaces
    return data[data.rindex(")") + 2]


def wait_pid_state(pid: int, states: str | None, timeout: float = 10.0) -> bool:
    """Poll until the process is in one of ``states`` (None: gone or zombie)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        st = pid_state(pid)
        if (states is None and (st is None or st in "ZX")) or (states and st and st in states):
            return True
        time.sleep(0.02)
    return False


def restart_redis(server: Any, down_s: float = 0.0) -> None:
    """Stop and start an EmbeddedRedis on the same port. Its data survives only if it was started
    with ``persistence=True`` (AOF): the runner turns that on when the schedule has redis-restart."""
    if not getattr(server, "persistence", False):
        raise ValueError("redis-restart needs an EmbeddedRedis started with persistence=True "
                         "(otherwise the API server's state would be lost)")
    server.restart(down_s)


class NotHere(LookupError):
    """The Ray node's raylet is not a process of this machine (the message says why)."""


def _local_addresses() -> set[str]:
    import psutil
    out = {"127.0.0.1", "::1", "localhost"}
    for addrs in psutil.net_if_addrs().values():
        out.update(a.address.split("%")[0] for a in addrs)
    return out


def raylet_process(address: str, port: int):
    """The ``psutil.Process`` of the raylet (Ray's node manager) that listens on ``address:port``
    on this machine — Ray's GCS lists each node with that address and port. :class:`NotHere` when
    the address is not this machine's or no process here listens there."""
    import psutil
    if address not in _local_addresses():
        raise NotHere(f"its raylet listens on {address}:{port}, not an address of this machine")
    # gRPC listens on IPv6 sockets: 127.0.0.1 shows as the IPv4-mapped ::ffff:127.0.0.1
    ips = {address, f"::ffff:{address}", "0.0.0.0", "::"}
    pids = sorted({c.pid for c in psutil.net_connections(kind="tcp")
                   if c.status == psutil.CONN_LISTEN and c.pid and c.laddr and c.laddr.port == port
                   and c.laddr.ip in ips})
    if not pids:
        raise NotHere(f"no process of this machine listens on {address}:{port}")
    proc = psutil.Process(pids[0])
    if proc.name() != "raylet":   # a port reused since Ray listed it: not ours to kill
        raise NotHere(f"{address}:{port} is held by {proc.name()} (pid {proc.pid}), not a raylet")
    return proc


def kill_ray_node(address: str, port: int) -> tuple[int, list[int]]:
    """SIGKILL a Ray node of this machine as a crash would take it: its raylet and every process
    under it (workers and the actors they run, the node's agents), each by PID (psutil refuses a
    PID reused meanwhile). Returns (the raylet's PID, the other PIDs killed)."""
    import psutil
    raylet = raylet_process(address, port)
    under = raylet.children(recursive=True)
    killed = []
    for p in [raylet] + under:
        try:
            _check_pid(p.pid)
            p.kill()
            if p is not raylet:
                killed.append(p.pid)
        except psutil.NoSuchProcess:
            pass
    return raylet.pid, sorted(killed)
