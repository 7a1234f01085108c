"""The scenario harness: Volcano's ``uthelper`` (docs/volcano-semantics.md §16.2) in Python.

1. a SchedulerCache (``ha.scheduler.wiring.build_cache``, a fixed clock) with an in-memory RecordingIO as binder, evictor and status updater; nodes,
   pods, podgroups, queues and priority classes go in through the cache's event handlers, in the
   order the Go harness adds them;
2. one session opened with ONLY the flags the scenario's tiers list (unset = off);
3. ``EnabledActionMap`` = the scenario's actions; each action runs in order on that session;
4. ``JobUpdater.UpdateAll``; the session's Pipelined tasks are read; the session is closed;
5. compare: binds exactly (``ns/name -> node`` and the count), evictions as a multiset, and for
   each expected pipelined job: it has Pipelined tasks in the session, all on the listed nodes.

``ScenarioCluster`` carries one cache across several sessions, with an in-memory API "truth" that
the recorded binds / evictions / status writes are applied to and delivered back to the cache as
informer updates between sessions (the multi-session bug reproductions).
"""
from __future__ import annotations

import copy
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable

from ha.errors import BadInput
from ha.scenario.loader import ClusterObjects, Expected, PluginSpec, Scenario
from ha.scheduler.profiles import Switches, profile as get_profile

__all__ = ["SessionOutcome", "ScenarioResult", "ScenarioCluster", "make_conf", "run_scenario",
           "compare", "resolve_profile", "SCENARIO_TIME"]

# The clock a scenario's sessions read (``ha.scheduler.interfaces.FixedClock``): a fixed instant, so
# conditions' lastTransitionTime and jobs' scheduleStartTimestamp never depend on when a test ran.
SCENARIO_TIME = 1_700_000_000.0


# ------------------------------------------------------------------------------------ results

@dataclass
class SessionOutcome:
    """What one session did, as Volcano's fake binder / evictor saw it."""
    binds: dict[str, str] = field(default_factory=dict)          # ns/name -> node (this session)
    bind_list: list[tuple[str, str]] = field(default_factory=list)  # in order, with repeats
    evicted: list[str] = field(default_factory=list)             # ns/name, in order, with repeats
    pipelined: dict[str, str] = field(default_factory=dict)      # session Pipelined: ns/name -> node
    pipelined_by_job: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    session_jobs: set[str] = field(default_factory=set)
    # per bind, the lowest-tier hypernode (of the session's tier sets) holding the bound node
    bind_hyper_nodes: list[str] = field(default_factory=list)
    # session job -> its PodGroup phase / {task status name: count} when the session was read
    podgroup_phases: dict[str, str] = field(default_factory=dict)
    task_status_counts: dict[str, dict[str, int]] = field(default_factory=dict)
    # the session died: FatalCacheError (Volcano's klog.Fatalf) or ResourceUnderflow (its assert
    # panics); what was recorded up to then is kept
    fatal: str | None = None


@dataclass
class ScenarioResult:
    name: str
    path: str
    profile: str
    outcome: SessionOutcome
    ok: bool | None = None
    mismatches: list[str] = field(default_factory=list)

    def to_json(self, check: bool) -> dict[str, Any]:
        d: dict[str, Any] = {
            "name": self.name, "profile": self.profile,
            "binds": dict(sorted(self.outcome.binds.items())),
            "evicted": list(self.outcome.evicted),
            "pipelined": dict(sorted(self.outcome.pipelined.items())),
            "bind_count": len(self.outcome.bind_list),
            "evict_count": len(self.outcome.evicted),
        }
        if self.outcome.fatal is not None:
            d["fatal"] = self.outcome.fatal
        if check:
            d["ok"] = bool(self.ok)
            d["mismatches"] = list(self.mismatches)
        return d


def resolve_profile(name: str) -> Switches:
    try:
        return get_profile(name)
    except BadInput as e:
        raise BadInput(f"--profile: {e}") from None


# --------------------------------------------------------------------------------- conf / keys

def make_conf(actions: list[str], tiers: list[list[PluginSpec]],
              action_arguments: dict[str, dict] | None = None, source: str = "<scenario>",
              registered_builders: Iterable[str] | None = None):
    """A SchedulerConf with exactly the flags the tiers set (unset = off, like the Go tests)."""
    from ha.scheduler.conf import SchedulerConf
    d: dict[str, Any] = {"actions": list(actions),
                         "tiers": [[p.to_option() for p in tier] for tier in tiers],
                         "action_arguments": dict(action_arguments or {})}
    if registered_builders is not None:
        d["registered_builders"] = list(registered_builders)
    return SchedulerConf.from_dict(d, source=source)


def pod_key(pod: dict) -> str:
    m = pod["metadata"]
    return f"{m['namespace']}/{m['name']}"


def _task_key(task: Any) -> str:
    ns = getattr(task, "namespace", None)
    name = getattr(task, "name", None)
    if ns is None or name is None:
        pod = task.pod
        return pod_key(pod)
    return f"{ns}/{name}"


def _job_key(job: Any) -> str:
    uid = getattr(job, "uid", None)
    return str(uid if uid is not None else job.id)


# ----------------------------------------------------------------------------------- the harness

class ScenarioCluster:
    """One SchedulerCache (fed through its event handlers) + RecordingIO + the API truth.

    ``self.pods`` etc. are what the API server would hold. ``sync()`` applies the writes the
    scheduler made through its IO (bind -> spec.nodeName, evict -> deletionTimestamp, status ->
    status / nomination) to that truth and delivers them to the cache as informer updates.
    """

    def __init__(self, objects: ClusterObjects, switches: Switches, *, source: str = "<scenario>"):
        from ha.scheduler.interfaces import FixedClock
        from ha.scheduler.wiring import build_cache
        self.source = source
        self.switches = switches
        self.io = _scenario_io()
        # status writes refused by the API truth (stale resourceVersion -> 409), in order
        self.conflicts: list[tuple[str, str]] = []
        # one session in memory: its results must not depend on when it ran
        self.cache, self.handlers = build_cache(profile=switches, io=self.io, clock=FixedClock(SCENARIO_TIME))
        self.nodes: dict[str, dict] = {}
        self.pods: dict[str, dict] = {}
        self.podgroups: dict[str, dict] = {}
        self.queues: dict[str, dict] = {}
        self.priority_classes: dict[str, dict] = {}
        self._rv = 10_000
        self._io_seen = _IOCursor()
        # the Go harness order: nodes, pods, podgroups, queues, priority classes
        for n in objects.nodes:
            self.add_node(n)
        for p in objects.pods:
            self.add_pod(p)
        for g in objects.podgroups:
            self.add_pod_group(g)
        for q in objects.queues:
            self.add_queue(q)
        for pc in objects.priority_classes:
            self.add_priority_class(pc)
        self.hyper_nodes: dict[str, dict] = {}
        self._add_hyper_nodes(objects)

    # -- objects in -------------------------------------------------------------------------
    def _bump(self, obj: dict) -> dict:
        self._rv += 1
        obj["metadata"]["resourceVersion"] = self._rv
        return obj

    def add_node(self, node: dict) -> None:
        node = copy.deepcopy(node)
        self.nodes[node["metadata"]["name"]] = node
        self.handlers["Node"].on_add(copy.deepcopy(node))

    def add_pod(self, pod: dict) -> None:
        pod = self._bump(copy.deepcopy(pod))
        self.pods[pod_key(pod)] = pod
        self.io.pods[pod_key(pod)] = copy.deepcopy(pod)   # what the binder's 409 check / GET see
        self.handlers["Pod"].on_add(copy.deepcopy(pod))

    def add_pod_group(self, pg: dict) -> None:
        pg = self._bump(copy.deepcopy(pg))
        self.podgroups[pod_key(pg)] = pg
        self.handlers["PodGroup"].on_add(copy.deepcopy(pg))

    def add_queue(self, q: dict) -> None:
        q = copy.deepcopy(q)
        self.queues[q["metadata"]["name"]] = q
        self.handlers["Queue"].on_add(copy.deepcopy(q))

    def add_priority_class(self, pc: dict) -> None:
        pc = copy.deepcopy(pc)
        self.priority_classes[pc["metadata"]["name"]] = pc
        self.handlers["PriorityClass"].on_add(copy.deepcopy(pc))

    def _add_hyper_nodes(self, objects: ClusterObjects) -> None:
        """HyperNodes after everything else (as the Go harness sets HyperNodesInfo last): with a
        ``hypernode_cache`` the harness's injection (children and parents from exact HyperNode
        members, ``parent`` options, tier and real-node sets verbatim), else the cache's own
        handlers resolve them."""
        for hn in objects.hyper_nodes:
            self.hyper_nodes[hn["metadata"]["name"]] = copy.deepcopy(hn)
        hc = objects.hyper_node_cache
        if hc is None:
            for hn in objects.hyper_nodes:
                self.cache.add_hyper_node(copy.deepcopy(hn))
            return
        from ha.scheduler.api.hypernode_info import HyperNodeInfo
        infos = {n: HyperNodeInfo.from_object(o, parent=objects.hyper_node_parents.get(n, ""))
                 for n, o in self.hyper_nodes.items()}
        for name in sorted(infos):
            for child in infos[name].child_names():
                infos[name].children.add(child)
                if child in infos:
                    infos[child].parent = name
        self.cache.inject_hyper_nodes(infos, hc.set_by_tier, hc.real_nodes)

    def update_pod(self, key: str, mutate) -> dict:
        """Change the API truth of a pod and deliver the update to the cache (an informer event)."""
        old = self.pods[key]
        new = copy.deepcopy(old)
        mutate(new)
        self._bump(new)
        self.pods[key] = new
        self.io.pods[key] = copy.deepcopy(new)
        self.handlers["Pod"].on_update(copy.deepcopy(old), copy.deepcopy(new))
        return new

    def delete_pod(self, key: str) -> None:
        pod = self.pods.pop(key)
        self.io.pods.pop(key, None)
        self.handlers["Pod"].on_delete(copy.deepcopy(pod))

    def set_pod_phase(self, key: str, phase: str) -> dict:
        def m(p: dict) -> None:
            p["status"]["phase"] = phase
        return self.update_pod(key, m)

    # -- one session ------------------------------------------------------------------------
    def run_session(self, conf, *, seed: int | None = None,
                    update_all_before_close: bool = True) -> SessionOutcome:
        """Open a session on the cache, run the conf's actions in order, close it.

        ``update_all_before_close``: the Go harness's CheckAll runs ``JobUpdater.UpdateAll``
        before inspecting the session (step 4 of the module docstring; docs/volcano-semantics.md §16.2)
        and CloseSession runs it again; a real
        scheduler cycle (runOnce) runs it once, at close. The multi-session driver uses the latter.
        """
        from ha.scheduler.api import ResourceUnderflow
        from ha.scheduler.api.types import FatalCacheError
        from ha.scheduler.framework import close_session, open_session
        before = self._io_seen.mark(self.io)
        out = SessionOutcome()
        ssn = open_session(self.cache, conf, seed=seed)
        try:
            for name in conf.actions:
                action = _get_action(name, self.source)
                action.initialize()
                action.execute(ssn)
                action.uninitialize()
            if update_all_before_close:
                _update_all(ssn)
            self._read_session(ssn, out)
            close_session(ssn)
            _flush(self.cache)
        except (FatalCacheError, ResourceUnderflow) as e:
            # the real scheduler would have exited mid-session; keep what it did until then
            out.fatal = f"{type(e).__name__}: {e}"
            self._read_session(ssn, out)
        binds, evicts = self._io_seen.since(self.io, before)
        out.bind_list = binds
        out.binds = dict(binds)
        out.evicted = evicts
        out.bind_hyper_nodes = [self.cache.hyper_nodes_info.find_hyper_node_for_node(n) for _, n in binds]
        return out

    @staticmethod
    def _read_session(ssn: Any, out: SessionOutcome) -> None:
        out.session_jobs = {str(j) for j in ssn.jobs}
        out.pipelined.clear()
        out.pipelined_by_job.clear()
        out.podgroup_phases = {str(j): str(job.pod_group_phase) for j, job in ssn.jobs.items()}
        out.task_status_counts = {
            str(j): {str(st): len(ts) for st, ts in job.task_status_index.items() if ts}
            for j, job in ssn.jobs.items()}
        for jid, job in ssn.jobs.items():
            pl = _tasks_with_status(job, "PIPELINED")
            if pl:
                out.pipelined_by_job[str(jid)] = [(_task_key(t), t.node_name) for t in pl]
                for t in pl:
                    out.pipelined[_task_key(t)] = t.node_name

    # -- the informer round trip --------------------------------------------------------------
    def sync(self) -> None:
        """Apply the scheduler's API writes since the last sync to the truth and deliver them."""
        for op in self._io_seen.unsynced(self.io):
            kind = op[0]
            if kind == "bind":
                _, key, node = op
                if key not in self.pods:
                    continue

                def m(p: dict, node=node) -> None:
                    p["spec"]["nodeName"] = node
                    if self.switches.clear_nnn_on_binding:
                        p["status"]["nominatedNodeName"] = ""
                self.update_pod(key, m)
            elif kind == "evict":
                _, key = op
                if key not in self.pods or self.pods[key]["metadata"].get("deletionTimestamp"):
                    continue

                def m(p: dict) -> None:
                    p["metadata"]["deletionTimestamp"] = 1.0
                    p["metadata"]["deletionGracePeriodSeconds"] = 30
                self.update_pod(key, m)
            elif kind == "pod_status":
                _, key, status, rv = op
                if key not in self.pods:
                    continue
                # UpdateStatus carries the pod's resourceVersion: a write made from a stale copy
                # of the pod (e.g. taskUnschedulable at close, after Cache.Pipeline's own write
                # landed) gets 409 Conflict and changes nothing, as on a real API server
                if rv is not None and rv != self.pods[key]["metadata"].get("resourceVersion"):
                    self.conflicts.append((key, "update_pod_status"))
                    continue

                def m(p: dict, status=status) -> None:
                    p["status"].update(copy.deepcopy(status))
                self.update_pod(key, m)
            elif kind == "annotations":
                _, key, patch = op
                if key not in self.pods:
                    continue

                def m(p: dict, patch=patch) -> None:
                    ann = p["metadata"].setdefault("annotations", {})
                    for k, v in patch.items():
                        if v is None:
                            ann.pop(k, None)
                        else:
                            ann[k] = v
                self.update_pod(key, m)
            elif kind == "podgroup_status":
                _, key, status = op
                if key not in self.podgroups:
                    continue
                old = self.podgroups[key]
                new = copy.deepcopy(old)
                new["status"].update(copy.deepcopy(status))
                self._bump(new)
                self.podgroups[key] = new
                self.handlers["PodGroup"].on_update(copy.deepcopy(old), copy.deepcopy(new))


# --------------------------------------------------------------- adapters to the scheduler model
# Kept in one place: the model's names are fixed by the model's interfaces (docs/design.md), the details are read here.

def _get_action(name: str, source: str):
    from ha.scheduler.actions import get_action
    try:
        return get_action(name)
    except BadInput as e:
        raise BadInput(f"{source}: actions: {e}") from None
    except KeyError:
        raise BadInput(f"{source}: actions: unknown action {name!r}") from None


def _update_all(ssn: Any) -> None:
    from ha.scheduler.framework import job_updater
    job_updater.JobUpdater(ssn).update_all()


def _flush(cache: Any) -> None:
    """Let asynchronous bind / evict work of the cache finish (the Go harness waits for them)."""
    for name in ("process_bind_task",):
        fn = getattr(cache, name, None)
        if callable(fn):
            fn()


def _tasks_with_status(job: Any, status_name: str) -> list:
    from ha.scheduler.api import TaskStatus
    st = getattr(TaskStatus, status_name)
    idx = job.task_status_index.get(st) or {}
    return list(idx.values()) if isinstance(idx, dict) else list(idx)


class _IOCursor:
    """Reads RecordingIO's records: binds and evictions per session, and the API writes not yet
    applied to the truth."""

    def __init__(self) -> None:
        self._synced = 0

    @staticmethod
    def _ops(io: Any) -> list[tuple]:
        return _io_ops(io)

    def mark(self, io: Any) -> int:
        return len(self._ops(io))

    def since(self, io: Any, mark: int) -> tuple[list[tuple[str, str]], list[str]]:
        binds: list[tuple[str, str]] = []
        evicts: list[str] = []
        for op in self._ops(io)[mark:]:
            if op[0] == "bind":
                binds.append((op[1], op[2]))
            elif op[0] == "evict":
                evicts.append(op[1])
        return binds, evicts

    def unsynced(self, io: Any) -> list[tuple]:
        ops = self._ops(io)
        new = ops[self._synced:]
        self._synced = len(ops)
        return new


def _scenario_io():
    """RecordingIO that also keeps the resourceVersion each status write was made from."""
    from ha.scheduler.interfaces import RecordingIO

    class ScenarioIO(RecordingIO):
        def update_pod_status(self, pod: dict) -> dict:
            n = len(self.records)
            try:
                return super().update_pod_status(pod)
            finally:
                if len(self.records) > n:
                    self.records[n].detail["resourceVersion"] = (pod.get("metadata") or {}).get("resourceVersion")

    return ScenarioIO()


def _io_ops(io: Any) -> list[tuple]:
    """RecordingIO's log as (kind, ...) tuples in order: ("bind", key, node), ("evict", key),
    ("pod_status", key, status), ("podgroup_status", key, status), ("annotations", key, patch).
    Failed calls are left out: they changed nothing in the API."""
    out: list[tuple] = []
    for r in io.records:
        if r.detail.get("error"):
            continue
        if r.op == "bind":
            out.append(("bind", r.key, r.detail.get("node", "")))
        elif r.op == "evict":
            out.append(("evict", r.key))
        elif r.op == "update_pod_status":
            out.append(("pod_status", r.key, r.detail.get("status") or {}, r.detail.get("resourceVersion")))
        elif r.op == "update_pod_group":
            out.append(("podgroup_status", r.key, r.detail.get("status") or {}))
        elif r.op == "patch_annotations":
            out.append(("annotations", r.key, r.detail.get("annotations") or {}))
    return out


# -------------------------------------------------------------------------------------- compare

def compare(expected: Expected, out: SessionOutcome) -> list[str]:
    """uthelper CheckBind / CheckEvict / CheckPipelined, as readable mismatch lines."""
    mm: list[str] = []
    if out.fatal is not None:
        mm.append(f"session aborted: {out.fatal}")
    # binds: exactly the expected map, and exactly bind_count bind calls ("count_only": the count)
    if len(out.bind_list) != expected.bind_count:
        mm.append(f"bind_count: expected {expected.bind_count}, got {len(out.bind_list)}")
    if expected.bind_check == "by_hypernode":
        # CheckBindInHyperNode: nothing else is checked
        got_counts = sorted(Counter(out.bind_hyper_nodes).values())
        if got_counts != sorted(expected.bind_counts_by_hypernode or []):
            mm.append(f"bind_counts_by_hypernode: expected {sorted(expected.bind_counts_by_hypernode or [])}, "
                      f"got {got_counts} ({dict(sorted(Counter(out.bind_hyper_nodes).items()))})")
        return mm
    for key, node in sorted(expected.binds.items()):
        got = out.binds.get(key)
        if got != node:
            mm.append(f"binds: expected {key} -> {node}, got {key} -> {got or '(not bound)'}")
    for key, node in sorted(out.binds.items()):
        if key not in expected.binds and expected.bind_check == "full":
            mm.append(f"binds: unexpected {key} -> {node}")
    # evictions: a multiset
    want, got = Counter(expected.evicted), Counter(out.evicted)
    if want != got:
        missing = sorted((want - got).elements())
        extra = sorted((got - want).elements())
        parts = []
        if missing:
            parts.append(f"missing {missing}")
        if extra:
            parts.append(f"unexpected {extra}")
        mm.append(f"evicted: expected {sorted(want.elements())}, got {sorted(got.elements())} "
                  f"({'; '.join(parts)})")
    # pipelined: every session-Pipelined task of each listed job is on one of the listed nodes
    for job, nodes in sorted((expected.pipelined or {}).items()):
        if job not in out.session_jobs:
            mm.append(f"pipelined: job {job} does not exist in the session")
            continue
        tasks = out.pipelined_by_job.get(job) or []
        if not tasks:
            mm.append(f"pipelined: job {job} has no Pipelined task (expected one on {', '.join(nodes)})")
            continue
        for key, node in tasks:
            if node not in nodes:
                mm.append(f"pipelined: {key} is pipelined on {node}, expected one of {', '.join(nodes)}")
    mm.extend(_compare_phases(expected, out))
    return mm


def _compare_phases(expected: Expected, out: SessionOutcome) -> list[str]:
    """uthelper ExpectStatus (PodGroup phases) and ExpectTaskStatusNums of the session jobs."""
    mm: list[str] = []
    for job, phase in sorted(expected.podgroup_phases.items()):
        got = out.podgroup_phases.get(job)
        if got is None:
            mm.append(f"podgroup_phases: job {job} does not exist in the session")
        elif got != phase:
            mm.append(f"podgroup_phases: {job} expected {phase}, got {got}")
    for job, counts in sorted(expected.task_status_counts.items()):
        got = out.task_status_counts.get(job)
        if got is None:
            mm.append(f"task_status_counts: job {job} does not exist in the session")
            continue
        for st, n in sorted(counts.items()):
            if got.get(st, 0) != n:
                mm.append(f"task_status_counts: {job} {st} expected {n}, got {got.get(st, 0)}")
    return mm


def run_scenario(scn: Scenario, profile_name: str = "v1.14", *,
                 switches: Switches | None = None) -> ScenarioResult:
    """Run one kind-"action" scenario through one session and compare with its ``expected``."""
    if scn.kind != "action":
        raise BadInput(f"{scn.path}: kind: {scn.kind!r} scenarios are for the project's own tests; "
                       f"only kind 'action' scenarios can be run")
    sw = switches if switches is not None else resolve_profile(profile_name)
    conf = make_conf(scn.actions, scn.tiers, scn.action_arguments, source=scn.path,
                     registered_builders=scn.registered_builders)
    cluster = ScenarioCluster(scn.objects, sw, source=scn.path)
    outcome = cluster.run_session(conf)
    res = ScenarioResult(name=scn.name, path=scn.path, profile=profile_name, outcome=outcome)
    if scn.expected is not None:
        res.mismatches = compare(scn.expected, outcome)
        res.ok = not res.mismatches
    return res
