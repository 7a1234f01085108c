"""Every ``kind: "unit"`` scenario in tests/data/scenarios/*.json, interpreted at the cache/API level.

The ``actions`` are short prose statements; ``Runner`` maps each statement form to calls on NodeInfo,
TaskInfo, JobInfo or SchedulerCache. Expected values are read from the file:
  * ``expected.pr5045`` → profile("pr5045"); ``expected["v1.14.0_*"]`` → profile("v1.14");
  * a flat ``expected`` → the profile of ``source_file`` (``@refs/pull/5045`` → pr5045, else v1.14);
    v1.14.0-sourced files must hold under pr5045 too (those code paths are unchanged by the PR).
"""
from __future__ import annotations

import json
import re

import pytest

from ha.scheduler.api import NodeInfo, Resource, TaskInfo, TaskNodeError, TaskStatus
from ha.scheduler.cache import BindContext, SchedulerCache
from ha.scheduler.interfaces import RecordingIO
from ha.scheduler.profiles import profile
from tests.scheduler.cachekit import node_from_scenario, pod_from_scenario, unit_scenarios

UNIT_FILES = unit_scenarios()


def _cases():
    out = []
    for path in UNIT_FILES:
        sc = json.loads(path.read_text())
        exp = sc["expected"]
        keyed = {k: v for k, v in exp.items() if k == "pr5045" or k.startswith("v1.14")}
        if keyed:
            for k, v in keyed.items():
                out.append(pytest.param(sc, "pr5045" if k == "pr5045" else "v1.14", v, id=f"{path.stem}[{k}]"))
        else:
            src_profile = "pr5045" if "refs/pull/5045" in sc["source_file"] else "v1.14"
            out.append(pytest.param(sc, src_profile, exp, id=f"{path.stem}[{src_profile}]"))
            if src_profile == "v1.14":
                out.append(pytest.param(sc, "pr5045", exp, id=f"{path.stem}[pr5045-unchanged]"))
    return out


def _plain(r: Resource) -> dict:
    return r.to_plain()


class Runner:
    """Interprets one scenario's action statements."""

    def __init__(self, sc: dict, profile_name: str):
        self.sc = sc
        self.switches = profile(profile_name)
        self.io = RecordingIO()
        self.cache = SchedulerCache(self.switches, binder=self.io, evictor=self.io, status_updater=self.io)
        self.pods = {p["name"]: pod_from_scenario(p) for p in sc["pods"]}
        self.nodes = {n["name"]: node_from_scenario(n) for n in sc["nodes"]}
        self.node_info: NodeInfo | None = None   # the bare NodeInfo of NodeInfo.* statements
        self.task: TaskInfo | None = None        # "task" in the statements
        self.bind_ctx: BindContext | None = None
        self.error: str | None = None
        self.set_node_results: list[dict] = []
        self.new_task: TaskInfo | None = None
        # the Go cache tests put nodes in the cache up front unless a statement adds them
        if not any("AddOrUpdateNode" in a for a in sc["actions"]):
            for n in self.nodes.values():
                self.cache.add_node(n)

    # -- helpers --
    def _ni(self) -> NodeInfo:
        if self.node_info is None:
            self.node_info = NodeInfo(next(iter(self.nodes.values())))
        return self.node_info

    def _task_for(self, name: str) -> TaskInfo:
        if name == "task":
            if self.task is None:
                self.task = TaskInfo(next(iter(self.pods.values())), self.switches)
            return self.task
        return TaskInfo(self.pods[name], self.switches)

    def _cache_task(self) -> TaskInfo:
        pod = next(iter(self.pods.values()))
        t = self.cache.find_task(pod["metadata"]["namespace"], pod["metadata"]["name"])
        assert t is not None, "the cache has no task for the scenario pod"
        return t

    # -- statements --
    def run(self) -> None:
        for action in self.sc["actions"]:
            for stmt in [s.strip() for s in action.split(";") if s.strip()]:
                self.stmt(stmt)

    def stmt(self, s: str) -> None:  # noqa: C901 — one branch per statement form
        m = re.fullmatch(r"NodeInfo\.(AddTask|RemoveTask|UpdateTask)\((.*)\)", s)
        if m:
            op, args = m.group(1), [a.strip() for a in m.group(2).split(",")]
            ni = self._ni()
            for a in args:
                t = self._task_for(a)
                if op == "AddTask":
                    ni.add_task(t)
                elif op == "RemoveTask":
                    ni.remove_task(t)
                else:
                    ni.update_task(t)
            return
        m = re.fullmatch(r"NodeInfo\.SetNode\((\S+) (.*)\)", s)
        if m:
            base = self.nodes[m.group(1)]
            node = base
            if m.group(2) != "original":
                node = json.loads(json.dumps(base))
                for kv in m.group(2).removeprefix("allocatable ").split(","):
                    k, v = kv.split("=")
                    k = {"mem": "memory"}.get(k, k)
                    node["status"]["allocatable"][k] = v  # Kubernetes quantities ("8", "8G", "10")
            self._ni().set_node(node)
            ni = self._ni()
            self.set_node_results.append({"idle": _plain(ni.idle), "used": _plain(ni.used),
                                          "allocatable": _plain(ni.allocatable), "state": str(ni.state.phase)})
            return
        m = re.fullmatch(r"(?:task=)?NewTaskInfo\((\w+)\)", s)
        if m:
            pod = self.pods[m.group(1)] if m.group(1) in self.pods else next(iter(self.pods.values()))
            self.task = self.new_task = TaskInfo(pod, self.switches)
            return
        m = re.fullmatch(r"task\.(Status|Job|NodeName)='?([\w-]+)'?", s)
        if m:
            t = self._task_for("task")
            if m.group(1) == "Status":
                t.status = TaskStatus.parse(m.group(2))
            elif m.group(1) == "Job":
                t.job = m.group(2)
            else:
                t.node_name = m.group(2)
            return
        m = re.fullmatch(r"cache\.AddPod(?:\((\w+)\))?", s)
        if m:
            for name, pod in self.pods.items():
                if m.group(1) in (None, name):
                    self.cache.add_pod(pod)
            return
        m = re.fullmatch(r"cache\.AddOrUpdateNode(?:\((\w[\w-]*)\))?", s)
        if m:
            for name, node in self.nodes.items():
                if m.group(1) in (None, name):
                    self.cache.add_node(node)
            return
        if s == "cache.addTask(task)":
            self.cache._add_task(self._task_for("task"))
            return
        if s == "cache.AddBindTask(task)":
            t = self.task if self.task is not None else self._cache_task()
            self.bind_ctx = BindContext(t)
            try:
                self.cache.add_bind_task(self.bind_ctx)
            except TaskNodeError as e:
                self.error = str(e)
            return
        if s == "job.UpdateTaskStatus(Pipelined)":
            t = self.task = self._cache_task()
            self.cache.jobs[t.job].update_task_status(t, TaskStatus.PIPELINED)
            return
        m = re.fullmatch(r"NodeName=NominatedNodeName=([\w-]+)", s)
        if m:
            self.task.node_name = self.task.nominated_node_name = m.group(1)
            return
        if s == "node.AddTask":
            self.cache.nodes[self.task.node_name].add_task(self.task)
            return
        m = re.fullmatch(r"set cache task Status=(\w+), NodeName=([\w-]+)", s)
        if m:  # the PR test assigns the fields directly (no index or node update)
            t = self.task = self._cache_task()
            t.status = TaskStatus.parse(m.group(1))
            t.node_name = m.group(2)
            return
        m = re.fullmatch(r"cache\.updatePod\((\w+), (\w+)\)", s)
        if m:
            self.cache.update_pod(self.pods[m.group(1)], self.pods[m.group(2)])
            return
        if s == "cache.UnPipeline(task)":
            self.cache.unpipeline(self.task)
            return
        raise AssertionError(f"unit-scenario statement not understood: {s!r}")


def _check_node(ni: NodeInfo, exp: dict) -> None:
    for field in ("idle", "used", "releasing", "pipelined"):
        if field in exp:
            assert _plain(getattr(ni, field)) == exp[field], field
    if "tasks" in exp:
        assert sorted(ni.tasks) == sorted(exp["tasks"])


@pytest.mark.parametrize("sc,profile_name,exp", _cases())
def test_unit_scenario(sc, profile_name, exp):
    r = Runner(sc, profile_name)
    r.run()
    if "node" in exp:
        _check_node(r.node_info, exp["node"])
        assert exp["node"].get("errors", []) == []  # no statement raised
    for i, key in enumerate(("after_shrink", "after_recover")):
        if key in exp:
            assert r.set_node_results[i] == exp[key]
    if "status" in exp:  # NewTaskInfo rows
        t = r.new_task
        assert str(t.status) == exp["status"]
        assert t.node_name == exp["nodeName"]
        if "nominatedNodeName" in exp:
            assert t.nominated_node_name == exp["nominatedNodeName"]
    if "error" in exp:
        if exp["error"] is None:
            assert r.error is None
        else:
            assert r.error is not None and exp["error"] in r.error
    if "task_status" in exp:
        assert str(r._cache_task().status) == exp["task_status"]
    if "task_node" in exp:
        assert r._cache_task().node_name == exp["task_node"]
    if "NodeName" in exp:
        assert r._cache_task().node_name == exp["NodeName"]
    if "NominatedNodeName" in exp:
        assert r._cache_task().nominated_node_name == exp["NominatedNodeName"]
    if "bindContext.NominatedNodeName" in exp:
        assert r.bind_ctx.task_info.nominated_node_name == exp["bindContext.NominatedNodeName"]
    if exp.get("task_unchanged"):
        t = r._cache_task()
        assert t.status == TaskStatus.PENDING and t.node_name == "n1"  # only the statement's own NodeName
    if exp.get("node_unchanged"):
        ni = r.cache.nodes["n1"]
        assert ni.tasks == {} and ni.idle == ni.allocatable and ni.used.to_plain() == {}


def test_every_unit_file_is_covered():
    assert len(UNIT_FILES) >= 15
    ids = {c.id.split("[")[0] for c in _cases()}
    assert ids == {p.stem for p in UNIT_FILES}


def test_addbindtask_of_pipelined_task_fails_on_v114():
    """The note of cache__pr5045-addbindtask-clears-nomination: on v1.14.0 AddBindTask uses AddTask
    and the key is already on the node."""
    sc = json.loads(next(p for p in UNIT_FILES if "addbindtask-clears-nomination" in p.name).read_text())
    r = Runner(sc, "v1.14")
    r.run()
    assert r.error is not None and "already on node" in r.error
    assert r._cache_task().status == TaskStatus.PIPELINED  # reverted
