"""The experiment side of real vc-scheduler instances, without the binary: the scheduler-conf
translation shared with the model, the command line each instance gets, and the configuration
and CLI errors (exit 2) for what cannot run."""
from __future__ import annotations

import yaml
from typer.testing import CliRunner

import pytest

from ha.cli import app
from ha.errors import BadInput
from ha.experiment.config import load_experiment, parse_experiment
from ha.runtime.external.process import ExternalConfig, format_go_duration, volcano_argv
from ha.scheduler.conf import _FLAG_GO_NAMES, SchedulerConf, default_conf
from ha.scheduler.volcano_conf import YAML_TAGS, volcano_conf_dict, volcano_yaml

EXP = {
    "name": "conf-test", "duration": "5s", "cluster": {"nodes": 2},
    "schedulers": {"instances": 2, "implementation": "volcano", "period": "250ms",
                   "lease": {"duration": "3s", "renew_deadline": "2s", "retry": "500ms"}},
    "scheduler_conf": {"actions": ["enqueue", "allocate", "backfill"],
                       "tiers": [[{"name": "priority"}, {"name": "gang", "enabledJobReady": False}],
                                 [{"name": "drf"}, {"name": "predicates"},
                                  {"name": "binpack", "arguments": {"binpack.weight": 10}}]],
                       "action_arguments": {"allocate": {"placeholder": 1}}},
}


def test_yaml_tags_are_volcanos():
    # the yaml tag of every flag is the one conf.py already accepts as Volcano's spelling
    assert YAML_TAGS == {f: names[1] for f, names in _FLAG_GO_NAMES.items()}
    assert YAML_TAGS["enabled_preemptive"] == "enablePreemptive"


@pytest.mark.parametrize("conf", [default_conf(), parse_experiment(EXP).scheduler_conf_resolved()],
                         ids=["default", "experiment"])
def test_translation_round_trips_through_the_models_loader(conf):
    text = volcano_yaml(conf)
    back = SchedulerConf.from_dict(yaml.safe_load(text), source="<volcano yaml>")
    assert back.to_dict() == conf.to_dict()


def test_translation_of_an_experiment_says_what_the_model_runs():
    exp = parse_experiment(EXP)
    d = volcano_conf_dict(exp.scheduler_conf_resolved())
    assert d["actions"] == "enqueue, allocate, backfill"
    gang = d["tiers"][0]["plugins"][1]
    assert gang["name"] == "gang" and gang["enableJobReady"] is False
    assert gang["enableJobOrder"] is True          # unset: on, as ApplyPluginConfDefaults does
    assert "enableHierarchy" not in gang           # hierarchy stays opt-in, as in Volcano
    assert d["tiers"][1]["plugins"][2]["arguments"] == {"binpack.weight": 10}
    assert d["configurations"] == [{"name": "allocate", "arguments": {"placeholder": 1}}]


def _ext(**kw) -> ExternalConfig:
    base = dict(name="scheduler-2", binary="/bin/vc", version="v1.14.1", endpoint_url="http://127.0.0.1:1",
                kubeconfig="/r/kc", workdir="/r/w", log_path="/r/l", request_log="/r/q", delivery_log="/r/d",
                scheduler_conf_yaml="")
    base.update(kw)
    return ExternalConfig(**base)


def test_command_line_from_the_experiment():
    from ha.runtime.external.volcano import VolcanoBinary, external_config
    exp = parse_experiment(EXP)
    cfg = external_config(exp, "scheduler-2", binary=VolcanoBinary("/bin/vc", "v1.14.1", False, 0.0),
                          endpoint_url="http://127.0.0.1:9", kubeconfig="/r/kc", out="/r", redis_url="redis://x",
                          prefix="p", api_server=None)
    argv = volcano_argv(cfg, conf_path="/r/c", listen="127.0.0.1:7", healthz="127.0.0.1:8", dump_dir="/t/d")
    for flag in ("--leader-elect=true", "--leader-elect-lease-duration=3s", "--leader-elect-renew-deadline=2s",
                 "--leader-elect-retry-period=500ms", "--leader-elect-resource-namespace=volcano-system",
                 "--leader-elect-resource-name=volcano", "--schedule-period=250ms", "--scheduler-conf=/r/c",
                 "--listen-address=127.0.0.1:7", "--healthz-address=127.0.0.1:8", "--cache-dump-dir=/t/d",
                 "--enable-metrics=true", "--kubeconfig=/r/kc", "--scheduler-name=volcano"):
        assert flag in argv, flag
    assert cfg.log_path == "/r/volcano/scheduler-2.log"
    assert cfg.request_log == "/r/kube-api/scheduler-2/requests.jsonl"
    assert yaml.safe_load(cfg.scheduler_conf_yaml)["actions"] == "enqueue, allocate, backfill"
    # active-active: no leader election at all
    aa = _ext(leader_elect=False)
    argv = volcano_argv(aa, conf_path="c", listen="l", healthz="h", dump_dir="d")
    assert "--leader-elect=false" in argv and not any(a.startswith("--leader-elect-lease") for a in argv)
    assert format_go_duration(1.5) == "1500ms" and format_go_duration(15) == "15s"


def test_an_unbuildable_version_names_the_proxy_refusal():
    with pytest.raises(BadInput, match=r"schedulers.*version: v1.14.0 cannot be built here: the Go module "
                                       r"proxy refuses volcano.sh/volcano@v1.14.0"):
        parse_experiment({**EXP, "schedulers": {**EXP["schedulers"], "volcano": {"version": "v1.14.0"}}})
    with pytest.raises(BadInput, match="unknown version 'v9.9.9'"):
        parse_experiment({**EXP, "schedulers": {**EXP["schedulers"], "volcano": {"version": "v9.9.9"}}})
    with pytest.raises(BadInput, match="is not a Volcano checkout"):
        parse_experiment({**EXP, "schedulers": {**EXP["schedulers"], "volcano": {"source": "/nonexistent"}}})


def test_what_volcano_cannot_do_is_refused():
    with pytest.raises(BadInput, match="cold standby"):
        parse_experiment({**EXP, "schedulers": {**EXP["schedulers"], "standby": "warm"}})
    with pytest.raises(BadInput, match="no dry run"):
        parse_experiment({**EXP, "schedulers": {**EXP["schedulers"], "mode": "shadow"}})
    crash = [{"at": "1s", "fault": "crash-point", "target": "scheduler-1", "point": "between-gang-binds", "for": "2s"}]
    with pytest.raises(BadInput, match=r"chaos\[0\].fault: crash-point .* has none"):
        parse_experiment({**EXP, "chaos": crash})
    with pytest.raises(BadInput, match=r"--implementation volcano: chaos\[0\] is a crash-point"):
        parse_experiment({**EXP, "schedulers": {"instances": 2}, "chaos": crash}).with_overrides(
            implementation="volcano")
    with pytest.raises(BadInput, match="implementation is 'model'"):
        parse_experiment({**EXP, "schedulers": {"instances": 1, "volcano": {"version": "v1.14.1"}}})


def test_overrides_and_a_model_record_left_as_it_was():
    exp = load_experiment("examples/quickstart.yaml")
    assert "implementation" not in exp.resolved()["schedulers"]
    v = exp.with_overrides(implementation="volcano")
    assert (v.schedulers.implementation, v.schedulers.standby, v.schedulers.volcano.version) == \
        ("volcano", "cold", "v1.14.1")
    assert exp.with_overrides(volcano="1.14.1").schedulers.volcano.version == "v1.14.1"
    with pytest.raises(BadInput, match="--implementation: must be model or volcano"):
        exp.with_overrides(implementation="kube")
    with pytest.raises(BadInput, match="--volcano: .*v1.14.0 cannot be built here"):
        exp.with_overrides(volcano="v1.14.0")


def test_cli_exits_2_with_the_reason():
    runner = CliRunner()
    r = runner.invoke(app, ["run", "examples/quickstart.yaml", "--volcano", "v1.14.0"])
    assert r.exit_code == 2, r.output
    assert "proxy refuses volcano.sh/volcano@v1.14.0" in r.output
    r = runner.invoke(app, ["run", "examples/quickstart.yaml", "--implementation", "volcano", "--engine", "sim"])
    assert r.exit_code == 2, r.output
    assert "sim engine runs the model only" in r.output


def test_real_instance_tests_skip_with_the_reason_without_a_binary(tmp_path, monkeypatch):
    from _pytest.outcomes import Skipped

    from tests.runtime.test_real_volcano import _binary_or_skip
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "empty-cache"))   # nothing built there
    monkeypatch.delenv("HA_TESTBED_BUILD_VOLCANO", raising=False)
    with pytest.raises(Skipped, match=r"vc-scheduler v1.14.1 is not built"):
        _binary_or_skip()
    monkeypatch.setenv("PATH", str(tmp_path))                            # and no Go either
    with pytest.raises(Skipped, match="Go is not installed"):
        _binary_or_skip()


# -------------------------------------------------------------- a conf given in Volcano's own shape

GANG_V115 = {"actions": ["enqueue", "allocate", "gangpreempt", "gangreclaim", "backfill"],
             "tiers": [{"plugins": [{"name": "priority"}, {"name": "gang"}]},
                       {"plugins": [{"name": "proportion"}, {"name": "predicates"}]}],
             "configurations": [{"name": "gangpreempt", "arguments": {"maxDomains": 4}}]}


def test_a_given_conf_goes_to_vc_scheduler_as_given():
    from ha.runtime.external.volcano import VolcanoBinary, external_config
    exp = parse_experiment({**EXP, "schedulers": {**EXP["schedulers"], "volcano": {"conf": GANG_V115}}})
    cfg = external_config(exp, "scheduler-1", binary=VolcanoBinary("/bin/vc", "v1.14.1", False, 0.0),
                          endpoint_url="http://127.0.0.1:9", kubeconfig="/r/kc", out="/r", redis_url="redis://x",
                          prefix="p", api_server=None)
    got = yaml.safe_load(cfg.scheduler_conf_yaml)
    # actions the model has no registry entry for pass, written as Volcano's comma-separated string
    assert got["actions"] == "enqueue, allocate, gangpreempt, gangreclaim, backfill"
    assert got["tiers"] == GANG_V115["tiers"] and got["configurations"] == GANG_V115["configurations"]
    # the experiment's own scheduler_conf (the model's) is not what this instance runs
    assert "binpack" not in cfg.scheduler_conf_yaml
    # --volcano-source keeps the given conf
    src = exp.with_overrides(volcano="v1.14.1")
    assert src.schedulers.volcano.conf == GANG_V115


@pytest.mark.parametrize("conf, where", [
    ("actions: allocate", "schedulers.volcano.conf: expected a map"),
    ({"tiers": GANG_V115["tiers"]}, "conf.actions: needs at least one action"),
    ({"actions": "allocate, ,", "tiers": GANG_V115["tiers"]}, "conf.actions: needs at least one action"),
    ({"actions": "allocate"}, "conf.tiers: needs a list of tiers"),
    ({"actions": "allocate", "tiers": [{"plugins": [{"arguments": {}}]}]}, r"conf.tiers\[0\].plugins\[0\].name"),
    ({"actions": "allocate", "tiers": [{"plugin": []}]}, r"conf.tiers\[0\].plugins: needs a list"),
    ({"actions": "allocate", "tiers": GANG_V115["tiers"], "configurations": [{"arguments": {}}]},
     r"conf.configurations\[0\].name"),
    ({"actions": "allocate", "tiers": GANG_V115["tiers"], "action": "x"}, "conf.action: unknown field"),
])
def test_a_given_conf_of_the_wrong_shape_is_refused_naming_the_field(conf, where):
    with pytest.raises(BadInput, match=where):
        parse_experiment({**EXP, "schedulers": {**EXP["schedulers"], "volcano": {"conf": conf}}})
