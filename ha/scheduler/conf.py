"""Scheduler configuration: actions, plugin tiers with their ``enabled*`` flags, action arguments.

Mirrors Volcano's scheduler configuration types (``SchedulerConfiguration``, ``Tier``,
``PluginOption``, ``Configuration``) and its action arguments.

Flag semantics (docs/volcano-semantics.md, "Plugin enable flags"): the session aggregators treat an unset flag (None) as
*disabled*. Production YAML runs ``ApplyPluginConfDefaults``, which turns every unset flag on; the
Go unit tests (and so our scenario files) do not. ``SchedulerConf.from_dict`` therefore leaves unset
flags off unless ``apply_defaults=True``; ``default_conf()`` is the production default with every
flag on.

This module is also the one schema of a scheduler configuration (:func:`read_conf` and its parts):
experiment files (``scheduler_conf``), scenario files and bug repros (``actions``, ``plugins``,
``action_arguments``) and Volcano's YAML are read by it, so they accept and refuse the same things
with the same words; a file format only puts its file and section in front of the field.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Mapping

from ha.errors import BadInput

__all__ = [
    "PluginOption", "Tier", "Configuration", "Arguments", "SchedulerConf", "default_conf",
    "ENABLED_FLAGS", "FLAG_ALIASES", "FLAG_NAMES", "known_actions", "known_plugins",
    "get_arg_of_action_from_conf", "read_conf", "read_actions", "read_tiers", "read_plugin_option",
    "read_action_arguments", "read_registered_builders", "ConfProblems", "CONF_KEYS", "GANG_AWARE_KEY",
]


def known_actions() -> tuple[str, ...]:
    """The actions the model implements: the framework's registry, which every action module
    fills when ``ha.scheduler`` is imported, is the one list."""
    from ha.scheduler.framework.registry import registered_action_names
    return tuple(registered_action_names())


def known_plugins() -> tuple[str, ...]:
    """The plugins the model implements: the framework's registry, which every plugin module
    fills when ``ha.scheduler`` is imported (a module that fails to import is an error then)."""
    from ha.scheduler.framework.registry import registered_plugin_names
    return tuple(registered_plugin_names())


# preempt's and reclaim's gang-aware switch (an action argument); a plugin's arguments may carry it
# too, as ``preempt.gangAwareEnable`` (gang-aware experiments put it there)
GANG_AWARE_KEY = "gangAwareEnable"

# Python attribute name -> (Go field name of conf.PluginOption, its yaml tag, other spellings).
# Every one may be written in a file as the Go field name, its lower-camel form
# (``enabledJobOrder``, what the scenario files use), Volcano's yaml tag (``enableJobOrder``; but
# ``enabledOverused``, ``enabledAllocatable``, ``EnabledClusterOrder``, ... as the struct spells
# them: vc-scheduler decodes no other key) or the snake_case attribute name.
_FLAG_GO_NAMES: dict[str, tuple[str, ...]] = {
    "enabled_job_order": ("EnabledJobOrder", "enableJobOrder"),
    "enabled_hierarchy": ("EnabledHierarchy", "enableHierarchy"),
    "enabled_job_ready": ("EnabledJobReady", "enableJobReady"),
    "enabled_job_pipelined": ("EnabledJobPipelined", "enableJobPipelined"),
    "enabled_task_order": ("EnabledTaskOrder", "enableTaskOrder"),
    "enabled_preemptable": ("EnabledPreemptable", "enablePreemptable"),
    "enabled_reclaimable": ("EnabledReclaimable", "enableReclaimable"),
    # Go spells this one EnablePreemptive (no "d"); both spellings are accepted.
    "enabled_preemptive": ("EnablePreemptive", "enablePreemptive", "EnabledPreemptive"),
    "enabled_queue_order": ("EnabledQueueOrder", "enableQueueOrder"),
    "enabled_cluster_order": ("EnabledClusterOrder", "EnabledClusterOrder", "enableClusterOrder"),
    "enabled_predicate": ("EnabledPredicate", "enablePredicate"),
    "enabled_best_node": ("EnabledBestNode", "enableBestNode"),
    "enabled_node_order": ("EnabledNodeOrder", "enableNodeOrder"),
    "enabled_target_job": ("EnabledTargetJob", "enableTargetJob"),
    "enabled_reserved_nodes": ("EnabledReservedNodes", "enableReservedNodes"),
    "enabled_job_enqueued": ("EnabledJobEnqueued", "enableJobEnqueued"),
    "enabled_victim": ("EnabledVictim", "enabledVictim", "enableVictim"),
    "enabled_job_starving": ("EnabledJobStarving", "enableJobStarving"),
    "enabled_overused": ("EnabledOverused", "enabledOverused", "enableOverused"),
    "enabled_allocatable": ("EnabledAllocatable", "enabledAllocatable", "enableAllocatable"),
    "enabled_hyper_node_order": ("EnabledHyperNodeOrder", "enabledHyperNodeOrder", "enableHyperNodeOrder"),
    "enabled_sub_job_ready": ("EnabledSubJobReady", "enabledSubJobReady", "enableSubJobReady"),
    "enabled_sub_job_pipelined": ("EnabledSubJobPipelined", "enabledSubJobPipelined", "enableSubJobPipelined"),
    "enabled_sub_job_order": ("EnabledSubJobOrder", "enabledSubJobOrder", "enableSubJobOrder"),
    "enabled_hyper_node_gradient": ("EnabledHyperNodeGradient", "enabledHyperNodeGradient", "enableHyperNodeGradient"),
}
ENABLED_FLAGS: tuple[str, ...] = tuple(_FLAG_GO_NAMES)
# Volcano's ApplyPluginConfDefaults turns every unset flag on EXCEPT these two, which stay
# nil (off): hierarchy is opt-in (Session.HierarchyEnabled: non-nil and true), as is cluster order.
DEFAULTED_FLAGS: tuple[str, ...] = tuple(f for f in ENABLED_FLAGS
                                         if f not in ("enabled_hierarchy", "enabled_cluster_order"))


def _lower_first(s: str) -> str:
    return s[:1].lower() + s[1:]


# attribute name -> the spelling a scenario file and a PluginSpec use (the Go field in lowerCamel)
FLAG_NAMES: dict[str, str] = {attr: _lower_first(names[0]) for attr, names in _FLAG_GO_NAMES.items()}

# every spelling of a flag a file may use -> its attribute name
FLAG_ALIASES: dict[str, str] = {}
for _attr, _names in _FLAG_GO_NAMES.items():
    FLAG_ALIASES[_attr] = _attr
    for _n in _names:
        FLAG_ALIASES[_n] = _attr
        FLAG_ALIASES[_lower_first(_n)] = _attr


@dataclass
class PluginOption:
    """One plugin in a tier. A flag is True, False or None (unset = disabled in the session)."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    enabled_job_order: bool | None = None
    enabled_hierarchy: bool | None = None
    enabled_job_ready: bool | None = None
    enabled_job_pipelined: bool | None = None
    enabled_task_order: bool | None = None
    enabled_preemptable: bool | None = None
    enabled_reclaimable: bool | None = None
    enabled_preemptive: bool | None = None
    enabled_queue_order: bool | None = None
    enabled_cluster_order: bool | None = None
    enabled_predicate: bool | None = None
    enabled_best_node: bool | None = None
    enabled_node_order: bool | None = None
    enabled_target_job: bool | None = None
    enabled_reserved_nodes: bool | None = None
    enabled_job_enqueued: bool | None = None
    enabled_victim: bool | None = None
    enabled_job_starving: bool | None = None
    enabled_overused: bool | None = None
    enabled_allocatable: bool | None = None
    enabled_hyper_node_order: bool | None = None
    enabled_sub_job_ready: bool | None = None
    enabled_sub_job_pipelined: bool | None = None
    enabled_sub_job_order: bool | None = None
    enabled_hyper_node_gradient: bool | None = None

    # Go-compatible alias: the Go field is EnablePreemptive.
    @property
    def enable_preemptive(self) -> bool | None:
        return self.enabled_preemptive

    def is_enabled(self, flag: str) -> bool:
        """``isEnabled``: nil counts as disabled."""
        return getattr(self, flag) is True

    def with_defaults(self) -> "PluginOption":
        """``ApplyPluginConfDefaults``: every unset flag of :data:`DEFAULTED_FLAGS` becomes True."""
        return replace(self, **{f: True for f in DEFAULTED_FLAGS if getattr(self, f) is None})

    @classmethod
    def all_on(cls, name: str, **arguments: Any) -> "PluginOption":
        return cls(name=name, arguments=dict(arguments)).with_defaults()

    @classmethod
    def from_dict(cls, d: Any, *, source: str, where: str) -> "PluginOption":
        """One plugin option of a tier (:func:`read_plugin_option`)."""
        problems: list[tuple[str, str]] = []
        opt = read_plugin_option(d, where, problems)
        if problems:
            raise ConfProblems(source, problems)
        return opt

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name}
        for f in ENABLED_FLAGS:
            v = getattr(self, f)
            if v is not None:
                out[_lower_first(_FLAG_GO_NAMES[f][0])] = v
        if self.arguments:
            out["arguments"] = dict(self.arguments)
        return out


@dataclass
class Tier:
    plugins: list[PluginOption] = field(default_factory=list)


class Arguments(dict):
    """``framework.Arguments``: typed getters that leave the target unchanged when the key is absent
    or has the wrong type (Volcano only logs in that case)."""

    def get_bool(self, key: str, default: bool) -> bool:
        v = self.get(key)
        if isinstance(v, bool):
            return v
        if isinstance(v, str) and v.lower() in ("true", "false"):
            return v.lower() == "true"
        return default

    def get_int(self, key: str, default: int) -> int:
        v = self.get(key)
        if isinstance(v, bool):
            return default
        if isinstance(v, int):
            return v
        if isinstance(v, float) and v.is_integer():
            return int(v)
        if isinstance(v, str):
            try:
                return int(v)
            except ValueError:
                return default
        return default

    def get_float(self, key: str, default: float) -> float:
        v = self.get(key)
        if isinstance(v, bool):
            return default
        if isinstance(v, (int, float)):
            return float(v)
        if isinstance(v, str):
            try:
                return float(v)
            except ValueError:
                return default
        return default


@dataclass
class Configuration:
    """Arguments of one action (``conf.Configuration``)."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


def get_arg_of_action_from_conf(configurations: Iterable[Configuration], action_name: str) -> Arguments:
    """``framework.GetArgOfActionFromConf``: the arguments of the named action (empty if none)."""
    for c in configurations:
        if c.name == action_name:
            return Arguments(c.arguments)
    return Arguments()


@dataclass
class SchedulerConf:
    actions: list[str] = field(default_factory=list)
    tiers: list[Tier] = field(default_factory=list)
    configurations: list[Configuration] = field(default_factory=list)
    # The Go test harness registers only some plugin builders (a scenario's
    # ``plugins.registered_builders``); None = every builder known to the registry.
    registered_builders: tuple[str, ...] | None = None
    source: str = "<builtin>"

    # -- views --------------------------------------------------------------------------------
    @property
    def enabled_action_map(self) -> dict[str, bool]:
        """``conf.EnabledActionMap``: decides whether allocate auto-enqueues Pending PodGroups."""
        return {a: True for a in self.actions}

    def action_arguments(self, action: str) -> Arguments:
        return get_arg_of_action_from_conf(self.configurations, action)

    def plugin_names(self) -> list[str]:
        return [p.name for t in self.tiers for p in t.plugins]

    def with_defaults(self) -> "SchedulerConf":
        """Production semantics: every unset ``enabled*`` flag on."""
        return replace(self, tiers=[Tier([p.with_defaults() for p in t.plugins]) for t in self.tiers])

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "actions": list(self.actions),
            "tiers": [[p.to_dict() for p in t.plugins] for t in self.tiers],
            "action_arguments": {c.name: dict(c.arguments) for c in self.configurations},
        }
        if self.registered_builders is not None:
            out["registered_builders"] = list(self.registered_builders)
        return out

    # -- loading ------------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, d: Any, source: str = "<dict>", *, apply_defaults: bool = False,
                  strict: bool = True, require_actions: bool = False) -> "SchedulerConf":
        """Load from a mapping shaped like a scenario file or Volcano's YAML (:func:`read_conf`);
        every problem is reported at once, each naming ``source`` and the field. Unset flags stay
        off unless ``apply_defaults``."""
        conf, problems = read_conf(d, strict=strict, require_actions=require_actions)
        if problems:
            raise ConfProblems(source, problems)
        conf.source = source
        return conf.with_defaults() if apply_defaults else conf

    @classmethod
    def from_scenario(cls, scenario: Mapping[str, Any], source: str = "<scenario>") -> "SchedulerConf":
        """The configuration part of a scenario file (other keys are ignored; unset flags off)."""
        sub = {k: scenario[k] for k in ("actions", "plugins", "tiers", "action_arguments",
                                        "configurations") if k in scenario}
        return cls.from_dict(sub, source=source)


def default_conf() -> SchedulerConf:
    """Volcano's default configuration (its ``DefaultSchedulerConf``) plus preempt and reclaim,
    with every ``enabled*`` flag on (``ApplyPluginConfDefaults``)."""
    t1 = [PluginOption.all_on(n) for n in ("priority", "gang", "conformance")]
    t2 = [PluginOption.all_on(n) for n in ("overcommit", "drf", "predicates", "proportion", "nodeorder")]
    return SchedulerConf(actions=["enqueue", "allocate", "preempt", "reclaim", "backfill"],
                         tiers=[Tier(t1), Tier(t2)], configurations=[], source="<default>")



# ------------------------------------------------------------------------------------ the schema
# The one reading of a scheduler configuration, whatever file it comes from: an experiment's
# ``scheduler_conf``, a scenario file's ``actions`` / ``plugins`` / ``action_arguments``, Volcano's
# YAML. The readers collect ``(field, problem)`` pairs, fields relative to the configuration
# (``plugins.tiers[0][1].name``); each file format puts its file (and section) in front. Actions
# and plugins are known through their registries only.

CONF_KEYS = ("actions", "tiers", "plugins", "action_arguments", "configurations", "registered_builders")

Problems = list[tuple[str, str]]


class ConfProblems(BadInput):
    """A scheduler configuration that does not validate: one line ``<source>: <field>: <problem>``
    per problem."""

    def __init__(self, source: str, problems: Problems):
        self.source, self.problems = source, list(problems)
        super().__init__("\n".join(f"{source}: {f}: {p}" if f else f"{source}: {p}" for f, p in problems))


def _kind(v: Any) -> str:
    return "null" if v is None else {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean",
                                     int: "an integer", float: "a number"}.get(type(v), type(v).__name__)


def read_actions(v: Any, where: str, problems: Problems, *, require: bool = False) -> list[str]:
    """A list of registered action names, or Volcano's comma-separated string. An action may be
    listed twice: Volcano runs it twice (the session sums its phases)."""
    if v is None:
        v = []
    if isinstance(v, str):
        v = [a.strip() for a in v.split(",") if a.strip()]
    if not isinstance(v, list):
        problems.append((where, f"expected a list of action names or a comma-separated string, got {_kind(v)}"))
        return []
    known = known_actions()
    out: list[str] = []
    for i, a in enumerate(v):
        if not isinstance(a, str) or a.strip() not in known:
            problems.append((f"{where}[{i}]", f"unknown action {a!r}; known: {', '.join(known)}"))
        else:
            out.append(a.strip())
    if require and not v:
        problems.append((where, "at least one action is needed"))
    return out


def _plugin_argument_problems(plugin: str, args: Mapping, where: str, problems: Problems) -> None:
    """Argument keys the plugin does not read. A plugin builder declares them in ``argument_keys``
    (exact keys) and ``argument_prefixes``; one declaring neither is not checked."""
    from ha.scheduler.framework.registry import get_plugin_builder
    builder = get_plugin_builder(plugin)
    keys = getattr(builder, "argument_keys", None)
    prefixes = tuple(getattr(builder, "argument_prefixes", ()) or ())
    if keys is None and not prefixes:
        return
    keys = tuple(keys or ()) + tuple(f"{a}.{GANG_AWARE_KEY}" for a in ("preempt", "reclaim"))
    for k in args:
        if k not in keys and not any(str(k).startswith(p) for p in prefixes):
            known = ", ".join(list(keys) + [f"{p}*" for p in prefixes]) or "(none)"
            problems.append((f"{where}.{k}", f"unknown argument {k!r} for plugin {plugin!r}; known: {known}"))


def read_plugin_option(d: Any, where: str, problems: Problems) -> PluginOption:
    """``{name, arguments, enabled* flags}`` (or just the plugin's name): a registered plugin, the
    arguments it reads, each flag true, false or null (unset) under any of its spellings."""
    if isinstance(d, str):
        d = {"name": d}
    if not isinstance(d, Mapping):
        problems.append((where, f"a plugin option is a mapping with a 'name', got {_kind(d)}"))
        return PluginOption(name="")
    name = d.get("name")
    known = known_plugins()
    if not isinstance(name, str) or not name:
        problems.append((f"{where}.name", "missing or not a non-empty string"))
        name = ""
    elif name not in known:
        problems.append((f"{where}.name", f"unknown plugin {name!r}; known: {', '.join(known)}"))
    opt = PluginOption(name=name)
    for key, value in d.items():
        if key == "name":
            continue
        if key == "arguments":
            if value is None:
                continue
            if not isinstance(value, Mapping):
                problems.append((f"{where}.arguments", f"expected a mapping, got {_kind(value)}"))
                continue
            if name in known:
                _plugin_argument_problems(name, value, f"{where}.arguments", problems)
            opt.arguments = dict(value)
            continue
        attr = FLAG_ALIASES.get(key)
        if attr is None:
            problems.append((f"{where}.{key}", f"unknown plugin option {key!r} for plugin {name!r}; a plugin "
                             f"takes name, arguments and the flags {', '.join(FLAG_NAMES.values())}"))
        elif value is not None and not isinstance(value, bool):
            problems.append((f"{where}.{key}", f"expected true, false or null, got {value!r}"))
        else:
            setattr(opt, attr, value)
    return opt


def read_tiers(v: Any, where: str, problems: Problems) -> list[Tier]:
    """A list of tiers, each a list of plugin options or ``{plugins: [...]}``; no plugin twice."""
    if v is None:
        return []
    if not isinstance(v, list):
        problems.append((where, f"expected a list of tiers, got {_kind(v)}"))
        return []
    tiers: list[Tier] = []
    seen: set[str] = set()
    for ti, raw in enumerate(v):
        w = f"{where}[{ti}]"
        if isinstance(raw, Mapping):
            if set(raw) - {"plugins"}:
                problems.append((w, "a tier mapping has only 'plugins'"))
                continue
            raw = raw.get("plugins") or []
            w += ".plugins"
        if not isinstance(raw, list):
            problems.append((w, f"a tier is a list of plugin options, got {_kind(raw)}"))
            continue
        opts = []
        for pi, p in enumerate(raw):
            opt = read_plugin_option(p, f"{w}[{pi}]", problems)
            if opt.name and opt.name in seen:
                problems.append((f"{w}[{pi}].name", f"plugin {opt.name!r} appears twice in the tiers"))
            seen.add(opt.name)
            opts.append(opt)
        tiers.append(Tier(opts))
    return tiers


def read_action_arguments(v: Any, where: str, problems: Problems) -> list[Configuration]:
    """``{action: {argument: value}}`` of registered actions."""
    if v is None:
        return []
    if not isinstance(v, Mapping):
        problems.append((where, f"expected a mapping of action to its arguments, got {_kind(v)}"))
        return []
    known = known_actions()
    out = []
    for name, args in v.items():
        if name not in known:
            problems.append((f"{where}.{name}", f"unknown action {name!r}; known: {', '.join(known)}"))
        elif args is not None and not isinstance(args, Mapping):
            problems.append((f"{where}.{name}", f"expected a mapping of arguments, got {_kind(args)}"))
        else:
            out.append(Configuration(str(name), dict(args or {})))
    return out


def _read_configurations(v: Any, where: str, problems: Problems) -> list[Configuration]:
    """Volcano's ``configurations: [{name, arguments}]``."""
    if v is None:
        return []
    if not isinstance(v, list):
        problems.append((where, f"expected a list of {{name, arguments}}, got {_kind(v)}"))
        return []
    known = known_actions()
    out = []
    for i, c in enumerate(v):
        w = f"{where}[{i}]"
        if not isinstance(c, Mapping) or not isinstance(c.get("name"), str):
            problems.append((w, "expected a mapping with a 'name'"))
        elif c["name"] not in known:
            problems.append((f"{w}.name", f"unknown action {c['name']!r}; known: {', '.join(known)}"))
        elif c.get("arguments") is not None and not isinstance(c["arguments"], Mapping):
            problems.append((f"{w}.arguments", f"expected a mapping, got {_kind(c['arguments'])}"))
        else:
            out.append(Configuration(c["name"], dict(c.get("arguments") or {})))
    return out


def read_registered_builders(v: Any, where: str, problems: Problems) -> tuple[str, ...] | None:
    """The plugin builders a Go test harness registers (None: every registered plugin)."""
    if v is None:
        return None
    if not isinstance(v, list):
        problems.append((where, f"expected a list of plugin names, got {_kind(v)}"))
        return None
    known = known_plugins()
    for i, n in enumerate(v):
        if not isinstance(n, str) or n not in known:
            problems.append((f"{where}[{i}]", f"unknown plugin {n!r}; known: {', '.join(known)}"))
    return tuple(n for n in v if isinstance(n, str))


def read_conf(d: Any, *, strict: bool = True, require_actions: bool = False) -> tuple[SchedulerConf, Problems]:
    """A scheduler configuration and its problems (empty: valid). Keys: ``actions``, ``tiers`` or
    ``plugins: {tiers, registered_builders}`` (scenario files), ``registered_builders``,
    ``action_arguments`` or Volcano's ``configurations``. With ``strict=False`` other keys (a
    whole scenario file) are ignored."""
    problems: Problems = []
    if not isinstance(d, Mapping):
        return SchedulerConf(), [("", f"a scheduler configuration is a mapping, got {_kind(d)}")]
    if strict:
        for k in d:
            if k not in CONF_KEYS:
                problems.append((str(k), f"unknown scheduler configuration field {k!r}; known: {', '.join(CONF_KEYS)}"))
    actions = read_actions(d.get("actions"), "actions", problems, require=require_actions)
    registered = read_registered_builders(d.get("registered_builders"), "registered_builders", problems)
    raw_tiers, tiers_at = d.get("tiers"), "tiers"
    block = d.get("plugins")
    if block is not None:
        if not isinstance(block, Mapping):
            problems.append(("plugins", f"expected a mapping with 'tiers', got {_kind(block)}"))
        else:
            for k in block:
                if k not in ("tiers", "registered_builders"):
                    problems.append((f"plugins.{k}", f"unknown field {k!r}; known fields: tiers, registered_builders"))
            if raw_tiers is not None:
                problems.append(("plugins.tiers", "give either 'tiers' or 'plugins.tiers', not both"))
            raw_tiers, tiers_at = block.get("tiers"), "plugins.tiers"
            if block.get("registered_builders") is not None:
                registered = read_registered_builders(block["registered_builders"], "plugins.registered_builders",
                                                      problems)
    tiers = read_tiers(raw_tiers, tiers_at, problems)
    configurations = (read_action_arguments(d.get("action_arguments"), "action_arguments", problems)
                      + _read_configurations(d.get("configurations"), "configurations", problems))
    return SchedulerConf(actions=actions, tiers=tiers, configurations=configurations,
                         registered_builders=registered), problems
