"""Plugin builder and action registry (``framework.RegisterPluginBuilder`` / ``GetPluginBuilder``,
``framework.RegisterAction`` / ``GetAction``).

A builder is ``builder(arguments: dict) -> Plugin``. Plugin modules register themselves at import
time; importing ``ha.scheduler`` imports them (the framework itself imports no plugin).
"""
from __future__ import annotations

from typing import Any, Callable, Protocol, runtime_checkable

__all__ = ["Plugin", "PluginBuilder", "register_plugin_builder", "get_plugin_builder",
           "registered_plugin_names", "unregister_plugin_builder", "register_action",
           "get_action_factory", "registered_action_names"]


@runtime_checkable
class Plugin(Protocol):
    """What a plugin is to the session (``framework.Plugin``)."""

    def name(self) -> str: ...

    def on_session_open(self, ssn: Any) -> None: ...

    def on_session_close(self, ssn: Any) -> None: ...


PluginBuilder = Callable[[dict], Plugin]

_builders: dict[str, PluginBuilder] = {}


def register_plugin_builder(name: str, builder: PluginBuilder) -> None:
    """Register (or replace) the builder of the plugin called ``name``."""
    if not isinstance(name, str) or not name:
        raise ValueError("plugin name must be a non-empty string")
    if not callable(builder):
        raise TypeError(f"builder of plugin {name!r} is not callable")
    _builders[name] = builder


def unregister_plugin_builder(name: str) -> None:
    """For tests that register throw-away plugins."""
    _builders.pop(name, None)


def get_plugin_builder(name: str) -> PluginBuilder | None:
    """The builder registered under ``name``, or None."""
    return _builders.get(name)


def registered_plugin_names() -> list[str]:
    return sorted(_builders)


# Actions register a factory of fresh action objects under Volcano's name, at import (as plugins do);
# importing ``ha.scheduler`` imports them. The order of registration is the order of the names.
_actions: dict[str, Callable[[], Any]] = {}


def register_action(name: str, factory: Callable[[], Any]) -> None:
    if not isinstance(name, str) or not name:
        raise ValueError("action name must be a non-empty string")
    if not callable(factory):
        raise TypeError(f"factory of action {name!r} is not callable")
    _actions[name] = factory


def get_action_factory(name: str) -> Callable[[], Any] | None:
    return _actions.get(name)


def registered_action_names() -> list[str]:
    return list(_actions)
