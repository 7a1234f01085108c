"""ha-testbed: the scheduler model, the HA runtime, experiments and oracles."""
