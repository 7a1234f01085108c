"""examples/gang-aware-vs-legacy*.yaml validate with the experiment loader, differ only in the
gang-aware flags, and their scheduler_conf resolves to a conf whose preempt / reclaim read the flag
(and whose plugins — network-topology-aware included — open in a real session)."""
from __future__ import annotations

from pathlib import Path

from ha.experiment.config import load_experiment
from ha.scheduler.actions.utils import gang_path
from tests.scheduler.fw_helpers import make_cache, session

ROOT = Path(__file__).resolve().parents[2]
GANG = ROOT / "examples" / "gang-aware-vs-legacy.yaml"
LEGACY = ROOT / "examples" / "gang-aware-vs-legacy-baseline.yaml"


def test_the_two_arms_load_and_differ_only_in_the_flags():
    g, l = load_experiment(GANG), load_experiment(LEGACY)
    assert g.name == "gang-aware-vs-legacy" and l.name == "gang-aware-vs-legacy-baseline"
    gd, ld = g.resolved(), l.resolved()
    for d in (gd, ld):
        d.pop("name")
        d["scheduler_conf"].pop("action_arguments")
    assert gd == ld
    assert g.seed == l.seed == 11
    assert g.scheduler_conf.action_arguments == {"preempt": {"gangAwareEnable": True},
                                                 "reclaim": {"gangAwareEnable": True}}
    assert l.scheduler_conf.action_arguments == {"preempt": {"gangAwareEnable": False},
                                                 "reclaim": {"gangAwareEnable": False}}
    racks = {n.name: n.labels["topology/rack"] for n in g.initial.nodes}
    assert sorted(set(racks.values())) == ["r1", "r2"] and len(racks) == 8


def test_resolved_confs_switch_the_gang_path():
    for path, want in ((GANG, True), (LEGACY, False)):
        conf = load_experiment(path).scheduler_conf_resolved()
        cache, _ = make_cache()
        ssn = session(cache, conf)
        assert "network-topology-aware" in ssn.plugins and ssn.gang_search_space_fns
        assert gang_path.gang_aware_enabled(ssn, "preempt") is want
        assert gang_path.gang_aware_enabled(ssn, "reclaim") is want
