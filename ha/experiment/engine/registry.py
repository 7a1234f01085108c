"""The one table of engines: an engine's name (``ha-testbed run --engine NAME``, ``metrics.json``'s
``engine``) -> its class. Every engine is constructed alike,
``cls(exp, out, source=..., instance_options=..., redis_url=..., ray_address=...)``
(``ha.experiment.engine.base.EngineBase``), and refuses what it cannot run with ``BadInput``."""
from __future__ import annotations

from ha.errors import BadInput
from ha.experiment.engine.base import EngineBase
from ha.experiment.engine.live.engine import LiveEngine
from ha.experiment.engine.sim.engine import SimEngine

__all__ = ["ENGINES", "engine_class"]

ENGINES: dict[str, type[EngineBase]] = {cls.engine: cls for cls in (LiveEngine, SimEngine)}


def engine_class(name: str) -> type[EngineBase]:
    """The engine called ``name``; :class:`BadInput` naming the choices for any other."""
    try:
        return ENGINES[name]
    except KeyError:
        raise BadInput(f"--engine: must be one of {', '.join(ENGINES)}, got {name!r}") from None
