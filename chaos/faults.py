"""Fault models: what each fault of an experiment's ``chaos:`` list takes, and delay distributions.

An entry is a map (YAML/JSON: durations as ``500ms``/``10s``/``2m`` or plain seconds) or an
``ha.experiment.config.ChaosEntry``; :func:`parse_fault` validates it into a :class:`Fault` and
raises :class:`ha.errors.BadInput` naming ``chaos[i].<field>`` and the problem. The rules match the
experiment file's (same field names: ``at``, ``fault``, ``target``, ``for``, ``kinds``, ``delay``,
``window``, ``restart_after``, ``verbs``, ``probability``, ``rate``).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ha.errors import BadInput

__all__ = ["FAULTS", "WATCH_FAULTS", "WINDOWED", "KINDS", "VERBS", "WRITE_VERBS", "Distribution",
           "Fault", "FaultSpec", "parse_fault", "parse_seconds"]

KINDS = ("Pod", "Node", "PodGroup", "Queue", "PriorityClass", "Lease")
VERBS = ("create", "get", "list", "update", "update_status", "patch_annotations", "bind",
         "bind_many", "delete", "evict", "watch")
# api-latency / api-conflict act on writes unless `verbs` says otherwise
WRITE_VERBS = ("create", "update", "update_status", "patch_annotations", "bind", "bind_many",
               "delete", "evict")


@dataclass(frozen=True)
class FaultSpec:
    required: frozenset[str]
    optional: frozenset[str]
    targets: tuple[str, ...]      # "instance" (scheduler-N), "leader", "all"; () = no target
    needs_for: bool = False       # lasts a window (for) -- else instantaneous or until the end


_T = ("instance", "leader", "all")
FAULTS: dict[str, FaultSpec] = {
    "watch-delay": FaultSpec(frozenset({"target", "delay"}), frozenset({"for", "kinds"}), _T),
    "watch-stall": FaultSpec(frozenset({"target", "for"}), frozenset({"kinds"}), _T, True),
    "watch-reorder": FaultSpec(frozenset({"target"}), frozenset({"for", "kinds", "window"}), _T),
    "watch-expire": FaultSpec(frozenset({"target"}), frozenset({"kinds"}), _T),
    "partition": FaultSpec(frozenset({"target", "for"}), frozenset(), _T, True),
    "kill": FaultSpec(frozenset({"target"}), frozenset({"restart_after"}), ("instance", "leader")),
    "pause": FaultSpec(frozenset({"target", "for"}), frozenset(), ("instance", "leader"), True),
    "api-latency": FaultSpec(frozenset({"delay"}), frozenset({"for", "target", "verbs"}), _T),
    "api-conflict": FaultSpec(frozenset({"probability"}), frozenset({"for", "target", "verbs"}), _T),
    "redis-restart": FaultSpec(frozenset(), frozenset({"for"}), ()),
    "clock-rate": FaultSpec(frozenset({"target", "rate"}), frozenset({"for"}), _T),
}
WATCH_FAULTS = frozenset({"watch-delay", "watch-stall", "watch-reorder", "watch-expire"})
# faults whose effect has a start and (with `for`) an end
WINDOWED = frozenset({"watch-delay", "watch-stall", "watch-reorder", "partition", "pause",
                      "api-latency", "api-conflict", "clock-rate", "redis-restart"})
_PARAMS = ("target", "for", "kinds", "delay", "window", "restart_after", "verbs", "probability", "rate")
_DEFAULT_REORDER_WINDOW = 0.5

_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|s|m)\s*$")
_SCALE = {"ms": 0.001, "s": 1.0, "m": 60.0}


def parse_seconds(value: Any, where: str) -> float:
    """Seconds from ``500ms``/``10s``/``2m`` or a non-negative number of seconds."""
    if isinstance(value, bool) or value is None:
        raise BadInput(f"{where}: expected a duration like 500ms, 10s or 2m, got {value!r}")
    if isinstance(value, (int, float)):
        if not math.isfinite(value) or value < 0:
            raise BadInput(f"{where}: a duration must be a finite number ≥ 0 seconds, got {value!r}")
        return float(value)
    if isinstance(value, str):
        m = _DURATION.match(value)
        if m:
            return float(m.group(1)) * _SCALE[m.group(2)]
    raise BadInput(f"{where}: expected a duration like 500ms, 10s or 2m (units ms, s, m), got {value!r}")


# ------------------------------------------------------------------------------- distributions

_DIST_FIELDS = {"fixed": ({"value"}, set()), "uniform": ({"min", "max"}, set()),
                "exponential": ({"mean"}, {"max"}), "pareto": ({"scale", "alpha"}, {"max"})}


@dataclass(frozen=True)
class Distribution:
    """A delay distribution in seconds: fixed {value}, uniform {min, max}, exponential {mean[, max]},
    pareto {scale, alpha[, max]} (scale = x_m, the minimum; ``max`` caps the long tail)."""
    dist: str
    value: float | None = None
    min: float | None = None
    max: float | None = None
    mean: float | None = None
    scale: float | None = None
    alpha: float | None = None

    @classmethod
    def parse(cls, obj: Any, where: str) -> "Distribution":
        if isinstance(obj, Distribution):
            return obj
        if hasattr(obj, "model_dump"):      # the experiment config's pydantic Distribution
            obj = obj.model_dump(exclude_none=True)
        if isinstance(obj, (int, float, str)) and not isinstance(obj, bool):
            return cls("fixed", value=parse_seconds(obj, where))   # `delay: 200ms` = fixed
        if not isinstance(obj, dict):
            raise BadInput(f"{where}: expected a map like {{dist: exponential, mean: 500ms}}, got {obj!r}")
        dist = obj.get("dist")
        if dist not in _DIST_FIELDS:
            raise BadInput(f"{where}.dist: must be one of {', '.join(_DIST_FIELDS)}, got {dist!r}")
        required, optional = _DIST_FIELDS[dist]
        given = set(obj) - {"dist"}
        unknown = sorted(given - {"value", "min", "max", "mean", "scale", "alpha"})
        if unknown:
            raise BadInput(f"{where}: unknown field(s) {', '.join(unknown)}")
        missing = sorted(required - given)
        extra = sorted(given - required - optional)
        if missing:
            raise BadInput(f"{where}: dist {dist} needs {', '.join(missing)}")
        if extra:
            raise BadInput(f"{where}: dist {dist} does not take {', '.join(extra)} "
                           f"(it takes {', '.join(sorted(required | optional))})")
        kw: dict[str, float] = {}
        for f in given:
            if f == "alpha":
                a = obj[f]
                if isinstance(a, bool) or not isinstance(a, (int, float)) or not a > 0 or not math.isfinite(a):
                    raise BadInput(f"{where}.alpha: must be a number > 0, got {a!r}")
                kw[f] = float(a)
            else:
                kw[f] = parse_seconds(obj[f], f"{where}.{f}")
        d = cls(dist, **kw)
        if dist == "uniform" and d.min > d.max:
            raise BadInput(f"{where}: min {d.min:g}s > max {d.max:g}s")
        if dist == "exponential" and not d.mean > 0:
            raise BadInput(f"{where}.mean: must be > 0")
        if dist == "pareto" and not d.scale > 0:
            raise BadInput(f"{where}.scale: must be > 0")
        if d.max is not None and dist in ("exponential", "pareto"):
            lo = d.scale if dist == "pareto" else 0.0
            if d.max < lo:
                raise BadInput(f"{where}.max: {d.max:g}s is below the distribution's minimum {lo:g}s")
        return d

    def sample(self, rng: np.random.Generator) -> float:
        """One delay in seconds (always ≥ 0, capped at ``max`` when given)."""
        if self.dist == "fixed":
            return float(self.value)
        if self.dist == "uniform":
            return float(rng.uniform(self.min, self.max))
        if self.dist == "exponential":
            x = float(rng.exponential(self.mean))
        else:  # pareto (type I): x_m * (1 + Lomax(alpha))
            x = float(self.scale * (1.0 + rng.pareto(self.alpha)))
        return min(x, self.max) if self.max is not None else x

    def mean_s(self) -> float:
        """The distribution's mean (before the cap), inf for pareto with alpha ≤ 1."""
        if self.dist == "fixed":
            return float(self.value)
        if self.dist == "uniform":
            return (self.min + self.max) / 2
        if self.dist == "exponential":
            return float(self.mean)
        return math.inf if self.alpha <= 1 else self.alpha * self.scale / (self.alpha - 1)

    def to_json(self) -> dict:
        out: dict[str, Any] = {"dist": self.dist}
        for f in ("value", "min", "max", "mean", "scale", "alpha"):
            v = getattr(self, f)
            if v is not None:
                out[f] = v
        return out


# ------------------------------------------------------------------------------------- faults

_TARGET = re.compile(r"^scheduler-[1-9]\d*$")
_TARGET_WORDS = {"instance": "scheduler-<N>", "leader": "leader", "all": "all"}


@dataclass(frozen=True)
class Fault:
    """One validated ``chaos:`` entry (times in seconds from the start of the run)."""
    index: int
    fault: str
    at: float
    duration: float | None = None          # `for`
    target: str | None = None              # scheduler-N | leader | all | None
    kinds: tuple[str, ...] | None = None
    delay: Distribution | None = None
    window: float | None = None
    restart_after: float | None = None
    verbs: tuple[str, ...] | None = None
    probability: float | None = None
    rate: float | None = None
    extra: dict = field(default_factory=dict, compare=False)

    @property
    def end(self) -> float | None:
        return None if self.duration is None else self.at + self.duration

    def params(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.kinds is not None:
            out["kinds"] = list(self.kinds)
        if self.delay is not None:
            out["delay"] = self.delay.to_json()
        for f in ("window", "restart_after", "probability", "rate"):
            v = getattr(self, f)
            if v is not None:
                out[f] = v
        if self.verbs is not None:
            out["verbs"] = list(self.verbs)
        return out


def _entry_map(entry: Any, where: str) -> dict:
    if hasattr(entry, "model_dump"):     # ha.experiment.config.ChaosEntry
        return entry.model_dump(mode="json", by_alias=True, exclude_none=True)
    if not isinstance(entry, dict):
        raise BadInput(f"{where}: expected a map like {{at: 10s, fault: kill, target: leader}}, got {entry!r}")
    return dict(entry)


def _names(value: Any, allowed: tuple[str, ...], what: str, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not value:
        raise BadInput(f"{where}: expected a non-empty list of {what}s, got {value!r}")
    for v in value:
        if v not in allowed:
            raise BadInput(f"{where}: unknown {what} {v!r}; known: {', '.join(allowed)}")
    return tuple(value)


def parse_fault(entry: Any, index: int = 0) -> Fault:
    """Validate one ``chaos:`` entry (see the module doc); errors name ``chaos[index].field``."""
    where = f"chaos[{index}]"
    m = _entry_map(entry, where)
    fault = m.get("fault")
    if fault not in FAULTS:
        raise BadInput(f"{where}.fault: unknown fault {fault!r}; known: {', '.join(FAULTS)}")
    unknown = sorted(set(m) - {"at", "fault", *_PARAMS})
    if unknown:
        raise BadInput(f"{where}: unknown field(s) {', '.join(unknown)} for fault {fault}")
    if "at" not in m:
        raise BadInput(f"{where}.at: missing (when the fault starts, e.g. at: 10s)")
    spec = FAULTS[fault]
    given = {p for p in _PARAMS if m.get(p) is not None}
    missing = sorted(spec.required - given)
    extra = sorted(given - spec.required - spec.optional)
    if missing:
        raise BadInput(f"{where}: fault {fault} needs {', '.join(missing)}")
    if extra:
        takes = ", ".join(sorted(spec.required | spec.optional)) or "nothing but at"
        raise BadInput(f"{where}: fault {fault} does not take {', '.join(extra)} (it takes {takes})")
    at = parse_seconds(m["at"], f"{where}.at")
    duration = None
    if m.get("for") is not None:
        duration = parse_seconds(m["for"], f"{where}.for")
        if duration <= 0:
            raise BadInput(f"{where}.for: must be > 0")
    target = m.get("target")
    if target is not None:
        if not isinstance(target, str):
            raise BadInput(f"{where}.target: expected scheduler-<N>, leader or all, got {target!r}")
        tkind = ("leader" if target == "leader" else "all" if target == "all"
                 else "instance" if _TARGET.match(target) else None)
        if tkind is None:
            raise BadInput(f"{where}.target: {target!r}: expected scheduler-<N>, leader or all")
        if tkind not in spec.targets:
            raise BadInput(f"{where}.target: fault {fault} cannot target {target!r} "
                           f"(it takes {' or '.join(_TARGET_WORDS[t] for t in spec.targets)})")
    elif spec.targets:
        target = "all"       # api-latency / api-conflict without a target: every instance
    kinds = _names(m["kinds"], KINDS, "kind", f"{where}.kinds") if m.get("kinds") is not None else None
    verbs = _names(m["verbs"], VERBS, "verb", f"{where}.verbs") if m.get("verbs") is not None else None
    delay = Distribution.parse(m["delay"], f"{where}.delay") if m.get("delay") is not None else None
    window = None
    if m.get("window") is not None:
        window = parse_seconds(m["window"], f"{where}.window")
        if window <= 0:
            raise BadInput(f"{where}.window: must be > 0")
    elif fault == "watch-reorder":
        window = _DEFAULT_REORDER_WINDOW
    restart_after = (parse_seconds(m["restart_after"], f"{where}.restart_after")
                     if m.get("restart_after") is not None else None)
    prob = m.get("probability")
    if prob is not None:
        if isinstance(prob, bool) or not isinstance(prob, (int, float)) or not 0 <= prob <= 1:
            raise BadInput(f"{where}.probability: must be a number in [0, 1], got {prob!r}")
        prob = float(prob)
    rate = m.get("rate")
    if rate is not None:
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not rate > 0 or not math.isfinite(rate):
            raise BadInput(f"{where}.rate: must be a number > 0 (1 = real time), got {rate!r}")
        rate = float(rate)
    if fault in ("api-latency", "api-conflict") and verbs is None:
        verbs = WRITE_VERBS
    return Fault(index=index, fault=fault, at=at, duration=duration, target=target, kinds=kinds,
                 delay=delay, window=window, restart_after=restart_after, verbs=verbs,
                 probability=prob, rate=rate)
