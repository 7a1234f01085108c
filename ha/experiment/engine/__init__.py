"""The engines of an experiment run: what starts the world, lets it run and takes it down again.

* :mod:`ha.experiment.engine.base` — the common base (``EngineBase``: the run's phases;
  ``EngineTargets``: what the faults act on; ``InstanceSlot``; the instance configuration both
  build); it imports neither engine;
* :mod:`ha.experiment.engine.live` — ``LiveEngine``, ``LiveTargets``: Redis, Ray actors, real
  processes, wall-clock time;
* :mod:`ha.experiment.engine.sim` — ``SimEngine``, ``SimTargets``, the virtual-time loop and the
  instances' environment: one process, virtual time, deterministic;
* :mod:`ha.experiment.engine.registry` — ``ENGINES``, the one table from an engine's name
  (``ha-testbed run --engine live|sim``) to its class.
docs/design.md (layout), docs/simulation.md."""
