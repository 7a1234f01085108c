"""Checkers: every metric of a run, each computed by ONE module from the recorded history alone.

A checker is a module in this package (or in a folder given to :func:`all_checkers` as an
``extra_paths`` entry) that defines::

    NAME = "allocation_drift"                # the metric's key in metrics.json's summary
    def check(h: History) -> Any | Absent    # the metric's value, or Absent(reason)
    def columns(h: History) -> dict          # optional: {column: [ {instance: value} per tick ]}

Modules whose name starts with ``_`` are shared helpers, not checkers. The registry is
discovered from the package's files and sorted by NAME, so adding a metric is adding one file and
the order of results never depends on the file system. Checkers read only the
:class:`~ha.experiment.history.History` (and its ``memo`` for derived data another checker
already computed: the reference replay, the truth fold).
"""
from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Iterable

from ha.errors import BadInput

__all__ = ["Absent", "Checker", "all_checkers", "run_checkers"]


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


def _checker_of(mod: ModuleType, where: str) -> Checker:
    name = getattr(mod, "NAME", None)
    check = getattr(mod, "check", None)
    if not isinstance(name, str) or not name or not callable(check):
        raise BadInput(f"{where}: a checker module needs NAME (str) and check(h)")
    cols = getattr(mod, "columns", None)
    return Checker(name=name, check=check, columns=cols if callable(cols) else None, module=mod.__name__)


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
