"""predicates: node filters (Volcano ``plugins/predicates/predicates.go``; no resource fit — the
actions check resources themselves).

Per node, in this order:
1. pod count: fails (Unschedulable, "node(s) pod number exceeded") when the node's ``pods``
   allocatable ≤ the number of pods in the session's k8s view of the node, which counts every
   task on it — Pipelined and Releasing included (docs/volcano-semantics.md S9);
2. NodeUnschedulable (always on): ``spec.unschedulable`` without the matching toleration;
3. NodeAffinity (``predicate.NodeAffinityEnable``, default on): ``nodeSelector`` and required node
   affinity;
4. TaintToleration (``predicate.TaintTolerationEnable``, default on): NoSchedule/NoExecute taints;
5. NodePorts (``predicate.NodePortsEnable``, default on): host-port conflicts;
6. InterPodAffinity (``predicate.PodAffinityEnable``, default on): required pod affinity
   (UnschedulableAndUnresolvable), required anti-affinity of the pod and of the pods already on
   the nodes (Unschedulable), with the state PrePredicate computed for the task
   (``interpod_affinity``).
2–4 are UnschedulableAndUnresolvable and stop the check; 1, 5 and anti-affinity are Unschedulable.
Volumes, topology spread and DRA are not modelled (they pass). Preempt's simulated removal of
victims (SimulateRemoveTask) does not update the affinity state.

Event handlers keep the k8s view current (AllocateFunc adds the pod to ``task.node_name``,
DeallocateFunc removes it). PrePredicate passes: the k8s PreFilter plugins have nothing to reject
for the pods this testbed models, except InterPodAffinity's, which computes the task's state.

The task's cycle state. Every session starts each task with an empty k8s CycleState; only
PrePredicate runs the PreFilter plugins that fill it (and mark the plugins that have nothing to
check as skipped). The non-stable filters NodePorts, InterPodAffinity, PodTopologySpread and
VolumeBinding read their PreFilter's entry and answer ``Error`` ("reading ... from cycleState:
not found") when it is missing, which aborts the check. So a Predicate for a task whose
PrePredicate has not run in this session fails with an ``Error`` status once the stable filters
pass (when any of those four is enabled; all are by default). Every action runs PrePredicate
before its node scan; the one Predicate that can come first is preempt's ``taskEligibleToPreempt``
on the task's nominated node, for a task that allocate skipped this session (its queue overused):
the nomination is then no bar to preempting again, so the task can be nominated elsewhere.
"""
from __future__ import annotations

from typing import Any, Mapping

from ha.scheduler.api.types import NODE_POD_NUMBER_EXCEEDED, FitError, Status, StatusCode
from ha.scheduler.framework.events import EventHandler
from ha.scheduler.plugins.factory import register
from ha.scheduler.plugins.k8s_nodes import affinity_index, has_pod_affinity, node_map, pod_host_ports
from ha.scheduler.plugins.matchers import term_matches, tolerates  # noqa: F401  (tolerates: re-exported)
from ha.scheduler.plugins.util import arguments
from ha.scheduler.plugins import interpod_affinity

PLUGIN_NAME = "predicates"

NODE_AFFINITY_ENABLE = "predicate.NodeAffinityEnable"
NODE_PORTS_ENABLE = "predicate.NodePortsEnable"
TAINT_TOLERATION_ENABLE = "predicate.TaintTolerationEnable"
POD_AFFINITY_ENABLE = "predicate.PodAffinityEnable"
POD_TOPOLOGY_SPREAD_ENABLE = "predicate.PodTopologySpreadEnable"
VOLUME_BINDING_ENABLE = "predicate.VolumeBindingEnable"

# k8s filter plugin failure reasons
ERR_REASON_UNSCHEDULABLE = "node(s) were unschedulable"
ERR_REASON_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
ERR_REASON_PORTS = "node(s) didn't have free ports for the requested pod ports"
ERR_REASON_NODE_INFO = "node info not found"
# k8s's getPreFilterState error (nodeports.go), the first of the state readers' in the model's order
ERR_PRE_FILTER_STATE = 'reading "PreFilter{plugin}" from cycleState: not found'
TAINT_NODE_UNSCHEDULABLE = "node.kubernetes.io/unschedulable"

_EMPTY: dict = {}


# ----------------------------------------------------------------------- k8s filter logic

def _spec(pod: dict) -> dict:
    return (pod or _EMPTY).get("spec") or _EMPTY


def node_matches_affinity(pod: dict, node: dict) -> bool:
    """NodeAffinity filter: every nodeSelector label, and one required nodeSelectorTerm."""
    md = (node or _EMPTY).get("metadata") or _EMPTY
    labels = md.get("labels") or _EMPTY
    for k, v in (_spec(pod).get("nodeSelector") or _EMPTY).items():
        if labels.get(k) != v:
            return False
    required = ((((_spec(pod).get("affinity") or _EMPTY).get("nodeAffinity") or _EMPTY)
                 .get("requiredDuringSchedulingIgnoredDuringExecution")) or None)
    if required is not None:
        terms = required.get("nodeSelectorTerms") or []
        if not any(term_matches(t, labels, md.get("name", "")) for t in terms):
            return False
    return True


def untolerated_taint(pod: dict, node: dict) -> dict | None:
    """TaintToleration filter: the first NoSchedule/NoExecute taint the pod does not tolerate."""
    tolerations = _spec(pod).get("tolerations") or []
    for taint in ((node or _EMPTY).get("spec") or _EMPTY).get("taints") or ():
        if taint.get("effect") not in ("NoSchedule", "NoExecute"):
            continue
        if not tolerates(tolerations, taint):
            return taint
    return None


def node_unschedulable_blocks(pod: dict, node: dict) -> bool:
    if not ((node or _EMPTY).get("spec") or _EMPTY).get("unschedulable"):
        return False
    taint = {"key": TAINT_NODE_UNSCHEDULABLE, "effect": "NoSchedule"}
    return not tolerates(_spec(pod).get("tolerations") or [], taint)


def ports_conflict(wanted: set, used: set) -> bool:
    for ip, proto, port in wanted:
        for uip, uproto, uport in used:
            if port == uport and proto == uproto and (ip == uip or "0.0.0.0" in (ip, uip)):
                return True
    return False


# ----------------------------------------------------------------------- plugin

@register(PLUGIN_NAME)
class PredicatesPlugin:
    argument_keys = (NODE_AFFINITY_ENABLE, NODE_PORTS_ENABLE, TAINT_TOLERATION_ENABLE, POD_AFFINITY_ENABLE,
                     POD_TOPOLOGY_SPREAD_ENABLE, VOLUME_BINDING_ENABLE)

    def __init__(self, args: Mapping[str, Any] | None = None):
        a = arguments(args)
        self.arguments = a
        self.node_affinity_enable = a.get_bool(NODE_AFFINITY_ENABLE, True)
        self.node_ports_enable = a.get_bool(NODE_PORTS_ENABLE, True)
        self.taint_toleration_enable = a.get_bool(TAINT_TOLERATION_ENABLE, True)
        self.pod_affinity_enable = a.get_bool(POD_AFFINITY_ENABLE, True)
        # read only for the cycle-state rule: the filters themselves pass (not modelled)
        self.pod_topology_spread_enable = a.get_bool(POD_TOPOLOGY_SPREAD_ENABLE, True)
        self.volume_binding_enable = a.get_bool(VOLUME_BINDING_ENABLE, True)
        # the first enabled filter that reads its PreFilter's state (None: no filter needs one)
        self.state_reader = next((name for name, on in (
            ("NodePorts", self.node_ports_enable), ("InterPodAffinity", self.pod_affinity_enable),
            ("PodTopologySpread", self.pod_topology_spread_enable),
            ("VolumeBinding", self.volume_binding_enable)) if on), None)
        # task uid -> InterPodAffinity PreFilter state (None: skipped), per session
        self.affinity_states: dict[str, Any] = {}
        # uids of the tasks whose PrePredicate ran in this session (their CycleState is filled)
        self.pre_filtered: set[str] = set()

    def name(self) -> str:
        return PLUGIN_NAME

    def predicate(self, ssn: Any, task: Any, node: Any) -> FitError | None:
        view = node_map(ssn).get(node.name)
        if view is None:
            return FitError.with_status(task, node, Status(StatusCode.ERROR, ERR_REASON_NODE_INFO, PLUGIN_NAME))
        statuses: list[Status] = []
        if node.allocatable.max_task_num <= view.pod_count():
            statuses.append(Status(StatusCode.UNSCHEDULABLE, NODE_POD_NUMBER_EXCEEDED, PLUGIN_NAME))

        # "stable" filters: any of them failing ends the check
        pod, k8s_node = task.pod, node.node
        stable_fail = None
        if node_unschedulable_blocks(pod, k8s_node):
            stable_fail = Status(StatusCode.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_UNSCHEDULABLE,
                                 "NodeUnschedulable")
        elif self.node_affinity_enable and not node_matches_affinity(pod, k8s_node):
            stable_fail = Status(StatusCode.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_AFFINITY, "NodeAffinity")
        elif self.taint_toleration_enable:
            taint = untolerated_taint(pod, k8s_node)
            if taint is not None:
                reason = f"node(s) had untolerated taint {{{taint.get('key')}: {taint.get('value', '')}}}"
                stable_fail = Status(StatusCode.UNSCHEDULABLE_AND_UNRESOLVABLE, reason, "TaintToleration")
        if stable_fail is not None:
            statuses.append(stable_fail)
            return FitError.with_status(task, node, *statuses)

        if self.state_reader is not None and task.uid not in self.pre_filtered:
            statuses.append(Status(StatusCode.ERROR, ERR_PRE_FILTER_STATE.format(plugin=self.state_reader),
                                   self.state_reader))
            return FitError.with_status(task, node, *statuses)

        if self.node_ports_enable:
            wanted = pod_host_ports(pod)
            if wanted and ports_conflict(wanted, view.host_ports()):
                statuses.append(Status(StatusCode.UNSCHEDULABLE, ERR_REASON_PORTS, "NodePorts"))

        if self.pod_affinity_enable:
            if task.uid not in self.affinity_states:
                self.pre_filter(ssn, task)
            reason = interpod_affinity.filter_node(self.affinity_states[task.uid], k8s_node)
            if reason is not None:
                code = (StatusCode.UNSCHEDULABLE_AND_UNRESOLVABLE if reason == interpod_affinity.ERR_AFFINITY
                        else StatusCode.UNSCHEDULABLE)
                statuses.append(Status(code, reason, "InterPodAffinity"))

        if statuses:
            return FitError.with_status(task, node, *statuses)
        return None

    def pre_filter(self, ssn: Any, task: Any) -> None:
        """InterPodAffinity's PreFilter for ``task`` over the session's node view, kept until the
        task's next PrePredicate (Volcano's per-task cycle state)."""
        index = affinity_index(ssn)
        if not index.with_required_anti and not has_pod_affinity(task.pod):
            self.affinity_states[task.uid] = None  # Skip: nothing to count, nothing to check
            return
        self.affinity_states[task.uid] = interpod_affinity.pre_filter(task.pod, node_map(ssn), index)

    def pre_predicate(self, ssn: Any, task: Any) -> None:
        self.pre_filtered.add(task.uid)
        if self.pod_affinity_enable:
            self.pre_filter(ssn, task)
        return None

    def on_session_open(self, ssn: Any) -> None:
        view = node_map(ssn)
        self.affinity_states = {}
        self.pre_filtered = set()

        def on_allocate(event: Any) -> None:
            ni = view.get(event.task.node_name)
            if ni is not None and event.task.node_name in ssn.nodes:
                ni.add_pod(event.task)

        def on_deallocate(event: Any) -> None:
            ni = view.get(event.task.node_name)
            if ni is not None and event.task.node_name in ssn.nodes:
                ni.remove_pod(event.task)

        ssn.add_event_handler(EventHandler(allocate_func=on_allocate, deallocate_func=on_deallocate))
        ssn.add_pre_predicate_fn(self.name(), lambda task: self.pre_predicate(ssn, task))
        ssn.add_predicate_fn(self.name(), lambda task, node: self.predicate(ssn, task, node))

    def on_session_close(self, ssn: Any) -> None:
        self.affinity_states = {}
        self.pre_filtered = set()
