"""Actions and plugins are known through their registries only: an action registered with the
framework is accepted by experiment files, scenario files and scheduler configurations alike, and a
plugin module that cannot be imported is a loud error, never a plugin quietly missing."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ha.errors import BadInput
from ha.experiment.config import load_experiment, parse_experiment
from ha.scenario import loader
from ha.scheduler.conf import SchedulerConf
from ha.scheduler.framework import registry

SCENARIO = Path(__file__).resolve().parents[1] / "data" / "scenarios" / "allocate__one-job-two-pods-one-node.json"


@pytest.fixture
def extra_action():
    registry.register_action("test-noop", lambda: None)
    yield "test-noop"
    registry._actions.pop("test-noop", None)


def test_a_registered_action_is_accepted_by_every_format(extra_action, tmp_path):
    # an experiment file and a scenario file on disk, read by their loaders
    exp_file = tmp_path / "exp.yaml"
    exp_file.write_text(f"scheduler_conf:\n  actions: [allocate, {extra_action}]\n"
                        f"  tiers: [[{{name: gang}}]]\n  action_arguments: {{{extra_action}: {{x: 1}}}}\n")
    exp = load_experiment(exp_file)
    assert exp.scheduler_conf.actions == ["allocate", extra_action]
    assert exp.scheduler_conf_resolved().actions == ["allocate", extra_action]
    assert exp.scheduler_conf_resolved().action_arguments(extra_action) == {"x": 1}
    scn = json.loads(SCENARIO.read_text())
    scn["actions"] = ["allocate", extra_action]
    scn["action_arguments"] = {extra_action: {"x": 1}}
    scn_file = tmp_path / "scn.json"
    scn_file.write_text(json.dumps(scn))
    loaded = loader.load_scenario(scn_file)
    assert loaded.actions == ["allocate", extra_action] and loaded.action_arguments == {extra_action: {"x": 1}}
    conf = SchedulerConf.from_dict({"actions": f"allocate, {extra_action}", "tiers": [{"plugins": [{"name": "gang"}]}]},
                                   source="conf.yaml")
    assert conf.actions == ["allocate", extra_action]


def test_the_formats_share_one_scheduler_conf_schema(tmp_path):
    """The same mistake gets the same words in an experiment file, a scenario file and Volcano's YAML."""
    bad_tiers = [[{"name": "gang", "enabledJobReady": "yes"}]]
    words = "enabledJobReady: expected true, false or null, got 'yes'"
    exp_file = tmp_path / "exp.yaml"
    exp_file.write_text(json.dumps({"scheduler_conf": {"actions": ["allocate"], "tiers": bad_tiers}}))
    with pytest.raises(BadInput, match=f"exp.yaml: scheduler_conf.tiers\\[0\\]\\[0\\].{words}"):
        load_experiment(exp_file)
    scn = json.loads(SCENARIO.read_text())
    scn["plugins"]["tiers"] = bad_tiers
    scn_file = tmp_path / "scn.json"
    scn_file.write_text(json.dumps(scn))
    with pytest.raises(BadInput, match=f"scn.json: plugins.tiers\\[0\\]\\[0\\].{words}"):
        loader.load_scenario(scn_file)
    with pytest.raises(BadInput, match=f"conf.yaml: tiers\\[0\\]\\[0\\].{words}"):
        SchedulerConf.from_dict({"actions": ["allocate"], "tiers": bad_tiers}, source="conf.yaml")


def test_an_unregistered_action_is_refused_by_every_format():
    with pytest.raises(BadInput, match="unknown action 'test-noop'"):
        parse_experiment({"name": "t", "scheduler_conf": {"actions": ["test-noop"], "tiers": [[{"name": "gang"}]]}})
    with pytest.raises(BadInput, match="unknown action 'test-noop'"):
        loader.parse_actions(loader.new_context("x.json"), ["test-noop"], "actions")
    with pytest.raises(BadInput, match="unknown action 'test-noop'"):
        SchedulerConf.from_dict({"actions": ["test-noop"], "tiers": []}, source="conf.yaml")


def test_a_broken_plugin_module_is_a_loud_error():
    code = """
import importlib.abc, sys
class Broken(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "ha.scheduler.plugins.binpack":
            raise ImportError("binpack is broken")
sys.meta_path.insert(0, Broken())
import ha.experiment.config
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "binpack is broken" in r.stderr
