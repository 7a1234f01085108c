"""The scheduler-conf file the testbed writes for a real vc-scheduler uses the yaml tags Volcano's
``conf.PluginOption`` declares, read from the Go module's own source (skipped when the module is
not in the Go module cache). A flag under another key is unknown to vc-scheduler's YAML decoding
and its ApplyPluginConfDefaults turns it on: ``enableAllocatable: false`` instead of
``enabledAllocatable: false`` left proportion's allocatable check on in BR1 and BR4, so the real
scheduler never preempted there."""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from ha.scheduler.conf import _FLAG_GO_NAMES, SchedulerConf
from ha.scheduler.volcano_conf import YAML_TAGS, volcano_yaml

_FIELD = re.compile(r"^\s*(Enable\w+)\s+\*bool\s+`yaml:\"(\w+)\"`", re.M)


def _modcache() -> Path:
    env = os.environ.get("GOMODCACHE")
    if env:
        return Path(env)
    try:
        out = subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True, timeout=30).stdout.strip()
        if out:
            return Path(out)
    except (OSError, subprocess.SubprocessError):
        pass
    return Path.home() / "go" / "pkg" / "mod"


@pytest.mark.parametrize("version", ["v1.14.1"])
def test_yaml_tags_are_those_of_volcanos_plugin_option(version):
    src = _modcache() / f"volcano.sh/volcano@{version}" / "pkg/scheduler/conf/scheduler_conf.go"
    if not src.is_file():
        pytest.skip(f"{src} not in the Go module cache (ha-testbed volcano build {version} downloads it)")
    tags = dict(_FIELD.findall(src.read_text()))
    assert len(tags) >= 20, "the PluginOption struct was not found"
    assert {go for go, *_ in _FLAG_GO_NAMES.values()} == set(tags)
    for attr, (go, *_) in _FLAG_GO_NAMES.items():
        assert YAML_TAGS[attr] == tags[go], attr
    # a flag set false reaches vc-scheduler under its own key
    conf = SchedulerConf.from_dict({"actions": ["allocate"], "tiers": [[{"name": "proportion",
                                    "enabledAllocatable": False, "enabledOverused": False}]]})
    plugin = yaml.safe_load(volcano_yaml(conf))["tiers"][0]["plugins"][0]
    assert plugin[tags["EnabledAllocatable"]] is False and plugin[tags["EnabledOverused"]] is False
