"""The fault registry: every module of this package that exposes ``FAULT`` (a
:class:`chaos.faults.base.FaultPackage`), by name, in the packages' ``order`` (then name).
Adding a fault = adding one module here; nothing else lists faults."""
from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path
from typing import Any

from chaos.faults.base import FaultPackage

__all__ = ["FAULTS", "discover"]

# the package's own plumbing, not faults
SUPPORT_MODULES = frozenset({"base", "distribution", "entry", "fields", "registry"})


def discover() -> dict[str, FaultPackage]:
    package = __name__.rpartition(".")[0]
    found: list[FaultPackage] = []
    for info in sorted(pkgutil.iter_modules([str(Path(__file__).parent)]), key=lambda m: m.name):
        if info.name in SUPPORT_MODULES or info.name.startswith("_"):
            continue
        mod = importlib.import_module(f"{package}.{info.name}")
        fault: Any = getattr(mod, "FAULT", None)
        if isinstance(fault, FaultPackage):
            found.append(fault)
    found.sort(key=lambda f: (f.order, f.name))
    out: dict[str, FaultPackage] = {}
    for f in found:
        if f.name in out:
            raise RuntimeError(f"two fault modules define {f.name!r}")
        out[f.name] = f
    return out


FAULTS: dict[str, FaultPackage] = discover()
