"""One ``chaos:`` entry: the experiment file's :class:`ChaosEntry` (pydantic, strict) and the
resolved :class:`Fault` the schedule, the nemesis and the injectors use.

``ChaosEntry`` is built from the registry: ``at``, ``fault`` and every key some fault takes, typed
as that fault's ``Params`` declares it (:mod:`chaos.faults.fields`). After the types, the entry's
fault judges it (:meth:`chaos.faults.base.FaultPackage.problems`: keys it needs or does not take,
targets it accepts, its own rules); problems carry the key they are about, so messages read
``chaos[2].target: fault kill cannot target 'all' (it takes scheduler-<N> or leader)``.
:func:`parse_fault` validates one raw map (or a ChaosEntry) and resolves it, defaults filled in.
"""
from __future__ import annotations

import types
import typing
from dataclasses import dataclass, field
from typing import Any, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model, field_validator, model_validator
from pydantic_core import PydanticCustomError

from chaos.faults.distribution import Distribution
from chaos.faults.fields import TARGET_WORDS
from chaos.faults.registry import FAULTS
from apimachinery.errors import BadInput
from apimachinery.units import Duration
from apimachinery.validation import validation_problems

__all__ = ["ChaosEntry", "Fault", "parse_fault", "PARAM_KEYS"]


def _core_type(info: Any) -> Any:
    """A Params field's type without its Optional (every envelope key is optional)."""
    tp = info.annotation
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return info.rebuild_annotation()


def _param_fields() -> dict[str, tuple[str, Any, Any]]:
    """key (YAML) -> (attribute, type, FieldInfo) over every fault, the first declaration of a key
    winning (faults share a key's type through chaos.faults.fields)."""
    out: dict[str, tuple[str, Any, Any]] = {}
    for pkg in FAULTS.values():
        for attr, info in pkg.Params.model_fields.items():
            key = info.alias or attr
            if key not in out:
                out[key] = (attr, _core_type(info), info)
    # target and for first (the order users write them in)
    first = [k for k in ("target", "for") if k in out]
    return {k: out[k] for k in first + [k for k in out if k not in first]}


_PARAMS = _param_fields()
PARAM_KEYS: tuple[str, ...] = tuple(_PARAMS)


def _schema_extra(schema: dict[str, Any]) -> None:
    """Per fault: its required keys, the keys it does not take, the targets it accepts."""
    rules = []
    for name, pkg in FAULTS.items():
        takes = set(pkg.keys())
        then: dict[str, Any] = {"properties": {k: False for k in PARAM_KEYS if k not in takes}}
        if pkg.required():
            then["required"] = pkg.required()
        if "target" in takes and set(pkg.targets) != set(TARGET_WORDS):
            alts = [{"instance": r"scheduler-[1-9]\d*", "leader": "leader", "all": "all"}[t]
                    for t in pkg.targets]
            then["properties"]["target"] = {"pattern": f"^({'|'.join(alts)})$"}
        rules.append({"if": {"properties": {"fault": {"const": name}}, "required": ["fault"]},
                      "then": then})
    schema["allOf"] = rules


class _EntryBase(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, json_schema_extra=_schema_extra)

    @field_validator("fault", check_fields=False)
    @classmethod
    def _known_fault(cls, v: str) -> str:
        if v not in FAULTS:
            raise ValueError(f"unknown fault {v!r}; known: {', '.join(FAULTS)}")
        return v

    @model_validator(mode="after")
    def _judged_by_its_fault(self) -> "_EntryBase":
        problems = FAULTS[self.fault].problems(self.given())
        if problems:
            raise ValidationError.from_exception_data("ChaosEntry", [
                {"type": PydanticCustomError("chaos_entry", "{problem}", {"problem": msg}),
                 "loc": (key,) if key else (), "input": self.given().get(key) if key else None}
                for key, msg in problems])
        return self

    def given(self) -> dict[str, Any]:
        """The fault's keys this entry sets (YAML spelling) -> value."""
        return {k: getattr(self, attr) for k, (attr, _, _) in _PARAMS.items()
                if getattr(self, attr) is not None}

    @property
    def end(self) -> Optional[float]:
        d = getattr(self, "for_", None)
        return None if d is None else self.at + d


ChaosEntry = create_model(
    "ChaosEntry", __base__=_EntryBase, __module__=__name__,
    __doc__="One fault of an experiment's ``chaos:`` list: starts ``at``; what else it takes "
            "depends on ``fault`` (docs/reference.md).",
    at=(Duration, Field(description="when it starts, from the start of the run")),
    fault=(str, Field(description="the fault's name", json_schema_extra={"enum": list(FAULTS)})),
    **{attr: (Optional[tp], Field(None, alias=None if key == attr else key, description=info.description))
       for key, (attr, tp, info) in _PARAMS.items()})


# ------------------------------------------------------------------------------------ resolved

# keys with an attribute of their own on Fault (others land in Fault.extra)
_FAULT_ATTRS = {"target": "target", "for": "duration", "kinds": "kinds", "delay": "delay",
                "window": "window", "restart_after": "restart_after", "verbs": "verbs",
                "probability": "probability", "rate": "rate"}


@dataclass(frozen=True)
class Fault:
    """One validated ``chaos:`` entry, defaults filled in (times in seconds from the run's start)."""
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

    @property
    def package(self):
        return FAULTS[self.fault]

    def get(self, key: str) -> Any:
        """A parameter by its YAML key (``for``, ``delay``, or a key of a newer fault)."""
        attr = _FAULT_ATTRS.get(key)
        return getattr(self, attr) if attr else self.extra.get(key)

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
        out.update(self.extra)
        return out


def resolve(entry: "ChaosEntry", index: int) -> Fault:
    """The Fault of a validated entry: its fault's defaults for the keys it leaves out."""
    pkg = FAULTS[entry.fault]
    given = entry.given()
    kw: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, info in pkg.keys().items():
        v = given.get(key, info.default)
        if isinstance(v, list):
            v = tuple(v)
        if key in _FAULT_ATTRS:
            kw[_FAULT_ATTRS[key]] = v
        elif v is not None:
            extra[key] = v
    return Fault(index=index, fault=entry.fault, at=entry.at, extra=extra, **kw)


def parse_fault(entry: Any, index: int = 0) -> Fault:
    """Validate one ``chaos:`` entry (a map or a ChaosEntry) and resolve it; errors are
    :class:`BadInput`, one line per problem: ``chaos[index].field: problem``."""
    where = f"chaos[{index}]"
    if not isinstance(entry, ChaosEntry):
        if isinstance(entry, BaseModel):
            entry = entry.model_dump(mode="json", by_alias=True, exclude_none=True)
        if not isinstance(entry, dict):
            raise BadInput(f"{where}: expected a map like {{at: 10s, fault: kill, target: leader}}, "
                           f"got {entry!r}")
        try:
            entry = ChaosEntry.model_validate(entry)
        except ValidationError as e:
            raise BadInput("\n".join(f"{p}: {m}" for p, m in
                                     validation_problems(e, ChaosEntry, ("chaos", index)))) from None
    return resolve(entry, index)
