"""Units users write in experiment, chaos and scenario files: durations (``500ms``, ``10s``, ``2m``),
rates (``20/s``) and the resource quantities of scenario-shaped objects (numbers in scenario units:
cpu in millicores) -- apimachinery's ``metav1.Duration`` and ``resource.Quantity`` of this project.

The one duration grammar of the project: experiment keys and chaos entries alike use
:data:`Duration` (a pydantic type: parsed to seconds, written back as ``"500ms"``; its JSON Schema
is the string grammar). :data:`PositiveDuration` is the same, > 0."""
from __future__ import annotations

import math
import re
from typing import Annotated

from pydantic import AfterValidator, BeforeValidator, PlainSerializer, WithJsonSchema

from apimachinery.quantity import QuantityError, parse_quantity

__all__ = ["parse_duration", "format_duration", "parse_rate", "format_rate", "scenario_quantity",
           "Duration", "PositiveDuration", "Rate", "DURATION_SCHEMA", "RATE_SCHEMA"]

_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|s|m)\s*$")
_RATE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*/\s*(s|m)\s*$")
_SCALE = {"ms": 0.001, "s": 1.0, "m": 60.0}


def parse_duration(value: object) -> float:
    """Seconds from ``"500ms"``, ``"10s"``, ``"2m"``; a bare 0 is allowed (no unit needed)."""
    if isinstance(value, bool):
        raise ValueError(f"expected a duration like 500ms, 10s or 2m, got {value!r}")
    if isinstance(value, (int, float)) and value == 0:
        return 0.0
    if isinstance(value, str):
        m = _DURATION.match(value)
        if m:
            return float(m.group(1)) * _SCALE[m.group(2)]
    raise ValueError(f"expected a duration like 500ms, 10s or 2m (units ms, s, m), got {value!r}")


def format_duration(seconds: float) -> str:
    """The shortest exact spelling: ``"250ms"``, ``"10s"``, ``"2m"``."""
    ms = seconds * 1000.0
    if math.isclose(ms, round(ms), abs_tol=1e-9):
        ms_i = int(round(ms))
        if ms_i % 60000 == 0 and ms_i:
            return f"{ms_i // 60000}m"
        if ms_i % 1000 == 0:
            return f"{ms_i // 1000}s"
        return f"{ms_i}ms"
    return f"{ms:g}ms"


def parse_rate(value: object) -> float:
    """Events per second from ``"20/s"`` or ``"600/m"``."""
    if isinstance(value, str):
        m = _RATE.match(value)
        if m:
            return float(m.group(1)) / _SCALE[m.group(2)]
    raise ValueError(f"expected a rate like 20/s or 600/m, got {value!r}")


def format_rate(per_s: float) -> str:
    return f"{per_s:g}/s"


def scenario_quantity(resource: str, value: object) -> int:
    """A quantity in a scenario-shaped object: a number is in scenario units (cpu millicores,
    memory bytes, counts), a string is a Kubernetes quantity (``"500m"``, ``"4Gi"``)."""
    if isinstance(value, bool):
        raise QuantityError(resource, value, "a boolean is not a quantity")
    if isinstance(value, (int, float)):
        if not math.isfinite(value) or value < 0:
            raise QuantityError(resource, value, "must be a non-negative number")
        return int(math.ceil(value))
    return parse_quantity(resource, value)


def _positive(v: float) -> float:
    if v <= 0:
        raise ValueError(f"must be > 0 (got {format_duration(v)})")
    return v


DURATION_SCHEMA = {"anyOf": [{"type": "string", "pattern": _DURATION.pattern}, {"const": 0}],
                   "description": "a duration: 500ms, 10s, 2m (or 0)"}
RATE_SCHEMA = {"type": "string", "pattern": _RATE.pattern, "description": "a rate: 20/s or 600/m"}

Duration = Annotated[float, BeforeValidator(parse_duration),
                     PlainSerializer(format_duration, return_type=str), WithJsonSchema(DURATION_SCHEMA)]
PositiveDuration = Annotated[Duration, AfterValidator(_positive)]
Rate = Annotated[float, BeforeValidator(parse_rate), PlainSerializer(format_rate, return_type=str),
                 WithJsonSchema(RATE_SCHEMA)]
