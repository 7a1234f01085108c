"""``ha-testbed hunt``: search many randomized HA chaos runs (sim engine) for safety violations,
shrink each distinct one, and report a minimal repro per bug.

* :mod:`ha.hunt.draw` — one run's experiment drawn from the hunt's seed (cluster, queues, workload,
  instances and mode, a swarm-tested fault schedule at a named intensity);
* :mod:`ha.hunt.safety` — the properties every run must satisfy, as ``--when`` predicates over the
  summary;
* :mod:`ha.hunt.signature` — a failure's oracle, roles and fault kinds;
* :mod:`ha.hunt.search` — the search loop (local pool or Ray tasks), background shrinking, resume;
* :mod:`ha.hunt.report` — ``hunt.md`` and ``hunt.json``.
"""
