"""The sweep's grid: --seeds, --set paths and values (bad ones exit 2 naming them), cell folders."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from ha.cli import app
from ha.errors import BadInput
from ha.experiment.sweep_grid import apply_path, build_grid, parse_path, parse_seeds, parse_set

DATA = Path(__file__).resolve().parents[1] / "data" / "sweep" / "tiny.yaml"


def _data() -> dict:
    return yaml.safe_load(DATA.read_text())


def test_seeds():
    assert parse_seeds("1-5") == [1, 2, 3, 4, 5]
    assert parse_seeds("1,3,5") == [1, 3, 5]
    assert parse_seeds("1-3,7,2") == [1, 2, 3, 7]
    for bad in ("5-1", "a", "1-", "", "1,,2"):
        with pytest.raises(BadInput, match="--seeds"):
            parse_seeds(bad)


def test_set_values_and_paths():
    s = parse_set("chaos[0].delay.mean=100ms,1s, 3s")
    assert s.path == ("chaos", 0, "delay", "mean") and s.texts == ("100ms", "1s", "3s")
    assert parse_set("schedulers.instances=2,3").values == (2, 3)
    assert parse_set("workload.gang_size=[1, 2],[2, 4]").values == ([1, 2], [2, 4])
    d = _data()
    apply_path(d, parse_path("chaos[0].delay.mean"), "2s", "chaos[0].delay.mean")
    assert d["chaos"][0]["delay"]["mean"] == "2s"
    apply_path(d, parse_path("measure.converge_within"), "3s", "k")     # a new key under a map
    assert d["measure"]["converge_within"] == "3s"
    d["chaos"].append(dict(d["chaos"][0], target="scheduler-2"))
    d["chaos"].append({"at": "2s", "fault": "kill", "target": "leader"})
    apply_path(d, parse_path("chaos[*].delay.mean"), "700ms", "k")    # the entries with a delay
    assert [c.get("delay", {}).get("mean") for c in d["chaos"]] == ["700ms", "700ms", None]
    with pytest.raises(BadInput, match="no entry of chaos has 'point'"):
        apply_path(d, parse_path("chaos[*].point.x"), "x", "chaos[*].point.x")


def test_grid_expansion_and_cell_folders():
    g = build_grid(str(DATA), _data(), [1, 2, 3], ["v1.14", "pr5045-fixed"],
                   [parse_set("chaos[0].delay.mean=100ms,1s"), parse_set("schedulers.instances=2,3")])
    assert len(g.cells) == 3 * 2 * 2 * 2
    assert len({c.rel for c in g.cells}) == len(g.cells)
    c = next(c for c in g.cells if c.profile == "pr5045-fixed" and c.seed == 2
             and dict(c.assign) == {"chaos[0].delay.mean": "1s", "schedulers.instances": "3"})
    assert c.rel == "cells/pr5045-fixed/chaos[0].delay.mean=1s+schedulers.instances=3/seed-2"
    exp = g.experiment(c)
    assert exp.seed == 2 and exp.profile == "pr5045-fixed" and exp.schedulers.instances == 3
    assert exp.chaos[0].delay.mean == pytest.approx(1.0)
    plain = build_grid(str(DATA), _data(), [4], ["v1.14"], [])
    assert [c.rel for c in plain.cells] == ["cells/v1.14/base/seed-4"]


@pytest.mark.parametrize("spec, words", [
    ("chaos[5].delay.mean=1s", ["chaos[5].delay.mean", "chaos has 1 entries, no index 5"]),
    ("nosuchkey=1", ["nosuchkey", "nosuchkey"]),
    ("schedulers.instances=two", ["--set schedulers.instances=two", "schedulers.instances:"]),
    ("chaos[0].delay.mean=0ms", ["--set chaos[0].delay.mean=0ms", "chaos[0].delay: mean must be > 0"]),
    ("cluster.nodes.x=1", ["cluster.nodes.x", "cluster.nodes is not a map"]),
    ("chaos[0]..delay=1", ["chaos[0]..delay", "not a path"]),
    ("schedulers.instances", ["schedulers.instances", "KEY=V1,V2"]),
    ("schedulers.resync=sometimes", ["--set schedulers.resync=sometimes", "schedulers.resync:",
                                     "'continuous' or 'after-session'"]),
    ("switches.bind_before_nomination_clearr=true", ["switches:", "unknown switch(es): "
                                                     "bind_before_nomination_clearr"]),
    ("switches.bind_before_nomination_clear=maybe", ["switches.bind_before_nomination_clear:",
                                                     "expected true or false"]),
])
def test_bad_set_exits_2_naming_it(tmp_path, spec, words):
    r = CliRunner().invoke(app, ["sweep", str(DATA), "--seeds", "1", "--profiles", "v1.14", "--set", spec,
                                 "--out", str(tmp_path / "s")])
    assert r.exit_code == 2, r.output
    for w in words:
        assert w in r.output, (w, r.output)
    assert not (tmp_path / "s" / "cells").exists()      # nothing ran


def test_bad_profile_and_live_over_ray_exit_2(tmp_path):
    r = CliRunner().invoke(app, ["sweep", str(DATA), "--seeds", "1", "--profiles", "v1.14,nope"])
    assert r.exit_code == 2 and "unknown profile 'nope'" in r.output
    r = CliRunner().invoke(app, ["sweep", str(DATA), "--seeds", "1", "--profiles", "v1.14", "--engine", "live",
                                 "--ray-address", "127.0.0.1:1", "--out", str(tmp_path / "s")])
    assert r.exit_code == 2 and "--engine live" in r.output and "own Redis and Ray" in r.output
