"""A resolved, seeded fault schedule built from an experiment's ``chaos:`` list.

``build_schedule(chaos_entries, seed, instances)`` validates every entry (:mod:`chaos.faults`),
resolves ``target: all`` to the instance names (``leader`` stays ``leader``: it is resolved when the
fault fires), gives every fault its own seed derived from the experiment seed, and lays out the
timeline of actions (start / end / fire / restart). Every random draw a fault makes later (a delay
per event, a conflict coin per write) comes from :func:`fault_rng` of that fault's seed and a label
(instance, kind, verb), so the same seed gives the same draws in the same order, whatever else
runs. ``Schedule.to_json()`` is what goes into ``metrics.json`` (key ``chaos_schedule``).
"""
from __future__ import annotations

import hashlib
import zlib
from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np

from chaos.faults import FAULTS, WATCH_FAULTS, Distribution, Fault, parse_fault
from apimachinery.errors import BadInput

__all__ = ["ScheduledFault", "Action", "Schedule", "build_schedule", "fault_rng", "derive_seed"]

PREVIEW = 3   # delay samples shown per target in the resolved schedule (the first draws)


def derive_seed(seed: int, *labels: Any) -> int:
    """A 63-bit seed from the experiment seed and labels (stable across runs and Python versions)."""
    h = hashlib.sha256(":".join([str(int(seed)), *map(str, labels)]).encode()).digest()
    return int.from_bytes(h[:8], "big") >> 1


def fault_rng(fault_seed: int, *labels: str) -> np.random.Generator:
    """The generator for one stream of a fault's draws (e.g. labels = instance, kind)."""
    return np.random.default_rng(np.random.SeedSequence(
        [int(fault_seed)] + [zlib.crc32(str(l).encode()) for l in labels]))


@dataclass(frozen=True)
class ScheduledFault:
    fault: Fault
    targets: tuple[str, ...]    # instance names, or ("leader",) resolved at fire time; () = none
    seed: int

    # convenience pass-throughs
    @property
    def index(self) -> int:
        return self.fault.index

    @property
    def name(self) -> str:
        return self.fault.fault

    @property
    def at(self) -> float:
        return self.fault.at

    @property
    def end(self) -> float | None:
        return self.fault.end

    @property
    def kinds(self) -> tuple[str, ...] | None:
        return self.fault.kinds

    @property
    def is_watch(self) -> bool:
        return self.fault.fault in WATCH_FAULTS

    def applies_to(self, instance: str, kind: str | None = None) -> bool:
        if instance not in self.targets:
            return False
        return kind is None or self.fault.kinds is None or kind in self.fault.kinds

    def rng(self, *labels: str) -> np.random.Generator:
        return fault_rng(self.seed, *labels)

    @property
    def package(self):
        """The fault's package (chaos.faults.FAULTS[name])."""
        return FAULTS[self.fault.fault]

    def to_json(self) -> dict:
        f = self.fault
        out: dict[str, Any] = {"index": f.index, "fault": f.fault, "at": f.at, "for": f.duration,
                               "end": f.end, "target": f.target, "targets": list(self.targets),
                               "seed": self.seed}
        out.update(f.params())
        d: Distribution | None = f.delay
        if d is not None and self.targets:
            label_kind = f.kinds[0] if f.kinds else "*"
            out["delay_preview_s"] = {t: [round(x, 6) for x in _draws(d, self.rng(t, label_kind), PREVIEW)]
                                      for t in self.targets}
        return out


def _draws(d: Distribution, rng: np.random.Generator, n: int) -> list[float]:
    return [d.sample(rng) for _ in range(n)]


@dataclass(frozen=True, order=True)
class Action:
    t: float
    order: int                  # ends before starts at the same t; then by fault index
    index: int
    action: str                 # start | end | fire | restart
    fault: str = field(compare=False)

    def to_json(self) -> dict:
        return {"t": self.t, "index": self.index, "fault": self.fault, "action": self.action}


_ACTION_ORDER = {"end": 0, "restart": 1, "start": 2, "fire": 3}


@dataclass
class Schedule:
    seed: int
    instances: tuple[str, ...]
    faults: list[ScheduledFault]

    def __iter__(self):
        return iter(self.faults)

    def __len__(self) -> int:
        return len(self.faults)

    def timeline(self) -> list[Action]:
        """Every fault's actions (its package says which: start/end, fire, restart), in time order."""
        acts = [Action(t, _ACTION_ORDER[action], sf.index, action, sf.name)
                for sf in self.faults for t, action in FAULTS[sf.name].actions(sf.fault)]
        return sorted(acts)

    def by_index(self, index: int) -> ScheduledFault:
        for sf in self.faults:
            if sf.index == index:
                return sf
        raise KeyError(index)

    def for_instance(self, instance: str, *, watch_only: bool = False) -> list[ScheduledFault]:
        """Faults aimed at this instance by name (or via ``all``); ``leader`` ones are not included:
        the nemesis resolves them when they fire."""
        return [sf for sf in self.faults if instance in sf.targets
                and (not watch_only or sf.is_watch)]

    def to_json(self) -> dict:
        return {"seed": self.seed, "instances": list(self.instances),
                "faults": [sf.to_json() for sf in self.faults],
                "timeline": [a.to_json() for a in self.timeline()]}


def build_schedule(chaos_entries: Iterable[Any] | None, seed: int,
                   instances: Iterable[str]) -> Schedule:
    """Validate and resolve a ``chaos:`` list (maps or ChaosEntry models); see the module doc."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise BadInput(f"seed: expected an integer, got {seed!r}")
    names = tuple(instances)
    if len(set(names)) != len(names):
        raise BadInput(f"instances: duplicate names in {list(names)}")
    faults: list[ScheduledFault] = []
    for i, entry in enumerate(chaos_entries or ()):
        f = parse_fault(entry, i)
        if f.target is None:
            targets: tuple[str, ...] = ()
        elif f.target == "all":
            targets = names
        elif f.target == "leader":
            targets = ("leader",)
        else:
            if f.target not in names:
                raise BadInput(f"chaos[{i}].target: {f.target!r} does not exist "
                               f"(instances: {', '.join(names) or 'none'})")
            targets = (f.target,)
        faults.append(ScheduledFault(f, targets, derive_seed(int(seed), "chaos", i, f.fault)))
    return Schedule(int(seed), names, faults)
