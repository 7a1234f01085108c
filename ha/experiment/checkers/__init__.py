"""Checkers: every metric of a run, each computed by ONE module from the recorded history alone.

A checker is a module in this package (or in a folder given to :func:`all_checkers` as an
``extra_paths`` entry) that defines::

    NAME = "allocation_drift"                # the metric's key in metrics.json's summary
    HEADLINE = "count"                       # the key of its summary a table shows (None: below)
    CONTRACT = True                          # one of the contract's metrics (docs/design.md)
    def check(h: History) -> Any | Absent    # the metric's value, or Absent(reason)
    def columns(h: History) -> dict          # optional: {column: [ {instance: value} per tick ]}

The first sentence of its docstring is the metric's definition (docs/reference.md lists them).
Its rule lives in the module too: what the checkers share (the truth fold, the reference pass,
the vocabulary of ``ha.experiment.oracles``) is only what they read.

Modules whose name starts with ``_`` are shared helpers, not checkers. The registry is
discovered from the package's files and sorted by NAME, so adding a metric is adding one file and
the order of results never depends on the file system. Checkers read only the
:class:`~ha.experiment.history.History` (and its ``memo`` for derived data another checker
already computed: the reference replay, the truth fold).

The registry is what every reader of a summary goes by -- report, compare, sweep, shrink's
predicates, the reference page: :func:`metric_names` (the contract's metrics first, then the
extensions, each in name order) and :func:`headline` (the one number a table shows for a
metric's summary: the key its checker names; for a summary of per-instance maps, the worst
instance's; without a key, the summary itself or its first of ``max``, ``count``, ``p99``,
``value``).
"""
from __future__ import annotations

import functools
import importlib
import importlib.util
import math
import pkgutil
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Iterable, Mapping

from ha.errors import BadInput

__all__ = ["Absent", "Checker", "all_checkers", "run_checkers", "registry", "metric_names", "headline"]


@dataclass(frozen=True)
class Absent:
    """The metric could not be computed from this history; ``reason`` says why (never a zero)."""
    reason: str


@dataclass(frozen=True)
class Checker:
    name: str
    check: Callable[[Any], Any]
    columns: Callable[[Any], dict] | None
    module: str
    headline: str | None = None     # the key of its summary a table shows
    contract: bool = False          # one of the contract's metrics (docs/design.md)


def _checker_of(mod: ModuleType, where: str) -> Checker:
    name = getattr(mod, "NAME", None)
    check = getattr(mod, "check", None)
    if not isinstance(name, str) or not name or not callable(check):
        raise BadInput(f"{where}: a checker module needs NAME (str) and check(h)")
    cols = getattr(mod, "columns", None)
    head = getattr(mod, "HEADLINE", None)
    if head is not None and not isinstance(head, str):
        raise BadInput(f"{where}: HEADLINE must be the name of a key of the summary, or None")
    return Checker(name=name, check=check, columns=cols if callable(cols) else None, module=mod.__name__,
                   headline=head, contract=bool(getattr(mod, "CONTRACT", False)))


def all_checkers(extra_paths: Iterable[str | Path] = ()) -> list[Checker]:
    """Every checker of this package, plus those in ``extra_paths`` (folders of checker modules,
    or single ``.py`` files), sorted by name. Two checkers with one NAME are bad input."""
    found: list[Checker] = []
    pkg = Path(__file__).parent
    for info in sorted(pkgutil.iter_modules([str(pkg)]), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        mod = importlib.import_module(f"{__name__}.{info.name}")
        found.append(_checker_of(mod, str(pkg / f"{info.name}.py")))
    for p in extra_paths:
        p = Path(p)
        files = sorted(p.glob("*.py")) if p.is_dir() else [p]
        for f in files:
            if f.name.startswith("_"):
                continue
            if not f.is_file():
                raise BadInput(f"{f}: no such checker file")
            spec = importlib.util.spec_from_file_location(f"ha_testbed_extra_checkers.{f.stem}", f)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            found.append(_checker_of(mod, str(f)))
    names = [c.name for c in found]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise BadInput(f"checkers: more than one checker named {', '.join(dup)}")
    return sorted(found, key=lambda c: c.name)


def run_checkers(h, checkers: list[Checker] | None = None) -> tuple[dict[str, Any], dict[str, str]]:
    """(summary, absent) of every checker over the history ``h``; a checker that raises is absent
    with the error as its reason (one broken metric does not hide the others)."""
    summary: dict[str, Any] = {}
    absent: dict[str, str] = {}
    for c in checkers if checkers is not None else all_checkers():
        try:
            v = c.check(h)
        except BadInput:
            raise
        except Exception as e:  # noqa: BLE001
            v = Absent(f"checker failed: {type(e).__name__}: {e}")
        if isinstance(v, Absent):
            absent[c.name] = v.reason
        else:
            summary[c.name] = v
    return summary, absent


@functools.lru_cache(maxsize=1)
def _package_checkers() -> tuple[Checker, ...]:
    return tuple(all_checkers())


def registry() -> dict[str, Checker]:
    """This package's checkers by metric name."""
    return {c.name: c for c in _package_checkers()}


def metric_names(*, contract_only: bool = False) -> tuple[str, ...]:
    """Every metric of the registry: the contract's first, then the extensions (name order in each)."""
    cs = _package_checkers()
    contract = tuple(c.name for c in cs if c.contract)
    return contract if contract_only else contract + tuple(c.name for c in cs if not c.contract)


def headline(metric: str, value: Any) -> Any:
    """The one number a table shows for a metric's summary value (None if absent)."""
    if isinstance(value, Mapping):
        c = registry().get(metric)
        k = c.headline if c is not None else None
        if k is not None and k not in value:
            # per-instance shape ({instance: {p50, p99, ...}}): the worst instance
            vs = [x.get(k) for x in value.values() if isinstance(x, Mapping) and x.get(k) is not None]
            return max(vs) if vs else None
        if k is None:
            for k in ("max", "count", "p99", "value"):
                if k in value:
                    break
        v = value.get(k)
        return None if isinstance(v, float) and not math.isfinite(v) else v
    return value
