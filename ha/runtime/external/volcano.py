"""The vc-scheduler an experiment asks for (``schedulers.volcano``), ready to run, and the
per-instance configuration of the supervisors.

* :func:`resolve_binary` -- a pinned version's binary from the user cache (built with Go when it is
  missing: ``ha.volcano.build``), or a local checkout built as it is (``source``). A version that
  cannot be built (the Go module proxy refuses it), a missing Go, a failing build: ``BadInput``
  naming why (exit 2).
* :func:`external_config` -- one instance's :class:`ExternalConfig` from the experiment: leader
  election (``--leader-elect``, lease duration / renew / retry, the Lease's namespace and name),
  ``--schedule-period``, ``--scheduler-name``, the ``--scheduler-conf`` text (the one translation
  of the experiment's ``scheduler_conf``, ``ha.scheduler.volcano_conf``), its endpoint, its files
  under the results folder.
"""
from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ha.errors import BadInput
from ha.runtime.external.process import ExternalConfig

__all__ = ["VolcanoBinary", "resolve_binary", "external_config", "CLOSEST_TO_V1140", "built_binary"]

CLOSEST_TO_V1140 = ("v1.14.1 is the closest release to v1.14.0 that this machine's Go module proxy serves "
                    "(volcano.sh/volcano@v1.14.0 answers 403); it is built from the same volcano.sh/apis "
                    "v1.14.0 and Kubernetes v1.34.1 (docs/real-volcano-build.md)")


@dataclass(frozen=True)
class VolcanoBinary:
    path: str
    version: str            # "v1.14.1" or "source:/abs/path"
    built: bool             # built by this call (False: taken from the cache)
    seconds: float

    def record(self) -> dict[str, Any]:
        """What metrics.json says about the scheduler that ran."""
        out: dict[str, Any] = {"implementation": "volcano", "version": self.version, "binary": self.path,
                               "built_now": self.built, "build_s": round(self.seconds, 1)}
        if self.version == "v1.14.1":
            out["note"] = CLOSEST_TO_V1140
        return out


def built_binary(version: str = "v1.14.1") -> Path | None:
    """The cached binary of a pinned version, or None when it is not built."""
    from ha.volcano.build import binary_path, resolve_version
    p = binary_path(resolve_version(version))
    return p if p.exists() else None


def resolve_binary(spec: Any, *, log: Callable[[str], None] = print) -> VolcanoBinary:
    """The binary for ``spec`` (``ha.experiment.config.VolcanoSpec``), building it when needed."""
    from ha.volcano.build import VolcanoBuildError, build
    where = f"schedulers.volcano.{'source' if spec.source else 'version'}"
    if spec.source is None:
        cached = built_binary(spec.version)
        if cached is not None:
            return VolcanoBinary(str(cached), spec.version, False, 0.0)
    if shutil.which("go") is None:
        what = spec.source or spec.version
        raise BadInput(f"{where}: vc-scheduler {what} is not built and Go is not installed "
                       f"(`ha-testbed volcano build` needs Go)")
    log(f"building vc-scheduler {spec.source or spec.version} (ha-testbed volcano build; a first build "
        "downloads and compiles Volcano and Kubernetes: many minutes)")
    try:
        res = build(spec.version if spec.source is None else None, spec.source, log=log)
    except VolcanoBuildError as e:
        raise BadInput(f"{where}: {e}") from None
    version = spec.version if spec.source is None else f"source:{Path(spec.source).expanduser().resolve()}"
    return VolcanoBinary(str(res.binary), version, not res.cached, res.seconds)


def external_config(exp: Any, name: str, *, binary: VolcanoBinary, endpoint_url: str, kubeconfig: str,
                    out: Path, redis_url: str, prefix: str, api_server: Any, tmp_root: str = "") -> ExternalConfig:
    from ha.scheduler.volcano_conf import given_conf_yaml, volcano_yaml
    s = exp.schedulers
    spec = s.volcano
    out = Path(out).absolute()
    return ExternalConfig(
        name=name, binary=binary.path, version=binary.version, endpoint_url=endpoint_url,
        kubeconfig=kubeconfig, workdir=str(out / "volcano" / name),
        log_path=str(out / "volcano" / f"{name}.log"),
        request_log=str(out / "kube-api" / name / "requests.jsonl"),
        delivery_log=str(out / "kube-api" / name / "delivery.log"),
        scheduler_conf_yaml=(given_conf_yaml(spec.conf) if spec.conf is not None
                             else volcano_yaml(exp.scheduler_conf_resolved())),
        redis_url=redis_url, prefix=prefix, api_server=api_server,
        leader_elect=s.mode != "active-active", lease_duration=s.lease.duration,
        lease_renew_deadline=s.lease.renew_deadline, lease_retry=s.lease.retry,
        period_s=s.period, scheduler_name=s.scheduler_name, verbosity=spec.verbosity,
        restart_delay_s=spec.restart_delay, extra_args=tuple(spec.args), tmp_root=tmp_root)
