"""The live engine (``ha-testbed run --engine live``): Redis, Ray actors and real processes under
wall-clock time. :mod:`ha.experiment.engine.live.engine` (the engine: its parts and their lives),
:mod:`ha.experiment.engine.live.targets` (what the faults act on)."""
