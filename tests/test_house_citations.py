"""Comments and docstrings of the repository's Python name the designs they follow in words ("PR
#5045's design", "the gang-aware eviction design", "the annotation-persistence design") and cite
files inside the repository by their headings, never by the numbers of design documents a reader of
the repository cannot open ("seed 001 §3.2", "seed-003", "seeds/000_...").

Names that are contracts stay: the profile ``seed000``, ``_SEED000`` and example files such as
``examples/seed000-current-vs-proposed.yaml`` carry no space or dash before the number and are not
matched.

A section number ("§5.3", "§16.2") is a citation of a file in docs/: the file the same line names
before it (``docs/design.md §...``), else docs/volcano-semantics.md, whose sections keep the numbers
the code uses. It must be a section that file has, as a heading (``## §5.3 Aggregators``) or as the
bold label that opens a paragraph (``**§16.2 The harness**``); a number from an outside document
("§3", "§12.1") is not.

The check reads every .py file of the packages and the tests, except this file, whose examples are
the citations it refuses."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("ha", "cluster_state", "apimachinery", "chaos", "kube_api", "examples", "tests")
THIS = Path(__file__).resolve().relative_to(ROOT)
# a design document by its number: "seed 001", "Seed 000's", "seed-003", "seed000's", "seeds/000_",
# also across a line break ("seed\n000's", "seed\n    # 001"), or by its section numbers: "seed §3.4"
DESIGN_NUMBER = re.compile(r"\bseed[\s#-]+0\d\d|\bseed0\d\d's|\bseeds/0|\bseed\s*§", re.IGNORECASE)
SECTION = re.compile(r"§(\d+(?:\.\d+)*)")
DOC_NAME = re.compile(r"\bdocs/[\w.-]+\.md\b")
DEFAULT_DOC = "docs/volcano-semantics.md"
# a section of a docs file: a heading "## §5.3 Aggregators" or a paragraph's bold label "**§16.2 The"
DOC_SECTION = re.compile(r"^(?:#+\s*|\*\*)§(\d+(?:\.\d+)*)\b", re.MULTILINE)


def python_files(root: Path) -> list[Path]:
    """Every .py file of the packages and the tests, this file left out."""
    return [p for pkg in PACKAGES for p in sorted((root / pkg).rglob("*.py"))
            if p.relative_to(root) != THIS]


def citations(root: Path) -> list[str]:
    """``path:line: match`` for every design document cited by number in a .py file."""
    out = []
    for p in python_files(root):
        text = p.read_text(encoding="utf-8")
        out += [f"{p.relative_to(root)}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)!r}"
                for m in DESIGN_NUMBER.finditer(text)]
    return out


def doc_sections(root: Path, doc: str) -> set[str]:
    """The section numbers ``doc`` (a path from the root) has; empty when there is no such file."""
    path = root / doc
    return set(DOC_SECTION.findall(path.read_text(encoding="utf-8"))) if path.is_file() else set()


def unknown_sections(root: Path) -> list[str]:
    """``path:line: §N in doc`` for every section number a .py file cites that its docs file lacks."""
    out, known = [], {}
    for p in python_files(root):
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
            for m in SECTION.finditer(line):
                named = DOC_NAME.findall(line, 0, m.start())
                doc = named[-1] if named else DEFAULT_DOC
                if doc not in known:
                    known[doc] = doc_sections(root, doc)
                if m.group(1) not in known[doc]:
                    out.append(f"{p.relative_to(root)}:{n}: {m.group(0)} in {doc}")
    return out


def test_no_design_document_is_cited_by_number():
    assert citations(ROOT) == []


def test_every_section_number_is_a_section_of_the_docs_file_it_cites():
    assert unknown_sections(ROOT) == []


def test_the_check_tells_a_citation_from_a_contract_name():
    for cited in ("(seed 001 §3.2)", "Seed 001: gangAwareEnable", "seed 000's Problem 2",
                  "the seed-003 annotation patch", "seed000's design", "the seeds/001_f41.txt design",
                  "(seed §3.4 phase 2)", "per instance — seed\n000's claim", "(seed\n    # 001 §5.1)"):
        assert DESIGN_NUMBER.search(cited), cited
    for name in ('profile("seed000")', "_SEED000 = Switches(", "examples/seed000-current-vs-proposed.yaml",
                 "``seed000`` is PR #5045's design", "the seeds 1-10 of both", "seed=derive_seed(seed, m)"):
        assert not DESIGN_NUMBER.search(name), name


def test_the_check_reads_the_files(tmp_path):
    (tmp_path / "ha" / "pkg").mkdir(parents=True)
    (tmp_path / "ha" / "pkg" / "mod.py").write_text('"""Fine, seed000 is a profile."""\n'
                                                    'x = 1  # as seed 001 says\n"""As the seed\n003 has it."""\n')
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_mod.py").write_text("# the seed-003 patch\n")
    assert citations(tmp_path) == ["ha/pkg/mod.py:2: 'seed 001'", "ha/pkg/mod.py:3: 'seed\\n003'",
                                   "tests/test_mod.py:1: 'seed-003'"]


def test_a_section_number_must_be_a_section_of_the_file_it_cites(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / DEFAULT_DOC).write_text(
        "# Title\n\n## §5.3 Aggregators\n\ntext §7 in prose is no section\n\n## §16 Scenario files\n\n"
        "**§16.2 The harness** (Volcano's `uthelper`)\n")
    (tmp_path / "docs" / "design.md").write_text("# Design\n\n## Scenario files\n")
    (tmp_path / "chaos").mkdir()
    (tmp_path / "chaos" / "mod.py").write_text(
        '"""Votes (docs/volcano-semantics.md §5.3) and the harness (§16.2, §16)."""\n'
        "# outside numbering: §3, §12.1, §5.3.1; not a heading: §7\n"
        "# the file named before the number is the one cited: docs/design.md §5.3; §5.3 again\n"
        "# named after it does not count: §16.2 of docs/design.md\n")
    assert unknown_sections(tmp_path) == [
        "chaos/mod.py:2: §3 in docs/volcano-semantics.md",
        "chaos/mod.py:2: §12.1 in docs/volcano-semantics.md",
        "chaos/mod.py:2: §5.3.1 in docs/volcano-semantics.md",
        "chaos/mod.py:2: §7 in docs/volcano-semantics.md",
        "chaos/mod.py:3: §5.3 in docs/design.md",
        "chaos/mod.py:3: §5.3 in docs/design.md",
    ]


def test_the_section_check_knows_the_real_docs():
    sections = doc_sections(ROOT, DEFAULT_DOC)
    assert {"4.11", "5.3", "6", "13", "15", "16", "16.1", "16.2", "16.3"} <= sections
    assert not sections & {"3", "6.1", "6.2", "12.1", "4.6", "2.3", "10", "11.5"}
