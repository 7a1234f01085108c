"""Scheduler configuration: actions, plugin tiers with their ``enabled*`` flags, action arguments.

Mirrors Volcano's ``pkg/scheduler/conf`` (``SchedulerConfiguration``, ``Tier``, ``PluginOption``,
``Configuration``) and its action arguments.

Flag semantics (docs/volcano-semantics.md §5.2): the session aggregators treat an unset flag (None) as
*disabled*. Production YAML runs ``ApplyPluginConfDefaults``, which turns every unset flag on; the
Go unit tests (and so our scenario files) do not. ``SchedulerConf.from_dict`` therefore leaves unset
flags off unless ``apply_defaults=True``; ``default_conf()`` is the production default with every
flag on.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Mapping

from ha.errors import BadInput

__all__ = [
    "PluginOption", "Tier", "Configuration", "Arguments", "SchedulerConf", "default_conf",
    "ENABLED_FLAGS", "FLAG_ALIASES", "FLAG_NAMES", "known_actions", "get_arg_of_action_from_conf",
]


def known_actions() -> tuple[str, ...]:
    """The actions the model implements: the framework's registry, which every action module
    fills when ``ha.scheduler`` is imported, is the one list."""
    from ha.scheduler.framework.registry import registered_action_names
    return tuple(registered_action_names())

# Python attribute name -> Go field name of conf.PluginOption. Every one may be written in a file
# as the Go field name, its lower-camel form (``enabledJobOrder``, what the scenario files use),
# Volcano's yaml tag (``enableJobOrder``) or the snake_case attribute name.
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
    "enabled_cluster_order": ("EnabledClusterOrder", "enableClusterOrder"),
    "enabled_predicate": ("EnabledPredicate", "enablePredicate"),
    "enabled_best_node": ("EnabledBestNode", "enableBestNode"),
    "enabled_node_order": ("EnabledNodeOrder", "enableNodeOrder"),
    "enabled_target_job": ("EnabledTargetJob", "enableTargetJob"),
    "enabled_reserved_nodes": ("EnabledReservedNodes", "enableReservedNodes"),
    "enabled_job_enqueued": ("EnabledJobEnqueued", "enableJobEnqueued"),
    "enabled_victim": ("EnabledVictim", "enableVictim"),
    "enabled_job_starving": ("EnabledJobStarving", "enableJobStarving"),
    "enabled_overused": ("EnabledOverused", "enableOverused"),
    "enabled_allocatable": ("EnabledAllocatable", "enableAllocatable"),
    "enabled_hyper_node_order": ("EnabledHyperNodeOrder", "enableHyperNodeOrder"),
    "enabled_sub_job_ready": ("EnabledSubJobReady", "enableSubJobReady"),
    "enabled_sub_job_pipelined": ("EnabledSubJobPipelined", "enableSubJobPipelined"),
    "enabled_sub_job_order": ("EnabledSubJobOrder", "enableSubJobOrder"),
    "enabled_hyper_node_gradient": ("EnabledHyperNodeGradient", "enableHyperNodeGradient"),
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
        if isinstance(d, str):
            d = {"name": d}
        if not isinstance(d, Mapping):
            raise BadInput(f"{source}: {where}: a plugin option must be a mapping with a 'name', "
                           f"got {type(d).__name__}")
        name = d.get("name")
        if not isinstance(name, str) or not name:
            raise BadInput(f"{source}: {where}.name: missing or not a non-empty string")
        opt = cls(name=name)
        for key, value in d.items():
            if key == "name":
                continue
            if key == "arguments":
                if value is None:
                    continue
                if not isinstance(value, Mapping):
                    raise BadInput(f"{source}: {where}.arguments (plugin {name!r}): must be a mapping")
                opt.arguments = dict(value)
                continue
            attr = FLAG_ALIASES.get(key)
            if attr is None:
                raise BadInput(f"{source}: {where}.{key} (plugin {name!r}): unknown plugin option; "
                               f"known flags: {', '.join(sorted(n for n in FLAG_ALIASES if n[0].islower() and '_' not in n))}")
            if value is not None and not isinstance(value, bool):
                raise BadInput(f"{source}: {where}.{key} (plugin {name!r}): must be true, false or null, "
                               f"got {value!r}")
            setattr(opt, attr, value)
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
    _KEYS = ("actions", "tiers", "plugins", "action_arguments", "configurations",
             "registered_builders")

    @classmethod
    def from_dict(cls, d: Any, source: str = "<dict>", *, apply_defaults: bool = False,
                  strict: bool = True) -> "SchedulerConf":
        """Load from a mapping shaped like a scenario file or Volcano's YAML.

        Accepted keys: ``actions`` (list or Volcano's comma-separated string), ``tiers`` (a list
        of tiers, each a list of plugin options or ``{"plugins": [...]}``), or ``plugins:
        {tiers, registered_builders}`` as in the scenario files; ``action_arguments: {action:
        {...}}`` or Volcano's ``configurations: [{name, arguments}]``. With ``strict=False``
        other keys (a whole scenario file) are ignored. Unset flags stay off unless
        ``apply_defaults``.
        """
        if not isinstance(d, Mapping):
            raise BadInput(f"{source}: scheduler configuration must be a mapping, got {type(d).__name__}")
        if strict:
            unknown = [k for k in d if k not in cls._KEYS]
            if unknown:
                raise BadInput(f"{source}: unknown scheduler configuration field(s) "
                               f"{', '.join(map(repr, unknown))}; known: {', '.join(cls._KEYS)}")

        # actions
        raw_actions = d.get("actions", [])
        if raw_actions is None:
            raw_actions = []
        if isinstance(raw_actions, str):
            raw_actions = [a.strip() for a in raw_actions.split(",") if a.strip()]
        if not isinstance(raw_actions, list):
            raise BadInput(f"{source}: actions: must be a list of action names or a comma-separated string")
        actions: list[str] = []
        known = known_actions()
        for i, a in enumerate(raw_actions):
            if not isinstance(a, str) or a.strip() not in known:
                raise BadInput(f"{source}: actions[{i}]: unknown action {a!r}; known: {', '.join(known)}")
            actions.append(a.strip())

        # tiers
        registered: tuple[str, ...] | None = None
        tiers_src = "tiers"
        raw_tiers = d.get("tiers")
        plugins_block = d.get("plugins")
        if plugins_block is not None:
            if isinstance(plugins_block, Mapping):
                if raw_tiers is not None:
                    raise BadInput(f"{source}: give either 'tiers' or 'plugins.tiers', not both")
                raw_tiers = plugins_block.get("tiers")
                tiers_src = "plugins.tiers"
                rb = plugins_block.get("registered_builders")
                if rb is not None:
                    if not isinstance(rb, list) or not all(isinstance(x, str) for x in rb):
                        raise BadInput(f"{source}: plugins.registered_builders: must be a list of plugin names")
                    registered = tuple(rb)
                extra = [k for k in plugins_block if k not in ("tiers", "registered_builders")]
                if extra and strict:
                    raise BadInput(f"{source}: plugins: unknown field(s) {', '.join(map(repr, extra))}")
            else:
                raise BadInput(f"{source}: plugins: must be a mapping with 'tiers'")
        if d.get("registered_builders") is not None:
            rb = d["registered_builders"]
            if not isinstance(rb, list) or not all(isinstance(x, str) for x in rb):
                raise BadInput(f"{source}: registered_builders: must be a list of plugin names")
            registered = tuple(rb)
        if raw_tiers is None:
            raw_tiers = []
        if not isinstance(raw_tiers, list):
            raise BadInput(f"{source}: {tiers_src}: must be a list of tiers")
        tiers: list[Tier] = []
        for ti, raw_tier in enumerate(raw_tiers):
            where = f"{tiers_src}[{ti}]"
            if isinstance(raw_tier, Mapping):
                if set(raw_tier) - {"plugins"}:
                    raise BadInput(f"{source}: {where}: a tier mapping may only have 'plugins'")
                raw_tier = raw_tier.get("plugins") or []
                where += ".plugins"
            if not isinstance(raw_tier, list):
                raise BadInput(f"{source}: {where}: a tier must be a list of plugin options")
            opts = [PluginOption.from_dict(p, source=source, where=f"{where}[{pi}]")
                    for pi, p in enumerate(raw_tier)]
            tiers.append(Tier(opts))

        # action arguments
        configurations: list[Configuration] = []
        aa = d.get("action_arguments")
        if aa is not None:
            if not isinstance(aa, Mapping):
                raise BadInput(f"{source}: action_arguments: must be a mapping action -> arguments")
            for name, args in aa.items():
                if args is None:
                    args = {}
                if not isinstance(args, Mapping):
                    raise BadInput(f"{source}: action_arguments.{name}: must be a mapping")
                configurations.append(Configuration(str(name), dict(args)))
        cf = d.get("configurations")
        if cf is not None:
            if not isinstance(cf, list):
                raise BadInput(f"{source}: configurations: must be a list of {{name, arguments}}")
            for i, c in enumerate(cf):
                if not isinstance(c, Mapping) or not isinstance(c.get("name"), str):
                    raise BadInput(f"{source}: configurations[{i}]: must be a mapping with a 'name'")
                args = c.get("arguments") or {}
                if not isinstance(args, Mapping):
                    raise BadInput(f"{source}: configurations[{i}].arguments: must be a mapping")
                configurations.append(Configuration(c["name"], dict(args)))

        conf = cls(actions=actions, tiers=tiers, configurations=configurations,
                   registered_builders=registered, source=source)
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

