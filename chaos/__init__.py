"""Chaos for the HA testbed: seeded fault schedules (faults.py, schedule.py), injectors at the
watch (a DeliveryHook), the Redis link (a TCP proxy), the API client and the process, a nemesis that
fires a schedule against a driver's targets, client retries (tenacity), and deterministic replay of
an instance's cache from its delivery log (replay.py)."""
