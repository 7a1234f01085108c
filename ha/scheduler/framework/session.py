"""The scheduling session: open, the plugins' registered functions, close (Volcano's framework package).

A session is a snapshot of the cache plus the functions the plugins registered for it. Actions
work on the snapshot; only ``Statement.commit`` (and the few direct ``Session`` operations that
Volcano also has) reach the cache.

Registration API (what plugins call in ``on_session_open``), each ``add_*_fn(plugin_name, fn)``:

=============================== ==================================================== ==========================
method                          fn signature                                          enabled flag / aggregator
=============================== ==================================================== ==========================
add_job_order_fn                (l_job, r_job) -> int (<0: l first, 0: no opinion)   enabled_job_order
add_queue_order_fn              (l_queue, r_queue) -> int                            enabled_queue_order
add_victim_queue_order_fn       (l_queue, r_queue, preemptor_queue) -> int           (no flag)
add_cluster_order_fn            (l, r) -> int                                        enabled_cluster_order
add_task_order_fn               (l_task, r_task) -> int                              enabled_task_order
add_sub_job_order_fn            (l, r) -> int                                        enabled_sub_job_order
add_preemptable_fn              (preemptor, preemptees) -> (victims, vote)           enabled_preemptable
add_reclaimable_fn              (reclaimer, reclaimees) -> (victims, vote)           enabled_reclaimable
add_job_ready_fn                (job) -> bool                                        enabled_job_ready
add_job_pipelined_fn            (job) -> vote int (1 permit, 0 abstain, -1 reject)   enabled_job_pipelined
add_job_starving_fns            (job) -> bool       (alias add_job_starving_fn)      enabled_job_starving
add_job_valid_fn                (job) -> ValidateResult | None                       (no flag)
add_job_enqueueable_fn          (job) -> vote int                                    enabled_job_enqueued
add_job_enqueued_fn             (job) -> None                                        enabled_job_enqueued
add_predicate_fn                (task, node) -> None | FitError | Exception (or raise) enabled_predicate
add_pre_predicate_fn            (task) -> None | error (or raise)                    enabled_predicate
add_best_node_fn                (task, {score: [nodes]}) -> node | None              enabled_best_node
add_node_order_fn               (task, node) -> float                                enabled_node_order
add_batch_node_order_fn         (task, nodes) -> {node_name: float}                  enabled_node_order
add_node_map_fn                 (task, node) -> float                                enabled_node_order
add_node_reduce_fn              (task, [NodeScore]) -> None (mutates scores)         enabled_node_order
add_overused_fn                 (queue) -> bool                                      enabled_overused
add_preemptive_fn               (queue, task) -> bool                                enabled_preemptive
add_allocatable_fn              (queue, task) -> bool                                enabled_allocatable
add_target_job_fn               (jobs) -> job | None                                 enabled_target_job
add_reserved_nodes_fn           () -> None                                           enabled_reserved_nodes
add_victim_tasks_fns            [fn(tasks) -> tasks]                                 enabled_victim
add_hyper_node_order_fn         (job, {hypernode: [nodes]}) -> {hypernode: score}    enabled_hyper_node_order
add_hyper_node_gradient_for_job_fn (job, HyperNodeInfo) -> [[HyperNodeInfo]]        enabled_hyper_node_gradient (first wins)
add_sub_job_ready_fn / add_sub_job_pipelined_fn, add_simulate_*                      stored; sub-groups are not
                                                                                     modelled
add_event_handler               EventHandler(allocate_func, deallocate_func)
add_gang_search_space_fn        (job, ssn, purpose) -> SearchSpace | None             (no flag) gang_valid_domains
add_gang_victim_selector_fn     (preemptor_job, needed, candidates, ctx) -> dict      (no flag) gang_victim_selector
=============================== ==================================================== ==========================

Aggregators keep Volcano's exact tier and vote rules (docs/volcano-semantics.md, "Aggregators" and S9). The two
gang-aware eviction points (framework/gang_eviction.py) are first-answer-wins in tier order; ``gang_evictable`` is one batched Preemptable/Reclaimable call with per-plugin overrides.
"""
from __future__ import annotations

import itertools
import logging
import random
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from ha.scheduler.acceleration import acceleration_of
from ha.scheduler.api.hypernode_info import HyperNodeInfoMap
from ha.scheduler.api.job_info import writable_status as _writable_status
from ha.scheduler.conf import PluginOption, SchedulerConf, Tier, default_conf
from ha.scheduler.framework import registry
from ha.scheduler.framework.events import Event, EventHandler, NodeScore, ValidateResult
from ha.scheduler.framework.fit import FitError, as_fit_error
from ha.scheduler.framework.hypernodes import open_hyper_nodes
from ha.scheduler.framework.util import PriorityQueue, compare_task

log = logging.getLogger(__name__)

__all__ = ["Session", "open_session", "close_session", "SessionError", "record_phase"]

_session_counter = itertools.count(1)


class SessionError(Exception):
    pass


def _is_enabled(opt: PluginOption, flag: str) -> bool:
    return getattr(opt, flag, None) is True


# registry attribute -> the PluginOption flag that enables its fns (None: no flag, as in Go)
_REGISTRY_FLAGS: dict[str, str | None] = {
    "job_order_fns": "enabled_job_order",
    "queue_order_fns": "enabled_queue_order",
    "victim_queue_order_fns": None,
    "cluster_order_fns": "enabled_cluster_order",
    "task_order_fns": "enabled_task_order",
    "sub_job_order_fns": "enabled_sub_job_order",
    "preemptable_fns": "enabled_preemptable",
    "reclaimable_fns": "enabled_reclaimable",
    "job_ready_fns": "enabled_job_ready",
    "job_pipelined_fns": "enabled_job_pipelined",
    "job_starving_fns": "enabled_job_starving",
    "job_valid_fns": None,
    "job_enqueueable_fns": "enabled_job_enqueued",
    "job_enqueued_fns": "enabled_job_enqueued",
    "predicate_fns": "enabled_predicate",
    "pre_predicate_fns": "enabled_predicate",
    "best_node_fns": "enabled_best_node",
    "node_order_fns": "enabled_node_order",
    "batch_node_order_fns": "enabled_node_order",
    "overused_fns": "enabled_overused",
    "preemptive_fns": "enabled_preemptive",
    "allocatable_fns": "enabled_allocatable",
    "target_job_fns": "enabled_target_job",
    "reserved_nodes_fns": "enabled_reserved_nodes",
    "victim_tasks_fns": "enabled_victim",
    "gang_search_space_fns": None,
    "gang_victim_selector_fns": None,
}


class _Chains(dict):
    """registry attribute -> what ``build(attr)`` makes of it, built on first use. The
    aggregators are on the hot path: a hit is one dict lookup instead of a walk over the tiers."""

    __slots__ = ("_build",)

    def __init__(self, build: Callable[[str], Any]):
        super().__init__()
        self._build = build

    def __missing__(self, attr: str) -> Any:
        value = self[attr] = self._build(attr)
        return value


@dataclass
class PodGroupOldState:
    status: dict[str, Any] = field(default_factory=dict)
    annotations: dict[str, dict] = field(default_factory=dict)


class Session:
    """``framework.Session``. Built by :func:`open_session`; attributes mirror Volcano's.

    Attributes: ``uid``, ``cache``, ``switches`` (the cache's behaviour switches), ``conf``,
    ``jobs`` {job_id: JobInfo}, ``nodes`` {name: NodeInfo}, ``queues`` {queue_id: QueueInfo},
    ``node_list`` [NodeInfo], ``namespace_info``, ``total_resource``, ``tiers`` [Tier],
    ``configurations``, ``plugins`` {name: Plugin}, ``pod_group_old_state``, ``dirty_jobs``,
    ``enabled_action_map``, ``rng`` (random tie-breaks), ``errors`` (strings recorded during
    the session), ``nodes_in_shard`` (None: no sharding).
    """

    def __init__(self, cache: Any, conf: SchedulerConf | None = None, *, seed: int | None = None,
                 clock: Any = None):
        # a seeded session's uid is drawn from its seed (it reaches the API server as the
        # podgroup condition's transitionID: nothing of the host may reach a reproducible run)
        suffix = uuid.uuid4().hex[:8] if seed is None else f"{random.Random(f'uid:{seed}').getrandbits(32):08x}"
        self.uid = f"ssn-{next(_session_counter)}-{suffix}"
        self.cache = cache
        self.lent_token: tuple[int | None, int | None] | None = None   # the snapshot's node and job clones, given back in release()
        # where the session's time went, phase -> [wall ms, this thread's CPU ms], in the order
        # run (record_phase): a measurement for reports and benchmarks, never an input of the model
        self.phase_times: dict[str, list[float]] = {}
        # the session's time.Now(): the one given, else the cache's, else the wall clock
        if clock is None:
            clock = getattr(cache, "clock", None)
        if clock is None:
            from ha.scheduler.interfaces import WallClock
            clock = WallClock()
        self.clock = clock
        self.conf = conf if conf is not None else default_conf()
        self.acceleration = acceleration_of(cache)   # the cache's, read when it was built
        self.switches = getattr(cache, "switches", None)
        if self.switches is None:
            from ha.scheduler.profiles import Switches
            self.switches = Switches()
        self.tiers: list[Tier] = list(self.conf.tiers)
        self.configurations = list(self.conf.configurations)
        self.enabled_action_map: dict[str, bool] = self.conf.enabled_action_map
        self.rng = random.Random(seed if seed is not None else 0)
        self.errors: list[str] = []
        # what reached the cache (in order): (pod_key, node) binds, (pod_key, reason) evictions,
        # (pod_key, node) committed pipelines
        self.bind_log: list[tuple[str, str]] = []
        self.evict_log: list[tuple[str, str]] = []
        self.pipeline_log: list[tuple[str, str]] = []
        self.closed = False

        self.jobs: dict[Any, Any] = {}
        self.nodes: dict[str, Any] = {}
        self.queues: dict[Any, Any] = {}
        self.namespace_info: dict[str, Any] = {}
        self.node_list: list[Any] = []
        self.revocable_nodes: dict[str, Any] = {}
        self.total_resource: Any = None
        self.total_guarantee: Any = None
        self.total_deserved: Any = None
        self.pod_group_old_state = PodGroupOldState()
        self.dirty_jobs: set[Any] = set()
        self.nodes_in_shard: set[str] | None = None
        self.hyper_nodes_ready_to_schedule = False
        # hypernodes (framework/hypernodes.py fills them at open)
        self.hyper_nodes: HyperNodeInfoMap = HyperNodeInfoMap()
        self.hyper_nodes_set_by_tier: dict[int, set[str]] = {}
        self.hyper_node_tier_name_map: dict[str, int] = {}
        self.hyper_nodes_tiers: list[int] = []
        self.real_nodes_list: dict[str, list[Any]] = {}
        self.real_nodes_set: dict[str, frozenset[str]] = {}

        self.plugins: dict[str, Any] = {}
        self.event_handlers: list[EventHandler] = []
        self.job_order_fns: dict[str, Callable] = {}
        self.queue_order_fns: dict[str, Callable] = {}
        self.victim_queue_order_fns: dict[str, Callable] = {}
        self.task_order_fns: dict[str, Callable] = {}
        self.cluster_order_fns: dict[str, Callable] = {}
        self.predicate_fns: dict[str, Callable] = {}
        self.pre_predicate_fns: dict[str, Callable] = {}
        self.best_node_fns: dict[str, Callable] = {}
        self.node_order_fns: dict[str, Callable] = {}
        self.batch_node_order_fns: dict[str, Callable] = {}
        self.node_map_fns: dict[str, Callable] = {}
        self.node_reduce_fns: dict[str, Callable] = {}
        self.hyper_node_order_fns: dict[str, Callable] = {}
        self.preemptable_fns: dict[str, Callable] = {}
        self.reclaimable_fns: dict[str, Callable] = {}
        self.overused_fns: dict[str, Callable] = {}
        self.preemptive_fns: dict[str, Callable] = {}
        self.allocatable_fns: dict[str, Callable] = {}
        self.job_ready_fns: dict[str, Callable] = {}
        self.job_pipelined_fns: dict[str, Callable] = {}
        self.job_valid_fns: dict[str, Callable] = {}
        self.job_enqueueable_fns: dict[str, Callable] = {}
        self.job_enqueued_fns: dict[str, Callable] = {}
        self.target_job_fns: dict[str, Callable] = {}
        self.reserved_nodes_fns: dict[str, Callable] = {}
        self.victim_tasks_fns: dict[str, list[Callable]] = {}
        self.job_starving_fns: dict[str, Callable] = {}
        self.simulate_remove_task_fns: dict[str, Callable] = {}
        self.simulate_add_task_fns: dict[str, Callable] = {}
        self.simulate_predicate_fns: dict[str, Callable] = {}
        self.simulate_allocatable_fns: dict[str, Callable] = {}
        self.sub_job_ready_fns: dict[str, Callable] = {}
        self.sub_job_pipelined_fns: dict[str, Callable] = {}
        self.sub_job_order_fns: dict[str, Callable] = {}
        self.hyper_node_gradient_for_job_fns: dict[str, Callable] = {}
        self.hyper_node_gradient_for_sub_job_fns: dict[str, Callable] = {}
        self.cycle_states: dict[Any, dict] = {}
        self._flag_cache: dict[str | None, list] = {}
        # per registry: its enabled fns in tier order, and its registered fns by tier (for the
        # tier walks, which check flags per call); _register drops both
        self._chains = _Chains(self._chain)
        self._tier_chains = _Chains(lambda attr: self._tier_registered(getattr(self, attr)))
        # gang-aware eviction: GangSearchSpaceFn / GangVictimSelectorFn
        self.gang_search_space_fns: dict[str, Callable] = {}
        self.gang_victim_selector_fns: dict[str, Callable] = {}

    # ---------------------------------------------------------------------------------------------
    # registration: the functions plugins add to the session
    # ---------------------------------------------------------------------------------------------
    def add_job_order_fn(self, name: str, fn: Callable) -> None:
        self._register(self.job_order_fns, name, fn)

    def add_queue_order_fn(self, name: str, fn: Callable) -> None:
        self._register(self.queue_order_fns, name, fn)

    def add_victim_queue_order_fn(self, name: str, fn: Callable) -> None:
        self._register(self.victim_queue_order_fns, name, fn)

    def add_cluster_order_fn(self, name: str, fn: Callable) -> None:
        self._register(self.cluster_order_fns, name, fn)

    def add_task_order_fn(self, name: str, fn: Callable) -> None:
        self._register(self.task_order_fns, name, fn)

    def add_preemptable_fn(self, name: str, fn: Callable) -> None:
        self._register(self.preemptable_fns, name, fn)

    def add_reclaimable_fn(self, name: str, fn: Callable) -> None:
        self._register(self.reclaimable_fns, name, fn)

    def add_job_ready_fn(self, name: str, fn: Callable) -> None:
        self._register(self.job_ready_fns, name, fn)

    def add_job_pipelined_fn(self, name: str, fn: Callable) -> None:
        self._register(self.job_pipelined_fns, name, fn)

    def add_predicate_fn(self, name: str, fn: Callable) -> None:
        self._register(self.predicate_fns, name, fn)

    def add_pre_predicate_fn(self, name: str, fn: Callable) -> None:
        self._register(self.pre_predicate_fns, name, fn)

    def add_best_node_fn(self, name: str, fn: Callable) -> None:
        self._register(self.best_node_fns, name, fn)

    def add_node_order_fn(self, name: str, fn: Callable) -> None:
        self._register(self.node_order_fns, name, fn)

    def add_hyper_node_order_fn(self, name: str, fn: Callable) -> None:
        self._register(self.hyper_node_order_fns, name, fn)

    def add_batch_node_order_fn(self, name: str, fn: Callable) -> None:
        self._register(self.batch_node_order_fns, name, fn)

    def add_node_map_fn(self, name: str, fn: Callable) -> None:
        self._register(self.node_map_fns, name, fn)

    def add_node_reduce_fn(self, name: str, fn: Callable) -> None:
        self._register(self.node_reduce_fns, name, fn)

    def add_overused_fn(self, name: str, fn: Callable) -> None:
        self._register(self.overused_fns, name, fn)

    def add_preemptive_fn(self, name: str, fn: Callable) -> None:
        self._register(self.preemptive_fns, name, fn)

    def add_allocatable_fn(self, name: str, fn: Callable) -> None:
        self._register(self.allocatable_fns, name, fn)

    def add_job_valid_fn(self, name: str, fn: Callable) -> None:
        self._register(self.job_valid_fns, name, fn)

    def add_job_enqueueable_fn(self, name: str, fn: Callable) -> None:
        self._register(self.job_enqueueable_fns, name, fn)

    def add_job_enqueued_fn(self, name: str, fn: Callable) -> None:
        self._register(self.job_enqueued_fns, name, fn)

    def add_target_job_fn(self, name: str, fn: Callable) -> None:
        self._register(self.target_job_fns, name, fn)

    def add_reserved_nodes_fn(self, name: str, fn: Callable) -> None:
        self._register(self.reserved_nodes_fns, name, fn)

    def add_victim_tasks_fns(self, name: str, fns: list[Callable]) -> None:
        self._register(self.victim_tasks_fns, name, list(fns))

    def add_job_starving_fns(self, name: str, fn: Callable) -> None:
        self._register(self.job_starving_fns, name, fn)

    add_job_starving_fn = add_job_starving_fns

    def add_simulate_add_task_fn(self, name: str, fn: Callable) -> None:
        self._register(self.simulate_add_task_fns, name, fn)

    def add_simulate_remove_task_fn(self, name: str, fn: Callable) -> None:
        self._register(self.simulate_remove_task_fns, name, fn)

    def add_simulate_allocatable_fn(self, name: str, fn: Callable) -> None:
        self._register(self.simulate_allocatable_fns, name, fn)

    def add_simulate_predicate_fn(self, name: str, fn: Callable) -> None:
        self._register(self.simulate_predicate_fns, name, fn)

    def add_sub_job_ready_fn(self, name: str, fn: Callable) -> None:
        self._register(self.sub_job_ready_fns, name, fn)

    def add_sub_job_pipelined_fn(self, name: str, fn: Callable) -> None:
        self._register(self.sub_job_pipelined_fns, name, fn)

    def add_sub_job_order_fn(self, name: str, fn: Callable) -> None:
        self._register(self.sub_job_order_fns, name, fn)

    def add_hyper_node_gradient_for_job_fn(self, name: str, fn: Callable) -> None:
        self._register(self.hyper_node_gradient_for_job_fns, name, fn)

    def add_hyper_node_gradient_for_sub_job_fn(self, name: str, fn: Callable) -> None:
        self._register(self.hyper_node_gradient_for_sub_job_fns, name, fn)

    def hyper_node_order_map_fn(self, job: Any, hyper_nodes: dict[str, list[Any]]) -> dict[str, dict[str, float]]:
        """``HyperNodeOrderMapFn``: plugin name -> {hypernode: score}, every plugin with
        ``enabledHyperNodeOrder`` that registered a function."""
        out: dict[str, dict[str, float]] = {}
        for _ti, opt, fn in self._enabled("enabled_hyper_node_order", self.hyper_node_order_fns):
            out[opt.name] = fn(job, hyper_nodes)
        return out

    def hyper_node_gradient_for_job_fn(self, job: Any, hyper_node: Any) -> list[list[Any]]:
        """``HyperNodeGradientForJobFn``: the first enabled plugin decides; none: [[hyper_node]]."""
        for _ti, _opt, fn in self._enabled("enabled_hyper_node_gradient", self.hyper_node_gradient_for_job_fns):
            return fn(job, hyper_node) or []
        return [[hyper_node]]

    def add_event_handler(self, eh: EventHandler) -> None:
        self.event_handlers.append(eh)

    # -- gang-aware extension points ---------------------------------------------------------------
    def add_gang_search_space_fn(self, name: str, fn: Callable) -> None:
        """``fn(job, ssn, purpose) -> SearchSpace | list[list[NodeInfo]] | None``: feasible domains,
        best first (purpose ``PURPOSE_ALLOCATE``: all; ``PURPOSE_EVICT``: top-K)."""
        self._register(self.gang_search_space_fns, name, fn)

    def add_gang_victim_selector_fn(self, name: str, fn: Callable) -> None:
        """``fn(preemptor_job, needed, candidates, ctx) -> {job_uid: [task_uid]} | None``."""
        self._register(self.gang_victim_selector_fns, name, fn)

    def gang_valid_domains(self, job: Any, purpose: int) -> Any:
        """``GetGangValidDomains``: the first plugin (tier order) returning a non-empty list
        defines the search space (winner takes all); an empty SearchSpace when none does."""
        from ha.scheduler.framework.gang_eviction import SearchSpace
        for fn in self._chains["gang_search_space_fns"]:
            res = fn(job, self, purpose)
            if res:
                return res if isinstance(res, SearchSpace) else SearchSpace(res)
        return SearchSpace()

    def gang_victim_selector(self, preemptor_job: Any, needed: Any, candidates: list[Any], ctx: Any) -> dict:
        """The first plugin's GangVictimSelectorFn that answers; else the bundle algorithm."""
        from ha.scheduler.framework.gang_eviction import select_gang_victims_in_domain
        res = self._first_answer("gang_victim_selector_fns", preemptor_job, needed, candidates, ctx)
        if res is not None:
            return res
        return select_gang_victims_in_domain(preemptor_job, needed, candidates, ctx)

    def gang_evictable(self, kind: str, evictor: Any, evictees: list[Any],
                       overrides: dict[str, Callable] | None = None) -> list[Any]:
        """Preemptable (kind "preempt") or Reclaimable over one batch, with the same tier/vote
        rules; ``overrides`` replace named plugins' functions for this call only (the gang-aware
        path lets the framework, not the gang plugin, guard gang integrity: the gang is judged whole)."""
        attr = "preemptable_fns" if kind == "preempt" else "reclaimable_fns"
        fns = dict(getattr(self, attr))
        for name, fn in (overrides or {}).items():
            if name in fns:
                fns[name] = fn
        return self._evictable(self._tier_registered(fns), _REGISTRY_FLAGS[attr], evictor, evictees) or []

    def job_order_compare(self, l: Any, r: Any) -> int:
        """JobOrderFn plugins only: <0 when l goes first, 0 when no plugin has an opinion."""
        return self._first_opinion("job_order_fns", l, r)

    # ---------------------------------------------------------------------------------------------
    # iteration helpers
    # ---------------------------------------------------------------------------------------------
    def _register(self, registry: dict[str, Any], name: str, fn: Any) -> None:
        registry[name] = fn
        self._chains.clear()  # built from the old registries
        self._tier_chains.clear()

    def _enabled_opts(self, flag: str | None) -> list[tuple[int, PluginOption]]:
        """(tier_index, option) of every plugin whose ``flag`` is on (all plugins for None), in
        tier order. Tiers are fixed for the session, so this is computed once per flag."""
        cached = self._flag_cache.get(flag)
        if cached is None:
            cached = [(ti, opt) for ti, tier in enumerate(self.tiers) for opt in tier.plugins
                      if flag is None or _is_enabled(opt, flag)]
            self._flag_cache[flag] = cached
        return cached

    def _enabled(self, flag: str | None, fns: dict[str, Any]):
        """(tier_index, plugin_option, fn) for every plugin in tier order whose flag is on and
        that registered a function in ``fns``."""
        if not fns:
            return []
        return [(ti, opt, fns[opt.name]) for ti, opt in self._enabled_opts(flag) if opt.name in fns]

    def _chain(self, attr: str) -> list[Any]:
        """Builds ``_chains[attr]``: the enabled fns of registry ``attr`` in tier order."""
        return [fn for _, _, fn in self._enabled(_REGISTRY_FLAGS[attr], getattr(self, attr))]

    def _tier_registered(self, fns: dict[str, Any]) -> list[list[tuple[PluginOption, Any]]]:
        """Per tier, (option, fn) of the plugins that registered one in ``fns``; tiers without
        one left out (every tier walk passes the decision on over such a tier). The tier walks
        check the flags per call: they have always seen flags changed mid-session."""
        if not fns:
            return []
        tiers = [[(opt, fns[opt.name]) for opt in tier.plugins if opt.name in fns] for tier in self.tiers]
        return [t for t in tiers if t]

    def _first_opinion(self, attr: str, *args: Any) -> int:
        """Order fns: the first non-zero answer in tier order; 0 when no plugin has an opinion."""
        for fn in self._chains[attr]:
            j = fn(*args)
            if j != 0:
                return j
        return 0

    def _first_answer(self, attr: str, *args: Any) -> Any:
        """The first answer that is not None, in tier order."""
        for fn in self._chains[attr]:
            res = fn(*args)
            if res is not None:
                return res
        return None

    def _first_error(self, attr: str, *args: Any) -> Any:
        """Predicates may return an error or raise one (a plugin error is a predicate error,
        as in Go): the first one, or None."""
        for fn in self._chains[attr]:
            try:
                err = fn(*args)
            except Exception as e:  # noqa: BLE001
                return e
            if err is not None:
                return err
        return None

    def _all_true(self, attr: str, *args: Any) -> bool:
        """AND over the enabled fns; True when none registered."""
        for fn in self._chains[attr]:
            if not fn(*args):
                return False
        return True

    # ---------------------------------------------------------------------------------------------
    # aggregators
    # ---------------------------------------------------------------------------------------------
    def _evictable(self, tiers: list[list[tuple[PluginOption, Callable]]], flag: str, evictor: Any,
                   evictees: list[Any]) -> list[Any] | None:
        """Shared rule of Reclaimable / Preemptable, as Volcano's session applies it:
        per tier, intersect the candidate sets of the voting plugins; an empty set resets to nil
        and ends the tier; an empty intersection is nil too, so the next plugin's set is taken as
        is; the first tier that ends non-nil decides."""
        victims: list[Any] | None = None
        for tier in tiers:
            for opt, fn in tier:
                if getattr(opt, flag, None) is not True:
                    continue
                candidates, abstain = fn(evictor, evictees)
                if abstain == 0:
                    continue
                if not candidates:
                    victims = None
                    break
                if victims is None:
                    victims = list(candidates)
                else:
                    cand_uids = [c.uid for c in candidates]
                    inter = []
                    for v in victims:
                        for cu in cand_uids:
                            if v.uid == cu:
                                inter.append(v)
                    victims = inter or None  # Go: an empty slice appended to nil stays nil
            if victims is not None:
                return victims
        return victims

    def reclaimable(self, reclaimer: Any, reclaimees: list[Any]) -> list[Any]:
        return self._evictable(self._tier_chains["reclaimable_fns"], "enabled_reclaimable",
                               reclaimer, reclaimees) or []

    def preemptable(self, preemptor: Any, preemptees: list[Any]) -> list[Any]:
        return self._evictable(self._tier_chains["preemptable_fns"], "enabled_preemptable",
                               preemptor, preemptees) or []

    def overused(self, queue: Any) -> bool:
        for fn in self._chains["overused_fns"]:
            if fn(queue):
                return True
        return False

    def preemptive(self, queue: Any, candidate: Any) -> bool:
        return self._all_true("preemptive_fns", queue, candidate)

    def allocatable(self, queue: Any, candidate: Any) -> bool:
        return self._all_true("allocatable_fns", queue, candidate)

    def job_ready(self, job: Any) -> bool:
        """AND over enabled plugins; true when none registered."""
        return self._all_true("job_ready_fns", job)

    def _vote(self, attr: str, obj: Any) -> bool:
        """JobPipelined / JobEnqueueable voting: any reject -> False; a permit in a tier ends the
        vote at the end of that tier with True; all abstain -> True."""
        flag = _REGISTRY_FLAGS[attr]
        for tier in self._tier_chains[attr]:
            has_found = False
            for opt, fn in tier:
                if getattr(opt, flag, None) is not True:
                    continue
                res = fn(obj)
                if res < 0:
                    return False
                if res > 0:
                    has_found = True
            if has_found:
                return True
        return True

    def job_pipelined(self, job: Any) -> bool:
        return self._vote("job_pipelined_fns", job)

    def job_starving(self, job: Any) -> bool:
        """Within the first tier that has any enabled starving function, the AND of them;
        False when no plugin registered one (S9)."""
        for tier in self._tier_chains["job_starving_fns"]:
            has_found = False
            for opt, fn in tier:
                if opt.enabled_job_starving is not True:
                    continue
                has_found = True
                if not fn(job):
                    return False
            if has_found:
                return True
        return False

    def job_valid(self, job: Any) -> ValidateResult | None:
        """The first failing result of any plugin (no enable flag). A question: no JobValidFn
        changes anything (gang's counts tasks), so a pass with nothing to do for a job need not
        ask it (init_cycle_state, allocate's and backfill's job lists)."""
        for fn in self._chains["job_valid_fns"]:
            vr = fn(job)
            if vr is None or vr is True:
                continue
            if vr is False:
                return ValidateResult(False, "NotValid", "")
            if not _vr_passed(vr):
                return vr
        return None

    def job_enqueueable(self, job: Any) -> bool:
        return self._vote("job_enqueueable_fns", job)

    def job_enqueued(self, job: Any) -> None:
        for fn in self._chains["job_enqueued_fns"]:
            fn(job)

    def target_job(self, jobs: list[Any]) -> Any:
        """The first enabled plugin's answer, None included."""
        for fn in self._chains["target_job_fns"]:
            return fn(jobs)
        return None

    def victim_tasks(self, tasks: list[Any]) -> list[Any]:
        """The union of the first tier that names any victim (a plugin registers a list of fns)."""
        for tier in self._tier_chains["victim_tasks_fns"]:
            victims: dict[Any, Any] = {}
            for opt, fns in tier:
                if opt.enabled_victim is not True:
                    continue
                for fn in fns:
                    for v in fn(tasks):
                        victims[v.uid] = v
            if victims:
                return list(victims.values())
        return []

    def reserved_nodes(self) -> None:
        for fn in self._chains["reserved_nodes_fns"]:
            fn()

    # sub-jobs are not modelled: every job is its own default sub-job.
    def sub_job_ready(self, job: Any, sub_job: Any = None) -> bool:
        return self.job_ready(job)

    def sub_job_pipelined(self, job: Any, sub_job: Any = None) -> bool:
        return self.job_pipelined(job)

    # -- order functions: the first plugin with an opinion decides, else a fixed tie-break -------
    def _order(self, attr: str, l: Any, r: Any, tie_break: Callable[[Any, Any], bool]) -> bool:
        for fn in self._chains[attr]:
            j = fn(l, r)
            if j != 0:
                return j < 0
        return tie_break(l, r)

    def job_order_fn(self, l: Any, r: Any) -> bool:
        return self._order("job_order_fns", l, r, _created_first)

    def queue_order_fn(self, l: Any, r: Any) -> bool:
        return self._order("queue_order_fns", l, r, _created_first)

    def cluster_order_fn(self, l: Any, r: Any) -> bool:
        return self._order("cluster_order_fns", l, r, _by_name)

    def sub_job_order_fn(self, l: Any, r: Any) -> bool:
        return self._order("sub_job_order_fns", l, r, _by_uid)

    def task_order_fn(self, l: Any, r: Any) -> bool:
        return self._order("task_order_fns", l, r, compare_task)

    def task_compare_fns(self, l: Any, r: Any) -> int:
        return self._first_opinion("task_order_fns", l, r)

    def victim_queue_order_fn(self, l: Any, r: Any, preemptor: Any) -> bool:
        j = self._first_opinion("victim_queue_order_fns", l, r, preemptor)
        if j != 0:
            return j < 0
        return not self.queue_order_fn(l, r)

    # -- predicates and scoring -------------------------------------------------------------------
    def predicate_fn(self, task: Any, node: Any) -> Any:
        """None when every enabled predicate passes, else the first error (no resource check)."""
        return self._first_error("predicate_fns", task, node)

    def pre_predicate_fn(self, task: Any) -> Any:
        return self._first_error("pre_predicate_fns", task)

    def best_node_fn(self, task: Any, node_scores: dict[float, list[Any]]) -> Any:
        return self._first_answer("best_node_fns", task, node_scores)

    def node_order_fn(self, task: Any, node: Any) -> float:
        score = 0.0
        for fn in self._chains["node_order_fns"]:
            score += fn(task, node)
        return score

    def batch_node_order_fn(self, task: Any, nodes: list[Any]) -> dict[str, float]:
        out: dict[str, float] = {}
        for fn in self._chains["batch_node_order_fns"]:
            for name, s in fn(task, nodes).items():
                out[name] = out.get(name, 0.0) + s
        return out

    def node_order_map_fn(self, task: Any, node: Any) -> tuple[dict[str, float], float]:
        node_score_map: dict[str, float] = {}
        priority = 0.0
        for _, opt in self._enabled_opts("enabled_node_order"):
            fn = self.node_order_fns.get(opt.name)
            if fn is not None:
                priority += fn(task, node)
            mfn = self.node_map_fns.get(opt.name)
            if mfn is not None:
                node_score_map[opt.name] = mfn(task, node)
        return node_score_map, priority

    def node_order_reduce_fn(self, task: Any, plugin_scores: dict[str, list[NodeScore]]) -> dict[str, float]:
        out: dict[str, float] = {}
        for _, opt, fn in self._enabled("enabled_node_order", self.node_reduce_fns):
            scores = plugin_scores.get(opt.name, [])
            fn(task, scores)
            for hp in scores:
                out[hp.name] = out.get(hp.name, 0.0) + float(hp.score)
        return out

    def predicate_for_allocate_action(self, task: Any, node: Any) -> FitError | None:
        """Fails on Unschedulable, UnschedulableAndUnresolvable or Error/Skip/Wait."""
        return self._predicate_for_action(task, node, unschedulable_fails=True)

    def predicate_for_preempt_action(self, task: Any, node: Any) -> FitError | None:
        """Fails only on UnschedulableAndUnresolvable or Error/Skip/Wait (Unschedulable is what
        preemption may resolve)."""
        return self._predicate_for_action(task, node, unschedulable_fails=False)

    def _predicate_for_action(self, task: Any, node: Any, *, unschedulable_fails: bool) -> FitError | None:
        err = self.predicate_fn(task, node)
        if err is None:
            return None
        if not isinstance(err, FitError):
            return as_fit_error(task, node, err)
        st = err.status
        if ((unschedulable_fails and st.contains_unschedulable())
                or st.contains_unschedulable_and_unresolvable() or st.contains_error_skip_or_wait()):
            return err
        return None

    def filter_out_unschedulable_and_unresolvable_nodes_for_task(self, task: Any) -> list[Any]:
        job = self.jobs.get(task.job)
        if job is None:
            return self.node_list
        fit_errs = _nodes_fit_errors(job).get(task.uid)
        if fit_errs is None:
            return self.node_list
        skip = fit_errs.get_unschedulable_and_unresolvable_nodes() if hasattr(
            fit_errs, "get_unschedulable_and_unresolvable_nodes") else set()
        if not skip:
            return self.node_list
        return [n for n in self.nodes.values() if n.name not in skip]

    def build_victims_priority_queue(self, victims: Iterable[Any], preemptor: Any) -> PriorityQueue:
        """Same job: reverse task order; jobs missing from the session first; different queues:
        VictimQueueOrderFn; otherwise reverse job order."""

        def less(lv: Any, rv: Any) -> bool:
            if lv.job == rv.job:
                return not self.task_order_fn(lv, rv)
            lj = self.jobs.get(lv.job)
            rj = self.jobs.get(rv.job)
            pj = self.jobs.get(preemptor.job)
            if lj is None or rj is None:
                if lj is None and rj is None:
                    return not self.task_order_fn(lv, rv)
                return lj is None
            if pj is None:
                return not self.job_order_fn(lj, rj)
            if lj.queue != rj.queue:
                return self.victim_queue_order_fn(self.queues.get(lj.queue), self.queues.get(rj.queue),
                                                  self.queues.get(pj.queue))
            return not self.job_order_fn(lj, rj)

        q = PriorityQueue(less)
        for v in victims:
            q.push(v)
        return q

    # ---------------------------------------------------------------------------------------------
    # event handlers
    # ---------------------------------------------------------------------------------------------
    def fire_allocate(self, task: Any) -> list[Any]:
        """Run every AllocateFunc; return the errors handlers set on the event."""
        return self._fire("allocate_func", task)

    def fire_deallocate(self, task: Any) -> list[Any]:
        """Run every DeallocateFunc; return the errors handlers set on the event."""
        return self._fire("deallocate_func", task)

    def _fire(self, func_attr: str, task: Any) -> list[Any]:
        errs = []
        for eh in self.event_handlers:
            func = getattr(eh, func_attr)
            if func is not None:
                ev = Event(task)
                func(ev)
                if ev.err is not None:
                    errs.append(ev.err)
        return errs

    # ---------------------------------------------------------------------------------------------
    # statements and direct operations
    # ---------------------------------------------------------------------------------------------
    def release(self) -> None:
        """Drop everything the session holds (its snapshot, plugins, functions) once its result
        is taken. The session and its plugins refer to each other, so without this the snapshot
        -- at 5,000 nodes / 100,000 pods a million objects -- lives on until the action objects
        take the next session or a full collection finds the cycle; measured, freeing it this way
        costs 0.1 s where letting it go cost 0.5 s. Any use of the session afterwards fails.
        The node clones go back to the cache, which may hand those of unchanged nodes to the next
        session (snapshot_reuse.py)."""
        token, cache = self.__dict__.get("lent_token"), self.__dict__.get("cache")
        self.__dict__.clear()
        if token is not None:
            cache.give_back(token)

    def statement(self) -> Any:
        from ha.scheduler.framework.statement import Statement
        return Statement(self)

    def record_error(self, msg: str) -> None:
        log.debug("session %s: %s", self.uid, msg)
        self.errors.append(msg)

    def mark_job_dirty(self, job_id: Any) -> None:
        self.dirty_jobs.add(job_id)

    def create_bind_context(self, task: Any) -> Any:
        """``CreateBindContext``: plugins implementing ``setup_bind_context_extension`` may add
        extensions. The cache's ``add_bind_task`` accepts the task itself (``bind_context.task``)."""
        ctx = BindContext(task=task, extensions={})
        for plugin in self.plugins.values():
            hook = getattr(plugin, "setup_bind_context_extension", None)
            if hook is not None:
                hook(self.cycle_states.setdefault(task.uid, {}), ctx)
        return ctx

    def dispatch(self, task: Any) -> None:
        ctx = self.create_bind_context(task)
        _cache_add_bind_task(self.cache, ctx)
        self.bind_log.append((task.pod_key, task.node_name))
        job = self.jobs.get(task.job)
        if job is None:
            raise SessionError(f"failed to find job {task.job}")
        job.update_task_status(task, _ts_status("BINDING"))

    def allocate(self, task: Any, node: Any) -> None:
        """``Session.Allocate`` (used by backfill): no statement; dispatches every Allocated task
        of the job as soon as the job is ready."""
        from ha.scheduler.api import TaskStatus
        hostname = node.name
        _set_pod_node_name(task, hostname)
        job = self.jobs.get(task.job)
        if job is None:
            raise SessionError(f"failed to find job {task.job}")
        self._place(task, job, TaskStatus.ALLOCATED, hostname)
        if self.job_ready(job):
            for t in list(job.task_status_index.get(TaskStatus.ALLOCATED, {}).values()):
                self.dispatch(t)

    def pipeline(self, task: Any, hostname: str) -> None:
        """``Session.Pipeline`` (unused by the actions in v1.14.0)."""
        from ha.scheduler.api import TaskStatus
        job = self.jobs.get(task.job)
        if job is None:
            raise SessionError(f"failed to find job {task.job} when pipeline")
        self._place(task, job, TaskStatus.PIPELINED, hostname)

    def _place(self, task: Any, job: Any, status: Any, hostname: str) -> None:
        """The session side of Allocate / Pipeline: status, node, AllocateFuncs (whose errors
        Volcano ignores here)."""
        job.update_task_status(task, status)
        task.node_name = hostname
        n = self.nodes.get(hostname)
        if n is None:
            raise SessionError(f"failed to find node {hostname}")
        n.add_task(task)
        self.fire_allocate(task)

    def un_pipeline(self, task: Any) -> None:
        """PR #5045 ``Session.UnPipeline``: un-pipeline in the session, then **immediately** in
        the cache (S7); if the cache refuses, re-pipeline in the session."""
        orig_node = task.node_name
        orig_nom = getattr(task, "nominated_node_name", "")
        orig_hn = getattr(task, "job_allocated_hyper_node", "")
        stmt = self.statement()
        stmt.un_pipeline(task)
        try:
            self.cache.unpipeline(task)
        except Exception as e:  # noqa: BLE001
            if orig_node:
                try:
                    stmt.pipeline(task, orig_node)
                except Exception as e2:  # noqa: BLE001
                    self.record_error(f"rollback of unpipeline of {task.namespace}/{task.name} failed: {e2}")
                task.nominated_node_name = orig_nom
                task.job_allocated_hyper_node = orig_hn
            raise e

    unpipeline = un_pipeline

    def evict(self, reclaimee: Any, reason: str) -> None:
        """``Session.Evict`` (shuffle): cache first, then the session."""
        from ha.scheduler.api import TaskStatus
        self.cache.evict(reclaimee, reason)
        self.evict_log.append((reclaimee.pod_key, reason))
        job = self.jobs.get(reclaimee.job)
        if job is None:
            raise SessionError(f"failed to find job {reclaimee.job}")
        job.update_task_status(reclaimee, TaskStatus.RELEASING)
        n = self.nodes.get(reclaimee.node_name)
        if n is not None:
            n.update_task(reclaimee)
        self.fire_deallocate(reclaimee)

    def update_pod_group_condition(self, job_info: Any, cond: dict) -> None:
        """Replace (by type) or append a PodGroup condition on the session job."""
        job = self.jobs.get(job_info.uid)
        if job is None:
            raise SessionError(f"failed to find job <{job_info.namespace}/{job_info.name}>")
        status = _writable_pg_status(job)
        conds = status.setdefault("conditions", [])
        for i, c in enumerate(conds):
            if c.get("type") == cond.get("type"):
                conds[i] = cond
                return
        conds.append(cond)

    def get_cycle_state(self, task_uid: Any) -> dict:
        return self.cycle_states.setdefault(task_uid, {})

    def init_cycle_state(self) -> None:
        from ha.scheduler.api import TaskStatus
        for job in self.jobs.values():
            if not job.task_status_index.get(TaskStatus.PENDING):
                continue    # no task to give a state: job_valid, a question, is not asked
            vr = self.job_valid(job)
            if vr is not None and not _vr_passed(vr):
                continue
            for task in job.task_status_index.get(TaskStatus.PENDING, {}).values():
                if getattr(task, "sch_gated", False):
                    continue
                self.cycle_states[task.uid] = {}


@dataclass
class BindContext:
    task: Any
    extensions: dict = field(default_factory=dict)

    @property
    def task_info(self) -> Any:  # Go name
        return self.task


# -------------------------------------------------------------------------------------------------
# helpers tolerant of small differences in the api types
# -------------------------------------------------------------------------------------------------

def _vr_passed(vr: Any) -> bool:
    for attr in ("passed", "pass_", "pass_ok", "ok"):
        if hasattr(vr, attr):
            return bool(getattr(vr, attr))
    if isinstance(vr, dict):
        return bool(vr.get("pass", vr.get("passed", True)))
    return bool(vr)


def _created_first(l: Any, r: Any) -> bool:
    """Job/queue order tie-break: creation time, then uid."""
    lt, rt = _ts(l), _ts(r)
    return str(l.uid) < str(r.uid) if lt == rt else lt < rt


def _by_name(l: Any, r: Any) -> bool:
    return str(getattr(l, "name", l)) < str(getattr(r, "name", r))


def _by_uid(l: Any, r: Any) -> bool:
    return str(getattr(l, "uid", l)) < str(getattr(r, "uid", r))


def _ts(obj: Any) -> float:
    ts = getattr(obj, "creation_timestamp", None)
    if ts is None:
        raw = getattr(obj, "queue", None)  # QueueInfo keeps the Queue dict
        if isinstance(raw, dict):
            ts = (raw.get("metadata") or {}).get("creationTimestamp")
    if ts is None:
        return 0.0
    try:
        return float(ts)
    except (TypeError, ValueError):
        return 0.0


def _ts_status(name: str) -> Any:
    from ha.scheduler.api import TaskStatus
    return TaskStatus[name]


def _nodes_fit_errors(job: Any) -> dict:
    nfe = getattr(job, "nodes_fit_errors", None)
    if nfe is None:
        nfe = {}
        try:
            job.nodes_fit_errors = nfe
        except AttributeError:
            pass
    return nfe


def _writable_pg_status(job: Any) -> dict:
    """The session job's PodGroup status to write into (its own copy: job_info.writable_status)."""
    pg = job.pod_group
    if isinstance(pg, dict):
        return _writable_status(pg)
    return _pg_status(job)


def _pg_status(job: Any) -> dict:
    pg = job.pod_group
    if isinstance(pg, dict):
        return pg.setdefault("status", {})
    st = getattr(pg, "status", None)
    if st is None:
        st = {}
        pg.status = st
    return st


def _set_pod_node_name(task: Any, hostname: str) -> None:
    """``task.Pod.Spec.NodeName = hostname``: the pod object is shared with the cache (as Volcano's session
    and cache share one pod)."""
    pod = getattr(task, "pod", None)
    if isinstance(pod, dict):
        pod.setdefault("spec", {})["nodeName"] = hostname


def _cache_add_bind_task(cache: Any, ctx: BindContext) -> None:
    cache.add_bind_task(ctx.task)


# -------------------------------------------------------------------------------------------------
# open / close
# -------------------------------------------------------------------------------------------------

def _lookup_builder(name: str, registered: tuple[str, ...] | None) -> Callable | None:
    """The builder registered under ``name`` (None: unknown, or not among ``registered``). The
    plugin modules register themselves when ``ha.scheduler`` is imported; the framework itself
    imports no plugin."""
    if registered is not None and name not in registered:
        return None
    return registry.get_plugin_builder(name)


def open_session(cache: Any, conf: SchedulerConf | None = None, *, tiers: list[Tier] | None = None,
                 configurations: list | None = None, seed: int | None = None,
                 clock: Any = None) -> Session:
    """``framework.OpenSession``: snapshot the cache, build each tier's plugins and run their
    ``on_session_open``. A plugin without a builder is skipped with a recorded error."""
    conf = conf if conf is not None else default_conf()
    if tiers is not None or configurations is not None:
        conf = SchedulerConf(actions=list(conf.actions),
                             tiers=list(tiers if tiers is not None else conf.tiers),
                             configurations=list(configurations if configurations is not None else conf.configurations),
                             registered_builders=conf.registered_builders, source=conf.source)
    ssn = Session(cache, conf, seed=seed, clock=clock)
    t0, c0 = time.perf_counter(), time.thread_time()
    hook = getattr(cache, "on_session_open", None)
    if callable(hook):
        hook()
    # a cache that can lend its node clones (SchedulerCache): they come back in release()
    snapshot = cache.snapshot(lend=True) if callable(getattr(cache, "give_back", None)) else cache.snapshot()
    record_phase(ssn.phase_times, "snapshot", t0, c0)
    t1, c1 = time.perf_counter(), time.thread_time()
    ssn.lent_token = getattr(snapshot, "lent_token", None)
    ssn.jobs = snapshot.jobs
    for job in ssn.jobs.values():
        if getattr(job, "pod_group", None) is not None:
            # the status the snapshot gave: a session never writes into it (a new status takes
            # its place: job_info.writable_status), so it stays what it was at open uncopied
            ssn.pod_group_old_state.status[job.uid] = _pg_status(job)
            ssn.pod_group_old_state.annotations[job.uid] = dict(_pg_annotations(job))
    ssn.nodes = snapshot.nodes
    names = getattr(snapshot, "node_list", None)
    if names is None:
        ssn.node_list = list(ssn.nodes.values())
    else:
        ssn.node_list = [ssn.nodes[n] if isinstance(n, str) else n for n in names
                         if (n in ssn.nodes if isinstance(n, str) else True)]
    open_hyper_nodes(ssn, snapshot)
    ssn.queues = snapshot.queues
    ssn.namespace_info = getattr(snapshot, "namespace_info", {}) or {}
    ssn.revocable_nodes = getattr(snapshot, "revocable_nodes", {}) or {}
    ssn.nodes_in_shard = getattr(snapshot, "nodes_in_shard", None)
    from ha.scheduler.api import Resource
    total = Resource()
    for n in ssn.nodes.values():
        total.add(n.allocatable)
    ssn.total_resource = total
    ssn.total_guarantee = Resource()
    ssn.total_deserved = Resource()

    for tier in ssn.tiers:
        for opt in tier.plugins:
            builder = _lookup_builder(opt.name, conf.registered_builders)
            if builder is None:
                ssn.record_error(f"failed to get plugin {opt.name}")
                continue
            plugin = builder(dict(opt.arguments))
            ssn.plugins[plugin.name()] = plugin
            plugin.on_session_open(ssn)
    ssn.init_cycle_state()
    record_phase(ssn.phase_times, "open", t1, c1)
    return ssn


def record_phase(phases: dict[str, list[float]], name: str, t0: float, c0: float) -> None:
    """Add the wall and this thread's CPU ms since (``perf_counter``, ``thread_time``) = (t0, c0)
    to ``phases[name]`` (an action configured twice is one phase, summed)."""
    wall, cpu = (time.perf_counter() - t0) * 1000.0, (time.thread_time() - c0) * 1000.0
    prev = phases.get(name)
    phases[name] = [wall, cpu] if prev is None else [prev[0] + wall, prev[1] + cpu]


def _pg_annotations(job: Any) -> dict:
    pg = job.pod_group
    if isinstance(pg, dict):
        return (pg.get("metadata") or {}).get("annotations") or {}
    md = getattr(pg, "metadata", None)
    if isinstance(md, dict):
        return md.get("annotations") or {}
    return getattr(pg, "annotations", {}) or {}


def close_session(ssn: Session) -> None:
    """``framework.CloseSession``: plugins' ``on_session_close``, then the JobUpdater writes every
    job's PodGroup status (and scheduling events) back through the cache."""
    from ha.scheduler.framework.job_updater import JobUpdater
    for plugin in list(ssn.plugins.values()):
        plugin.on_session_close(ssn)
    JobUpdater(ssn).update_all()
    hook = getattr(ssn.cache, "on_session_close", None)
    if callable(hook):
        hook()
    ssn.closed = True
