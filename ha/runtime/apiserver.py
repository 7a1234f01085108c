"""The API server configuration of one run, derived from the experiment's behaviour switches: the
one switch that is the API server's, not the scheduler's (``clear_nnn_on_binding``: binding clears
``status.nominatedNodeName``), goes to every API client of the run — the instances' binders,
kubelet, job controller, workload and the reference — through ``cluster_state.apiserver.
ApiServerConfig``.

``api_server_config(exp)`` (an ``ha.experiment.config.Experiment``), ``for_switches(switches)``
(a ``ha.scheduler.profiles.Switches``) and ``for_profile(profile, switches)`` give it.
"""
from __future__ import annotations

from typing import Any

from cluster_state.apiserver import ApiServerConfig

__all__ = ["ApiServerConfig", "api_server_config", "for_switches", "for_profile"]


def for_switches(switches: Any) -> ApiServerConfig:
    return ApiServerConfig(clear_nnn_on_binding=bool(switches.clear_nnn_on_binding))


def for_profile(profile: str = "v1.14", switches: dict | None = None) -> ApiServerConfig:
    from ha.scheduler.wiring import resolve_switches
    return for_switches(resolve_switches(profile, switches))


def api_server_config(exp: Any) -> ApiServerConfig:
    """The run's API server configuration from an experiment (its profile and switches)."""
    return for_switches(exp.switches_resolved())
