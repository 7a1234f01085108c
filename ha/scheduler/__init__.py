"""The scheduler model: Volcano semantics in pure, synchronous Python.

Nothing under this package may import redis or ray: it talks to the world through the small
interfaces in ``ha.scheduler.cache`` (binder, evictor, status updater), so the same code runs in
the scenario runner, inside a Ray actor and in replay.
"""
