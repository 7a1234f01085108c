"""Chaos for the HA testbed: the faults (``chaos/faults/``: one module per fault, a registry), the
seeded schedule (schedule.py), the targets protocol the faults act on (targets.py), injectors at the
watch (a DeliveryHook), the Redis link (a TCP proxy), the API client and the process, the nemesis
that fires a schedule against a driver's targets, client retries (tenacity), and deterministic
replay of an instance's cache from its delivery log (replay.py)."""
