"""One external scheduler instance's configuration, its command line, and the handle of one life.

:class:`ExternalConfig` is what the supervisor needs (engine-neutral, picklable for Ray): the
binary, the instance's endpoint of the Kubernetes API front, the experiment's flags. Every path is
absolute and on the driver's host (the front, the results folder and the process share one
machine: external instances need a local Ray).

:class:`ProcessHandle` is one life of the process and where its traces are; the observation side
(``ha.runtime.external.observe``) reads them:

* ``pid``: SIGUSR1 makes vc-scheduler dump its cache as JSON into ``dump_dir``
  (``snapshot-<unix seconds>.json``); the directory is the life's own (a temp dir: the unix-socket
  path of ``DEBUG_SOCKET_DIR`` must stay short, and dumps are transient);
* ``metrics_url`` (``--listen-address``, ``--enable-metrics``), ``healthz_url``;
* ``request_log`` / ``delivery_log``: the instance's endpoint's ``requests.jsonl`` and
  ``delivery.log`` (docs/kube-api.md), shared by all lives of the instance (the endpoint outlives
  them); ``started_at`` (wall clock) says where this life's part begins;
* ``log_path``: vc-scheduler's stdout and stderr, every life appended, each after a header line.

:func:`volcano_argv` builds the command line from the experiment (docs: README, "Against the real
Volcano scheduler").
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ha.runtime.external.observe.session_log import VMODULE_FLAG

__all__ = ["ExternalConfig", "ProcessHandle", "volcano_argv", "format_go_duration"]


@dataclass(frozen=True)
class ExternalConfig:
    name: str                         # the instance ("scheduler-1"); its endpoint has the same name
    binary: str                       # the vc-scheduler executable
    version: str                      # what was built ("v1.14.1", "source:/path")
    endpoint_url: str                 # http://127.0.0.1:PORT of the instance's endpoint
    kubeconfig: str                   # a kubeconfig naming endpoint_url (written by the engine)
    workdir: str                      # <results>/volcano/<name>/ : scheduler.conf
    log_path: str                     # <results>/volcano/<name>.log
    request_log: str                  # <results>/kube-api/<name>/requests.jsonl
    delivery_log: str                 # <results>/kube-api/<name>/delivery.log
    scheduler_conf_yaml: str          # the --scheduler-conf file's text (ha.scheduler.volcano_conf)
    redis_url: str = ""               # the store, read for the Lease (who holds it)
    prefix: str = "ht"
    api_server: Any = None            # cluster_state.apiserver.ApiServerConfig (None: defaults)
    leader_elect: bool = True
    lease_duration: float = 15.0
    lease_renew_deadline: float = 10.0
    lease_retry: float = 2.0
    lease_name: str = "volcano"
    lease_namespace: str = "volcano-system"
    period_s: float = 1.0
    scheduler_name: str = "volcano"
    verbosity: int = 2
    restart_delay_s: float = 1.0      # an exited process is started again after this (kubelet)
    extra_args: tuple[str, ...] = ()
    tmp_root: str = ""                # where each life's dump and socket dirs go ("" = the system's temp
                                      # dir); the engine removes it at the end, also after a kill

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("api_server", None)
        d.pop("scheduler_conf_yaml", None)
        return d


@dataclass
class ProcessHandle:
    instance: str
    life: int                         # 0 for the first process of this supervisor, +1 per restart
    pid: int | None
    argv: list[str]
    dump_dir: str
    socket_dir: str
    metrics_url: str
    healthz_url: str
    endpoint_url: str
    request_log: str
    delivery_log: str
    log_path: str
    started_at: float                 # wall clock (time.time()) when this life was spawned
    identity: str | None = None       # the Lease holderIdentity it won with (once it led)
    exit_code: int | None = None
    exit_reason: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def format_go_duration(seconds: float) -> str:
    """A Go ``time.Duration`` flag value: whole milliseconds ("1500ms", "4s")."""
    ms = int(round(seconds * 1000))
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


def volcano_argv(cfg: ExternalConfig, *, conf_path: str, listen: str, healthz: str,
                 dump_dir: str) -> list[str]:
    """vc-scheduler's command line for one life of instance ``cfg.name``."""
    argv = [
        cfg.binary,
        f"--kubeconfig={cfg.kubeconfig}",
        f"--scheduler-conf={conf_path}",
        f"--scheduler-name={cfg.scheduler_name}",
        f"--schedule-period={format_go_duration(cfg.period_s)}",
        f"--leader-elect={'true' if cfg.leader_elect else 'false'}",
        f"--listen-address={listen}",
        "--enable-metrics=true",
        "--enable-healthz=true",
        f"--healthz-address={healthz}",
        "--cache-dumper=true",
        f"--cache-dump-dir={dump_dir}",
        f"-v={int(cfg.verbosity)}",
        # "Start scheduling ..." of every session (level 4 in scheduler.go only): the decisions'
        # sessions (observe/session_log.py)
        VMODULE_FLAG,
    ]
    if cfg.leader_elect:
        argv += [
            f"--leader-elect-lease-duration={format_go_duration(cfg.lease_duration)}",
            f"--leader-elect-renew-deadline={format_go_duration(cfg.lease_renew_deadline)}",
            f"--leader-elect-retry-period={format_go_duration(cfg.lease_retry)}",
            f"--leader-elect-resource-namespace={cfg.lease_namespace}",
            f"--leader-elect-resource-name={cfg.lease_name}",
        ]
    return argv + list(cfg.extra_args)
