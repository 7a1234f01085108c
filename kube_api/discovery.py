"""Discovery documents: ``/version``, ``/api``, ``/api/v1``, ``/apis``, ``/apis/<g>``,
``/apis/<g>/<v>``, built once from the resource registry (kube_api.resources).

Aggregated discovery (``Accept: ...;as=APIGroupDiscoveryList``) is answered with the legacy
documents as ``application/json``: clients (kubectl, client-go) see no aggregated type and fall
back to legacy discovery. ``/version``'s major/minor are plain numbers: vc-scheduler feeds
``"<major>.<minor>"`` to its feature gates' emulation version.
"""
from __future__ import annotations

import functools
import platform

from kube_api.resources import SUBRESOURCE_KINDS, Resource, group_versions, resources_of

__all__ = ["version_info", "core_versions", "api_group_list", "api_group", "api_resource_list",
           "DEFAULT_VERSION"]

DEFAULT_VERSION = ("1", "34")


def version_info(major: str = DEFAULT_VERSION[0], minor: str = DEFAULT_VERSION[1]) -> dict:
    return {"major": str(major), "minor": str(minor), "emulationMajor": str(major), "emulationMinor": str(minor),
            "minCompatibilityMajor": str(major), "minCompatibilityMinor": str(int(minor) - 1 if str(minor).isdigit() else minor),
            "gitVersion": f"v{major}.{minor}.0-ha-testbed", "gitCommit": "0000000000000000000000000000000000000000",
            "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z", "goVersion": "python",
            "compiler": "cpython", "platform": f"{platform.system().lower()}/{platform.machine()}"}


def core_versions(server_address: str = "127.0.0.1:0") -> dict:
    return {"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]}


def _group_doc(group: str, versions: list[str]) -> dict:
    vs = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"name": group, "versions": vs, "preferredVersion": vs[0]}


@functools.lru_cache(maxsize=None)
def _groups() -> tuple[tuple[str, tuple[str, ...]], ...]:
    return tuple((g, tuple(vs)) for g, vs in group_versions().items() if g)


def api_group_list() -> dict:
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [_group_doc(g, list(vs)) for g, vs in _groups()]}


def api_group(group: str) -> dict | None:
    for g, vs in _groups():
        if g == group:
            return {"kind": "APIGroup", "apiVersion": "v1", **_group_doc(g, list(vs))}
    return None


def _entry(r: Resource) -> dict:
    out = {"name": r.plural, "singularName": r.singular, "namespaced": r.namespaced, "kind": r.kind,
           "verbs": list(r.verbs)}
    if r.short_names:
        out["shortNames"] = list(r.short_names)
    if r.categories:
        out["categories"] = list(r.categories)
    return out


def _sub_entry(r: Resource, sub: str) -> dict:
    kind, verbs = SUBRESOURCE_KINDS.get(sub, (None, ("get", "patch", "update")))
    out = {"name": f"{r.plural}/{sub}", "singularName": "", "namespaced": r.namespaced,
           "kind": kind or r.kind, "verbs": list(verbs)}
    if sub == "eviction":
        out["group"], out["version"] = "policy", "v1"
    return out


def api_resource_list(group: str, version: str) -> dict | None:
    rs = resources_of(group, version)
    if not rs:
        return None
    items = []
    for r in rs:
        items.append(_entry(r))
        items.extend(_sub_entry(r, s) for s in r.subresources)
    gv = f"{group}/{version}" if group else version
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": items}
