"""``ha-testbed schema``: the JSON Schema of experiment files, from the pydantic model. It accepts
every example under examples/ and rejects what load_experiment rejects for its shape (unknown keys,
keys a fault does not take, targets a fault does not accept)."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pytest
import yaml
from typer.testing import CliRunner

from ha.cli import app
from ha.errors import BadInput
from ha.experiment.config import parse_experiment

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.yaml"))


@pytest.fixture(scope="module")
def validator():
    res = CliRunner().invoke(app, ["schema"])
    assert res.exit_code == 0, res.output
    schema = json.loads(res.output)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_schema_accepts_every_example(validator, path):
    data = yaml.safe_load(path.read_text())
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(data)]
    assert errors == []


BASE = {"name": "x", "duration": "10s", "schedulers": {"instances": 2},
        "workload": {"gang_size": 4, "runtime": "5s", "rate": "2/s"},
        "chaos": [{"at": "1s", "for": "2s", "fault": "watch-delay", "target": "scheduler-1", "delay": "200ms"},
                  {"at": "2s", "fault": "kill", "target": "leader", "restart_after": "1s"}]}


def test_schema_accepts_the_short_forms(validator):
    assert list(validator.iter_errors(BASE)) == []
    parse_experiment(copy.deepcopy(BASE))          # and so does the loader


@pytest.mark.parametrize("change", [
    lambda d: d.update(colour="red"),                                    # unknown top-level key
    lambda d: d["schedulers"].update(replicas=3),                        # unknown nested key
    lambda d: d["chaos"][0].update(foo=1),                               # unknown chaos key
    lambda d: d["chaos"][1].update(delay="1s"),                          # kill does not take delay
    lambda d: d["chaos"][1].update(target="all"),                        # kill cannot target all
    lambda d: d["chaos"][0].pop("delay"),                                # watch-delay needs delay
    lambda d: d["chaos"][0].update(delay={"dist": "pareto", "scale": "1s", "beta": 2}),
    lambda d: d["chaos"][0].update(fault="watch-teleport"),
    lambda d: d["chaos"][0].update(at="soon"),
], ids=["top", "nested", "chaos-key", "fault-key", "fault-target", "fault-needs", "dist-key",
        "fault-name", "duration"])
def test_schema_rejects_what_the_loader_rejects(validator, change):
    data = copy.deepcopy(BASE)
    change(data)
    assert list(validator.iter_errors(data)), data
    with pytest.raises(BadInput):
        parse_experiment(data)
