"""The experiment file (docs/design.md "Experiment files"): pydantic v2 models, strict (unknown keys are
errors), with the units users write (``500ms``/``10s``/``2m``, ``20/s``, ``128Gi``).

``load_experiment(path)`` reads the YAML with ``yaml.safe_load`` and raises
:class:`ha.errors.BadInput` naming the file, the field path and the problem, one line per problem::

    examples/x.yaml: schedulers.instances: must be ≥ 1 (got 0)
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal, Optional

import yaml
from pydantic import (BaseModel, BeforeValidator, ConfigDict, Field, ValidationError,
                      WithJsonSchema, field_validator, model_validator)

from cluster_state.quantity import QuantityError, parse_quantity
from apimachinery.validation import validation_problems
from ha.errors import BadInput
from chaos.faults import FAULTS, ChaosEntry, Distribution
from ha.scenario import object_shapes
from ha.scenario.object_shapes import (PG_PHASES, POD_PHASES, PREEMPTION_POLICIES, QUEUE_STATES, ScenarioError,
                                       build_objects, new_context)
from ha.scheduler.conf import read_conf
from apimachinery.units import (DURATION_SCHEMA, Duration, Rate, format_duration, parse_duration,
                                 scenario_quantity)

__all__ = ["Experiment", "load_experiment", "parse_experiment", "FAULTS",
           "ChaosEntry", "Distribution", "SchedulerConfSpec", "PluginEntry", "instance_names",
           "json_schema"]

# ---------------------------------------------------------------------------------------- types




def _resources(v: object) -> dict[str, Any]:
    """A Kubernetes resource map (``{cpu: 32, memory: 128Gi}``); validated, kept as written."""
    if not isinstance(v, dict):
        raise ValueError("expected a map of resource name to quantity, like {cpu: 4, memory: 8Gi}")
    for name, q in v.items():
        if not isinstance(name, str) or not name:
            raise ValueError(f"resource names must be non-empty strings, got {name!r}")
        try:
            parse_quantity(name, q)
        except QuantityError as e:
            raise ValueError(str(e)) from None
    return dict(v)


def _scenario_resources(v: object) -> dict[str, Any]:
    """A resource map in scenario units (numbers: cpu millicores, memory bytes; strings: quantities)."""
    if not isinstance(v, dict):
        raise ValueError("expected a map of resource name to quantity, like {cpu: 1000, memory: 1Gi}")
    for name, q in v.items():
        if not isinstance(name, str) or not name:
            raise ValueError(f"resource names must be non-empty strings, got {name!r}")
        try:
            scenario_quantity(name, q)
        except QuantityError as e:
            raise ValueError(str(e)) from None
    return dict(v)


Resources = Annotated[dict[str, Any], BeforeValidator(_resources)]
ScenarioResources = Annotated[dict[str, Any], BeforeValidator(_scenario_resources)]


def _int_range(v: object) -> object:
    # `gang_size: 4` means [4, 4]
    if isinstance(v, int) and not isinstance(v, bool):
        return [v, v]
    return v


def _duration_range(v: object) -> object:
    if isinstance(v, (str, int, float)) and not isinstance(v, bool):
        return [v, v]
    return v


def _one_or_pair(item: dict[str, Any]) -> WithJsonSchema:
    return WithJsonSchema({"anyOf": [item, {"type": "array", "items": item, "minItems": 2, "maxItems": 2}]})


def _scenario_shape(builder_name: str):
    """A validator that reads a value with the starting objects' builder (taints, tolerations,
    affinity: docs/design.md, scenario files item 3), so experiment files accept exactly the scenario shapes."""
    def check(v: object) -> object:
        try:
            return getattr(object_shapes, builder_name)(new_context("<initial>"), v, "value")
        except BadInput as e:
            at = str(getattr(e, "field", "")).removeprefix("value")
            raise ValueError(getattr(e, "problem", str(e)) + (f" (at {at})" if at else "")) from None
    return BeforeValidator(check)


Taints = Annotated[list[dict[str, Any]], _scenario_shape("_taints")]
Tolerations = Annotated[list[dict[str, Any]], _scenario_shape("_tolerations")]
Affinity = Annotated[Optional[dict[str, Any]], _scenario_shape("_affinity")]

IntRange = Annotated[tuple[int, int], BeforeValidator(_int_range), _one_or_pair({"type": "integer"})]
DurationRange = Annotated[tuple[Duration, Duration], BeforeValidator(_duration_range),
                          _one_or_pair(DURATION_SCHEMA)]

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
_EXP_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def _dns_name(v: str) -> str:
    if not _NAME.match(v) or len(v) > 253:
        raise ValueError(f"{v!r} is not a valid object name (lowercase letters, digits, '-', '.')")
    return v


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, validate_default=True)


# -------------------------------------------------------------------------------------- cluster


class Topology(Strict):
    """The generated nodes spread over racks and spines (switches): each node is labelled with its
    rack (``topology/rack``) and spine (``topology/switch``); a tier-1 HyperNode per rack selects
    its nodes by label, a tier-2 HyperNode per spine lists its racks (docs/hypernodes.md)."""
    rack_size: int = Field(..., ge=1)           # nodes per rack (the last rack may be smaller)
    racks_per_spine: int = Field(2, ge=1)       # racks under one tier-2 spine HyperNode


class Cluster(Strict):
    """``nodes`` identical nodes named ``node-1`` … ``node-N`` with ``node`` as allocatable."""
    nodes: int = Field(4, ge=0)                 # how many identical nodes (node-1 … node-N)
    node: Resources = Field(default_factory=lambda: {"cpu": 32, "memory": "128Gi", "pods": 110})  # each node's allocatable
    labels: dict[str, str] = Field(default_factory=dict)   # labels of every node
    topology: Optional[Topology] = None         # racks and spines as HyperNodes (none: flat)

    @field_validator("node")
    @classmethod
    def _needs_cpu(cls, v: dict[str, Any]) -> dict[str, Any]:
        if "cpu" not in v:
            raise ValueError("a node needs at least cpu (e.g. {cpu: 32, memory: 128Gi, pods: 110})")
        return v


class QueueSpec(Strict):
    name: Annotated[str, BeforeValidator(str)]     # the Queue object's name
    weight: int = Field(1, ge=1)                     # proportion's share weight
    capability: Optional[Resources] = None           # hard limit of the queue
    deserved: Optional[Resources] = None             # capacity plugin's deserved share
    guarantee: Optional[Resources] = None            # reserved for the queue
    reclaimable: Optional[bool] = None               # may others reclaim from it
    priority: int = 0                                # queue order
    parent: str = ""                                 # capacity's queue hierarchy; "" = under root

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return _dns_name(v)


# ------------------------------------------------------------------------------------- workload


class NetworkTopology(Strict):
    """A PodGroup's ``spec.networkTopology`` (Volcano v1.14.0): ``hard`` keeps the gang inside one
    HyperNode of tier <= ``highestTierAllowed``; ``soft`` prefers it."""
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    mode: Literal["hard", "soft"] = "hard"
    highest_tier_allowed: Optional[int] = Field(None, ge=0, alias="highestTierAllowed")

    def to_spec(self) -> dict[str, Any]:
        out: dict[str, Any] = {"mode": self.mode}
        if self.highest_tier_allowed is not None:
            out["highestTierAllowed"] = self.highest_tier_allowed
        return out


class Workload(Strict):
    """Gangs arriving over time: each gang is a PodGroup (minMember = its size) and its pods."""
    arrivals: Literal["poisson", "constant"] = "poisson"   # gaps between gangs: exponential or fixed
    rate: Rate = "1/s"                          # gangs per second
    gang_size: IntRange = (1, 1)                # pods per gang: n, or [min, max] drawn uniformly
    runtime: DurationRange = ("10s", "10s")     # how long a pod runs once bound: d, or [min, max]
    queues: list[str] = Field(default_factory=list)        # empty: every queue of the experiment
    priority_classes: dict[str, int] = Field(default_factory=dict)   # created, and drawn from per gang
    request: Resources = Field(default_factory=lambda: {"cpu": 1, "memory": "1Gi"})  # per pod
    namespace: str = "default"                  # of the generated podgroups and pods
    max_gangs: Optional[int] = Field(None, ge=0)             # stop generating after this many
    # every generated PodGroup's spec.networkTopology, e.g. {mode: hard, highestTierAllowed: 1}
    network_topology: Optional[NetworkTopology] = None
    # no arrivals after this (default: the whole run). A quiet tail lets a long-run check judge
    # convergence without in-flight churn, as Jepsen heals and quiesces before its final reads.
    until: Optional[Duration] = None

    @field_validator("until")
    @classmethod
    def _until(cls, v: float | None) -> float | None:
        if v is not None and v <= 0:
            raise ValueError("must be > 0")
        return v

    @field_validator("rate")
    @classmethod
    def _positive_rate(cls, v: float) -> float:
        if v <= 0:
            raise ValueError("must be > 0/s")
        return v

    @field_validator("gang_size")
    @classmethod
    def _gang(cls, v: tuple[int, int]) -> tuple[int, int]:
        if v[0] < 1:
            raise ValueError(f"must be ≥ 1 (got {v[0]})")
        if v[0] > v[1]:
            raise ValueError(f"min {v[0]} > max {v[1]}")
        return v

    @field_validator("runtime")
    @classmethod
    def _runtime(cls, v: tuple[float, float]) -> tuple[float, float]:
        if v[0] > v[1]:
            raise ValueError(f"min {format_duration(v[0])} > max {format_duration(v[1])}")
        return v

    @field_validator("priority_classes")
    @classmethod
    def _pcs(cls, v: dict[str, int]) -> dict[str, int]:
        for name in v:
            _dns_name(name)
        return v


# ----------------------------------------------------------------------------------- schedulers


class Lease(Strict):
    duration: Duration = "15s"          # how long a lease holds without renewal (client-go leaseDuration)
    renew_deadline: Duration = "10s"    # the leader gives up when it has not renewed for this long
    retry: Duration = "2s"              # how often candidates try (retryPeriod)

    @model_validator(mode="after")
    def _order(self) -> "Lease":
        # client-go's leaderelection rejects these too
        if not self.duration > self.renew_deadline:
            raise ValueError(f"duration ({format_duration(self.duration)}) must be greater than "
                             f"renew_deadline ({format_duration(self.renew_deadline)})")
        if not self.renew_deadline > self.retry:
            raise ValueError(f"renew_deadline ({format_duration(self.renew_deadline)}) must be greater "
                             f"than retry ({format_duration(self.retry)})")
        if self.retry <= 0:
            raise ValueError("retry must be > 0")
        return self


class VolcanoSpec(Strict):
    """Which real vc-scheduler runs the instances (``implementation: volcano``): a pinned ``version``
    built from its Go module (``ha-testbed volcano build``), or ``source``, a local Volcano checkout
    built as it is. v1.14.1 is the closest release to v1.14.0 that this machine's Go module proxy
    serves (docs/real-volcano-build.md)."""
    version: Optional[str] = None                # default v1.14.1 when no source is given
    source: Optional[str] = None                 # a local checkout (path; ~ expanded)
    verbosity: int = Field(2, ge=0, le=10)      # klog -v
    restart_delay: Duration = "1s"              # an exited vc-scheduler starts again after this
    args: list[str] = Field(default_factory=list)   # more flags, e.g. ["--feature-gates=..."]
    # Volcano's own scheduler configuration (its yaml: actions, tiers, configurations), handed to
    # vc-scheduler as given instead of the translation of the experiment's ``scheduler_conf``: for
    # what the model does not have (e.g. v1.15's gangpreempt / gangreclaim actions). The model's
    # registries do not check it; vc-scheduler does.
    conf: Optional[dict[str, Any]] = None

    @model_validator(mode="after")
    def _which(self) -> "VolcanoSpec":
        if self.version is not None and self.source is not None:
            raise ValueError("give version or source, not both")
        if self.source is None:
            from ha.volcano.build import resolve_version
            try:
                self.version = resolve_version(self.version or "v1.14.1")
            except BadInput as e:
                raise ValueError(str(e).replace("volcano build: ", "version: ", 1)) from None
        else:
            src = Path(self.source).expanduser()
            if not (src / "go.mod").is_file() or not (src / "cmd" / "scheduler").is_dir():
                raise ValueError(f"source: {self.source} is not a Volcano checkout (needs go.mod and cmd/scheduler)")
        for a in self.args:
            if not a.startswith("-"):
                raise ValueError(f"args: {a!r} is not a flag (want --name=value)")
        if self.conf is not None:
            from ha.scheduler.volcano_conf import check_given_conf
            problems = check_given_conf(self.conf)
            if problems:
                raise ValueError("; ".join(f"conf.{where}: {what}" for where, what in problems))
        return self


class Schedulers(Strict):
    instances: int = Field(1, ge=1, le=64)      # named scheduler-1 … scheduler-N
    # leader-elected: one schedules; active-active: all do (conflicts decide); shadow: standbys
    # run dry-run sessions to compare with the leader's
    mode: Literal["leader-elected", "active-active", "shadow"] = "leader-elected"
    period: Duration = "1s"                     # time between scheduling sessions
    lease: Lease = Field(default_factory=Lease)  # leader election timing
    # cold (Volcano: vc-scheduler starts its cache only once elected and exits when it loses the
    # lease); warm: standbys keep their informers running (kube-scheduler's behaviour). Unset:
    # cold, but warm in shadow mode, whose standbys run (dry) sessions on their caches
    standby: Optional[Literal["warm", "cold"]] = None
    # when an instance retries its errTasks (failed writes, failed binds: resyncTask):
    # continuous (Volcano: a worker of its own in every instance, standbys too, each task
    # rate-limited) or after-session (only at the end of the instance's own sessions, so a
    # standby never retries and a leader's failed bind waits for its next session to end)
    resync: Literal["continuous", "after-session"] = "continuous"
    scheduler_name: str = "volcano"             # pods with another schedulerName are not ours
    # model: the Python model of Volcano (ha/scheduler) in each instance; volcano: each instance is a
    # real vc-scheduler process (ha/runtime/external), talking to its own endpoint of the front.
    # Unset means model (and stays out of the resolved experiment, so a model run's record is as before)
    implementation: Optional[Literal["model", "volcano"]] = None
    volcano: Optional[VolcanoSpec] = None       # which vc-scheduler (implementation: volcano)

    @field_validator("period")
    @classmethod
    def _period(cls, v: float) -> float:
        if v <= 0:
            raise ValueError("must be > 0")
        return v

    @model_validator(mode="after")
    def _standby(self) -> "Schedulers":
        if self.implementation == "volcano":
            if self.volcano is None:
                self.volcano = VolcanoSpec()
            if self.mode == "shadow":
                raise ValueError("mode: shadow runs dry-run sessions in the model's standbys; "
                                 "implementation: volcano has no dry run (use leader-elected or active-active)")
            if self.standby == "warm":
                raise ValueError("standby: vc-scheduler starts its informers only once it leads (a cold "
                                 "standby); implementation: volcano cannot run warm standbys")
        elif self.volcano is not None:
            raise ValueError("volcano: given, but implementation is 'model' (say implementation: volcano)")
        if self.standby is None:
            self.standby = "warm" if self.mode == "shadow" else "cold"
        elif self.mode == "shadow" and self.standby == "cold":
            raise ValueError("standby: a shadow standby runs dry sessions on its cache: it must be warm")
        return self


def instance_names(n: int) -> list[str]:
    return [f"scheduler-{i}" for i in range(1, n + 1)]


# ---------------------------------------------------------------------------------------- chaos
# One fault = one package under chaos/faults/: the entry model, its per-fault validation, the
# distributions and the fault list live there (ChaosEntry, FAULTS, Distribution).

# ------------------------------------------------------------------------------ scheduler conf

# One schema (ha.scheduler.conf.read_conf) reads the scheduler configuration of experiment files,
# scenario files and Volcano's YAML; the models below only give it its place in this file's JSON
# Schema and reference. Actions and plugins are known through the model's registries.


class PluginEntry(BaseModel):
    """``{name: drf, enabledJobOrder: true, arguments: {...}}`` — as in a scenario file's tiers."""
    model_config = ConfigDict(extra="allow")
    name: str
    arguments: Optional[dict[str, Any]] = None

    def flags(self) -> dict[str, bool]:
        return dict(self.model_extra or {})


class SchedulerConfSpec(Strict):
    actions: list[str]
    tiers: list[list[PluginEntry]]
    action_arguments: dict[str, dict[str, Any]] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _schema(cls, v: Any) -> Any:
        """Every problem the scheduler configuration's schema finds, each at its field."""
        if not isinstance(v, dict):
            return v            # pydantic names the type problem
        problems = [(k, f"unknown key {k!r}; a scheduler_conf has actions, tiers and action_arguments")
                    for k in v if k not in cls.model_fields]
        _, found = read_conf({k: v[k] for k in cls.model_fields if k in v}, require_actions=True)
        problems += found
        if problems:
            raise ConfigProblems([(f"scheduler_conf.{f}" if f else "scheduler_conf", m) for f, m in problems])
        out = dict(v)
        if isinstance(out.get("actions"), str):      # Volcano's "enqueue, allocate"
            out["actions"] = [a.strip() for a in out["actions"].split(",") if a.strip()]
        if isinstance(out.get("tiers"), list):       # Volcano's [{plugins: [...]}]
            out["tiers"] = [[{"name": o} if isinstance(o, str) else o
                             for o in (t.get("plugins") or [] if isinstance(t, dict) else t)]
                            for t in out["tiers"]]
        if isinstance(out.get("action_arguments"), dict):
            out["action_arguments"] = {a: args or {} for a, args in out["action_arguments"].items()}
        return out

    def to_scenario_shape(self) -> dict[str, Any]:
        """``{"actions", "action_arguments", "plugins": {"tiers"}}`` as in a scenario file."""
        return {"actions": list(self.actions), "action_arguments": dict(self.action_arguments),
                "plugins": {"tiers": [[p.model_dump(exclude_none=True) for p in t] for t in self.tiers]}}


# ------------------------------------------------------------------------ initial (scenario shape)


class InitialNode(Strict):
    name: str
    allocatable: ScenarioResources
    capacity: Optional[ScenarioResources] = None
    labels: dict[str, str] = Field(default_factory=dict)
    unschedulable: bool = False
    taints: Taints = Field(default_factory=list)


class InitialQueue(Strict):
    name: str
    weight: int = Field(1, ge=1)
    capability: Optional[ScenarioResources] = None
    deserved: Optional[ScenarioResources] = None
    guarantee: Optional[ScenarioResources] = None
    priority: int = 0
    state: Literal[*QUEUE_STATES] = "Open"
    reclaimable: Optional[bool] = None
    parent: str = ""


class InitialPodGroup(Strict):
    name: str
    namespace: str = "default"
    job_id: Optional[str] = None            # scenario files carry it; must agree with namespace/name
    queue: str = "default"
    minMember: int = Field(0, ge=0)
    minTaskMember: dict[str, int] = Field(default_factory=dict)
    phase: Literal[*PG_PHASES] = "Pending"
    priorityClassName: Optional[str] = None
    minResources: Optional[ScenarioResources] = None
    # docs/design.md, scenario files item 1 (checked by the scenario loader when the objects are built)
    networkTopology: Optional[dict[str, Any]] = None
    annotations: dict[str, str] = Field(default_factory=dict)


class InitialPod(Strict):
    name: str
    namespace: str = "default"
    key: Optional[str] = None
    podgroup: str
    request: ScenarioResources = Field(default_factory=dict)
    phase: Literal[*POD_PHASES] = "Pending"
    nodeName: str = ""
    priority: Optional[int] = None
    priorityClassName: Optional[str] = None
    nominatedNodeName: str = ""
    deletionTimestamp: bool = False
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    nodeSelector: dict[str, str] = Field(default_factory=dict)
    preemptionPolicy: Optional[Literal[*PREEMPTION_POLICIES]] = None
    preemptable: bool = True
    taskRole: str = ""
    bestEffort: bool = False
    tolerations: Tolerations = Field(default_factory=list)
    affinity: Affinity = None

    @model_validator(mode="after")
    def _created(self) -> "InitialPod":
        # the scenario format's deleting pods exist in a Go test's cache, not behind an API server
        if self.deletionTimestamp:
            raise ValueError("deletionTimestamp: true cannot be created through the API server "
                             "(create the pod, then delete it with a grace period)")
        return self


class InitialPriorityClass(Strict):
    name: str
    value: int
    globalDefault: bool = False
    preemptionPolicy: Literal[*PREEMPTION_POLICIES] = "PreemptLowerPriority"


class InitialHyperNode(Strict):
    """A HyperNode (docs/design.md, scenario files item 1); members are checked by the scenario loader."""
    name: str
    tier: int = Field(ge=0)
    tierName: str = ""
    members: list[dict[str, Any]] = Field(default_factory=list)


def _with_experiment_defaults(v: dict[str, Any]) -> dict[str, Any]:
    """The ``initial`` section with what an experiment file may leave out and a scenario file
    spells out: a podgroup's namespace and queue, a pod's namespace, empty node and pod lists."""
    spec = dict(v)
    spec["nodes"] = spec.get("nodes") or []
    spec["pods"] = [{"namespace": "default", **p} if isinstance(p, dict) else p for p in spec.get("pods") or []]
    if isinstance(spec.get("podgroups"), list):
        spec["podgroups"] = [{"namespace": "default", "queue": "default", **g} if isinstance(g, dict) else g
                             for g in spec["podgroups"]]
    return spec


class Initial(Strict):
    """The starting objects in scenario-file shapes. The object builders are their one schema
    (ha/scenario/object_shapes.py): they check every field first, with the scenario
    files' words; the models below give the section its place in the JSON Schema and the
    reference, and the cross-references (to the generated nodes, queues, priority classes) are
    checked with the rest of the experiment."""
    nodes: list[InitialNode] = Field(default_factory=list)
    hypernodes: list[InitialHyperNode] = Field(default_factory=list)
    queues: list[InitialQueue] = Field(default_factory=list)
    podgroups: list[InitialPodGroup] = Field(default_factory=list)
    pods: list[InitialPod] = Field(default_factory=list)
    priority_classes: list[InitialPriorityClass] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _schema(cls, v: Any) -> Any:
        if not isinstance(v, dict):
            return v            # pydantic names the type problem
        try:
            build_objects(new_context("<experiment>"), _with_experiment_defaults(v), "initial", strict=False)
        except ScenarioError as e:
            raise ConfigProblems([(e.field, e.problem)]) from None
        return v


class Measure(Strict):
    every: Duration = "500ms"           # time between measurement ticks
    # the long-run verdict (report.md, metrics.json "convergence"): every live instance's
    # cache_divergence must be back to 0 for good within this long after the last fault
    converge_within: Duration = "5s"

    @field_validator("every", "converge_within")
    @classmethod
    def _every(cls, v: float) -> float:
        if v <= 0:
            raise ValueError("must be > 0")
        return v


class Sim(Strict):
    """The sim engine's cost model (docs/simulation.md): how much virtual time the work takes that
    runs inline under the virtual clock. Ignored by the live engine."""
    # a scheduling session: base + per_task x tasks in the cache + per_pending x pending tasks
    # + per_node x nodes (calibrated on `ha-testbed bench session` and a live quickstart run,
    # docs/simulation.md)
    session_ms: float = 50.0
    session_per_task_ms: float = 0.05
    session_per_pending_ms: float = 0.3
    session_per_node_ms: float = 0.05
    api_call_ms: float = 0.5            # one API request (a Redis round trip on loopback)
    watch_delivery_ms: float = 1.5      # one watch read (what an informer's staleness p50 shows)

    @field_validator("session_ms", "session_per_task_ms", "session_per_pending_ms",
                     "session_per_node_ms", "api_call_ms", "watch_delivery_ms")
    @classmethod
    def _cost(cls, v: float) -> float:
        if not v >= 0:
            raise ValueError("must be >= 0 (milliseconds)")
        return v


# ----------------------------------------------------------------------------------- experiment


class ConfigProblems(Exception):
    """Cross-field problems found after the fields themselves validated: [(path, message)]."""

    def __init__(self, problems: list[tuple[str, str]]):
        self.problems = problems
        super().__init__("; ".join(f"{p}: {m}" for p, m in problems))


def _queue_tree_problems(queues: list, initial: list) -> list[tuple[str, str]]:
    """Queue parents name a queue of the experiment and never loop."""
    parents = {q.name: q.parent for q in list(queues) + list(initial)}
    out = []
    for where, qs in (("queues", queues), ("initial.queues", initial)):
        for i, q in enumerate(qs):
            if q.parent and q.parent not in parents:
                out.append((f"{where}[{i}].parent", f"unknown queue {q.parent!r}"))
                continue
            seen, cur = [q.name], q.parent
            while cur:
                if cur in seen:
                    out.append((f"{where}[{i}].parent", f"queue hierarchy has a cycle: "
                                f"{' -> '.join(seen + [cur])}"))
                    break
                seen.append(cur)
                cur = parents.get(cur, "")
    return out


class Experiment(Strict):
    name: str                           # names the results folder
    seed: int = 0                       # every random choice (arrivals, fault draws) comes from it
    duration: Duration = "60s"          # how long the run lasts
    profile: str = "v1.14"              # a named set of behaviour switches
    switches: dict[str, bool] = Field(default_factory=dict)   # per-switch overrides of the profile
    cluster: Cluster = Field(default_factory=Cluster)         # the nodes
    queues: list[QueueSpec] = Field(default_factory=list)     # queues besides `default`
    workload: Optional[Workload] = None                       # gangs arriving over time (none: only `initial`)
    schedulers: Schedulers = Field(default_factory=Schedulers)  # the scheduler instances
    chaos: list[ChaosEntry] = Field(default_factory=list)
    # actions and plugin tiers as in a scenario file (default: Volcano's, plus preempt and reclaim,
    # every enabled* flag on)
    scheduler_conf: Optional[SchedulerConfSpec] = None
    initial: Initial = Field(default_factory=Initial)   # exact starting objects, scenario-file shapes
    measure: Measure = Field(default_factory=Measure)   # measurement settings
    sim: Optional[Sim] = None           # the sim engine's cost model (default: Sim's defaults)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _EXP_NAME.match(v):
            raise ValueError(f"{v!r}: use letters, digits, '.', '_' and '-' (it names the results folder)")
        return v

    @field_validator("duration")
    @classmethod
    def _dur(cls, v: float) -> float:
        if v <= 0:
            raise ValueError("must be > 0")
        return v

    @field_validator("profile")
    @classmethod
    def _profile(cls, v: str) -> str:
        from ha.scheduler.profiles import profile
        try:
            profile(v)
        except BadInput as e:
            raise ValueError(str(e)) from None
        return v

    @field_validator("switches")
    @classmethod
    def _switches(cls, v: dict[str, bool]) -> dict[str, bool]:
        from ha.scheduler.profiles import Switches
        try:
            Switches().with_(**v)
        except BadInput as e:
            raise ValueError(str(e)) from None
        return v

    @model_validator(mode="after")
    def _cross(self) -> "Experiment":
        problems: list[tuple[str, str]] = []
        queue_names = {q.name for q in self.queues} | {q.name for q in self.initial.queues} | {"default"}
        seen: set[str] = set()
        for i, q in enumerate(self.queues):
            if q.name in seen:
                problems.append((f"queues[{i}].name", f"queue {q.name!r} is defined twice"))
            seen.add(q.name)
        for i, q in enumerate(self.initial.queues):
            if q.name in seen:
                problems.append((f"initial.queues[{i}].name", f"queue {q.name!r} is defined twice"))
            seen.add(q.name)
        problems += _queue_tree_problems(self.queues, self.initial.queues)
        if self.workload is not None:
            if self.workload.until is not None and self.workload.until > self.duration:
                problems.append(("workload.until", f"{format_duration(self.workload.until)} is after the end "
                                 f"of the experiment ({format_duration(self.duration)})"))
            for j, qn in enumerate(self.workload.queues):
                if qn not in queue_names:
                    problems.append((f"workload.queues[{j}]",
                                     f"unknown queue {qn!r}; defined: {', '.join(sorted(queue_names))}"))
        n = self.schedulers.instances
        for i, c in enumerate(self.chaos):
            if c.at >= self.duration:
                problems.append((f"chaos[{i}].at", f"{format_duration(c.at)} is not before the end of "
                                 f"the experiment ({format_duration(self.duration)})"))
            if c.target and c.target.startswith("scheduler-") and int(c.target.split("-")[1]) > n:
                problems.append((f"chaos[{i}].target", f"{c.target!r} does not exist "
                                 f"(schedulers.instances is {n}: scheduler-1 … scheduler-{n})"))
            if c.target == "leader" and self.schedulers.mode == "active-active":
                problems.append((f"chaos[{i}].target", "'leader' needs schedulers.mode "
                                 "leader-elected or shadow (active-active has no leader)"))
            if c.fault == "crash-point" and self.schedulers.implementation == "volcano":
                problems.append((f"chaos[{i}].fault", "crash-point stops the model between two writes of one "
                                 "commit; a vc-scheduler instance (schedulers.implementation: volcano) has none"))
        node_names = {f"node-{k}" for k in range(1, self.cluster.nodes + 1)}
        for i, nd in enumerate(self.initial.nodes):
            if nd.name in node_names:
                problems.append((f"initial.nodes[{i}].name", f"node {nd.name!r} already exists "
                                 f"(cluster.nodes makes node-1 … node-{self.cluster.nodes})"))
            node_names.add(nd.name)
        pcs = {pc.name for pc in self.initial.priority_classes} | set(
            self.workload.priority_classes if self.workload else ())
        pg_keys = set()
        for i, pg in enumerate(self.initial.podgroups):
            key = f"{pg.namespace}/{pg.name}"
            if key in pg_keys:
                problems.append((f"initial.podgroups[{i}]", f"podgroup {key} is defined twice"))
            pg_keys.add(key)
            if pg.queue not in queue_names:
                problems.append((f"initial.podgroups[{i}].queue", f"unknown queue {pg.queue!r}"))
            if pg.priorityClassName and pg.priorityClassName not in pcs:
                problems.append((f"initial.podgroups[{i}].priorityClassName",
                                 f"unknown priority class {pg.priorityClassName!r}"))
        pod_keys = set()
        for i, p in enumerate(self.initial.pods):
            key = f"{p.namespace}/{p.name}"
            if key in pod_keys:
                problems.append((f"initial.pods[{i}]", f"pod {key} is defined twice"))
            pod_keys.add(key)
            if f"{p.namespace}/{p.podgroup}" not in pg_keys:
                problems.append((f"initial.pods[{i}].podgroup",
                                 f"unknown podgroup {p.namespace}/{p.podgroup}"))
            for fld in ("nodeName", "nominatedNodeName"):
                nn = getattr(p, fld)
                if nn and nn not in node_names:
                    problems.append((f"initial.pods[{i}].{fld}", f"unknown node {nn!r}"))
            if p.priorityClassName and p.priorityClassName not in pcs:
                problems.append((f"initial.pods[{i}].priorityClassName",
                                 f"unknown priority class {p.priorityClassName!r}"))
        if problems:
            raise ConfigProblems(problems)
        return self

    # -- derived -----------------------------------------------------------------------------

    def instance_names(self) -> list[str]:
        return instance_names(self.schedulers.instances)

    def leaf_queue_names(self) -> list[str]:
        """The experiment's queues that are no other queue's parent, in file order: where a
        workload without ``workload.queues`` should submit jobs when the queues form a tree
        (capacity with enabledHierarchy refuses every job of an inner queue)."""
        queues = list(self.queues) + list(self.initial.queues)
        parents = {q.parent for q in queues if q.parent}
        return [q.name for q in queues if q.name not in parents]

    def switches_resolved(self):
        from ha.scheduler.profiles import profile
        return profile(self.profile, **self.switches)

    def scheduler_conf_resolved(self):
        """A :class:`ha.scheduler.conf.SchedulerConf`: the file's, or Volcano's defaults."""
        from ha.scheduler.conf import SchedulerConf, default_conf
        if self.scheduler_conf is None:
            return default_conf()
        # experiments are production: unset enabled* flags are on (unlike scenario files)
        return SchedulerConf.from_dict(self.scheduler_conf.to_scenario_shape(),
                                       source=f"experiment {self.name}: scheduler_conf",
                                       apply_defaults=True)

    def resolved(self) -> dict[str, Any]:
        """The experiment as JSON, every default filled in (goes into metrics.json)."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)

    def with_overrides(self, *, seed: int | None = None, profile: str | None = None,
                       duration: str | float | None = None, implementation: str | None = None,
                       volcano: str | None = None, volcano_source: str | None = None) -> "Experiment":
        """Command-line overrides; errors name the option. Chaos entries after a shortened end are
        kept (and reported as not reached) rather than rejected."""
        changes: dict[str, Any] = {}
        if seed is not None:
            changes["seed"] = int(seed)
        if profile is not None:
            try:
                Experiment._profile(profile)
            except ValueError as e:
                raise BadInput(f"--profile: {e}") from None
            changes["profile"] = profile
        if duration is not None:
            try:
                d = parse_duration(duration) if not isinstance(duration, float) else duration
            except ValueError as e:
                raise BadInput(f"--duration: {e}") from None
            if d <= 0:
                raise BadInput("--duration: must be > 0")
            changes["duration"] = d
        if implementation is not None or volcano is not None or volcano_source is not None:
            changes["schedulers"] = self._scheduler_overrides(implementation, volcano, volcano_source)
            if changes["schedulers"].implementation == "volcano":
                for i, c in enumerate(self.chaos):
                    if c.fault == "crash-point":
                        raise BadInput(f"--implementation volcano: chaos[{i}] is a crash-point, which stops the "
                                       "model between two writes of one commit; a vc-scheduler has none")
        return self.model_copy(update=changes) if changes else self

    def _scheduler_overrides(self, implementation: str | None, volcano: str | None,
                             volcano_source: str | None) -> "Schedulers":
        """``--implementation`` / ``--volcano VERSION`` / ``--volcano-source PATH`` (the latter two
        imply ``implementation: volcano``); errors name the option."""
        if volcano is not None and volcano_source is not None:
            raise BadInput("--volcano and --volcano-source: give one, not both")
        d = self.schedulers.model_dump(by_alias=True, exclude_none=True)
        if implementation is not None:
            if implementation not in ("model", "volcano"):
                raise BadInput(f"--implementation: must be model or volcano, got {implementation!r}")
            d["implementation"] = implementation
            if implementation == "model":
                d.pop("volcano", None)
        if volcano is not None or volcano_source is not None:
            if implementation == "model":
                raise BadInput("--volcano/--volcano-source: need --implementation volcano (or none)")
            d["implementation"] = "volcano"
            spec = {k: v for k, v in (d.get("volcano") or {}).items() if k not in ("version", "source")}
            spec.update({"version": volcano} if volcano is not None else {"source": volcano_source})
            d["volcano"] = spec
        if d.get("implementation") == "volcano" and self.schedulers.implementation != "volcano":
            d["standby"] = "cold"      # vc-scheduler's standbys are cold, whatever the model's file said
        opt = "--volcano-source" if volcano_source is not None else "--volcano" if volcano is not None \
            else "--implementation"
        try:
            return Schedulers.model_validate(d)
        except ValidationError as e:
            msgs = "; ".join(f"schedulers.{'.'.join(str(x) for x in err['loc'])}: {err['msg'].removeprefix('Value error, ')}"
                             if err['loc'] else err['msg'].removeprefix('Value error, ') for err in e.errors())
            raise BadInput(f"{opt}: {msgs}") from None


def json_schema() -> dict[str, Any]:
    """The JSON Schema of experiment files (``ha-testbed schema``). Per-fault rules of ``chaos:``
    entries (keys each fault needs or does not take, targets it accepts) are in the ChaosEntry
    definition; rules across fields (a target that exists, ``at`` before the end) are not."""
    schema = Experiment.model_json_schema(by_alias=True, mode="validation")
    # a file without `name` is named after itself (load_experiment)
    schema["required"] = [r for r in schema.get("required", []) if r != "name"]
    if not schema["required"]:
        del schema["required"]
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": "https://ha-testbed/experiment.schema.json", **schema}


# ------------------------------------------------------------------------------------- loading


def parse_experiment(data: Any, source: str = "<experiment>", *, default_name: str | None = None) -> Experiment:
    """Validate already-loaded YAML/JSON data; :class:`BadInput` names ``source``, field, problem."""
    if not isinstance(data, dict):
        raise BadInput(f"{source}: expected a map of experiment settings at the top level, "
                       f"got {type(data).__name__}")
    if "name" not in data and default_name:
        data = {"name": default_name, **data}
    try:
        return Experiment.model_validate(data)
    except ValidationError as e:
        raise BadInput("\n".join(f"{source}: {p}: {m}" for p, m in validation_problems(e, Experiment))) from None
    except ConfigProblems as e:
        raise BadInput("\n".join(f"{source}: {p}: {m}" for p, m in e.problems)) from None


def load_experiment(path: str | Path) -> Experiment:
    """Read and validate an experiment file (YAML, ``yaml.safe_load``)."""
    p = Path(path)
    source = str(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BadInput(f"{source}: no such file") from None
    except IsADirectoryError:
        raise BadInput(f"{source}: is a folder, expected an experiment file (YAML)") from None
    except (OSError, UnicodeDecodeError) as e:
        raise BadInput(f"{source}: cannot read: {e}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(e, "problem", None) or str(e)
        raise BadInput(f"{source}: {where}not valid YAML: {problem}") from None
    if data is None:
        raise BadInput(f"{source}: the file is empty")
    stem = re.sub(r"[^A-Za-z0-9._-]", "-", p.stem) or "experiment"
    return parse_experiment(data, source, default_name=stem)
