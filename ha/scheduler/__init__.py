"""The scheduler model: Volcano semantics in pure, synchronous Python.

Nothing under this package imports redis, ray, asyncio or the API server (``cluster_state``;
tests/test_import_boundaries.py checks it): it talks to the world through the small interfaces in
``ha.scheduler.interfaces`` (binder, evictor, status updater, pod getter, clock), and every user
builds its cache with ``ha.scheduler.wiring.build_cache``, so the same code runs in the scenario
runner, inside a Ray actor, in replay and in a simulation.
"""

# Volcano's scheduler imports its plugins and actions for their registrations (``factory.go``); so
# does the model's package: whoever uses any part of it finds every plugin and action registered,
# and the framework (which opens sessions) imports none of them itself. A module that fails to
# import is an error here, never a plugin or action silently missing.
from ha.scheduler import plugins as _plugins  # noqa: E402,F401
from ha.scheduler import actions as _actions  # noqa: E402,F401
