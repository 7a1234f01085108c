"""Registering the plugins' builders (Volcano's ``plugins/factory.go``): the decorator every plugin
module uses, and the look-up by Volcano's plugin name that names the known plugins when it fails.
The builders live in the framework's registry (``ha.scheduler.framework.registry``)."""
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
