"""Validation problems in words a user can act on: a pydantic ``ValidationError`` becomes one
``(field path, problem)`` pair per error -- ``schedulers.instances``, ``must be ≥ 1 (got 0)`` -- and
an unknown key lists the keys allowed there (read from the model classes). Apimachinery's
``field.ErrorList`` of this project: every file format that is a pydantic model (experiment files,
chaos entries, delay distributions) reports through it, so their messages read alike."""
from __future__ import annotations

import types
import typing
from typing import Annotated, Any

from pydantic import BaseModel, ValidationError

__all__ = ["validation_problems", "field_path"]


def field_path(loc: tuple) -> str:
    """``("chaos", 2, "delay")`` -> ``chaos[2].delay``; the empty path is ``(top level)``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "(top level)"


def _fields_at(loc: tuple, root: type[BaseModel]) -> list[str] | None:
    """The keys allowed at ``loc`` (for 'unknown key' hints), walking the model classes."""
    tp: Any = root
    for part in loc:
        tp = _unwrap(tp)
        if isinstance(part, int):
            args = typing.get_args(tp)
            if not args:
                return None
            tp = args[0]
            continue
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            f = next((f for n, f in tp.model_fields.items() if (f.alias or n) == part), None)
            if f is None:
                return None
            tp = f.annotation
        else:
            args = typing.get_args(tp)
            if typing.get_origin(tp) is dict and len(args) == 2:
                tp = args[1]
            else:
                return None
    tp = _unwrap(tp)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return [f.alias or n for n, f in tp.model_fields.items()]
    return None


def _unwrap(tp: Any) -> Any:
    while True:
        origin = typing.get_origin(tp)
        if origin is Annotated:
            tp = typing.get_args(tp)[0]
        elif origin in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(tp) if a is not type(None)]
            if len(args) != 1:
                return tp
            tp = args[0]
        else:
            return tp


def _message(err: dict, root: type[BaseModel]) -> str:
    t, ctx, inp = err["type"], err.get("ctx") or {}, err.get("input")
    got = f" (got {inp!r})" if not isinstance(inp, (dict, list)) else ""
    if t == "missing":
        return "required"
    if t == "extra_forbidden":
        allowed = _fields_at(tuple(err["loc"][:-1]), root)
        hint = f" (allowed: {', '.join(allowed)})" if allowed else ""
        return f"unknown key{hint}"
    if t == "greater_than_equal":
        return f"must be ≥ {ctx.get('ge')}{got}"
    if t == "greater_than":
        return f"must be > {ctx.get('gt')}{got}"
    if t == "less_than_equal":
        return f"must be ≤ {ctx.get('le')}{got}"
    if t == "less_than":
        return f"must be < {ctx.get('lt')}{got}"
    if t == "literal_error":
        return f"must be one of {ctx.get('expected')}{got}"
    if t in ("int_parsing", "int_type", "int_from_float"):
        return f"expected an integer{got}"
    if t in ("bool_parsing", "bool_type"):
        return f"expected true or false{got}"
    if t in ("float_parsing", "float_type"):
        return f"expected a number{got}"
    if t in ("string_type",):
        return f"expected a string{got}"
    if t in ("list_type", "tuple_type"):
        return f"expected a list{got}"
    if t in ("model_type", "dict_type", "model_attributes_type"):
        return f"expected a map{got}"
    if t == "too_short" or t == "too_long":
        return f"expected {ctx.get('expected', '')} items{got}".replace("  ", " ")
    if t == "value_error":
        return str(ctx.get("error") or err["msg"]).removeprefix("Value error, ")
    return err["msg"]


def validation_problems(e: ValidationError, root: type[BaseModel],
                        prefix: tuple = ()) -> list[tuple[str, str]]:
    """(field path, problem) for each error of validating the model ``root``; ``prefix`` is where
    that model sits in the file (e.g. ``("chaos", 2)``)."""
    return [(field_path(prefix + tuple(err["loc"])), _message(err, root)) for err in e.errors()]
