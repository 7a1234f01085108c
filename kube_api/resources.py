"""The registry of resources the front serves (what discovery lists and what a path may name).

A :class:`Resource` is one collection of the Kubernetes REST API: group, version, plural. Its
``store_kind`` names the ``cluster_state`` kind that holds its objects; ``None`` marks a collection
the testbed does not model: it is served as an always-empty list and a watch that only sends
bookmarks, so that a scheduler's informers for it sync (a 404 would keep them retrying forever).
A store kind that ``cluster_state.objects.KINDS`` does not know (yet) is served the same way.

``events.k8s.io/v1`` is deliberately absent: its 404 makes kube-scheduler fall back to core/v1
events, the only events the store keeps.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Resource", "RESOURCES", "lookup", "for_store_kind", "group_versions", "resources_of",
           "preferred_version", "ALL_VERBS", "READ_VERBS"]

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
READ_VERBS = ("get", "list", "watch")


@dataclass(frozen=True)
class Resource:
    group: str                 # "" for the core group
    version: str               # "v1", "v1beta1", ...
    plural: str                # "pods"
    singular: str              # "pod"
    kind: str                  # "Pod"
    namespaced: bool
    verbs: tuple[str, ...]     # discovery verbs
    store_kind: str | None     # the cluster_state kind that holds it; None = an always-empty collection
    subresources: tuple[str, ...] = ()   # e.g. ("status", "binding", "eviction")
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_version(self) -> str:
        return self.api_version

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def qualified(self) -> str:
        """``pods`` or ``podgroups.scheduling.volcano.sh`` (how Kubernetes names it in messages)."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def modelled(self) -> bool:
        """True when the store holds this resource's objects now (its kind is a store kind)."""
        if self.store_kind is None:
            return False
        from cluster_state.objects import KINDS
        return self.store_kind in KINDS


def _r(group, version, plural, singular, kind, namespaced, store_kind=None, subresources=(),
       short_names=(), verbs=ALL_VERBS, categories=()) -> Resource:
    return Resource(group, version, plural, singular, kind, namespaced, tuple(verbs), store_kind,
                    tuple(subresources), tuple(short_names), tuple(categories))


RESOURCES: tuple[Resource, ...] = (
    # core/v1: modelled
    _r("", "v1", "pods", "pod", "Pod", True, "Pod", ("status", "binding", "eviction"), ("po",),
       categories=("all",)),
    _r("", "v1", "nodes", "node", "Node", False, "Node", ("status",), ("no",)),
    _r("", "v1", "namespaces", "namespace", "Namespace", False, "Namespace", ("status",), ("ns",)),
    _r("", "v1", "events", "event", "Event", True, "Event", (), ("ev",)),
    # the legacy bindings collection (POST namespaces/{ns}/bindings; the Python client's
    # create_namespaced_binding): a write-only door to the pod's binding, nothing to list
    _r("", "v1", "bindings", "binding", "Binding", True, None, verbs=("create",)),
    # core/v1: what the informers of Volcano and kube-scheduler list, unmodelled
    _r("", "v1", "services", "service", "Service", True, None, ("status",), ("svc",), categories=("all",)),
    _r("", "v1", "persistentvolumes", "persistentvolume", "PersistentVolume", False, None, ("status",), ("pv",)),
    _r("", "v1", "persistentvolumeclaims", "persistentvolumeclaim", "PersistentVolumeClaim", True, None,
       ("status",), ("pvc",)),
    _r("", "v1", "replicationcontrollers", "replicationcontroller", "ReplicationController", True, None,
       ("status",), ("rc",), categories=("all",)),
    _r("", "v1", "resourcequotas", "resourcequota", "ResourceQuota", True, None, ("status",), ("quota",)),
    _r("", "v1", "configmaps", "configmap", "ConfigMap", True, None, (), ("cm",)),
    # apps/v1
    _r("apps", "v1", "replicasets", "replicaset", "ReplicaSet", True, None, ("status",), ("rs",),
       categories=("all",)),
    _r("apps", "v1", "statefulsets", "statefulset", "StatefulSet", True, None, ("status",), ("sts",),
       categories=("all",)),
    # policy/v1
    _r("policy", "v1", "poddisruptionbudgets", "poddisruptionbudget", "PodDisruptionBudget", True, None,
       ("status",), ("pdb",)),
    # storage.k8s.io
    _r("storage.k8s.io", "v1", "storageclasses", "storageclass", "StorageClass", False, None, (), ("sc",)),
    _r("storage.k8s.io", "v1", "volumeattachments", "volumeattachment", "VolumeAttachment", False, None,
       ("status",)),
    _r("storage.k8s.io", "v1", "csinodes", "csinode", "CSINode", False, None),
    _r("storage.k8s.io", "v1", "csidrivers", "csidriver", "CSIDriver", False, None),
    _r("storage.k8s.io", "v1", "csistoragecapacities", "csistoragecapacity", "CSIStorageCapacity", True, None),
    _r("storage.k8s.io", "v1beta1", "csistoragecapacities", "csistoragecapacity", "CSIStorageCapacity", True,
       None),
    # scheduling.k8s.io/v1
    _r("scheduling.k8s.io", "v1", "priorityclasses", "priorityclass", "PriorityClass", False, "PriorityClass",
       (), ("pc",)),
    # coordination.k8s.io/v1
    _r("coordination.k8s.io", "v1", "leases", "lease", "Lease", True, "Lease"),
    # resource.k8s.io (DRA; on at emulation version 1.34)
    _r("resource.k8s.io", "v1", "resourceclaims", "resourceclaim", "ResourceClaim", True, None, ("status",)),
    _r("resource.k8s.io", "v1", "resourceclaimtemplates", "resourceclaimtemplate", "ResourceClaimTemplate",
       True, None),
    _r("resource.k8s.io", "v1", "resourceslices", "resourceslice", "ResourceSlice", False, None),
    _r("resource.k8s.io", "v1", "deviceclasses", "deviceclass", "DeviceClass", False, None),
    _r("resource.k8s.io", "v1alpha3", "devicetaintrules", "devicetaintrule", "DeviceTaintRule", False, None),
    # Volcano
    _r("scheduling.volcano.sh", "v1beta1", "podgroups", "podgroup", "PodGroup", True, "PodGroup", ("status",),
       ("pg", "podgroup-v1beta1")),
    _r("scheduling.volcano.sh", "v1beta1", "queues", "queue", "Queue", False, "Queue", ("status",),
       ("q", "queue-v1beta1")),
    _r("topology.volcano.sh", "v1alpha1", "hypernodes", "hypernode", "HyperNode", False, "HyperNode",
       ("status",), ("hn",)),
    _r("nodeinfo.volcano.sh", "v1alpha1", "numatopologies", "numatopology", "Numatopology", False, None, (),
       ("numatopo",)),
    _r("shard.volcano.sh", "v1alpha1", "nodeshards", "nodeshard", "NodeShard", False, None, ("status",)),
)

# the kind of each subresource in discovery (Kubernetes' APIResource of "pods/binding" is a Binding)
SUBRESOURCE_KINDS = {
    "status": (None, ("get", "patch", "update")),
    "binding": ("Binding", ("create",)),
    "eviction": ("Eviction", ("create",)),
}

_BY_PATH: dict[tuple[str, str, str], Resource] = {(r.group, r.version, r.plural): r for r in RESOURCES}
_BY_STORE_KIND: dict[str, Resource] = {}
for _res in RESOURCES:
    if _res.store_kind is not None:
        _BY_STORE_KIND.setdefault(_res.store_kind, _res)


def lookup(group: str, version: str, plural: str) -> Resource | None:
    return _BY_PATH.get((group, version, plural))


def for_store_kind(kind: str) -> Resource:
    """The served resource of a store kind (KeyError naming it when the front does not serve it)."""
    try:
        return _BY_STORE_KIND[kind]
    except KeyError:
        raise KeyError(f"store kind {kind!r} is not served by the front; served: "
                       f"{', '.join(sorted(_BY_STORE_KIND))}") from None


def group_versions() -> dict[str, list[str]]:
    """group -> its versions, preferred first (core group "" included)."""
    out: dict[str, list[str]] = {}
    for r in RESOURCES:
        vs = out.setdefault(r.group, [])
        if r.version not in vs:
            vs.append(r.version)
    for g, vs in out.items():
        vs.sort(key=_version_priority)
    return out


def preferred_version(group: str) -> str | None:
    vs = group_versions().get(group)
    return vs[0] if vs else None


def resources_of(group: str, version: str) -> list[Resource]:
    return [r for r in RESOURCES if r.group == group and r.version == version]


def _version_priority(v: str) -> tuple:
    """Kubernetes' version order: GA before beta before alpha, higher numbers first."""
    m = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", v)
    if not m:
        return (3, 0, 0, v)
    major, stage, minor = int(m.group(1)), m.group(2), int(m.group(3) or 0)
    rank = {None: 0, "beta": 1, "alpha": 2}[stage]
    return (rank, -major, -minor, v)
