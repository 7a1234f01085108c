"""Delay distributions: the one check and the one sampler for every fault that takes a ``delay``.

``{dist: fixed, value}``, ``{dist: uniform, min, max}``, ``{dist: exponential, mean[, max]}``,
``{dist: pareto, scale, alpha[, max]}`` (type I: ``scale`` is the minimum x_m; ``max`` caps the long
tail). Every time is a :data:`apimachinery.units.Duration`; a bare duration (``delay: 200ms``) means
``{dist: fixed, value: 200ms}``. A wrong shape is a ``ValueError`` naming the field (pydantic turns it
into ``chaos[i].delay...: problem``).
"""
from __future__ import annotations

import math
from typing import Any, Literal, Optional

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from apimachinery.errors import BadInput
from apimachinery.units import Duration, format_duration
from apimachinery.validation import validation_problems

__all__ = ["Distribution", "DIST_FIELDS", "fixed_shorthand"]

# dist -> (required fields, optional fields)
DIST_FIELDS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "fixed": (frozenset({"value"}), frozenset()),
    "uniform": (frozenset({"min", "max"}), frozenset()),
    "exponential": (frozenset({"mean"}), frozenset({"max"})),
    "pareto": (frozenset({"scale", "alpha"}), frozenset({"max"})),
}
_VALUES = ("value", "min", "max", "mean", "scale", "alpha")


class Distribution(BaseModel):
    """A delay distribution in seconds (see the module doc)."""
    model_config = ConfigDict(extra="forbid", frozen=True)

    dist: Literal["fixed", "uniform", "exponential", "pareto"] = Field(
        description="fixed {value}, uniform {min, max}, exponential {mean[, max]}, pareto {scale, alpha[, max]}")
    value: Optional[Duration] = Field(None, description="fixed: the delay")
    min: Optional[Duration] = Field(None, description="uniform: the smallest delay")
    max: Optional[Duration] = Field(None, description="uniform: the largest delay; exponential, pareto: cap")
    mean: Optional[Duration] = Field(None, description="exponential: the mean delay")
    scale: Optional[Duration] = Field(None, description="pareto: the minimum delay x_m")
    alpha: Optional[float] = Field(None, gt=0, description="pareto: the shape (≤ 1: infinite mean)")

    @model_validator(mode="after")
    def _shape(self) -> "Distribution":
        required, optional = DIST_FIELDS[self.dist]
        given = {f for f in _VALUES if getattr(self, f) is not None}
        missing = sorted(required - given)
        extra = sorted(given - required - optional)
        if missing:
            raise ValueError(f"dist {self.dist} needs {', '.join(missing)}")
        if extra:
            raise ValueError(f"dist {self.dist} does not take {', '.join(extra)} "
                             f"(it takes {', '.join(sorted(required | optional))})")
        if self.dist == "uniform" and self.min > self.max:
            raise ValueError(f"min {format_duration(self.min)} > max {format_duration(self.max)}")
        if self.dist == "exponential" and not self.mean > 0:
            raise ValueError("mean must be > 0")
        if self.dist == "pareto" and not self.scale > 0:
            raise ValueError("scale must be > 0")
        if self.max is not None and self.dist in ("exponential", "pareto"):
            lo = self.scale if self.dist == "pareto" else 0.0
            if self.max < lo:
                raise ValueError(f"max {format_duration(self.max)} is below the distribution's "
                                 f"minimum {format_duration(lo)}")
        return self

    @classmethod
    def parse(cls, obj: Any, where: str) -> "Distribution":
        """Validate a map (or a bare duration); :class:`apimachinery.errors.BadInput` names ``where.field``."""
        if isinstance(obj, Distribution):
            return obj
        try:
            return cls.model_validate(fixed_shorthand(obj))
        except ValidationError as e:
            raise BadInput("\n".join(f"{where}{'' if p == '(top level)' else '.' + p}: {m}"
                                      for p, m in validation_problems(e, cls))) from None

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
        """Seconds as numbers (the resolved schedule); ``model_dump(mode="json")`` spells units."""
        out: dict[str, Any] = {"dist": self.dist}
        for f in _VALUES:
            v = getattr(self, f)
            if v is not None:
                out[f] = v
        return out


def fixed_shorthand(v: object) -> object:
    """``delay: 200ms`` = ``{dist: fixed, value: 200ms}``."""
    if isinstance(v, (str, int, float)) and not isinstance(v, bool):
        return {"dist": "fixed", "value": v}
    return v
