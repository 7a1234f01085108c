"""The simulation engine's environment: a virtual-time asyncio loop and clocks (:mod:`ha.sim.loop`);
the in-memory API server is :mod:`cluster_state.memstore`. docs/simulation.md."""
