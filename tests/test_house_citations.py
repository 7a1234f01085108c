"""Comments and docstrings under ``ha/`` name the designs they follow in words ("PR #5045's design",
"the gang-aware eviction design", "the annotation-persistence design") and cite files inside the
repository by their headings, never by the numbers of design documents a reader of the repository
cannot open ("seed 001 §3.2", "seed-003", "seeds/000_...").

Names that are contracts stay: the profile ``seed000``, ``_SEED000`` and example files such as
``examples/seed000-current-vs-proposed.yaml`` carry no space or dash before the number and are not
matched."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# a design document by its number: "seed 001", "Seed 000's", "seed-003", "seed000's", "seeds/000_",
# also across a line break ("seed\n000's", "seed\n    # 001"), or by its section numbers: "seed §3.4"
DESIGN_NUMBER = re.compile(r"\bseed[\s#-]+0\d\d|\bseed0\d\d's|\bseeds/0|\bseed\s*§", re.IGNORECASE)


def citations(root: Path) -> list[str]:
    """``path:line: match`` for every design document cited by number in a .py file under ha/."""
    out = []
    for p in sorted((root / "ha").rglob("*.py")):
        text = p.read_text(encoding="utf-8")
        out += [f"{p.relative_to(root)}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)!r}"
                for m in DESIGN_NUMBER.finditer(text)]
    return out


def test_ha_cites_no_design_document_by_number():
    assert citations(ROOT) == []


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
    assert citations(tmp_path) == ["ha/pkg/mod.py:2: 'seed 001'", "ha/pkg/mod.py:3: 'seed\\n003'"]
