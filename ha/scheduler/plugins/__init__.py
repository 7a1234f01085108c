"""Scheduler plugins (Volcano v1.14.0 semantics) and their registry.

A plugin module registers a *builder* under Volcano's plugin name::

    @register("gang")
    class GangPlugin: ...

    builder = get_plugin_builder("gang")
    plugin = builder(arguments)          # arguments: the tier option's ``arguments`` map (may be {})
    plugin.name(); plugin.on_session_open(ssn); plugin.on_session_close(ssn)

Plugins only register functions and event handlers with the session; the session's aggregators
decide which of them run (``enabled*`` flags of the tier options), as Volcano's do.
"""
from __future__ import annotations

from ha.scheduler.plugins.factory import PluginBuilder, get_plugin_builder, plugin_names, register

__all__ = ["register", "get_plugin_builder", "plugin_names", "PluginBuilder"]

# Importing the modules fills the registry.
from ha.scheduler.plugins import (  # noqa: E402,F401  (imported for their registrations)
    binpack,
    capacity,
    conformance,
    drf,
    gang,
    network_topology,
    nodeorder,
    overcommit,
    predicates,
    priority,
    proportion,
    sla,
)
