"""Kubernetes resource quantities ("500m", "1Gi", "2", 1.5) parsed into integers.

Pure: shared by the API server (validation, normalisation) and the scheduler model (requests).
CPU is returned in millicores; every other resource in base units (bytes, counts).
"""
from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation

__all__ = ["QuantityError", "parse_quantity", "format_quantity", "normalise_resources"]

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1),
            "k": Decimal("1e3"), "M": Decimal("1e6"), "G": Decimal("1e9"), "T": Decimal("1e12"),
            "P": Decimal("1e15"), "E": Decimal("1e18")}
_RE = re.compile(r"^\s*([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)\s*(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?\s*$")


class QuantityError(ValueError):
    """A quantity that is not a non-negative Kubernetes quantity; names the resource and value."""

    def __init__(self, resource: str, value: object, why: str):
        self.resource, self.value, self.why = resource, value, why
        super().__init__(f"resource {resource!r}: {why} (got {value!r})")


def _to_decimal(resource: str, value: object) -> Decimal:
    if isinstance(value, bool):
        raise QuantityError(resource, value, "a boolean is not a quantity")
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(resource, value, "not a finite number")
        return Decimal(repr(value))
    if isinstance(value, str):
        m = _RE.match(value)
        if not m:
            raise QuantityError(resource, value, "malformed quantity")
        num, suffix = m.group(1), m.group(2) or ""
        try:
            base = Decimal(num)
        except InvalidOperation:  # pragma: no cover - the regex already rules this out
            raise QuantityError(resource, value, "malformed quantity") from None
        return base * (_BINARY[suffix] if suffix in _BINARY else _DECIMAL[suffix])
    raise QuantityError(resource, value, f"expected a string or number, not {type(value).__name__}")


def parse_quantity(resource: str, value: object) -> int:
    """Millicores for ``cpu``, base units otherwise; rounds up like Kubernetes' ScaledValue."""
    d = _to_decimal(resource, value)
    if d < 0:
        raise QuantityError(resource, value, "negative quantity")
    if resource == "cpu":
        d = d * 1000
    return int(d.to_integral_value(rounding="ROUND_CEILING"))


def format_quantity(resource: str, amount: int) -> str:
    """Canonical stored form: ``"<n>m"`` for cpu, a plain integer string otherwise."""
    return f"{int(amount)}m" if resource == "cpu" else str(int(amount))


def normalise_resources(resources: object, where: str = "resources") -> dict[str, str]:
    """Validate a resource map and return it in canonical form; errors name ``where`` and the key."""
    if resources is None:
        return {}
    if not isinstance(resources, dict):
        raise QuantityError(where, resources, "expected a map of resource name to quantity")
    out: dict[str, str] = {}
    for name, value in resources.items():
        if not isinstance(name, str) or not name:
            raise QuantityError(where, name, "resource names must be non-empty strings")
        try:
            out[name] = format_quantity(name, parse_quantity(name, value))
        except QuantityError as e:
            raise QuantityError(f"{where}.{name}", value, e.why) from None
    return out
