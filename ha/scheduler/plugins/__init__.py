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

from typing import Any, Callable, Mapping

from ha.errors import BadInput
from ha.scheduler.framework import registry as _registry

__all__ = ["register", "get_plugin_builder", "plugin_names", "PluginBuilder"]

PluginBuilder = Callable[[Mapping[str, Any]], Any]


def register(name: str) -> Callable[[PluginBuilder], PluginBuilder]:
    """Class/function decorator: register ``name`` in the framework's builder registry."""

    def deco(builder: PluginBuilder) -> PluginBuilder:
        _registry.register_plugin_builder(name, builder)
        return builder

    return deco


def get_plugin_builder(name: str) -> PluginBuilder:
    """The builder registered under ``name``; BadInput naming the known plugins otherwise."""
    builder = _registry.get_plugin_builder(name)
    if builder is None:
        raise BadInput(f"unknown scheduler plugin {name!r}; known: {', '.join(plugin_names())}")
    return builder


def plugin_names() -> list[str]:
    return _registry.registered_plugin_names()


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
