"""``--when EXPR``: a small, safe predicate language over a run's summary (``metrics.json``).

Grammar (no ``eval``; a hand-written tokenizer and recursive-descent parser)::

    expr    := and ('or' and)*
    and     := unary ('and' unary)*
    unary   := 'not' unary | '(' expr ')' | compare
    compare := key OP literal          OP: == != > >= < <=
    key     := name ('.' name)*        e.g. cyclic_evictions, convergence.ok, cache_divergence.max
    literal := number | true | false | null | 'text' | "text"

A key's first part names a metric of the summary. A bare metric whose value is a map stands for its
headline scalar (``ha.experiment.checkers.headline``: the number a summary table shows, e.g.
``cyclic_evictions`` → its ``count``); dotted keys walk into the map. A comparison whose key is
absent from the summary (or is not a scalar, or compares a number with a word) is false and leaves a
note saying why — a missing metric is never a zero. Bad input raises :class:`ha.errors.BadInput`
naming the expression, the position and the problem.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Union

from ha.errors import BadInput

__all__ = ["Predicate", "Verdict", "parse_predicate"]

OPS = ("==", "!=", ">=", "<=", ">", "<")
_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<op>==|!=|>=|<=|>|<)
  | (?P<lp>\()
  | (?P<rp>\))
  | (?P<num>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?(?![A-Za-z_]))
  | (?P<str>'[^']*'|"[^"]*")
  | (?P<key>[A-Za-z_][A-Za-z0-9_\-]*(?:\.[A-Za-z0-9_\-|]+)*)
""", re.VERBOSE)
_WORDS = {"and", "or", "not", "true", "false", "null"}


@dataclass(frozen=True)
class _Tok:
    kind: str
    text: str
    pos: int


@dataclass(frozen=True)
class Compare:
    key: str
    op: str
    literal: Any

    def __str__(self) -> str:
        lit = self.literal
        text = "null" if lit is None else ("true" if lit is True else "false" if lit is False
                                           else repr(lit) if isinstance(lit, str) else f"{lit:g}")
        return f"{self.key}{self.op}{text}"


@dataclass(frozen=True)
class BoolOp:
    op: str                 # "and" | "or"
    parts: tuple["Node", ...]


@dataclass(frozen=True)
class Not:
    part: "Node"


Node = Union[Compare, BoolOp, Not]


@dataclass
class Verdict:
    """One evaluation: the truth value, each key's value as read, and notes (absent keys, type
    mismatches) that explain a false comparison."""
    ok: bool
    values: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def describe(self) -> str:
        vals = ", ".join(f"{k}={_fmt(v)}" for k, v in self.values.items())
        return f"{'true' if self.ok else 'false'} ({vals})" if vals else ("true" if self.ok else "false")


def _fmt(v: Any) -> str:
    if v is None:
        return "absent"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.toks = self._tokenize(text)
        self.i = 0

    def err(self, pos: int, problem: str) -> BadInput:
        return BadInput(f"--when {self.text!r}: at position {pos + 1}: {problem}")

    def _tokenize(self, text: str) -> list[_Tok]:
        out: list[_Tok] = []
        pos = 0
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None:
                raise self.err(pos, f"unexpected character {text[pos]!r} (keys, numbers, true/false/null, "
                                    f"quoted text, {' '.join(OPS)}, and, or, not, parentheses)")
            kind = m.lastgroup
            if kind != "ws":
                tok = m.group()
                if kind == "key" and tok in _WORDS:
                    kind = tok
                out.append(_Tok(kind, tok, pos))
            pos = m.end()
        out.append(_Tok("end", "", len(text)))
        return out

    def peek(self) -> _Tok:
        return self.toks[self.i]

    def take(self, kind: str | None = None) -> _Tok:
        t = self.toks[self.i]
        if kind is not None and t.kind != kind:
            raise self.err(t.pos, f"expected {kind}, got {t.text or 'the end'!r}")
        self.i += 1
        return t

    def take_close(self) -> None:
        t = self.peek()
        if t.kind != "rp":
            raise self.err(t.pos, f"expected ')', got {t.text or 'the end'!r}")
        self.take()

    def parse(self) -> Node:
        if self.peek().kind == "end":
            raise self.err(0, "empty expression")
        node = self.expr()
        t = self.peek()
        if t.kind != "end":
            raise self.err(t.pos, f"unexpected {t.text!r} after a complete expression "
                                  f"(join comparisons with 'and' / 'or')")
        return node

    def expr(self) -> Node:
        parts = [self.conj()]
        while self.peek().kind == "or":
            self.take()
            parts.append(self.conj())
        return parts[0] if len(parts) == 1 else BoolOp("or", tuple(parts))

    def conj(self) -> Node:
        parts = [self.unary()]
        while self.peek().kind == "and":
            self.take()
            parts.append(self.unary())
        return parts[0] if len(parts) == 1 else BoolOp("and", tuple(parts))

    def unary(self) -> Node:
        t = self.peek()
        if t.kind == "not":
            self.take()
            return Not(self.unary())
        if t.kind == "lp":
            self.take()
            node = self.expr()
            self.take_close()
            return node
        return self.compare()

    def compare(self) -> Node:
        t = self.peek()
        if t.kind != "key":
            raise self.err(t.pos, f"expected a metric name, got {t.text or 'the end'!r}")
        key = self.take().text
        op = self.peek()
        if op.kind != "op":
            raise self.err(op.pos, f"expected a comparison ({', '.join(OPS)}) after {key!r}, "
                                   f"got {op.text or 'the end'!r}")
        self.take()
        lit = self.peek()
        if lit.kind == "num":
            value: Any = float(lit.text)
            if value.is_integer() and re.fullmatch(r"[-+]?\d+", lit.text):
                value = int(lit.text)
        elif lit.kind in ("true", "false"):
            value = lit.kind == "true"
        elif lit.kind == "null":
            value = None
        elif lit.kind == "str":
            value = lit.text[1:-1]
        else:
            raise self.err(lit.pos, f"expected a number, true, false, null or quoted text after "
                                    f"{key}{op.text}, got {lit.text or 'the end'!r}")
        self.take()
        if op.text not in ("==", "!=") and not isinstance(value, (int, float)) or isinstance(value, bool) \
                and op.text not in ("==", "!="):
            raise self.err(op.pos, f"{op.text} needs a number on its right (got {lit.text})")
        return Compare(key, op.text, value)


def _lookup(summary: Mapping[str, Any], key: str) -> tuple[bool, Any, str | None]:
    """(found, scalar value, note when not usable)."""
    from ha.experiment.checkers import headline
    parts = key.split(".")
    if parts[0] not in summary:
        return False, None, f"{key}: metric {parts[0]!r} is absent from the summary (comparison is false)"
    v: Any = summary[parts[0]]
    if len(parts) == 1:
        v = headline(parts[0], v) if isinstance(v, Mapping) else v
    for i, p in enumerate(parts[1:], 1):
        if not isinstance(v, Mapping) or p not in v:
            return False, None, f"{key}: {'.'.join(parts[:i + 1])} is absent (comparison is false)"
        v = v[p]
    if isinstance(v, (Mapping, list)):
        return False, None, f"{key}: is a {'map' if isinstance(v, Mapping) else 'list'}, not a scalar " \
                            f"(name one of its fields with a dot; comparison is false)"
    return True, v, None


def _compare(v: Any, op: str, lit: Any) -> tuple[bool, str | None]:
    if op in ("==", "!="):
        if isinstance(lit, bool) or isinstance(v, bool):
            same = isinstance(v, bool) and isinstance(lit, bool) and v == lit
        elif isinstance(lit, (int, float)) and isinstance(v, (int, float)):
            same = v == lit
        else:
            same = v == lit
        return (same if op == "==" else not same), None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (isinstance(v, float) and math.isnan(v)):
        return False, f"value {_fmt(v)} is not a number (comparison is false)"
    return {"<": v < lit, "<=": v <= lit, ">": v > lit, ">=": v >= lit}[op], None


@dataclass(frozen=True)
class Predicate:
    text: str
    tree: Node

    def keys(self) -> list[str]:
        out: list[str] = []

        def walk(n: Node) -> None:
            if isinstance(n, Compare):
                if n.key not in out:
                    out.append(n.key)
            elif isinstance(n, Not):
                walk(n.part)
            else:
                for p in n.parts:
                    walk(p)
        walk(self.tree)
        return out

    def evaluate(self, summary: Mapping[str, Any]) -> Verdict:
        verdict = Verdict(ok=False)

        def ev(n: Node) -> bool:
            if isinstance(n, Compare):
                found, v, note = _lookup(summary, n.key)
                verdict.values.setdefault(n.key, v)
                if not found:
                    verdict.notes.append(note)
                    return False
                ok, note = _compare(v, n.op, n.literal)
                if note:
                    verdict.notes.append(f"{n}: {note}")
                return ok
            if isinstance(n, Not):
                return not ev(n.part)
            results = [ev(p) for p in n.parts]     # every part: every key's value is reported
            return all(results) if n.op == "and" else any(results)

        verdict.ok = ev(self.tree)
        return verdict

    def __str__(self) -> str:
        return self.text


def parse_predicate(text: str) -> Predicate:
    """Parse ``--when``; :class:`BadInput` (exit 2) names the position and the problem."""
    if not isinstance(text, str):
        raise BadInput(f"--when: expected text, got {type(text).__name__}")
    return Predicate(text, _Parser(text).parse())
