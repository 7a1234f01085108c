"""Docs a reader of the repository can follow: no docstring, comment or document points at a file
outside the repository (the design documents the project started from live elsewhere; what the
code relies on of them is in docs/design.md and docs/volcano-semantics.md), and every ``docs/*.md``
a file names exists."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUTSIDE = re.compile(r"\.\./shared|/work/shared|INTERFACES\.md|RunnerTargets|"
                     r"(?<![\w/.-])(?:DESIGN|volcano-semantics|format-extensions|kubernetes-and-peers|"
                     r"platform-measurements|real-schedulers)\.md")
DOCS_LINK = re.compile(r"\bdocs/([\w.-]+\.md)")


def _files() -> list[Path]:
    out = []
    for ext in ("*.py", "*.md", "*.yaml"):
        for p in ROOT.rglob(ext):
            rel = p.relative_to(ROOT).parts
            if rel[0] in (".git", "go", ".venv", "results") or "egg-info" in rel[0] or rel[0].startswith("."):
                continue
            if p.name == Path(__file__).name:
                continue
            out.append(p)
    return out


def test_nothing_points_outside_the_repository():
    bad = [f"{p.relative_to(ROOT)}:{i}: {m.group(0)}"
           for p in _files() for i, line in enumerate(p.read_text(errors="replace").splitlines(), 1)
           for m in OUTSIDE.finditer(line)]
    assert bad == []


def test_every_named_doc_exists():
    missing = sorted({f"{p.relative_to(ROOT)}: docs/{m.group(1)}"
                      for p in _files() for m in DOCS_LINK.finditer(p.read_text(errors="replace"))
                      if not (ROOT / "docs" / m.group(1)).exists()})
    assert missing == []


def test_the_check_sees_an_outside_pointer():
    assert OUTSIDE.search("see ../shared/DESIGN.md") and OUTSIDE.search("(volcano-semantics.md §5.3)")
    assert not OUTSIDE.search("(docs/volcano-semantics.md §5.3)") and not OUTSIDE.search("docs/design.md")
