"""The layering rules, read from the source (ast), not by importing:

* the scheduler model (``ha.scheduler``) is pure and synchronous: it imports neither Redis, Ray,
  asyncio, the API server (``cluster_state``), the chaos package nor the rest of ``ha`` (bar
  ``ha.errors``) — the same model runs live, in the scenario runner, in replay and in a simulation;
* the API server (``cluster_state``) does not import ``ha``;
* the shared vocabulary (``apimachinery``) imports neither.
Every import statement counts, also those inside functions (lazy imports are still imports)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def imports_of(package_dir: Path, package: str) -> dict[str, set[str]]:
    """module (dotted) -> every module name it imports (relative imports resolved)."""
    out: dict[str, set[str]] = {}
    for path in sorted(package_dir.rglob("*.py")):
        rel = path.relative_to(package_dir).with_suffix("")
        parts = [package, *rel.parts]
        is_pkg = parts[-1] == "__init__"
        if is_pkg:
            parts = parts[:-1]
        mod = ".".join(parts)
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                names.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = parts if is_pkg else parts[:-1]
                    base = base[:len(base) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                if node.module:
                    names.add(target)
                else:            # from . import x: x is a module of that package
                    names.update(f"{target}.{a.name}" for a in node.names)
        out[mod] = names
    return out


def violations(package_dir: Path, package: str, forbidden: tuple[str, ...],
               allowed: tuple[str, ...] = ()) -> list[str]:
    bad = []
    for mod, names in imports_of(package_dir, package).items():
        for name in sorted(names):
            hit = any(name == f or name.startswith(f + ".") for f in forbidden)
            ok = any(name == a or name.startswith(a + ".") for a in allowed)
            if hit and not ok:
                bad.append(f"{mod} imports {name}")
    return bad


def test_scheduler_model_imports_no_io_nor_api_server():
    bad = violations(ROOT / "ha" / "scheduler", "ha.scheduler",
                     forbidden=("redis", "ray", "asyncio", "cluster_state", "chaos", "ha"),
                     allowed=("ha.scheduler", "ha.errors"))
    assert bad == []


def test_api_server_does_not_import_ha():
    assert violations(ROOT / "cluster_state", "cluster_state", forbidden=("ha", "chaos")) == []


def test_shared_vocabulary_imports_neither_side():
    assert violations(ROOT / "apimachinery", "apimachinery",
                      forbidden=("ha", "cluster_state", "chaos", "redis", "ray", "asyncio")) == []


@pytest.mark.parametrize("source, found", [
    ("import redis\n", "pkg.mod imports redis"),
    ("def f():\n    from cluster_state.client import ApiClient\n", "pkg.mod imports cluster_state.client"),
    ("from ..runtime import instance\n", "pkg.mod imports runtime"),
    ("import asyncio.tasks\n", "pkg.mod imports asyncio.tasks"),
])
def test_the_check_finds_a_forbidden_import(tmp_path, source, found):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "mod.py").write_text(source)
    (pkg / "fine.py").write_text("import math\nfrom . import mod\n")
    bad = violations(pkg, "pkg", forbidden=("redis", "asyncio", "cluster_state", "runtime"))
    assert bad == [found]
