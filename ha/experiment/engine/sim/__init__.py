"""The sim engine (``ha-testbed run --engine sim``): the live parts in one process under a virtual
clock. :mod:`ha.experiment.engine.sim.loop` (virtual-time asyncio loop, clocks, simulated
processes), :mod:`ha.experiment.engine.sim.environment` (an instance's environment: inline workers,
the cost model, API clients on :mod:`cluster_state.memstore`), :mod:`ha.experiment.engine.sim.targets`
(what the faults act on), :mod:`ha.experiment.engine.sim.engine` (the engine). docs/simulation.md."""
