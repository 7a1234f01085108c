"""Literal histories for the checker tests: a tiny API server that stamps resourceVersions and
records its watch events, and helpers to write ticks through the real HistoryWriter."""
from __future__ import annotations

import copy

from ha.experiment.history import History, HistoryWriter

GROUP = "scheduling.k8s.io/group-name"


def node(name, cpu="4000m", memory="8589934592", pods="10"):
    return {"kind": "Node", "metadata": {"name": name, "labels": {}},
            "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": pods},
                       "capacity": {"cpu": cpu, "memory": memory, "pods": pods}}}


def pod(name, cpu="1000m", node_name="", phase="Pending", group=None, nnn="", ns="default"):
    ann = {GROUP: group} if group else {}
    return {"kind": "Pod", "metadata": {"name": name, "namespace": ns, "uid": f"u-{name}", "annotations": ann},
            "spec": {"nodeName": node_name, "schedulerName": "volcano",
                     "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1073741824"}}}]},
            "status": {"phase": phase, "nominatedNodeName": nnn}}


def pg(name, min_member, ns="default", queue="default"):
    return {"kind": "PodGroup", "metadata": {"name": name, "namespace": ns, "uid": f"pg-{name}"},
            "spec": {"minMember": min_member, "queue": queue}, "status": {"phase": "Inqueue"}}


def queue(name="default"):
    return {"kind": "Queue", "metadata": {"name": name, "uid": f"q-{name}"}, "spec": {"weight": 1},
            "status": {"state": "Open"}}


class Api:
    """Objects by key, a global RV, and the events a watch would deliver."""

    def __init__(self):
        self.rv = 0
        self.objects: dict[tuple[str, str], dict] = {}
        self.events: list[dict] = []

    @staticmethod
    def _key(obj):
        md = obj["metadata"]
        return obj["kind"], f"{md['namespace']}/{md['name']}" if md.get("namespace") else md["name"]

    def _emit(self, typ, obj):
        self.rv += 1
        obj = copy.deepcopy(obj)
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self.events.append({"rv": self.rv, "type": typ, "kind": obj["kind"], "object": obj})
        return obj

    def create(self, *objs):
        for o in objs:
            self.objects[self._key(o)] = self._emit("ADDED", o)

    def update(self, kind, key, fn):
        o = copy.deepcopy(self.objects[(kind, key)])
        fn(o)
        self.objects[(kind, key)] = self._emit("MODIFIED", o)

    def bind(self, key, node_name):
        def f(o):
            o["spec"]["nodeName"] = node_name
            o["status"]["nominatedNodeName"] = ""
            o["status"]["phase"] = "Running"
        self.update("Pod", key, f)

    def nominate(self, key, node_name):
        self.update("Pod", key, lambda o: o["status"].__setitem__("nominatedNodeName", node_name))

    def delete(self, kind, key):
        o = self.objects.pop((kind, key))
        self._emit("DELETED", o)

    def drain(self):
        out, self.events = self.events, []
        return out


def inst(tasks, nodes=None, *, leader=False, synced=True, gen=0, **counters):
    return {"tasks": tasks, "nodes": nodes or {}, "rvs": {"Pod": 0}, "is_leader": leader, "synced": synced,
            "sessions": counters.pop("sessions", 1), "generation": gen, "counters": counters}


def header(instances=("scheduler-1", "scheduler-2"), profile="v1.14", mode="leader-elected", **exp):
    e = {"name": "t", "seed": 1, "profile": profile, "duration": "10s",
         "schedulers": {"instances": len(instances), "mode": mode,
                        "lease": {"duration": "4s", "renew_deadline": "3s", "retry": "1s"}},
         "measure": {"every": "1s"}, "chaos": []}
    e.update(exp)
    return {"experiment": e, "seed": 1, "profile": profile, "switches": {}, "engine": "live",
            "code_version": "test", "instances": list(instances), "measure_every": 1.0}


def reopen(out) -> History:
    return History(out)


__all__ = ["node", "pod", "pg", "queue", "Api", "inst", "header", "HistoryWriter", "History", "reopen"]
