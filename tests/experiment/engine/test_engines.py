"""The engine package's common base and its table (``ha.experiment.engine``):

* each engine's targets (live: Ray actors and processes; sim: instances under the virtual clock)
  implement the one targets interface, ``EngineTargets``, which is ``chaos.targets.Targets`` plus
  ``NodeTargets`` with the protocol's arguments, async where the protocol says async;
* one table names the engines, every engine is a concrete ``EngineBase`` built alike, and a name
  not in it is bad input naming the choices; the sim engine refuses the live engine's addresses
  and real processes at construction.
"""
from __future__ import annotations

import inspect

import pytest

from chaos.targets import NodeTargets, Targets
from ha.errors import BadInput
from ha.experiment.config import parse_experiment
from ha.experiment.engine.base import EngineBase, EngineTargets
from ha.experiment.engine.live.targets import LiveTargets
from ha.experiment.engine.registry import ENGINES, engine_class
from ha.experiment.engine.sim.targets import SimTargets


def _protocol_members():
    return [(n, f) for n, f in inspect.getmembers(Targets, inspect.isfunction) + inspect.getmembers(NodeTargets, inspect.isfunction)
            if not n.startswith("_")]


@pytest.mark.parametrize("impl", [EngineTargets, LiveTargets, SimTargets])
def test_the_targets_implement_the_protocol(impl):
    for name, proto in _protocol_members():
        got = getattr(impl, name, None)
        assert callable(got), f"{impl.__name__} lacks {name}()"
        assert list(inspect.signature(got).parameters) == list(inspect.signature(proto).parameters), name
        assert inspect.iscoroutinefunction(got) == inspect.iscoroutinefunction(proto), name


def test_both_engines_targets_are_the_one_interface_and_leave_nothing_abstract():
    for impl in (LiveTargets, SimTargets):
        assert issubclass(impl, EngineTargets) and not inspect.isabstract(impl), impl
    # the interface declares every protocol method as abstract: an engine cannot forget one
    assert {n for n, _ in _protocol_members()} <= EngineTargets.__abstractmethods__
    # redis_restart stays optional (an engine that does not own the store leaves it out)
    assert not hasattr(EngineTargets, "redis_restart") and hasattr(SimTargets, "redis_restart")


def test_one_table_names_the_engines():
    assert list(ENGINES) == ["live", "sim"]
    for name, cls in ENGINES.items():
        assert issubclass(cls, EngineBase) and not inspect.isabstract(cls) and cls.engine == name
        assert engine_class(name) is cls
        params = inspect.signature(cls.__init__).parameters
        assert {"exp", "out", "source", "instance_options", "redis_url", "ray_address"} <= set(params), name
    with pytest.raises(BadInput, match=r"--engine: must be one of live, sim, got 'replay'"):
        engine_class("replay")


EXP = {"name": "engines", "duration": "5s", "cluster": {"nodes": 2}, "schedulers": {"instances": 2}}


def test_the_sim_engine_refuses_what_it_cannot_run(tmp_path):
    sim = engine_class("sim")
    exp = parse_experiment(EXP)
    with pytest.raises(BadInput, match="--redis-url / --ray-address belong to the live engine"):
        sim(exp, tmp_path, source="x.yaml", redis_url="redis://127.0.0.1:1")
    volcano = parse_experiment({**EXP, "schedulers": {"instances": 2, "implementation": "volcano"}})
    with pytest.raises(BadInput, match="the sim engine runs the model only"):
        sim(volcano, tmp_path, source="x.yaml")
    engine = sim(exp, tmp_path, source="x.yaml")
    try:
        assert engine.engine == "sim" and engine.slots == {}
    finally:
        engine.cleanup()
