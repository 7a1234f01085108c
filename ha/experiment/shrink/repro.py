"""A scenario file for a shrunk run whose violation comes from one session's decisions.

Today that is an overcommit caused by one bind: ``overcommit_violations``' first example names the
node and, per pod, ``bound_by`` = (instance, generation, session). The pod bound last onto that node
is the culprit and its session the one to reproduce. The file (``repro.json``, kind ``"action"``,
the format of :mod:`ha.scenario.loader`) holds:

* ``nodes``, ``queues``, ``podgroups``, ``pods``, ``priority_classes``: the API server's state just
  before that session's first write (the truth, ``history/events.msgpack`` folded up to that RV) —
  what an up-to-date cache of the instance held when the session opened;
* ``actions`` and ``plugins.tiers``: the run's scheduler configuration, every flag explicit;
* ``expected``: what the session should have done — its recorded binds and evictions without the
  binds the oracle blames (a bind is blamed when the node's bound requests exceed its allocatable
  once it lands). ``scenario run --check`` therefore fails while the bug is present and passes when
  the session no longer makes the blamed binds.

:func:`write_repro` checks that the file reproduces the blamed bind in memory under the run's
switches and says so in its result (``reproduces``); the run's switches beyond its profile are
listed in ``notes`` and in the command (``--switch``).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ha.experiment.shrink.predicate import Predicate

__all__ = ["write_repro", "scenario_from_truth"]

GROUP_NAME_ANNOTATION = "scheduling.k8s.io/group-name"
_DROP_ANNOTATIONS = {GROUP_NAME_ANNOTATION, "ha-testbed/write-time"}


def _pod_request(pod: dict[str, Any]) -> dict[str, Any]:
    from cluster_state.quantity import format_quantity, parse_quantity
    total: dict[str, int] = {}
    for c in (pod.get("spec") or {}).get("containers") or []:
        for name, q in ((c.get("resources") or {}).get("requests") or {}).items():
            total[name] = total.get(name, 0) + parse_quantity(name, q)
    return {k: format_quantity(k, v) for k, v in sorted(total.items())}


def scenario_from_truth(store: dict[str, dict[str, dict]]) -> dict[str, Any]:
    """The scenario file's object sections from API objects (``EventFold.store``), in name order."""
    nodes = []
    for _k, n in sorted(store.get("Node", {}).items()):
        st = n.get("status") or {}
        nodes.append({"name": n["metadata"]["name"], "allocatable": dict(st.get("allocatable") or {}),
                      "capacity": dict(st.get("capacity") or st.get("allocatable") or {}),
                      "labels": dict(n["metadata"].get("labels") or {}),
                      "unschedulable": bool((n.get("spec") or {}).get("unschedulable"))})
    queues = []
    for _k, q in sorted(store.get("Queue", {}).items()):
        sp = q.get("spec") or {}
        entry = {"name": q["metadata"]["name"], "weight": sp.get("weight", 1),
                 "priority": sp.get("priority") or 0, "state": (q.get("status") or {}).get("state") or "Open"}
        for f in ("capability", "deserved", "guarantee", "reclaimable"):
            if sp.get(f) is not None:
                entry[f] = sp[f]
        queues.append(entry)
    groups = []
    for _k, g in sorted(store.get("PodGroup", {}).items()):
        sp = g.get("spec") or {}
        md = g["metadata"]
        entry = {"name": md["name"], "namespace": md.get("namespace") or "default", "queue": sp.get("queue") or "default",
                 "minMember": sp.get("minMember") or 0, "minTaskMember": dict(sp.get("minTaskMember") or {}),
                 "phase": (g.get("status") or {}).get("phase") or "Pending"}
        if sp.get("priorityClassName"):
            entry["priorityClassName"] = sp["priorityClassName"]
        if sp.get("minResources"):
            entry["minResources"] = sp["minResources"]
        groups.append(entry)
    pods = []
    for _k, p in sorted(store.get("Pod", {}).items()):
        md, sp, st = p["metadata"], p.get("spec") or {}, p.get("status") or {}
        ann = md.get("annotations") or {}
        entry = {"name": md["name"], "namespace": md.get("namespace") or "default",
                 "podgroup": ann.get(GROUP_NAME_ANNOTATION), "request": _pod_request(p),
                 "phase": st.get("phase") or "Pending", "nodeName": sp.get("nodeName") or "",
                 "nominatedNodeName": st.get("nominatedNodeName") or "",
                 "deletionTimestamp": bool(md.get("deletionTimestamp")),
                 "labels": dict(md.get("labels") or {}),
                 "annotations": {k: v for k, v in sorted(ann.items()) if k not in _DROP_ANNOTATIONS},
                 "nodeSelector": dict(sp.get("nodeSelector") or {}),
                 "preemptionPolicy": sp.get("preemptionPolicy") or "PreemptLowerPriority"}
        if sp.get("priority") is not None:
            entry["priority"] = sp["priority"]
        if sp.get("priorityClassName"):
            entry["priorityClassName"] = sp["priorityClassName"]
        pods.append(entry)
    pcs = [{"name": pc["metadata"]["name"], "value": pc.get("value", 0),
            "globalDefault": bool(pc.get("globalDefault")),
            "preemptionPolicy": pc.get("preemptionPolicy") or "PreemptLowerPriority"}
           for _k, pc in sorted(store.get("PriorityClass", {}).items())]
    return {"nodes": nodes, "queues": queues, "podgroups": groups, "pods": pods, "priority_classes": pcs}


def overcommitting(doc: dict[str, Any], binds: list[tuple[str, str]]) -> list[str]:
    """The binds (in order, onto the scenario's objects) after which a node's bound requests exceed
    its allocatable: the overcommit oracle's blame for one session."""
    from cluster_state.quantity import parse_quantity
    alloc = {n["name"]: {k: parse_quantity(k, v) for k, v in n["allocatable"].items()} for n in doc["nodes"]}
    used: dict[str, dict[str, int]] = {n: {} for n in alloc}
    pods = {f"{p['namespace']}/{p['name']}": p for p in doc["pods"]}
    for p in doc["pods"]:
        if p["nodeName"] and p["phase"] not in ("Succeeded", "Failed") and p["nodeName"] in used:
            for k, v in p["request"].items():
                used[p["nodeName"]][k] = used[p["nodeName"]].get(k, 0) + parse_quantity(k, v)
    blamed: list[str] = []
    for key, node in binds:
        if node not in alloc:
            continue
        req = {k: parse_quantity(k, v) for k, v in (pods.get(key) or {}).get("request", {}).items()}
        after = {k: used[node].get(k, 0) + req.get(k, 0) for k in set(used[node]) | set(req)}
        if any(after[k] > alloc[node][k] for k in after if k in alloc[node]):
            blamed.append(key)
            continue
        used[node] = after
    return blamed


def _no(why: str) -> dict[str, Any]:
    return {"written": False, "why": why}


def write_repro(run_dir: Path, out: Path, predicate: Predicate, name: str = "repro.json") -> dict[str, Any]:
    """Write ``out/name`` when the shrunk run's violation comes from one session's binds; returns
    ``{"written", "file", "instance", "session", "profile", "switches", "reproduces", "note"}`` or
    ``{"written": False, "why"}``."""
    from ha.experiment.checkers._fold import EventFold
    from ha.experiment.history import History
    if not any(k.split(".")[0] == "overcommit_violations" for k in predicate.keys()):
        return _no("scenario files are extracted for overcommit_violations (a bind of one session); "
                   "the predicate does not name it")
    metrics = json.loads((Path(run_dir) / "metrics.json").read_text(encoding="utf-8"))
    oc = (metrics.get("summary") or {}).get("overcommit_violations")
    examples = (oc or {}).get("examples") if isinstance(oc, dict) else None
    if not examples:
        return _no("the shrunk run's overcommit_violations has no example to take the session from")
    ex = examples[0]
    bound = [p for p in ex.get("pods") or [] if p.get("bound_by")]
    if not bound:
        return _no(f"no pod on {ex.get('node')} records the session that bound it")
    culprit = max(bound, key=lambda p: (p["bound_by"][1], p["bound_by"][2]))
    instance, generation, session = culprit["bound_by"]
    h = History(run_dir)
    mine = [d for d in h.decisions() if d.get("instance") == instance and d.get("generation", 0) == generation
            and d.get("session") == session and not d.get("dry_run")]
    binds = [(d["pod"], d["node"]) for d in mine if d.get("op") == "bind" and d.get("ok", True)]
    evicts = [d["pod"] for d in mine if d.get("op") == "evict" and d.get("ok", True)]
    if not binds:
        return _no(f"session {session} of {instance} recorded no successful bind")
    events = h.events()
    targets = dict(binds)
    first_rv = None
    for e in events:
        if e.get("kind") != "Pod":
            continue
        md = e["object"]["metadata"]
        key = f"{md.get('namespace')}/{md['name']}"
        if key in targets and (e["object"].get("spec") or {}).get("nodeName") == targets[key]:
            first_rv = e["rv"]
            break
    if first_rv is None:
        return _no(f"the truth holds none of session {session}'s binds")
    fold = EventFold(events)
    fold.advance(first_rv - 1)
    doc = scenario_from_truth(fold.store)
    blamed = overcommitting(doc, binds)
    if not blamed:
        return _no(f"none of session {session}'s binds overcommits a node on the truth before it")
    conf = metrics.get("scheduler_conf") or {}
    profile = metrics.get("experiment", {}).get("profile") or "v1.14"
    overrides = dict((metrics.get("experiment") or {}).get("switches") or {})
    switch_args = "".join(f" --switch {k}" if v else f" --switch {k}=false" for k, v in sorted(overrides.items()))
    expected_binds = {k: n for k, n in binds if k not in blamed}
    scenario = {
        "name": f"shrink/{metrics.get('experiment', {}).get('name', 'run')}-{instance}-session-{session}",
        "kind": "action",
        "notes": (f"Extracted by ha-testbed shrink ({predicate}). The API server's state before session "
                  f"{session} of {instance} (generation {generation}), at RV {first_rv - 1}. In the run that "
                  f"session bound {', '.join(f'{k} -> {n}' for k, n in binds)}; the overcommit oracle blames "
                  f"{', '.join(blamed)}. `expected` is the session without the blamed binds. Run: "
                  f"ha-testbed scenario run {name} --profile {profile}{switch_args} --check"),
        **doc,
        "actions": list(conf.get("actions") or []),
        "action_arguments": dict(conf.get("action_arguments") or {}),
        "plugins": {"tiers": conf.get("tiers") or []},
        "expected": {"binds": expected_binds, "bind_count": len(expected_binds),
                     "evicted": evicts, "evict_count": len(evicts)},
    }
    path = Path(out) / name
    path.write_text(json.dumps(scenario, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    # does the file show the bug in memory under the run's switches?
    from ha.scenario.loader import load_scenario
    from ha.scenario.runner import resolve_profile, run_scenario
    sw = resolve_profile(profile).with_(**overrides)
    res = run_scenario(load_scenario(str(path)), profile, switches=sw)
    again = overcommitting(doc, list(res.outcome.bind_list))
    reproduces = bool(again) and not res.ok
    note = (f"In memory the session overcommits again ({', '.join(again)}; --check fails)." if reproduces else
            "In memory the session does NOT overcommit: it depended on cache state the truth does not "
            "show (a stale or diverged cache); the file is kept for reading.")
    return {"written": True, "file": name, "instance": instance, "generation": generation,
            "session": session, "rv": first_rv - 1, "profile": profile, "switches": overrides,
            "blamed": blamed, "in_memory_blamed": again, "reproduces": reproduces, "note": note,
            "command": f"ha-testbed scenario run {name} --profile {profile}{switch_args} --check"}
