"""The scheduler configuration as Volcano's ``--scheduler-conf`` file: one translation for both
implementations.

An experiment's ``scheduler_conf`` (actions, tiers of plugins with their ``enabled*`` flags and
arguments, action arguments) resolves to one :class:`ha.scheduler.conf.SchedulerConf`; the model's
sessions read that object, and :func:`volcano_yaml` writes the same object as the YAML a real
``vc-scheduler`` reads (``pkg/scheduler/conf.SchedulerConfiguration``)::

    actions: "enqueue, allocate, backfill"
    tiers:
    - plugins:
      - name: priority
        enableJobOrder: true        # the Go struct's yaml tags
        arguments: {...}
    configurations:
    - name: allocate
      arguments: {...}

The translation is lossless: ``SchedulerConf.from_dict(yaml.safe_load(volcano_yaml(c)))`` gives
back ``c``'s actions, flags and arguments (tests/runtime/test_real_volcano_conf.py). A flag left
unset (None) is left out, so Volcano's ``ApplyPluginConfDefaults`` treats it as the model does
under ``apply_defaults`` (every unset flag on but hierarchy and cluster order).
"""
from __future__ import annotations

from typing import Any

import yaml

from ha.scheduler.conf import _FLAG_GO_NAMES, ENABLED_FLAGS, SchedulerConf

__all__ = ["check_given_conf", "given_conf_yaml", "volcano_conf_dict", "volcano_yaml", "YAML_TAGS"]

# Python attribute -> the yaml tag of Volcano's conf.PluginOption field (pkg/scheduler/conf): most
# are "enable" + the flag, nine are not (enabledOverused, enabledAllocatable, EnabledClusterOrder,
# ...); a flag under any other key is unknown to vc-scheduler, whose defaults then turn it on
YAML_TAGS: dict[str, str] = {f: _FLAG_GO_NAMES[f][1] for f in ENABLED_FLAGS}


def volcano_conf_dict(conf: SchedulerConf) -> dict[str, Any]:
    """``conf`` in the shape of Volcano's ``SchedulerConfiguration`` (yaml field names)."""
    tiers = []
    for tier in conf.tiers:
        plugins = []
        for p in tier.plugins:
            d: dict[str, Any] = {"name": p.name}
            for f in ENABLED_FLAGS:
                v = getattr(p, f)
                if v is not None:
                    d[YAML_TAGS[f]] = bool(v)
            if p.arguments:
                d["arguments"] = dict(p.arguments)
            plugins.append(d)
        tiers.append({"plugins": plugins})
    out: dict[str, Any] = {"actions": ", ".join(conf.actions), "tiers": tiers}
    if conf.configurations:
        out["configurations"] = [{"name": c.name, "arguments": dict(c.arguments)}
                                 for c in conf.configurations]
    return out


def volcano_yaml(conf: SchedulerConf) -> str:
    """The ``--scheduler-conf`` file's text for ``conf``."""
    return yaml.safe_dump(volcano_conf_dict(conf), sort_keys=False, default_flow_style=False)


# -- a configuration given in Volcano's own shape (``schedulers.volcano.conf``) ---------------------
# Handed to vc-scheduler as it is, so that a real run can name what the model lacks. Its names are
# vc-scheduler's to judge; only the shape is checked here, because a conf vc-scheduler cannot parse
# is not an error there: it logs one and schedules with its built-in default configuration, which
# would make the run measure something nobody asked for.

_GIVEN_TOP = ("actions", "tiers", "configurations", "metrics")


def _given_actions(v: Any) -> list[str] | None:
    if isinstance(v, str):
        v = [a.strip() for a in v.split(",")]
    if isinstance(v, list) and v and all(isinstance(a, str) and a.strip() for a in v):
        return [a.strip() for a in v]
    return None


def check_given_conf(conf: Any) -> list[tuple[str, str]]:
    """Shape problems of a conf in ``SchedulerConfiguration``'s yaml shape, as (field, what)."""
    if not isinstance(conf, dict):
        return [("", f"expected a mapping (Volcano's scheduler configuration), got {type(conf).__name__}")]
    problems: list[tuple[str, str]] = []
    for k in conf:
        if k not in _GIVEN_TOP:
            problems.append((str(k), f"unknown field; Volcano's configuration has {', '.join(_GIVEN_TOP)}"))
    if _given_actions(conf.get("actions")) is None:
        problems.append(("actions", "needs at least one action name (a comma-separated string or a list)"))
    tiers = conf.get("tiers")
    if not isinstance(tiers, list) or not tiers:
        problems.append(("tiers", "needs a list of tiers, each {plugins: [{name: ...}, ...]}"))
    else:
        for i, tier in enumerate(tiers):
            plugins = tier.get("plugins") if isinstance(tier, dict) else None
            if not isinstance(plugins, list) or not plugins:
                problems.append((f"tiers[{i}].plugins", "needs a list of plugins"))
                continue
            for j, pl in enumerate(plugins):
                if not isinstance(pl, dict) or not isinstance(pl.get("name"), str) or not pl["name"]:
                    problems.append((f"tiers[{i}].plugins[{j}].name", "each plugin needs a name"))
                elif "arguments" in pl and not isinstance(pl["arguments"], dict):
                    problems.append((f"tiers[{i}].plugins[{j}].arguments", "expected a mapping"))
    cfgs = conf.get("configurations")
    if cfgs is not None:
        if not isinstance(cfgs, list):
            problems.append(("configurations", "expected a list of {name, arguments}"))
        else:
            for i, c in enumerate(cfgs):
                if not isinstance(c, dict) or not isinstance(c.get("name"), str) or not c["name"]:
                    problems.append((f"configurations[{i}].name", "each configuration needs an action name"))
                elif "arguments" in c and not isinstance(c["arguments"], dict):
                    problems.append((f"configurations[{i}].arguments", "expected a mapping"))
    return problems


def given_conf_yaml(conf: dict[str, Any]) -> str:
    """The ``--scheduler-conf`` text of a given conf (already checked): as given, with a list of
    actions written as Volcano's comma-separated string."""
    out = dict(conf)
    out["actions"] = ", ".join(_given_actions(conf["actions"]) or [])
    return yaml.safe_dump(out, sort_keys=False, default_flow_style=False)

