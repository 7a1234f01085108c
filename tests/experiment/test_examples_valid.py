"""Every experiment under examples/ loads and builds its starting objects (no Ray, no Redis), and the
bug-repro examples carry the settings that make them reproduce (examples/README.md)."""
from __future__ import annotations

from pathlib import Path

import pytest

from ha.errors import BadInput
from ha.experiment.config import load_experiment
from ha.experiment.objects import GRACE_ANNOTATION, INITIAL_POD_GRACE_S, starting_objects

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
FILES = sorted(EXAMPLES.glob("*.yaml"))


def test_there_are_examples():
    assert len(FILES) >= 5


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_example_loads_and_builds(path):
    exp = load_experiment(path)
    objs = starting_objects(exp, str(path))
    assert objs.counts()["Queue"] >= 1
    exp.scheduler_conf_resolved()
    exp.switches_resolved()


def _flag(exp, plugin: str, flag: str) -> bool:
    for tier in exp.scheduler_conf_resolved().to_dict()["tiers"]:
        for p in tier:
            if p["name"] == plugin:
                return p[flag]
    raise KeyError(plugin)


@pytest.mark.parametrize("name", ["br2-cyclic-eviction.yaml"])
def test_br2_gang_does_not_veto_reclaim(name):
    """Production defaults turn gang's Reclaimable on; it vetoes evicting pod1 (1 ready = minMember),
    so the BR2 example must switch it off as the repro's configuration does."""
    exp = load_experiment(EXAMPLES / name)
    assert _flag(exp, "gang", "enabledReclaimable") is False
    assert _flag(exp, "capacity", "enabledReclaimable") is True


def test_initial_pods_get_a_short_grace_period_and_the_annotation_overrides_it():
    exp = load_experiment(EXAMPLES / "br4-failover-reservation.yaml")
    grace = {p["metadata"]["name"]: p["spec"]["terminationGracePeriodSeconds"]
             for p in starting_objects(exp).pods}
    assert grace["l1"] == 12
    assert grace["l2"] == INITIAL_POD_GRACE_S == 1


def test_bad_grace_annotation_is_named(tmp_path):
    text = (EXAMPLES / "br4-failover-reservation.yaml").read_text()
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace(f'{GRACE_ANNOTATION}: "12"', f'{GRACE_ANNOTATION}: "soon"'))
    with pytest.raises(BadInput, match=r"initial\.pods\[0\].*termination-grace-s.*'soon'"):
        starting_objects(load_experiment(bad), str(bad))
