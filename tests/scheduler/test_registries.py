"""Actions and plugins are known through their registries only: an action registered with the
framework is accepted by experiment files, scenario files and scheduler configurations alike, and a
plugin module that cannot be imported is a loud error, never a plugin quietly missing."""
from __future__ import annotations

import subprocess
import sys

import pytest

from ha.errors import BadInput
from ha.experiment.config import parse_experiment
from ha.scenario import loader
from ha.scheduler.conf import SchedulerConf
from ha.scheduler.framework import registry


@pytest.fixture
def extra_action():
    registry.register_action("test-noop", lambda: None)
    yield "test-noop"
    registry._actions.pop("test-noop", None)


def test_a_registered_action_is_accepted_by_every_format(extra_action):
    tiers = [[{"name": "gang"}]]
    exp = parse_experiment({"name": "t", "scheduler_conf": {"actions": ["allocate", extra_action], "tiers": tiers}})
    assert exp.scheduler_conf.actions == ["allocate", extra_action]
    assert loader.parse_actions(loader.new_context("x.json"), ["allocate", extra_action], "actions") == \
        ["allocate", extra_action]
    conf = SchedulerConf.from_dict({"actions": f"allocate, {extra_action}", "tiers": [{"plugins": [{"name": "gang"}]}]},
                                   source="conf.yaml")
    assert conf.actions == ["allocate", extra_action]


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
