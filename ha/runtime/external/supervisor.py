"""The supervisor of one external scheduler instance: a ``vc-scheduler`` process run as a Deployment's
pod would run it, behind the instance seam (``ha.runtime.external.protocol``).

* ``start()`` writes the ``--scheduler-conf`` file and spawns the process (``volcano_argv``) with its
  own ``--listen-address`` / ``--healthz-address`` (free loopback ports), ``DEBUG_SOCKET_DIR`` and
  cache-dump directory (a temp dir per life), its stdout and stderr appended to ``log_path``. The
  process gets ``PR_SET_PDEATHSIG(SIGKILL)``: when the supervisor's process dies (``ray.kill``, a
  node-kill) the scheduler dies with it, as a container dies with its pod.
* A watcher follows the process and its log. Volcano's own semantics are recorded, not papered
  over: it creates the ``root`` and ``default`` queues at start, wins the Lease (``successfully
  acquired lease``) and only then starts its informers (a cold standby), and exits when it loses
  the lease (``klog.Fatalf("leaderelection lost")``). An exit is a life's end: after
  ``restart_delay_s`` the process is started again (the kubelet restarting the container), the
  incarnation + 1, and ``stats()`` says why the last one ended (``last_error``, ``exits``); the
  recorder writes that life into ``lives.jsonl``.
* Leadership: a life leads from the log line ``successfully acquired lease`` until it exits, while
  the Lease (read from the store) still names the identity it won with; that identity
  (``<hostname>_<uuid>``, which Volcano makes itself; the process runs in a UTS namespace whose
  hostname is the instance's name, as a pod's is its name, so ``scheduler-1_<uuid>``) is learnt
  from the Lease at that moment and reported (``stats()["identity"]``, ``identities``).
* ``observe()`` gives the seam's tick: the digest, decisions and metrics come from
  ``ha.runtime.external.observe.observe(handle, decisions_since)`` (the cache dump, the endpoint's
  request log, /metrics); without it the digest holds leadership and life only.

Chaos on watches and API calls acts at the instance's endpoint of the front (``kube_api``), never
here: the seam's typed chaos door (``chaos_set_epoch``, ``chaos_activate``, ...) answers empty.
"""
from __future__ import annotations

import asyncio
import ctypes
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from ha.runtime.external.observe.tail import complete_lines
from ha.runtime.external.process import ExternalConfig, ProcessHandle, volcano_argv

__all__ = ["ExternalScheduler", "create_external_actor", "LifeEnd"]

log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1
# client-go's line when the Lease is won: "successfully acquired lease volcano-system/volcano" up to
# Kubernetes 1.34's client-go (Volcano v1.14), structured from 1.35's on (Volcano v1.15):
# "Successfully acquired lease" lock="volcano-system/volcano"
LEASE_ACQUIRED = re.compile(r'[Ss]uccessfully acquired lease"?\s+(?:lock=")?([^\s"]+)')
_LOST = "leaderelection lost"
_FATAL = re.compile(r"^(F\d{4} .*|panic: .*|fatal error: .*)$")
_QUEUES = "Creating default queue and root queue"
# vc-scheduler that cannot use its --scheduler-conf (an unknown action or plugin, bad yaml) logs an
# error and schedules with its built-in default configuration: a run that would measure a
# configuration nobody asked for. The life is ended at once, with vc-scheduler's reason. The error
# line quotes the whole configuration, so the reason (after " is invalid: ") comes lines later.
_CONF_REFUSED_START = re.compile(r"^E\d{4} .*\] Scheduler config ")
_CONF_REFUSED_WHY = " is invalid: "
_STOP_GRACE_S = 5.0


_CLONE_NEWUTS = 0x04000000


def _child_setup(hostname: str):
    """preexec_fn (runs in the child before exec): die with the supervisor, and take the instance's
    name as hostname in a UTS namespace of its own, as a pod's hostname is its name. Volcano's Lease
    identity is ``<hostname>_<uuid>``, so the Lease then names the instance as a model instance's
    does. Without the privilege for a namespace the host's name stays (the ``leading`` lives map
    identities to instances either way)."""
    name = hostname.encode()

    def setup() -> None:
        try:
            libc = ctypes.CDLL("libc.so.6", use_errno=True)
        except OSError:
            return
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if libc.unshare(_CLONE_NEWUTS) == 0:
            libc.sethostname(name, len(name))
    return setup


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class LifeEnd:
    life: int
    pid: int | None
    t: float                    # wall clock
    code: int | None
    reason: str
    was_leader: bool

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class _Life:
    handle: ProcessHandle
    proc: subprocess.Popen
    log_offset: int              # where this life's part of the log starts
    acquired_at: float | None = None
    queues_at: float | None = None
    last_fatal: str | None = None
    conf_quoted: bool = False    # vc-scheduler began logging its --scheduler-conf as invalid
    conf_refused: str | None = None
    ended: LifeEnd | None = None
    events: list[tuple[float, str]] = field(default_factory=list)


class ExternalScheduler:
    """One external scheduler instance (plain asyncio; :func:`create_external_actor` is its Ray actor)."""

    def __init__(self, cfg: ExternalConfig):
        self.cfg = cfg
        self.generation = uuid.uuid4().hex[:8]
        self.life: _Life | None = None
        self.ends: list[LifeEnd] = []
        self.identities: dict[str, int] = {}       # Lease identity -> life
        self.started_at: float | None = None
        self.leader_transitions = 0
        self.conf_refused: str | None = None       # why vc-scheduler refused --scheduler-conf
        self._stopping = False
        self._watcher: asyncio.Task | None = None
        self._api = None
        self._log_pos = 0
        self._conf_path = os.path.join(cfg.workdir, "scheduler.conf")
        # one observation at a time, on a thread of its own: ticks that arrive while a sample runs
        # share it (a slow cache dump never piles up calls, nor starves is_leader / pid of threads)
        self._sampling: asyncio.Future | None = None
        # what the last observation added to the stats (counters, metrics): the final stats keep it
        self._observed_stats: dict[str, Any] = {}
        self._sampler = None

    # ------------------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        if self.life is not None:
            return
        os.makedirs(self.cfg.workdir, exist_ok=True)
        os.makedirs(os.path.dirname(self.cfg.log_path) or ".", exist_ok=True)
        with open(self._conf_path, "w") as f:
            f.write(self.cfg.scheduler_conf_yaml)
        self.started_at = time.time()
        self._spawn(0)
        self._watcher = asyncio.get_running_loop().create_task(self._watch(), name=f"{self.cfg.name}-watch")

    def _spawn(self, n: int) -> None:
        cfg = self.cfg
        if cfg.tmp_root:
            os.makedirs(cfg.tmp_root, exist_ok=True)
        tmp = tempfile.mkdtemp(prefix=f"{cfg.name}-{n}-", dir=cfg.tmp_root or None)
        dump_dir, sock_dir = os.path.join(tmp, "dump"), os.path.join(tmp, "sock")
        os.makedirs(dump_dir)
        os.makedirs(sock_dir)
        listen, healthz = f"127.0.0.1:{_free_port()}", f"127.0.0.1:{_free_port()}"
        argv = volcano_argv(cfg, conf_path=self._conf_path, listen=listen, healthz=healthz, dump_dir=dump_dir)
        with open(cfg.log_path, "ab") as f:
            offset = f.tell()
            # a restart by the engine is a new supervisor (its generation id) whose lives count from 0
            f.write(f"=== {cfg.name} life {n} at {time.time():.3f} (supervisor {self.generation}, pid "
                    f"{os.getpid()}): {' '.join(argv)}\n".encode())
        out = open(cfg.log_path, "ab")
        env = dict(os.environ, DEBUG_SOCKET_DIR=sock_dir)
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                    env=env, cwd=cfg.workdir, start_new_session=True,
                                    preexec_fn=_child_setup(cfg.name))
        finally:
            out.close()
        handle = ProcessHandle(instance=cfg.name, life=n, pid=proc.pid, argv=argv, dump_dir=dump_dir,
                               socket_dir=sock_dir, metrics_url=f"http://{listen}/metrics",
                               healthz_url=f"http://{healthz}/healthz", endpoint_url=cfg.endpoint_url,
                               request_log=cfg.request_log, delivery_log=cfg.delivery_log,
                               log_path=cfg.log_path, started_at=time.time(), extra={"tmp": tmp})
        self.life = _Life(handle=handle, proc=proc, log_offset=offset)
        if not cfg.leader_elect:
            # without leader election vc-scheduler runs its informers and sessions from the start
            self.life.acquired_at = time.time()
        log.info("%s: vc-scheduler life %d pid %d", cfg.name, n, proc.pid)

    async def _watch(self) -> None:
        """Follow the log and the process; start the next life after an exit."""
        while not self._stopping:
            await asyncio.sleep(0.1)
            life = self.life
            if life is None:
                continue
            await self._read_log(life)
            code = life.proc.poll()
            if code is None or life.ended is not None:
                continue
            await self._read_log(life)
            self._end(life, code)
            if self._stopping:
                return
            await asyncio.sleep(self.cfg.restart_delay_s)
            if self._stopping:
                return
            self._spawn(life.handle.life + 1)

    def _end(self, life: _Life, code: int | None, reason: str | None = None) -> None:
        h = life.handle
        if reason is None:
            if life.last_fatal and _LOST in life.last_fatal:
                reason = "leaderelection lost"
            elif life.last_fatal:
                reason = life.last_fatal[-300:]
            elif code is not None and code < 0:
                reason = f"signal {signal.Signals(-code).name}"
            else:
                reason = f"exit {code}"
        end = LifeEnd(life=h.life, pid=h.pid, t=time.time(), code=code, reason=reason,
                      was_leader=life.acquired_at is not None)
        life.ended = end
        h.exit_code, h.exit_reason = code, reason
        self.ends.append(end)
        tmp = h.extra.get("tmp")
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
        log.info("%s: life %d ended: %s", self.cfg.name, h.life, reason)

    async def _read_log(self, life: _Life) -> None:
        # complete lines of this life's part of the log only: a line an ended life left half-written
        # (killed mid-write) is never glued to the next life's first line
        try:
            lines, self._log_pos = complete_lines(self.cfg.log_path, max(self._log_pos, life.log_offset), 4 << 20)
        except OSError:
            return
        for raw in lines:
            line = raw.decode("utf-8", "replace")
            if life.acquired_at is None and LEASE_ACQUIRED.search(line):
                life.acquired_at = time.time()
                life.events.append((life.acquired_at, "acquired"))
                self.leader_transitions += 1
                await self._learn_identity(life)
            elif life.queues_at is None and _QUEUES in line:
                life.queues_at = time.time()
            if _FATAL.match(line):
                life.last_fatal = line
            if _CONF_REFUSED_START.match(line):
                life.conf_quoted = True
            if life.conf_quoted and _CONF_REFUSED_WHY in line and life.conf_refused is None:
                why = " ".join(line.split(_CONF_REFUSED_WHY, 1)[1].split())
                life.conf_refused = why
                life.last_fatal = f"vc-scheduler refused the scheduler configuration: {why}"
                self.conf_refused = life.last_fatal
                if life.proc.poll() is None:
                    life.proc.kill()   # this life's own process (its PID): never by name

    # ------------------------------------------------------------------------------ the Lease
    def _lease_api(self):
        if self._api is None and self.cfg.redis_url:
            from cluster_state.apiserver import ApiServerConfig
            conf = self.cfg.api_server or ApiServerConfig()
            self._api = conf.sync_client(self.cfg.redis_url, self.cfg.prefix)
        return self._api

    def _lease_holder(self) -> str | None:
        api = self._lease_api()
        if api is None:
            return None
        try:
            obj = api.get("Lease", self.cfg.lease_name, self.cfg.lease_namespace)
        except Exception:  # noqa: BLE001 — no Lease yet, or the store away: nobody known
            return None
        return ((obj.get("spec") or {}).get("holderIdentity")) or None

    async def _learn_identity(self, life: _Life) -> None:
        holder = await asyncio.to_thread(self._lease_holder)
        if holder:
            life.handle.identity = holder
            self.identities[holder] = life.handle.life

    # ------------------------------------------------------------------------------ queries
    def running(self) -> bool:
        life = self.life
        return life is not None and life.ended is None and life.proc.poll() is None

    def is_leader_now(self, *, check_lease: bool = True) -> bool:
        life = self.life
        if not self.running() or life.acquired_at is None:
            return False
        if not self.cfg.leader_elect:
            return True
        if not check_lease or life.handle.identity is None:
            return True
        holder = self._lease_holder()
        return holder is None or holder == life.handle.identity

    async def is_leader(self) -> bool:
        return await asyncio.to_thread(self.is_leader_now)

    @property
    def incarnation(self) -> int:
        return self.life.handle.life if self.life is not None else 0

    async def pid(self) -> int:
        return self.life.handle.pid if self.life is not None else os.getpid()

    def _node_id(self) -> str | None:
        return None

    async def placement(self) -> dict:
        return {"node_id": self._node_id(), "host": socket.gethostname(),
                "pid": self.life.handle.pid if self.life is not None else None,
                "supervisor_pid": os.getpid()}

    async def handle(self) -> dict:
        """The current life's :class:`ProcessHandle` as a dict (None before start)."""
        return self.life.handle.to_dict() if self.life is not None else None

    async def stats(self) -> dict:
        life = self.life
        h = life.handle if life is not None else None
        leading = await asyncio.to_thread(self.is_leader_now)
        last = self.ends[-1] if self.ends else None
        return {**self._observed_stats, "name": self.cfg.name, "implementation": "volcano", "version": self.cfg.version,
                "pid": h.pid if h else None, "running": self.running(), "is_leader": leading,
                "synced": self._holds_cache(),
                "incarnation": self.incarnation, "restarts": len(self.ends),
                "leader_transitions": self.leader_transitions,
                "identity": h.identity if h else None, "identities": dict(self.identities),
                "hostname_is_name": (h.identity.startswith(f"{self.cfg.name}_") if h and h.identity else None),
                "last_error": last.reason if last else None,
                "conf_refused": self.conf_refused,
                "exits": [e.to_dict() for e in self.ends[-20:]],
                "queues_created_at": life.queues_at if life else None,
                "became_leader_at": life.acquired_at if life else None,
                "started_at": self.started_at, "generation": self.generation,
                "log_path": self.cfg.log_path}

    def _holds_cache(self) -> bool:
        """Whether the current life can hold a cache: it is running and has won the Lease. A life
        that has ended (a panic, a fatal, a kill of the process) holds none until the next one
        leads: during ``restart_delay_s`` ``self.life`` is still the ended one."""
        life = self.life
        return life is not None and life.acquired_at is not None and self.running()

    def _digest(self, leading: bool) -> dict:
        return {"name": self.cfg.name, "is_leader": leading, "incarnation": self.incarnation,
                "synced": self._holds_cache(), "t": time.time(), "implementation": "volcano"}

    def _no_cache_reason(self) -> str:
        """Why the digest of a tick without a sample holds no cache (``unobserved["cache"]``)."""
        life = self.life
        if life is None:
            return "vc-scheduler not started"
        end = life.ended
        if end is not None or life.proc.poll() is not None:
            why = end.reason if end is not None else f"exit {life.proc.poll()}"
            return (f"vc-scheduler (pid {life.handle.pid}) exited ({why[:200]}); the next life starts "
                    f"after {self.cfg.restart_delay_s:g}s and holds no cache until it leads")
        return "cold standby: vc-scheduler holds no cache until it leads"

    async def observe(self, decisions_since: int = 0) -> dict:
        stats = await self.stats()
        digest = self._digest(stats["is_leader"])
        out: dict[str, Any] = {"digest": digest, "stats": stats, "decisions": [], "staleness_ms": [],
                               "incarnation": self.incarnation, "generation": self.generation}
        if not (self.life is not None and self.running()):
            # no process to sample: the tick records no cache (never an empty one as synced, which
            # the checkers would count as every task of the cluster missing from it)
            digest["synced"] = False
            digest["unobserved"] = {"cache": self._no_cache_reason()}
        else:
            # a broken observation module is a loud error, never a run recorded without samples
            from ha.runtime.external import observe as observation
            try:
                got = await self._sample(observation, decisions_since)
            except Exception as e:  # noqa: BLE001 — a failed sample is a gap, not a crash
                stats["observe_error"] = str(e)[:300]
                got = {}
                digest["synced"] = False
                digest["unobserved"] = {"cache": f"observation failed: {str(e)[:200]}"}
            for k, v in (got or {}).items():
                if k == "digest":
                    digest.update(v or {})
                    digest["is_leader"] = stats["is_leader"]
                elif k == "stats":
                    self._observed_stats = dict(v or {})
                    stats.update(v or {})
                else:
                    out[k] = v
        return out

    async def _sample(self, observation, decisions_since: int) -> dict:
        from concurrent.futures import ThreadPoolExecutor
        fut = self._sampling
        if fut is None or fut.done():
            if self._sampler is None:
                self._sampler = ThreadPoolExecutor(1, thread_name_prefix=f"{self.cfg.name}-observe")
            loop = asyncio.get_running_loop()
            fut = self._sampling = loop.run_in_executor(self._sampler, observation.observe,
                                                        self.life.handle, decisions_since)
        got = await asyncio.shield(fut)
        if got and decisions_since:
            got = dict(got)
            got["decisions"] = [d for d in got.get("decisions") or [] if int(d.get("seq") or 0) > decisions_since]
        return got

    async def decisions(self, since: int = 0) -> list[dict]:
        return (await self.observe(since)).get("decisions") or []

    # the typed chaos door answers empty: the endpoint of the front carries this instance's chaos
    async def chaos_set_epoch(self, t0_wall: float) -> dict:
        return {}

    async def chaos_activate(self, sf, watch: bool = True, api: bool = True, kinds: list | None = None) -> dict:
        return {}

    async def chaos_deactivate(self, index: int, watch: bool = True, api: bool = True,
                               kinds: list | None = None) -> dict:
        return {}

    async def chaos_expire_now(self, kinds: list | None = None) -> dict:
        return {}

    async def set_clock_rate(self, rate: float) -> None:
        raise RuntimeError(f"{self.cfg.name}: clock-rate cannot act on an external process")

    async def ping(self) -> str:
        return self.cfg.name

    async def wait_leading(self, timeout: float = 60.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.life is not None and self.life.acquired_at is not None and self.running():
                return True
            await asyncio.sleep(0.1)
        return False

    # ------------------------------------------------------------------------------ stop
    async def stop(self) -> None:
        """SIGTERM (after SIGCONT: a paused process cannot stop), SIGKILL after a grace."""
        self._stopping = True
        life = self.life
        if life is not None and life.ended is None:
            p = life.proc
            for sig in (signal.SIGCONT, signal.SIGTERM):
                try:
                    p.send_signal(sig)
                except ProcessLookupError:
                    break
            try:
                await asyncio.to_thread(p.wait, _STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                p.kill()
                await asyncio.to_thread(p.wait, 5)
            await self._read_log(life)
            self._end(life, p.returncode, reason="stopped")
        if self._watcher is not None:
            self._watcher.cancel()
            try:
                await self._watcher
            except (asyncio.CancelledError, Exception):  # noqa: BLE001
                pass
            self._watcher = None
        if self._sampler is not None:
            self._sampler.shutdown(wait=False, cancel_futures=True)
            self._sampler = None
        if self._api is not None:
            try:
                self._api.close()
            except Exception:  # noqa: BLE001
                pass
            self._api = None


def create_external_actor(config: ExternalConfig, *, namespace: str | None = None, scheduling_strategy: Any = None):
    """A named Ray async actor supervising ``config``'s process (never restarted by Ray: a restart
    is the engine's, as for a model instance)."""
    import ray

    # the engine's control calls (pid before a kill or pause, is_leader, stop) have a concurrency
    # group of their own: observations waiting on a slow sample never hold them up
    @ray.remote(max_restarts=0, max_task_retries=0, max_concurrency=16,
                concurrency_groups={"control": 8, "observe": 8})
    class ExternalSchedulerActor(ExternalScheduler):
        def _node_id(self) -> str | None:
            return ray.get_runtime_context().get_node_id()

        @ray.method(concurrency_group="observe")
        async def observe(self, decisions_since: int = 0) -> dict:
            return await super().observe(decisions_since)

        @ray.method(concurrency_group="observe")
        async def decisions(self, since: int = 0) -> list[dict]:
            return await super().decisions(since)

        @ray.method(concurrency_group="control")
        async def pid(self) -> int:
            return await super().pid()

        @ray.method(concurrency_group="control")
        async def is_leader(self) -> bool:
            return await super().is_leader()

        @ray.method(concurrency_group="control")
        async def stop(self) -> None:
            return await super().stop()

        @ray.method(concurrency_group="control")
        async def placement(self) -> dict:
            return await super().placement()

        @ray.method(concurrency_group="control")
        async def stats(self) -> dict:
            return await super().stats()

    opts: dict[str, Any] = {"name": config.name}
    if namespace:
        opts["namespace"] = namespace
    if scheduling_strategy is not None:
        opts["scheduling_strategy"] = scheduling_strategy
    return ExternalSchedulerActor.options(**opts).remote(config)
