"""The driver: the run's tick loop (Jepsen's generator + nemesis timing), for any engine.

Every ``measure.every`` it asks the engine for one observation of every instance, bracketed by the
API server's resourceVersion before and after (the sampling window the checkers judge divergence
in), and hands it to the recorder; between ticks it fires the chaos actions that are due and lets
the world run (``engine.advance_to``: a wall-clock sleep in the live engine, virtual time in the
sim). A slow tick is skipped, never piled up. The driver computes nothing: metrics are checkers
over the history it leaves.

``Engine`` is what an engine provides::

    now() -> float                   run seconds since time 0
    advance_to(t)                    let the world run until about run time t
    fire_due()                       fire the nemesis' due actions (and record them)
    next_chaos_t() -> float | None   run time of the next chaos action
    observe() -> [Observation]       every instance once (ha.experiment.recorder.Observation)
    leader -> str | None             the leader seen at the last observation (progress line)
"""
from __future__ import annotations

import time
from typing import Any, Callable, Protocol

from ha.experiment.recorder import Observation, Recorder

__all__ = ["Engine", "Driver"]


class Engine(Protocol):
    leader: str | None

    def now(self) -> float: ...
    def advance_to(self, t: float) -> None: ...
    def fire_due(self) -> None: ...
    def next_chaos_t(self) -> float | None: ...
    def observe(self) -> list[Observation]: ...


class Driver:
    def __init__(self, engine: Engine, recorder: Recorder, *, duration: float, every: float,
                 on_tick: Callable[[float, dict[str, dict[str, Any]]], None] | None = None):
        self.engine = engine
        self.recorder = recorder
        self.duration = duration
        self.every = every
        self.on_tick = on_tick
        self.ticks = 0
        self.elapsed_s = 0.0
        self.wall_s = 0.0     # host seconds the loop took (benchmarks; never recorded in a result)

    def sample(self) -> None:
        e = self.engine
        rv_before = self.recorder.current_rv()
        obs = e.observe()
        rv_after = self.recorder.current_rv()
        t = e.now()        # stamped when taken (after any chaos just fired)
        recorded = self.recorder.tick(t, rv_before, obs, rv_after)
        self.ticks += 1
        if self.on_tick is not None:
            self.on_tick(t, recorded)

    def run(self) -> None:
        w0 = time.perf_counter()
        try:
            self._run()
        finally:
            self.wall_s = time.perf_counter() - w0

    def _run(self) -> None:
        e = self.engine
        next_tick = 0.0
        while True:
            now = e.now()
            if now >= self.duration:
                break
            e.fire_due()
            if now >= next_tick:
                self.sample()
                next_tick += self.every
                while next_tick <= e.now():   # a slow tick: skip, do not pile up
                    next_tick += self.every
            nxt = e.next_chaos_t()
            e.advance_to(min([next_tick, self.duration] + ([nxt] if nxt is not None else [])))
        self.sample()
        self.elapsed_s = e.now()
