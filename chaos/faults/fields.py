"""The parameters a ``chaos:`` entry may carry, as pydantic types shared by every fault that takes
them (one parser and one message per parameter): a fault's ``Params`` model declares which of them
it takes, which are required and their defaults (:mod:`chaos.faults.base`).

Targets: ``scheduler-<N>`` (one instance), ``leader`` (resolved when the fault starts), ``all``.
"""
from __future__ import annotations

import re
from typing import Annotated, Optional

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema

from chaos.faults.distribution import Distribution, fixed_shorthand
from apimachinery.units import DURATION_SCHEMA, Duration, PositiveDuration

__all__ = ["KINDS", "VERBS", "WRITE_VERBS", "TARGET_WORDS", "target_kind", "Target", "For",
           "Kinds", "Verbs", "Delay", "Window", "RestartAfter", "Probability", "ClockRate",
           "FaultParams", "ApiParams"]

# the kinds an instance has informers for, and the API verbs its client makes
KINDS = ("Pod", "Node", "HyperNode", "PodGroup", "Queue", "PriorityClass", "Lease")
VERBS = ("create", "get", "list", "update", "update_status", "patch_annotations", "bind",
         "bind_many", "delete", "evict", "watch")
# api-latency / api-conflict act on writes unless `verbs` says otherwise
WRITE_VERBS = ("create", "update", "update_status", "patch_annotations", "bind", "bind_many",
               "delete", "evict")

_INSTANCE = re.compile(r"^scheduler-[1-9]\d*$")
# target kinds a fault accepts -> how a message spells them
TARGET_WORDS = {"instance": "scheduler-<N>", "leader": "leader", "all": "all"}


def target_kind(target: str) -> str | None:
    """``instance`` / ``leader`` / ``all``, or None when the string is none of them."""
    if target in ("leader", "all"):
        return target
    return "instance" if _INSTANCE.match(target) else None


def _target(v: str) -> str:
    if target_kind(v) is None:
        raise ValueError(f"{v!r}: expected scheduler-<N>, leader or all")
    return v


def _names(allowed: tuple[str, ...], what: str):
    def check(v: list[str]) -> list[str]:
        if not v:
            raise ValueError(f"expected a non-empty list of {what}s")
        for x in v:
            if x not in allowed:
                raise ValueError(f"unknown {what} {x!r}; known: {', '.join(allowed)}")
        return v
    return check


def _one_to_list(v: object) -> object:
    return [v] if isinstance(v, str) else v


Target = Annotated[str, AfterValidator(_target), Field(
    description="scheduler-<N>, leader (resolved when the fault starts) or all",
    json_schema_extra={"pattern": r"^(scheduler-[1-9]\d*|leader|all)$"})]
For = Annotated[PositiveDuration, Field(
    description="how long the fault lasts (without it: until the end of the run)")]
Kinds = Annotated[list[str], BeforeValidator(_one_to_list), AfterValidator(_names(KINDS, "kind")),
                  WithJsonSchema({"type": "array", "items": {"enum": list(KINDS)}, "minItems": 1}),
                  Field(description="the informer kinds it acts on (default: every kind)")]
Verbs = Annotated[list[str], BeforeValidator(_one_to_list), AfterValidator(_names(VERBS, "verb")),
                  WithJsonSchema({"type": "array", "items": {"enum": list(VERBS)}, "minItems": 1}),
                  Field(description="the API verbs it acts on")]
class _OrBareDuration:
    """JSON Schema of ``delay``: a distribution map or a bare duration (= fixed)."""

    def __get_pydantic_json_schema__(self, core_schema, handler):
        return {"anyOf": [handler(core_schema), DURATION_SCHEMA]}


Delay = Annotated[Distribution, BeforeValidator(fixed_shorthand), _OrBareDuration(),
                  Field(description="a delay distribution (a bare duration = fixed)")]
Window = Annotated[PositiveDuration, Field(description="the largest random hold of an event")]
RestartAfter = Annotated[Duration, Field(description="restart the instance this long after")]
Probability = Annotated[float, Field(ge=0, le=1, description="the chance per call, in [0, 1]")]
ClockRate = Annotated[float, Field(gt=0, allow_inf_nan=False, description="clock speed (1 = real time)")]


class FaultParams(BaseModel):
    """Base of a fault's ``Params``: the keys it takes besides ``at`` and ``fault``. A field
    without a default is required; ``for`` is spelled ``for_`` (alias ``for``)."""
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class ApiParams(FaultParams):
    """The keys every API-chaos fault takes (api-latency, api-conflict): every instance unless
    ``target`` says otherwise, the writes unless ``verbs`` says otherwise."""
    target: Target = "all"
    for_: Optional[For] = Field(None, alias="for")
    verbs: Verbs = Field(list(WRITE_VERBS), description="the API verbs it acts on (default: the writes)")
