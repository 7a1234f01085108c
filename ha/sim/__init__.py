"""The sim engine (``ha-testbed run --engine sim``): the live parts in one process under a virtual
clock. :mod:`ha.sim.loop` (virtual-time asyncio loop, clocks, simulated processes),
:mod:`ha.sim.environment` (an instance's environment: inline workers, the cost model, API clients
on :mod:`cluster_state.memstore`), :mod:`ha.sim.targets` (what the faults act on),
:mod:`ha.sim.engine` (the driver's Engine). docs/simulation.md."""
