"""Scenario files (docs/design.md "Scenario files") -> a validated :class:`Scenario`.

A scenario file is a cluster (its starting objects), a scheduler configuration and what Volcano's
Go test expects. Each part is read by its one schema: the objects by ``ha.scenario.object_shapes``
(Kubernetes-shaped object dicts, so the very same cache event handlers that the informers feed
also build the scenario's cache), the actions, plugin tiers and action arguments by
``ha.scheduler.conf``; this module reads the file, the ``expected`` part and the Go harness's
hypernode cache. Every problem is a ``BadInput`` naming the file, the field
(``pods[2].request.cpu``) and what is wrong.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ha.scenario.object_shapes import (GROUP_NAME_ANNOTATION, PG_PHASES, POD_PHASES, PREEMPTION_POLICIES,
                                       QUEUE_STATES, ClusterObjects, HyperNodeCache, ScenarioError, _Ctx,
                                       _int, _known_fields, _list, _obj, _one_of, _req, _str, _typename,
                                       build_objects, hypernode_object, new_context, node_object,
                                       parse_hypernodes, pod_object, podgroup_object, priority_class_object,
                                       queue_object, scenario_amount)
from ha.scheduler.conf import (ENABLED_FLAGS, FLAG_ALIASES, FLAG_NAMES, known_actions, known_plugins,
                               read_action_arguments, read_actions, read_registered_builders, read_tiers)

__all__ = [
    "Scenario", "Expected", "PluginSpec", "ClusterObjects", "known_actions", "known_plugins",
    "PLUGIN_FLAGS", "load_scenario", "load_json", "expand_paths", "build_objects", "pod_object",
    "podgroup_object", "node_object", "queue_object", "priority_class_object", "parse_tiers",
    "ScenarioError", "new_context", "HyperNodeCache", "hypernode_object", "parse_hypernodes",
    "scenario_amount", "GROUP_NAME_ANNOTATION", "POD_PHASES", "PG_PHASES", "QUEUE_STATES",
    "PREEMPTION_POLICIES",
]

KNOWN_KINDS = ("action", "unit")

# Volcano's PluginOption enable flags: one table, the model's (ha.scheduler.conf). A file may spell a
# flag as the Go field in lowerCamel (what scenario files use), the Go field, Volcano's YAML key or
# the attribute name; the loader keeps the lowerCamel Go field.
PLUGIN_FLAGS: dict[str, str] = {alias: FLAG_NAMES[attr] for alias, attr in FLAG_ALIASES.items()}


# --------------------------------------------------------------------------------------- model

@dataclass
class PluginSpec:
    """One plugin of a tier: its name, the enable flags the file sets (unset = off), arguments."""
    name: str
    flags: dict[str, bool] = field(default_factory=dict)
    arguments: dict[str, Any] = field(default_factory=dict)

    def to_option(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name, **self.flags}
        if self.arguments:
            d["arguments"] = dict(self.arguments)
        return d


@dataclass
class Expected:
    """What Volcano's Go test asserts (uthelper CheckBind / CheckEvict / CheckPipelined)."""
    binds: dict[str, str]
    bind_count: int
    evicted: list[str]
    evict_count: int
    # job id -> nodes every session-Pipelined task of that job must be on; None = not checked
    pipelined: dict[str, list[str]] | None = None
    # uthelper's MinimalBindCheck ("count_only": bind_count binds, no map) / CheckBindInHyperNode
    bind_check: str = "full"
    bind_counts_by_hypernode: list[int] | None = None
    # job id -> PodGroup phase of the session job after JobUpdater.UpdateAll (ExpectStatus)
    podgroup_phases: dict[str, str] = field(default_factory=dict)
    # job id -> {task status name: count} in the session job (ExpectTaskStatusNums)
    task_status_counts: dict[str, dict[str, int]] = field(default_factory=dict)


@dataclass
class Scenario:
    path: str
    name: str
    kind: str
    objects: ClusterObjects
    actions: list[str]
    action_arguments: dict[str, dict[str, Any]]
    tiers: list[list[PluginSpec]]
    expected: Expected | None
    raw_expected: Any
    notes: str = ""
    source_test_name: str = ""
    # the Go test registers only these plugin builders; a tier plugin not among them is skipped
    # by OpenSession ("failed to get plugin"). None = every builder.
    registered_builders: list[str] | None = None


# Every field a scenario file may hold besides its objects' (ha.scenario.object_shapes). A field
# not listed is an error. ``hypernodes`` and ``hypernode_cache`` belong to the network-topology
# part of the format (docs/design.md, scenario files item 1).
TOP_FIELDS = ("name", "kind", "source_file", "source_lines", "source_test_name", "notes", "nodes",
              "queues", "podgroups", "pods", "priority_classes", "actions", "action_arguments",
              "plugins", "expected", "hypernodes", "hypernode_cache")
PLUGINS_FIELDS = ("tiers", "registered_builders")
EXPECTED_FIELDS = ("binds", "bind_count", "evicted", "evict_count", "pipelined", "podgroup_phases",
                   "bind_check", "bind_counts_by_hypernode", "task_status_counts")
BIND_CHECKS = ("full", "count_only", "by_hypernode")
TASK_STATUSES = ("Pending", "Allocated", "Pipelined", "Binding", "Bound", "Running", "Releasing",
                 "Succeeded", "Failed", "Unknown")
def _first(ctx: _Ctx, problems: list[tuple[str, str]]) -> None:
    """The scheduler configuration's schema (ha.scheduler.conf) collects problems; a scenario
    file reports the first, as it does for its objects."""
    if problems:
        raise ctx.err(*problems[0])


def parse_tiers(ctx: _Ctx, tiers: Any, where: str) -> list[list[PluginSpec]]:
    """Plugin tiers, read by the scheduler configuration's schema (``read_tiers``)."""
    problems: list[tuple[str, str]] = []
    if not isinstance(tiers, list):
        problems.append((where, f"expected a list, got {_typename(tiers)}"))
    read = read_tiers(tiers, where, problems)
    _first(ctx, problems)
    return [[PluginSpec(name=o.name, flags={FLAG_NAMES[a]: v for a in ENABLED_FLAGS
                                            if (v := getattr(o, a)) is not None},
                        arguments=dict(o.arguments)) for o in t.plugins] for t in read]


def parse_actions(ctx: _Ctx, actions: Any, where: str) -> list[str]:
    """Actions, read by the scheduler configuration's schema (``read_actions``): at least one."""
    problems: list[tuple[str, str]] = []
    if not isinstance(actions, list):
        problems.append((where, f"expected a list, got {_typename(actions)}"))
    out = read_actions(actions, where, problems, require=True)
    _first(ctx, problems)
    return out


def _parse_expected(ctx: _Ctx, raw: Any) -> Expected:
    e = _obj(ctx, raw, "expected")
    _known_fields(ctx, e, "expected", EXPECTED_FIELDS)
    bind_check = _one_of(ctx, e.get("bind_check") or "full", "expected.bind_check", BIND_CHECKS)
    binds_raw = _obj(ctx, e.get("binds") or {}, "expected.binds")
    binds = {k: _str(ctx, v, f"expected.binds.{k}", allow_empty=False) for k, v in binds_raw.items()}
    evicted = [_str(ctx, v, f"expected.evicted[{i}]", allow_empty=False)
               for i, v in enumerate(_list(ctx, e.get("evicted"), "expected.evicted", nullable=True))]
    bind_count = _int(ctx, e.get("bind_count", len(binds)), "expected.bind_count", minimum=0)
    evict_count = _int(ctx, e.get("evict_count", len(evicted)), "expected.evict_count", minimum=0)
    # uthelper refuses these as "invalid setting" too
    if bind_check == "full" and bind_count != len(binds):
        raise ctx.err("expected.bind_count", f"{bind_count} does not match the {len(binds)} entries of expected.binds")
    if bind_check != "full" and binds:
        raise ctx.err("expected.binds", f"must be {{}} with bind_check {bind_check!r} (only the count is checked)")
    if evict_count != len(evicted):
        raise ctx.err("expected.evict_count", f"{evict_count} does not match the {len(evicted)} entries of expected.evicted")
    by_hn = None
    if e.get("bind_counts_by_hypernode") is not None:
        if bind_check != "by_hypernode":
            raise ctx.err("expected.bind_counts_by_hypernode", "only with bind_check 'by_hypernode'")
        by_hn = [_int(ctx, n, f"expected.bind_counts_by_hypernode[{i}]", minimum=0)
                 for i, n in enumerate(_list(ctx, e["bind_counts_by_hypernode"], "expected.bind_counts_by_hypernode"))]
    elif bind_check == "by_hypernode":
        raise ctx.err("expected.bind_counts_by_hypernode", "missing required field for bind_check 'by_hypernode'")
    pipelined = None
    if e.get("pipelined") is not None:
        pm = _obj(ctx, e["pipelined"], "expected.pipelined")
        pipelined = {}
        for job, nodes in pm.items():
            if isinstance(nodes, str):
                nodes = [nodes]
            pipelined[job] = [_str(ctx, n, f"expected.pipelined.{job}[{i}]", allow_empty=False)
                              for i, n in enumerate(_list(ctx, nodes, f"expected.pipelined.{job}"))]
    phases = {}
    for job, ph in (_obj(ctx, e.get("podgroup_phases"), "expected.podgroup_phases", nullable=True) or {}).items():
        phases[job] = _one_of(ctx, ph, f"expected.podgroup_phases.{job}", PG_PHASES)
    counts: dict[str, dict[str, int]] = {}
    for job, m in (_obj(ctx, e.get("task_status_counts"), "expected.task_status_counts", nullable=True) or {}).items():
        w = f"expected.task_status_counts.{job}"
        counts[job] = {}
        for st, n in _obj(ctx, m, w).items():
            _one_of(ctx, st, f"{w}.{st}", TASK_STATUSES)
            counts[job][st] = _int(ctx, n, f"{w}.{st}", minimum=0)
    return Expected(binds=binds, bind_count=bind_count, evicted=evicted, evict_count=evict_count,
                    pipelined=pipelined, bind_check=bind_check, bind_counts_by_hypernode=by_hn,
                    podgroup_phases=phases, task_status_counts=counts)


# ----------------------------------------------------------------------------------- entry points

def load_json(path: str | Path) -> Any:
    p = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ScenarioError(p, "", "no such file") from None
    except IsADirectoryError:
        raise ScenarioError(p, "", "is a directory") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ScenarioError(p, "", f"cannot read: {e}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ScenarioError(p, f"line {e.lineno} column {e.colno}", f"malformed JSON: {e.msg}") from None


def load_scenario(path: str | Path, data: Any = None) -> Scenario:
    """Read and validate one scenario file (either kind)."""
    p = str(path)
    ctx = _Ctx(p)
    d = load_json(path) if data is None else data
    if not isinstance(d, dict):
        raise ctx.err("", f"a scenario file holds one JSON object, got {_typename(d)}")
    _known_fields(ctx, d, "", TOP_FIELDS)
    name = _str(ctx, _req(ctx, d, "name", ""), "name", allow_empty=False)
    kind = _one_of(ctx, d.get("kind", "action"), "kind", KNOWN_KINDS)
    # unit scenarios (NodeInfo / cache cases) may name objects their prose steps create
    objects = build_objects(ctx, d, strict=(kind == "action"))
    plugins = _obj(ctx, d.get("plugins") or {}, "plugins")
    _known_fields(ctx, plugins, "plugins", PLUGINS_FIELDS)
    if kind == "unit":
        # unit scenarios describe steps in prose; only their cluster is structural
        return Scenario(path=p, name=name, kind=kind, objects=objects,
                        actions=[a for a in d.get("actions") or [] if isinstance(a, str)],
                        action_arguments={}, tiers=[], expected=None,
                        raw_expected=d.get("expected"), notes=str(d.get("notes") or ""),
                        source_test_name=str(d.get("source_test_name") or ""))
    actions = parse_actions(ctx, _req(ctx, d, "actions", ""), "actions")
    tiers = parse_tiers(ctx, _req(ctx, plugins, "tiers", "plugins"), "plugins.tiers")
    problems: list[tuple[str, str]] = []
    configurations = read_action_arguments(d.get("action_arguments"), "action_arguments", problems)
    registered = read_registered_builders(plugins.get("registered_builders"), "plugins.registered_builders",
                                          problems)
    _first(ctx, problems)
    aa = {c.name: c.arguments for c in configurations}
    expected = _parse_expected(ctx, d["expected"]) if d.get("expected") is not None else None
    registered = list(registered) if registered is not None else None
    return Scenario(path=p, name=name, kind=kind, objects=objects, actions=actions,
                    action_arguments={k: dict(v) for k, v in aa.items()}, tiers=tiers,
                    expected=expected, raw_expected=d.get("expected"),
                    notes=str(d.get("notes") or ""), source_test_name=str(d.get("source_test_name") or ""),
                    registered_builders=registered)


def expand_paths(paths: list[str]) -> list[str]:
    """Files as given; a directory stands for its *.json files, sorted."""
    out: list[str] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            files = sorted(str(f) for f in p.glob("*.json"))
            if not files:
                raise ScenarioError(raw, "", "directory holds no *.json scenario files")
            out.extend(files)
        elif not p.exists():
            raise ScenarioError(raw, "", "no such file or directory")
        else:
            out.append(raw)
    return out
