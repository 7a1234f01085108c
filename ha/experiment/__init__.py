"""Experiments: the YAML experiment file (config), the runner behind ``ha-testbed run`` and the
results folder it writes."""
