"""Resource vectors with Volcano's arithmetic (``api/resource_info.go``).

Units inside a Resource, as in Volcano:
  * ``milli_cpu`` in millicores, ``memory`` in bytes;
  * ``pods`` as a plain count (Volcano parses it with ``Value()``);
  * every other scalar (incl. ephemeral-storage and extended resources) ×1000 (``MilliValue()``).

``Resource.from_plain``/``to_plain`` convert from/to the units people write in scenario files
(cpu millicores, memory bytes, scalars as counts).
"""
from __future__ import annotations

import logging
import operator
import os
from enum import IntEnum
from typing import Callable, Iterable, Mapping

from apimachinery.quantity import parse_quantity

__all__ = [
    "Resource", "DimensionDefaultValue", "ZERO", "INFINITY", "MIN_RESOURCE", "ResourceUnderflow",
    "set_panic_on_error", "panic_on_error", "assert_failures", "empty_resource", "exact_fields", "exceeded_part",
    "positive_part",
    "intersection", "is_ignored_scalar_resource", "is_count_quota", "CPU", "MEMORY", "PODS",
    "EPHEMERAL_STORAGE",
]

log = logging.getLogger(__name__)

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
EPHEMERAL_STORAGE = "ephemeral-storage"

MIN_RESOURCE = 0.1  # Volcano's minResource: the epsilon of every comparison


class DimensionDefaultValue(IntEnum):
    """What a scalar dimension missing on the right-hand side counts as."""
    ZERO = 0
    INFINITY = -1


ZERO = DimensionDefaultValue.ZERO
INFINITY = DimensionDefaultValue.INFINITY

# Scalars that IsEmpty and the *WithDimension comparisons skip (resource_info.go ignoredScalarResources).
_IGNORED_SCALARS = frozenset({PODS})


class ResourceUnderflow(AssertionError):
    """Volcano's ``assert.Assertf`` in ``Resource.Sub`` (and friends) failed: it would have panicked."""


# util/assert: panic unless PANIC_ON_ERROR=false. Failures are always counted so experiments can
# report "Volcano would have panicked here" even when running with panics off.
_panic_on_error = os.environ.get("PANIC_ON_ERROR", "") != "false"
assert_failures: list[str] = []  # messages of failed assertions (bounded below)
_MAX_RECORDED = 1000


def set_panic_on_error(value: bool) -> None:
    global _panic_on_error
    _panic_on_error = bool(value)


def panic_on_error() -> bool:
    return _panic_on_error


def volcano_assert(condition: bool, message: str) -> None:
    """util/assert.Assert: raise ResourceUnderflow, or only log when panics are off."""
    if condition:
        return
    if len(assert_failures) < _MAX_RECORDED:
        assert_failures.append(message)
    if _panic_on_error:
        raise ResourceUnderflow(message)
    log.error("assertion failed: %s", message)


def is_ignored_scalar_resource(name: str) -> bool:
    return name in _IGNORED_SCALARS


def is_count_quota(name: str) -> bool:
    return name.startswith("count/")


# Parsing cache: stored objects carry normalised strings ("1000m", "1073741824") that repeat a lot.
_QTY_CACHE: dict[tuple[str, object], float] = {}


def _scaled_value(name: str, value: object) -> float:
    """One quantity in Resource units (see the module docstring)."""
    key = (name, value)
    try:
        return _QTY_CACHE[key]
    except (KeyError, TypeError):
        pass
    base = parse_quantity(name, value)  # millicores for cpu, base units otherwise
    if name in (CPU, MEMORY, PODS):
        out = float(base)
    else:
        out = float(parse_quantity(CPU, value))  # MilliValue(): the same ×1000 as cpu
    if len(_QTY_CACHE) < 100_000:
        try:
            _QTY_CACHE[key] = out
        except TypeError:
            pass
    return out


def _le(left: float, right: float) -> bool:
    return left < right or abs(left - right) < MIN_RESOURCE


class Resource:
    """Volcano's ``api.Resource``. Mutating operations return ``self`` so calls chain like Go."""

    __slots__ = ("milli_cpu", "memory", "scalar_resources", "max_task_num")

    def __init__(self, milli_cpu: float = 0.0, memory: float = 0.0,
                 scalar_resources: dict[str, float] | None = None, max_task_num: int = 0):
        self.milli_cpu = float(milli_cpu)
        self.memory = float(memory)
        # None mirrors Go's nil map: several operations behave differently for nil and empty.
        self.scalar_resources = scalar_resources
        self.max_task_num = max_task_num

    # ---- construction -------------------------------------------------------------------------
    @classmethod
    def empty(cls) -> "Resource":
        return cls()

    @classmethod
    def from_quantities(cls, rl: Mapping[str, object] | None) -> "Resource":
        """NewResource(v1.ResourceList): a map of Kubernetes quantities ("500m", "1Gi", 2)."""
        r = cls()
        if not rl:
            return r
        for name, qty in rl.items():
            if name == CPU:
                r.milli_cpu += _scaled_value(CPU, qty)
            elif name == MEMORY:
                r.memory += _scaled_value(MEMORY, qty)
            elif name == PODS:
                v = _scaled_value(PODS, qty)
                r.max_task_num += int(v)
                r.add_scalar(PODS, v)
            elif is_count_quota(name):
                continue
            else:
                r.add_scalar(name, _scaled_value(name, qty))
        return r

    @classmethod
    def from_plain(cls, d: Mapping[str, float] | None) -> "Resource":
        """From the units people write: cpu millicores, memory bytes, scalars as counts."""
        r = cls()
        if not d:
            return r
        for name, v in d.items():
            if name == CPU:
                r.milli_cpu += float(v)
            elif name == MEMORY:
                r.memory += float(v)
            elif name == PODS:
                r.max_task_num += int(v)
                r.add_scalar(PODS, float(v))
            else:
                r.add_scalar(name, float(v) * 1000.0)
        return r

    def to_plain(self, *, keep_zero: bool = False) -> dict[str, float]:
        """Inverse of from_plain; integral floats become ints so results compare with JSON numbers."""
        out: dict[str, float] = {}

        def put(k: str, v: float) -> None:
            if v == 0 and not keep_zero:
                return
            out[k] = int(v) if float(v).is_integer() else v

        put(CPU, self.milli_cpu)
        put(MEMORY, self.memory)
        if self.scalar_resources:
            for k, v in self.scalar_resources.items():
                put(k, v if k == PODS else v / 1000.0)
        return out

    def clone(self) -> "Resource":
        r = Resource.__new__(Resource)
        r.milli_cpu = self.milli_cpu
        r.memory = self.memory
        s = self.scalar_resources
        r.scalar_resources = dict(s) if s is not None else None
        r.max_task_num = self.max_task_num
        return r

    # ---- inspection ---------------------------------------------------------------------------
    def get(self, name: str) -> float:
        if name == CPU:
            return self.milli_cpu
        if name == MEMORY:
            return self.memory
        if self.scalar_resources is None:
            return 0.0
        return self.scalar_resources.get(name, 0.0)

    def resource_names(self) -> list[str]:
        names = []
        if self.milli_cpu >= MIN_RESOURCE:
            names.append(CPU)
        if self.memory >= MIN_RESOURCE:
            names.append(MEMORY)
        if self.scalar_resources:
            names.extend(k for k, v in self.scalar_resources.items() if v >= MIN_RESOURCE)
        return names

    def is_empty(self) -> bool:
        """True when every dimension except pods is below the epsilon (BestEffort)."""
        if not (self.milli_cpu < MIN_RESOURCE and self.memory < MIN_RESOURCE):
            return False
        if self.scalar_resources:
            for k, v in self.scalar_resources.items():
                if k in _IGNORED_SCALARS:
                    continue
                if v >= MIN_RESOURCE:
                    return False
        return True

    def is_zero(self, name: str) -> bool:
        if name == CPU:
            return self.milli_cpu < MIN_RESOURCE
        if name == MEMORY:
            return self.memory < MIN_RESOURCE
        if self.scalar_resources is None:
            return True
        volcano_assert(name in self.scalar_resources, f"unknown resource {name}")
        return self.scalar_resources.get(name, 0.0) < MIN_RESOURCE

    def has_negative(self) -> bool:
        """Any dimension below −epsilon (a testbed helper, not in Volcano)."""
        if self.milli_cpu <= -MIN_RESOURCE or self.memory <= -MIN_RESOURCE:
            return True
        return bool(self.scalar_resources) and any(v <= -MIN_RESOURCE for v in self.scalar_resources.values())

    # ---- arithmetic ---------------------------------------------------------------------------
    def add(self, rr: "Resource") -> "Resource":
        self.milli_cpu += rr.milli_cpu
        self.memory += rr.memory
        if rr.scalar_resources:
            s = self.scalar_resources
            if s is None:
                s = self.scalar_resources = {}
            for k, v in rr.scalar_resources.items():
                s[k] = s.get(k, 0.0) + v
        return self

    def sub(self, rr: "Resource") -> "Resource":
        """Asserting subtraction: ResourceUnderflow unless ``rr <= self`` (Zero default)."""
        if not rr.less_equal(self, ZERO):
            volcano_assert(False, f"resource is not sufficient to do operation: <{self}> sub <{rr}>")
        return self._sub(rr)

    def sub_without_assert(self, rr: "Resource") -> "Resource":
        ok, names = rr.less_equal_with_resources_name(self, ZERO)
        if not ok:
            log.debug("resources <%s> are not sufficient to do operation: <%s> sub <%s>", names, self, rr)
        return self._sub(rr)

    def _sub(self, rr: "Resource") -> "Resource":
        self.milli_cpu -= rr.milli_cpu
        self.memory -= rr.memory
        s = self.scalar_resources
        if s is None:  # Go: a nil map skips the scalar part entirely
            return self
        if rr.scalar_resources:
            for k, v in rr.scalar_resources.items():
                s[k] = s.get(k, 0.0) - v
        return self

    def multi(self, ratio: float) -> "Resource":
        self.milli_cpu *= ratio
        self.memory *= ratio
        if self.scalar_resources:
            for k in self.scalar_resources:
                self.scalar_resources[k] *= ratio
        return self

    def set_max_resource(self, rr: "Resource | None") -> None:
        if rr is None:
            return
        if rr.milli_cpu > self.milli_cpu:
            self.milli_cpu = rr.milli_cpu
        if rr.memory > self.memory:
            self.memory = rr.memory
        if not rr.scalar_resources:
            return
        if self.scalar_resources is None:
            self.scalar_resources = dict(rr.scalar_resources)
            return
        for k, v in rr.scalar_resources.items():
            if k not in self.scalar_resources or v > self.scalar_resources[k]:
                self.scalar_resources[k] = v

    def fit_delta(self, rr: "Resource") -> "Resource":
        """self − rr − epsilon on every dimension rr requests (negative means 'does not fit')."""
        if rr.milli_cpu > 0:
            self.milli_cpu -= rr.milli_cpu + MIN_RESOURCE
        if rr.memory > 0:
            self.memory -= rr.memory + MIN_RESOURCE
        if self.scalar_resources is None:
            self.scalar_resources = {}
        if rr.scalar_resources:
            for k, v in rr.scalar_resources.items():
                if v > 0:
                    self.scalar_resources[k] = self.scalar_resources.get(k, 0.0) - (v + MIN_RESOURCE)
        return self

    def add_scalar(self, name: str, quantity: float) -> None:
        s = self.scalar_resources
        if s is None:
            s = self.scalar_resources = {}
        s[name] = s.get(name, 0.0) + quantity

    def set_scalar(self, name: str, quantity: float) -> None:
        if self.scalar_resources is None:
            self.scalar_resources = {}
        self.scalar_resources[name] = quantity

    def min_dimension_resource(self, rr: "Resource", default: DimensionDefaultValue = ZERO) -> "Resource":
        if rr.milli_cpu < self.milli_cpu:
            self.milli_cpu = rr.milli_cpu
        if rr.memory < self.memory:
            self.memory = rr.memory
        if self.scalar_resources is None:
            return self
        if rr.scalar_resources is None:
            if default == INFINITY:
                return self
            for k in self.scalar_resources:
                self.scalar_resources[k] = 0.0
            return self
        for k, v in self.scalar_resources.items():
            if k in rr.scalar_resources:
                self.scalar_resources[k] = min(v, rr.scalar_resources[k])
            elif default != INFINITY:
                self.scalar_resources[k] = 0.0
        return self

    def diff(self, rr: "Resource", default: DimensionDefaultValue = ZERO) -> tuple["Resource", "Resource"]:
        """(increased, decreased): per dimension, how much self exceeds rr and vice versa."""
        left = self.clone()
        right = rr.clone()
        _set_default_value(left, right, default)
        inc, dec = Resource(), Resource()
        if left.milli_cpu > right.milli_cpu:
            inc.milli_cpu = left.milli_cpu - right.milli_cpu
        else:
            dec.milli_cpu = right.milli_cpu - left.milli_cpu
        if left.memory > right.memory:
            inc.memory = left.memory - right.memory
        else:
            dec.memory = right.memory - left.memory
        inc.scalar_resources, dec.scalar_resources = {}, {}
        for k, lq in left.scalar_resources.items():
            rq = right.scalar_resources.get(k, 0.0)
            if lq == float(INFINITY):
                inc.scalar_resources[k] = lq
                continue
            if rq == float(INFINITY):
                dec.scalar_resources[k] = rq
                continue
            if lq > rq:
                inc.scalar_resources[k] = lq - rq
            else:
                dec.scalar_resources[k] = rq - lq
        return inc, dec

    # ---- comparisons --------------------------------------------------------------------------
    # A strict comparison is its "or within epsilon" twin with epsilon 0 (abs() < 0 never holds).
    def less(self, rr: "Resource", default: DimensionDefaultValue = ZERO) -> bool:
        """Strictly less in every dimension."""
        return self.less_equal(rr, default, 0.0)

    def less_equal(self, rr: "Resource", default: DimensionDefaultValue = ZERO,
                   epsilon: float = MIN_RESOURCE) -> bool:
        """Less than or within ``epsilon`` (0.1) in every dimension (the fit test). A scalar
        only the right side has fails by INFINITY default; one only the left side has counts
        against 0 by ZERO default and is skipped by INFINITY. Hot path: kept inline."""
        if not (self.milli_cpu < rr.milli_cpu or abs(self.milli_cpu - rr.milli_cpu) < epsilon):
            return False
        if not (self.memory < rr.memory or abs(self.memory - rr.memory) < epsilon):
            return False
        ls = self.scalar_resources
        rs = rr.scalar_resources
        if default == INFINITY and rs:
            for k in rs:
                if ls is None or k not in ls:
                    return False
        if ls:
            for k, lv in ls.items():
                if rs is not None and k in rs:
                    rv = rs[k]
                elif default == INFINITY:
                    continue
                else:
                    rv = 0.0
                if not (lv < rv or abs(lv - rv) < epsilon):
                    return False
        return True

    def less_equal_with_resources_name(self, rr: "Resource",
                                       default: DimensionDefaultValue = ZERO) -> tuple[bool, list[str]]:
        """LessEqual that also names every failing dimension (used in error messages)."""
        names: list[str] = []
        if not _le(self.milli_cpu, rr.milli_cpu):
            names.append(CPU)
        if not _le(self.memory, rr.memory):
            names.append(MEMORY)
        if self.scalar_resources:
            rs = rr.scalar_resources or {}
            for k, lv in self.scalar_resources.items():
                if k not in rs:
                    if default == INFINITY:
                        continue
                    rv = 0.0
                else:
                    rv = rs[k]
                if not _le(lv, rv):
                    names.append(k)
        return (not names), names

    def less_equal_with_dimension_and_resources_name(self, rr: "Resource | None",
                                                     req: "Resource | None") -> tuple[bool, list[str]]:
        """Compare only the dimensions ``req`` asks for (strict >, no epsilon, like Volcano)."""
        if rr is None:
            return False, self.resource_names()
        if req is None:
            return self.less_equal_with_resources_name(rr, ZERO)
        # a nil scalar map on the left skips the scalars
        names = self._requested_where(rr, req, operator.gt, scalars=self.scalar_resources is not None)
        return (not names), names

    def less_partly(self, rr: "Resource", default: DimensionDefaultValue = ZERO) -> bool:
        """Strictly less in at least one dimension."""
        return self.less_equal_partly(rr, default, 0.0)

    def less_equal_partly(self, rr: "Resource", default: DimensionDefaultValue = ZERO,
                          epsilon: float = MIN_RESOURCE) -> bool:
        """Less than or within ``epsilon`` (0.1) in at least one dimension. A scalar only the
        right side has holds by ZERO default; one only the left side has holds by INFINITY."""
        if (self.milli_cpu < rr.milli_cpu or abs(self.milli_cpu - rr.milli_cpu) < epsilon
                or self.memory < rr.memory or abs(self.memory - rr.memory) < epsilon):
            return True
        ls = self.scalar_resources or {}
        rs = rr.scalar_resources or {}
        if default == ZERO:
            for k in rs:
                if k not in ls:
                    return True
        for k, lv in ls.items():
            if k not in rs:
                if default == INFINITY:
                    return True
                rv = 0.0
            else:
                rv = rs[k]
            if lv < rv or abs(lv - rv) < epsilon:
                return True
        return False

    def less_equal_partly_with_dimension(self, rr: "Resource", req: "Resource | None") -> tuple[bool, list[str]]:
        if req is None:
            return False, []
        names = self._requested_where(rr, req, _le)
        return bool(names), names

    def less_equal_partly_with_dimension_zero_filtered(self, rr: "Resource",
                                                       req: "Resource | None") -> tuple[bool, list[str]]:
        """Only the dimensions where self or rr is non-zero."""
        if req is None:
            return False, []
        f = _request_filtered(req, lambda n: not (self.get(n) < MIN_RESOURCE and rr.get(n) < MIN_RESOURCE))
        return self.less_equal_partly_with_dimension(rr, f)

    def equal(self, rr: "Resource", default: DimensionDefaultValue = ZERO) -> bool:
        def eq(a: float, b: float) -> bool:
            return a == b or abs(a - b) < MIN_RESOURCE
        if not eq(self.milli_cpu, rr.milli_cpu) or not eq(self.memory, rr.memory):
            return False
        rs = rr.scalar_resources or {}
        for k, lv in (self.scalar_resources or {}).items():
            if not eq(lv, rs.get(k, 0.0)):
                return False
        return True

    def greater_partly(self, rr: "Resource", default: DimensionDefaultValue = ZERO) -> tuple[bool, list[str]]:
        ok, names = self.less_equal_with_resources_name(rr, default)
        return (not ok), names

    def greater_partly_with_dimension(self, rr: "Resource | None", req: "Resource | None") -> tuple[bool, list[str]]:
        if req is None:
            return False, []
        if rr is None:
            rr = Resource()
        names = self._requested_where(rr, req, operator.gt)
        return bool(names), names

    def greater_partly_with_relevant_dimensions(self, rr: "Resource | None",
                                                req: "Resource | None") -> tuple[bool, list[str]]:
        """Only the dimensions rr has: cpu/memory not zero, scalars present in its map."""
        if req is None:
            return False, []
        if rr is None:
            rr = Resource()
        rs = rr.scalar_resources

        def relevant(n: str) -> bool:
            if n == CPU or n == MEMORY:
                return not rr.get(n) < MIN_RESOURCE
            return rs is not None and n in rs

        return self.greater_partly_with_dimension(rr, _request_filtered(req, relevant))

    def _requested_where(self, rr: "Resource", req: "Resource", holds: Callable[[float, float], bool],
                         *, scalars: bool = True) -> list[str]:
        """The dimensions ``req`` asks for (> 0; pods ignored) where ``holds(self, rr)``."""
        names: list[str] = []
        if req.milli_cpu > 0 and holds(self.milli_cpu, rr.milli_cpu):
            names.append(CPU)
        if req.memory > 0 and holds(self.memory, rr.memory):
            names.append(MEMORY)
        if scalars and req.scalar_resources:
            for k, q in req.scalar_resources.items():
                if q > 0 and k not in _IGNORED_SCALARS and holds(self.get(k), rr.get(k)):
                    names.append(k)
        return names

    # ---- misc ---------------------------------------------------------------------------------
    def __repr__(self) -> str:
        return f"Resource({self})"

    def __str__(self) -> str:
        s = f"cpu {self.milli_cpu:.2f}, memory {self.memory:.2f}"
        if self.scalar_resources:
            for k in sorted(self.scalar_resources):
                s += f", {k} {self.scalar_resources[k]:.2f}"
        return s

    def __eq__(self, other: object) -> bool:  # exact equality, for tests and digests
        if not isinstance(other, Resource):
            return NotImplemented
        return (self.milli_cpu == other.milli_cpu and self.memory == other.memory
                and {k: v for k, v in (self.scalar_resources or {}).items() if v}
                == {k: v for k, v in (other.scalar_resources or {}).items() if v})

    __hash__ = None  # mutable


def _request_filtered(req: Resource, keep: Callable[[str], bool]) -> Resource:
    """The dimensions of ``req`` that are > 0 and ``keep``; a nil scalar map stays nil."""
    f = Resource()
    if req.milli_cpu > 0 and keep(CPU):
        f.milli_cpu = req.milli_cpu
    if req.memory > 0 and keep(MEMORY):
        f.memory = req.memory
    if req.scalar_resources is not None:
        f.scalar_resources = {k: q for k, q in req.scalar_resources.items() if q > 0 and keep(k)}
    return f


def _set_default_value(left: Resource, right: Resource, default: DimensionDefaultValue) -> None:
    if left.scalar_resources is None:
        left.scalar_resources = {}
    if right.scalar_resources is None:
        right.scalar_resources = {}
    for k in list(left.scalar_resources):
        if k not in right.scalar_resources:
            right.scalar_resources[k] = float(default)
    for k in list(right.scalar_resources):
        if k not in left.scalar_resources:
            left.scalar_resources[k] = float(default)


def exact_fields(r: Resource) -> tuple:
    """Every field of a Resource, for comparing two exactly (Resource's own comparisons allow
    an epsilon); no scalar map and an empty one are the same."""
    return r.milli_cpu, r.memory, sorted((r.scalar_resources or {}).items()), r.max_task_num


def empty_resource() -> Resource:
    return Resource()


def positive_part(r: Resource) -> Resource:
    """``r.diff(Resource(), ZERO)[0]`` without its copies: the dimensions above zero (a scalar
    at the -1 infinity sentinel too, as diff keeps it), each as it is (JobInfo's elastic
    resources of a job without minResources, 10,000 jobs a session)."""
    out = Resource()
    if r.milli_cpu > 0.0:
        out.milli_cpu = r.milli_cpu
    if r.memory > 0.0:
        out.memory = r.memory
    inf = float(INFINITY)
    out.scalar_resources = {k: v for k, v in (r.scalar_resources or _NO_SCALARS).items() if v > 0.0 or v == inf}
    return out


_NO_SCALARS: dict[str, float] = {}


def exceeded_part(left: Resource | None, right: Resource | None) -> Resource:
    if right is None:
        return left if left is not None else Resource()
    if left is None:
        return Resource()
    inc, _ = left.diff(right, ZERO)
    return inc


def intersection(r1: Resource, r2: Resource) -> list[str]:
    names2 = set(r2.resource_names())
    return [n for n in r1.resource_names() if n in names2]


def resource_names_contains(names: Iterable[str], required: Iterable[str]) -> bool:
    have = set(names)
    return all(n in have for n in required)

