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

__all__ = ["volcano_conf_dict", "volcano_yaml", "YAML_TAGS"]

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
