"""The faults of an experiment's ``chaos:`` list: one module per fault (Jepsen's nemesis packages).

* :data:`FAULTS` — name -> :class:`FaultPackage` (fields, defaults, targets, windowed or point,
  injector, start / end / fire, one-line doc, example, how the report draws it), from the modules of
  this package in their declared order (:mod:`chaos.faults.registry`);
* :class:`ChaosEntry` — the experiment file's entry model; :func:`parse_fault` -> :class:`Fault`;
* :class:`Distribution` — the one delay distribution check and sampler;
* the shared parameter types (:mod:`chaos.faults.fields`).

Adding a fault: docs/chaos.md "Adding a fault".
"""
from __future__ import annotations

from chaos.faults.base import Draw, FaultPackage
from chaos.faults.distribution import Distribution
from chaos.faults.fields import KINDS, VERBS, WRITE_VERBS
from chaos.faults.registry import FAULTS
from chaos.faults.entry import PARAM_KEYS, ChaosEntry, Fault, parse_fault, resolve

__all__ = ["FAULTS", "FaultPackage", "Draw", "ChaosEntry", "Fault", "parse_fault", "resolve",
           "Distribution", "KINDS", "VERBS", "WRITE_VERBS", "PARAM_KEYS", "WATCH_FAULTS",
           "API_FAULTS", "WINDOWED", "SELF_DRIVEN"]

# derived views other code asks for
WATCH_FAULTS = frozenset(n for n, f in FAULTS.items() if f.injector == "watch")
API_FAULTS = frozenset(n for n, f in FAULTS.items() if f.injector == "api")
WINDOWED = frozenset(n for n, f in FAULTS.items() if f.windowed)
# faults the instances' own hooks run from the schedule (the nemesis records named-target ones)
SELF_DRIVEN = frozenset(n for n, f in FAULTS.items() if f.self_driven)
