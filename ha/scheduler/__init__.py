"""The scheduler model: Volcano semantics in pure, synchronous Python.

Nothing under this package imports redis, ray, asyncio or the API server (``cluster_state``;
tests/test_import_boundaries.py checks it): it talks to the world through the small interfaces in
``ha.scheduler.interfaces`` (binder, evictor, status updater, pod getter, clock), and every user
builds its cache with ``ha.scheduler.wiring.build_cache``, so the same code runs in the scenario
runner, inside a Ray actor, in replay and in a simulation.
"""

# Volcano's scheduler imports its plugins for their registrations (``factory.go``); so does the
# model's package: whoever uses any part of it finds every plugin registered, and the framework
# (which opens sessions) imports no plugin itself. A plugin module that fails to import is an
# error here, never a plugin silently missing from the sessions.
from ha.scheduler import plugins as _plugins  # noqa: E402,F401
