"""Server-side ``meta.k8s.io/v1`` Tables, as kube-apiserver renders them for ``kubectl get``.

kubectl asks for ``Accept: application/json;as=Table;v=v1;g=meta.k8s.io`` and prints the Table's
columns; a plain list makes it fall back to NAME and AGE only. So the columns here are the
apiserver's own:

* pods -- NAME, READY, STATUS, RESTARTS, AGE and, priority 1 (``-o wide``), IP, NODE,
  NOMINATED NODE, READINESS GATES; STATUS follows the pod printer (phase, or ``status.reason``,
  ``SchedulingGated``, container waiting / terminated reasons, ``Init:...``, ``Terminating`` once
  ``deletionTimestamp`` is set and the phase is not terminal);
* nodes -- NAME, STATUS (Ready / NotReady / Unknown, ``,SchedulingDisabled``), ROLES, AGE, VERSION,
  then INTERNAL-IP, EXTERNAL-IP, OS-IMAGE, KERNEL-VERSION, CONTAINER-RUNTIME (priority 1);
* namespaces -- NAME, STATUS, AGE; leases -- NAME, HOLDER, AGE; priorityclasses -- NAME, VALUE,
  GLOBAL-DEFAULT, AGE, PREEMPTIONPOLICY; events -- LAST SEEN, TYPE, REASON, OBJECT, MESSAGE;
* the Volcano CRDs -- NAME plus their ``additionalPrinterColumns``: podgroups STATUS, minMember,
  RUNNINGS, AGE, QUEUE (priority 1); queues PARENT (a declared column list replaces the default
  AGE, as for any CRD); hypernodes Tier, TierName, NodeCount, Age;
* anything else -- NAME, AGE.

Every row has ``cells`` and ``object``: per ``includeObject`` (kubectl sends ``Metadata``, the
default) a ``PartialObjectMetadata``, the whole object (``Object``) or nothing (``None``).
AGE is apimachinery's ``HumanDuration`` ("5s", "3m2s", "2d"). The objects given are in Kubernetes
JSON (``kube_api.codec.to_kube``).
"""
from __future__ import annotations

import time
from typing import Any, Callable

from kube_api.codec import dumps, parse_time
from kube_api.resources import Resource
from kube_api.status import KubeError

__all__ = ["table", "supports_table", "human_duration", "pod_status_reason", "INCLUDE_OBJECT",
           "check_include_object"]

INCLUDE_OBJECT = ("None", "Metadata", "Object")

_NAME_DOC = ("Name must be unique within a namespace. Is required when creating resources, although some "
             "resources may allow a client to request the generation of an appropriate name automatically. "
             "Name is primarily intended for creation idempotence and configuration definition. Cannot be "
             "updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names")
_AGE_DOC = ("CreationTimestamp is a timestamp representing the server time when this object was created. It is "
            "not guaranteed to be set in happens-before order across separate operations. Clients may not set "
            "this value. It is represented in RFC3339 form and is in UTC.")


def _col(name: str, type_: str = "string", description: str = "", *, priority: int = 0, format_: str = "") -> dict:
    return {"name": name, "type": type_, "format": format_, "description": description, "priority": priority}


NAME_COLUMN = _col("Name", "string", _NAME_DOC, format_="name")
AGE_COLUMN = _col("Age", "string", _AGE_DOC)


def check_include_object(value: str | None) -> str:
    """The ``includeObject`` query parameter (default Metadata); 400 for another value."""
    if value is None or value == "":
        return "Metadata"
    if value not in INCLUDE_OBJECT:
        raise KubeError(400, "BadRequest", f'includeObject: Unsupported value: "{value}": supported values: '
                        f'"None", "Metadata", "Object"',
                        details={"causes": [{"reason": "FieldValueNotSupported", "field": "includeObject",
                                             "message": f"unsupported value {value!r}"}]})
    return value


# --- durations ----------------------------------------------------------------------------------
def human_duration(seconds: float) -> str:
    """apimachinery's ``duration.HumanDuration``."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        r = s % 60
        return f"{minutes}m" if r == 0 else f"{minutes}m{r}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        m = minutes % 60
        return f"{hours}h" if m == 0 else f"{hours}h{m}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        h = hours % 24
        return f"{hours // 24}d" if h == 0 else f"{hours // 24}d{h}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        dy = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if dy == 0 else f"{hours // 24 // 365}y{dy}d"
    return f"{hours // 24 // 365}y"


def _since(ts: Any, now: float) -> str:
    """translateTimestampSince: "<unknown>" for a zero / missing time."""
    if ts in (None, "", 0):
        return "<unknown>"
    try:
        t = parse_time(ts, "timestamp")
    except KubeError:
        return "<unknown>"
    return human_duration(now - t)


def _get(obj: Any, *path: str) -> Any:
    for p in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(p)
    return obj


def _list(v: Any) -> list:
    return v if isinstance(v, list) else []


def _dicts(v: Any) -> list[dict]:
    return [x for x in _list(v) if isinstance(x, dict)]


# --- pods ---------------------------------------------------------------------------------------
POD_COLUMNS = [
    NAME_COLUMN,
    _col("Ready", "string", "The aggregate readiness state of this pod for accepting traffic."),
    _col("Status", "string", "The aggregate status of the containers in this pod."),
    _col("Restarts", "string", "The number of times the containers in this pod have been restarted and when "
                               "the last container in this pod has restarted."),
    AGE_COLUMN,
    _col("IP", "string", "podIP address allocated to the pod. Routable at least within the cluster. Empty if "
                         "not yet allocated.", priority=1),
    _col("Node", "string", "NodeName indicates in which node this pod is scheduled. If empty, this pod is a "
                           "candidate for scheduling by the scheduler defined in schedulerName.", priority=1),
    _col("Nominated Node", "string", "nominatedNodeName is set only when this pod preempts other pods on the "
                                     "node, but it cannot be scheduled right away as preemption victims receive "
                                     "their graceful termination periods.", priority=1),
    _col("Readiness Gates", "string", "If specified, all readiness gates will be evaluated for pod readiness.",
         priority=1),
]
_POD_SUCCEEDED = [{"type": "Completed", "status": "True", "reason": "Succeeded",
                   "message": "The pod has completed successfully."}]
_POD_FAILED = [{"type": "Completed", "status": "True", "reason": "Failed", "message": "The pod failed."}]


def _restartable(c: dict | None) -> bool:
    return isinstance(c, dict) and c.get("restartPolicy") == "Always"


def _int(v: Any) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


def pod_status_reason(pod: dict) -> tuple[str, int, int, int, Any]:
    """The pod printer's (STATUS, ready, total, restarts, last restart time)."""
    spec = _get(pod, "spec") or {}
    status = _get(pod, "status") or {}
    phase = status.get("phase") if isinstance(status.get("phase"), str) else ""
    reason = status.get("reason") if isinstance(status.get("reason"), str) and status.get("reason") else phase
    for c in _dicts(status.get("conditions")):
        if c.get("type") == "PodScheduled" and c.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"
    containers = _dicts(spec.get("containers"))
    inits = {c.get("name"): c for c in _dicts(spec.get("initContainers"))}
    total = len(containers) + sum(1 for c in inits.values() if _restartable(c))
    ready = restarts = init_restarts = 0
    last = last_init = None

    def later(a, b):
        if b is None:
            return a
        try:
            tb = parse_time(b, "finishedAt")
        except KubeError:
            return a
        return tb if a is None or tb > a else a

    initializing = False
    init_statuses = _dicts(status.get("initContainerStatuses"))
    for i, cs in enumerate(init_statuses):
        restarts += _int(cs.get("restartCount"))
        last = later(last, _get(cs, "lastState", "terminated", "finishedAt"))
        spec_c = inits.get(cs.get("name"))
        if _restartable(spec_c):
            init_restarts += _int(cs.get("restartCount"))
            last_init = later(last_init, _get(cs, "lastState", "terminated", "finishedAt"))
        term = _get(cs, "state", "terminated")
        waiting = _get(cs, "state", "waiting")
        if isinstance(term, dict) and _int(term.get("exitCode")) == 0:
            continue
        if _restartable(spec_c) and cs.get("started") is True:
            if cs.get("ready") is True:
                ready += 1
            continue
        if isinstance(term, dict):
            if term.get("reason"):
                reason = f"Init:{term['reason']}"
            elif _int(term.get("signal")):
                reason = f"Init:Signal:{_int(term.get('signal'))}"
            else:
                reason = f"Init:ExitCode:{_int(term.get('exitCode'))}"
        elif isinstance(waiting, dict) and waiting.get("reason") and waiting.get("reason") != "PodInitializing":
            reason = f"Init:{waiting['reason']}"
        else:
            reason = f"Init:{i}/{len(inits)}"
        initializing = True
        break
    initialized = any(c.get("type") == "Initialized" and c.get("status") == "True"
                      for c in _dicts(status.get("conditions")))
    if not initializing or initialized:
        restarts, last = init_restarts, last_init
        has_running = False
        for cs in reversed(_dicts(status.get("containerStatuses"))):
            restarts += _int(cs.get("restartCount"))
            last = later(last, _get(cs, "lastState", "terminated", "finishedAt"))
            waiting = _get(cs, "state", "waiting")
            term = _get(cs, "state", "terminated")
            if isinstance(waiting, dict) and waiting.get("reason"):
                reason = waiting["reason"]
            elif isinstance(term, dict) and term.get("reason"):
                reason = term["reason"]
            elif isinstance(term, dict):
                reason = (f"Signal:{_int(term.get('signal'))}" if _int(term.get("signal"))
                          else f"ExitCode:{_int(term.get('exitCode'))}")
            elif cs.get("ready") is True and isinstance(_get(cs, "state", "running"), dict):
                has_running = True
                ready += 1
        if reason == "Completed" and has_running:
            ready_cond = any(c.get("type") == "Ready" and c.get("status") == "True"
                             for c in _dicts(status.get("conditions")))
            reason = "Running" if ready_cond else "NotReady"
    deleting = _get(pod, "metadata", "deletionTimestamp") is not None
    if deleting and status.get("reason") == "NodeLost":
        reason = "Unknown"
    elif deleting and phase not in ("Succeeded", "Failed"):
        reason = "Terminating"
    return reason, ready, total, restarts, last


def _pod_row(pod: dict, now: float) -> tuple[list, list | None]:
    reason, ready, total, restarts, last = pod_status_reason(pod)
    spec = _get(pod, "spec") or {}
    status = _get(pod, "status") or {}
    restarts_s = str(restarts)
    if restarts and last is not None:
        restarts_s = f"{restarts} ({human_duration(now - last)} ago)"
    ips = _dicts(status.get("podIPs"))
    ip = ips[0].get("ip") if ips and isinstance(ips[0].get("ip"), str) else ""
    if not ip and isinstance(status.get("podIP"), str):
        ip = status["podIP"]
    gates = _dicts(spec.get("readinessGates"))
    gates_s = "<none>"
    if gates:
        conds = {c.get("type"): c.get("status") for c in reversed(_dicts(status.get("conditions")))}
        true = sum(1 for g in gates if conds.get(g.get("conditionType")) == "True")
        gates_s = f"{true}/{len(gates)}"
    cells = [_get(pod, "metadata", "name"), f"{ready}/{total}", reason, restarts_s,
             _since(_get(pod, "metadata", "creationTimestamp"), now),
             ip or "<none>", spec.get("nodeName") or "<none>", status.get("nominatedNodeName") or "<none>",
             gates_s]
    conditions = _POD_SUCCEEDED if status.get("phase") == "Succeeded" else (
        _POD_FAILED if status.get("phase") == "Failed" else None)
    return cells, conditions


# --- nodes --------------------------------------------------------------------------------------
NODE_COLUMNS = [
    NAME_COLUMN,
    _col("Status", "string", "The status of the node"),
    _col("Roles", "string", "The roles of the node"),
    AGE_COLUMN,
    _col("Version", "string", "Kubelet Version reported by the node."),
    _col("Internal-IP", "string", "List of addresses reachable to the node. Queried from cloud provider, if "
                                  "available.", priority=1),
    _col("External-IP", "string", "List of addresses reachable to the node. Queried from cloud provider, if "
                                  "available.", priority=1),
    _col("OS-Image", "string", "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 "
                               "(wheezy)).", priority=1),
    _col("Kernel-Version", "string", "Kernel Version reported by the node from 'uname -r' (e.g. "
                                     "3.16.0-0.bpo.4-amd64).", priority=1),
    _col("Container-Runtime", "string", "ContainerRuntime Version reported by the node through runtime remote "
                                        "API (e.g. containerd://1.4.2).", priority=1),
]


def _node_row(node: dict, now: float) -> tuple[list, None]:
    status = _get(node, "status") or {}
    conds = {c.get("type"): c for c in _dicts(status.get("conditions"))}
    parts = []
    if "Ready" in conds:
        parts.append("Ready" if conds["Ready"].get("status") == "True" else "NotReady")
    if not parts:
        parts.append("Unknown")
    if _get(node, "spec", "unschedulable") is True:
        parts.append("SchedulingDisabled")
    roles = set()
    for k, v in (_get(node, "metadata", "labels") or {}).items():
        if not isinstance(k, str):
            continue
        if k.startswith("node-role.kubernetes.io/") and k[len("node-role.kubernetes.io/"):]:
            roles.add(k[len("node-role.kubernetes.io/"):])
        elif k == "kubernetes.io/role" and isinstance(v, str) and v:
            roles.add(v)
    info = status.get("nodeInfo") if isinstance(status.get("nodeInfo"), dict) else {}

    def address(kind: str) -> str:
        for a in _dicts(status.get("addresses")):
            if a.get("type") == kind and a.get("address"):
                return a["address"]
        return "<none>"

    cells = [_get(node, "metadata", "name"), ",".join(parts), ",".join(sorted(roles)) or "<none>",
             _since(_get(node, "metadata", "creationTimestamp"), now), info.get("kubeletVersion") or "",
             address("InternalIP"), address("ExternalIP"), info.get("osImage") or "<unknown>",
             info.get("kernelVersion") or "<unknown>", info.get("containerRuntimeVersion") or "<unknown>"]
    return cells, None


# --- the other built-in kinds -------------------------------------------------------------------
def _simple(columns: list, cells: Callable[[dict, float], list]):
    return columns, (lambda o, now: (cells(o, now), None))


_TABLES: dict[str, tuple[list, Callable]] = {
    "Pod": (POD_COLUMNS, _pod_row),
    "Node": (NODE_COLUMNS, _node_row),
    "Namespace": _simple([NAME_COLUMN, _col("Status", "string", "The status of the namespace"), AGE_COLUMN],
                         lambda o, now: [_get(o, "metadata", "name"), _get(o, "status", "phase") or "",
                                         _since(_get(o, "metadata", "creationTimestamp"), now)]),
    "Lease": _simple([NAME_COLUMN, _col("Holder", "string", "The holder of the lease"), AGE_COLUMN],
                     lambda o, now: [_get(o, "metadata", "name"), _get(o, "spec", "holderIdentity") or "",
                                     _since(_get(o, "metadata", "creationTimestamp"), now)]),
    "PriorityClass": _simple(
        [NAME_COLUMN, _col("Value", "integer", "The value of this priority class"),
         _col("Global-Default", "boolean", "globalDefault specifies whether this PriorityClass should be "
                                           "considered as the default priority"),
         AGE_COLUMN, _col("PreemptionPolicy", "string", "preemptionPolicy is the Policy for preempting pods "
                                                        "with lower priority", priority=1)],
        lambda o, now: [_get(o, "metadata", "name"), _get(o, "value"), bool(_get(o, "globalDefault")),
                        _since(_get(o, "metadata", "creationTimestamp"), now),
                        _get(o, "preemptionPolicy") or "PreemptLowerPriority"]),
    "Event": _simple(
        [_col("Last Seen", "string", "Time when this Event was last observed"),
         _col("Type", "string", "Type of this event (Normal, Warning)"),
         _col("Reason", "string", "This should be a short, machine understandable string that gives the reason "
                                  "for the transition into the object's current status."),
         _col("Object", "string", "The object that this event is about."),
         _col("Message", "string", "A human-readable description of the status of this operation.")],
        lambda o, now: [_since(_get(o, "lastTimestamp") or _get(o, "eventTime")
                               or _get(o, "metadata", "creationTimestamp"), now),
                        _get(o, "type") or "", _get(o, "reason") or "",
                        f"{str(_get(o, 'involvedObject', 'kind') or '').lower()}/"
                        f"{_get(o, 'involvedObject', 'name') or ''}",
                        _get(o, "message") or ""]),
}


# --- custom resources: NAME + additionalPrinterColumns -------------------------------------------
def _crd_columns(spec: list[tuple[str, str, tuple, int, str]]) -> tuple[list, Callable]:
    """``spec``: (name, type, jsonPath as a tuple, priority, description) per printer column."""
    cols = [NAME_COLUMN] + [_col(n, t, d, priority=p, format_="") for n, t, _path, p, d in spec]

    def row(o: dict, now: float) -> tuple[list, None]:
        cells: list = [_get(o, "metadata", "name")]
        for _n, t, path, _p, _d in spec:
            v = _get(o, *path)
            if v is None:
                pass
            elif t == "date":
                v = _since(v, now)
            elif t == "integer":
                v = v if isinstance(v, int) and not isinstance(v, bool) else (
                    int(v) if isinstance(v, float) and v.is_integer() else None)
            elif t == "string" and not isinstance(v, str):
                # the CRD table convertor prints a string column's value with JSONPath
                v = ("true" if v else "false") if isinstance(v, bool) else (
                    str(v) if isinstance(v, (int, float)) else dumps(v).decode())
            cells.append(v)
        return cells, None
    return cols, row


_TABLES["PodGroup"] = _crd_columns([
    ("STATUS", "string", ("status", "phase"), 0, ""),
    ("minMember", "integer", ("spec", "minMember"), 0, ""),
    ("RUNNINGS", "integer", ("status", "running"), 0, ""),
    ("AGE", "date", ("metadata", "creationTimestamp"), 0, ""),
    ("QUEUE", "string", ("spec", "queue"), 1, ""),
])
_TABLES["Queue"] = _crd_columns([("PARENT", "string", ("spec", "parent"), 0, "The parent queue of this queue")])
_TABLES["HyperNode"] = _crd_columns([
    ("Tier", "string", ("spec", "tier"), 0, ""),
    ("TierName", "string", ("spec", "tierName"), 0, ""),
    ("NodeCount", "integer", ("status", "nodeCount"), 0, ""),
    ("Age", "date", ("metadata", "creationTimestamp"), 0, ""),
])

_GENERIC = ([NAME_COLUMN, AGE_COLUMN],
            lambda o, now: ([_get(o, "metadata", "name"), _since(_get(o, "metadata", "creationTimestamp"), now)],
                            None))


def supports_table(resource: Resource) -> bool:
    """Every resource can be rendered (the generic NAME / AGE table at least)."""
    return True


def _row_object(obj: dict, include_object: str) -> dict | None:
    if include_object == "None":
        return None
    if include_object == "Object":
        return obj
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
            "metadata": obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}}


def table(resource: Resource, objects: list[dict], *, list_meta: dict | None, include_columns: bool = True,
          include_object: str = "Metadata", now: float | None = None) -> dict:
    """A ``meta.k8s.io/v1`` Table of ``objects`` (Kubernetes JSON). ``include_columns=False`` leaves
    out ``columnDefinitions`` (kubectl needs them only once in a watch). ``include_object``: the
    ``includeObject`` query parameter (None / Metadata / Object)."""
    include_object = check_include_object(include_object)
    t = time.time() if now is None else now
    columns, render = _TABLES.get(resource.kind, _GENERIC)
    rows = []
    for obj in objects:
        cells, conditions = render(obj if isinstance(obj, dict) else {}, t)
        row: dict = {"cells": cells}
        if conditions:
            row["conditions"] = conditions
        o = _row_object(obj, include_object)
        if o is not None:
            row["object"] = o
        rows.append(row)
    out: dict = {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": dict(list_meta or {})}
    out["columnDefinitions"] = [dict(c) for c in columns] if include_columns else None
    out["rows"] = rows
    return out
