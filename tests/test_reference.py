"""docs/reference.md is generated from the code (ha/reference.py): it must be what render() gives
now (else: python -m ha.reference), and it must mention every fault, switch, profile, metric and
experiment key the code knows."""
from __future__ import annotations

from dataclasses import fields

from ha import reference


def test_reference_is_up_to_date():
    assert reference.PATH.read_text(encoding="utf-8") == reference.render(), \
        "docs/reference.md is stale: run `python -m ha.reference`"
    assert reference.main(["--check"]) == 0


def test_reference_covers_everything_the_code_knows():
    from chaos.faults import FAULTS
    from ha.experiment.config import Experiment
    from ha.scheduler.profiles import Switches, profile_names
    text = reference.render()
    for name, pkg in FAULTS.items():
        assert f"### {name}\n" in text
        assert all(f"| `{k}` |" in text for k in pkg.keys())
    for f in fields(Switches):
        assert f"| `{f.name}` |" in text
    for p in profile_names():
        assert f"| `{p}` |" in text
    for m, _ in reference.metrics()[0]:
        assert f"| `{m}` |" in text
    for key in ("seed", "schedulers.lease.renew_deadline", "workload.gang_size", "initial.pods[].nodeName"):
        assert f"| `{key}` |" in text
    assert len(Experiment.model_fields) == sum(1 for line in text.splitlines()
                                               if line.startswith("| `") and "." not in line.split("`")[1]
                                               and "[" not in line.split("`")[1]
                                               and line.split("`")[1] in Experiment.model_fields)


def test_switch_docs_come_from_the_profiles_source():
    from ha.scheduler.profiles import Switches
    docs, groups = reference.field_comments(Switches)
    assert docs["cache_pipeline"].startswith("Statement commit persists Pipeline")
    assert groups["clear_nnn_on_binding"] == "API server"
    assert docs["unpipeline_on_replace"].startswith("S4 fix")


def test_check_fails_on_a_stale_file(tmp_path, monkeypatch):
    stale = tmp_path / "reference.md"
    stale.write_text(reference.render().replace("watch-delay", "watch-dilly", 1))
    monkeypatch.setattr(reference, "PATH", stale)
    assert reference.main(["--check"]) == 1
    assert reference.main([]) == 0 and reference.main(["--check"]) == 0
