"""HyperNodes (``api/hyper_node_info.go``, v1.14.0): the cache's network-topology tree.

A HyperNode object (``topology.volcano.sh/v1alpha1``, cluster-scoped) has ``spec.tier`` (lower =
closer), ``spec.tierName`` and ``spec.members``: ``{type: Node|HyperNode, selector: {exactMatch:
{name} | regexMatch: {pattern} | labelMatch: <LabelSelector>}}``.

:class:`HyperNodesInfo` keeps, for every hypernode:

* its :class:`HyperNodeInfo` (tier, tierName, parent, children);
* ``set_by_tier``: tier -> hypernode names;
* ``real_nodes``: hypernode -> the node names under it. A Node member adds the nodes its selector
  matches (``GetMembers``: an exactMatch name as written, even if no such node exists; a regex must
  match the node name; an empty labelMatch matches nothing); a HyperNode member (exactMatch only —
  regex/label members of type HyperNode are ignored, as in Go) becomes a child and adds the child's
  real nodes.

Changes re-resolve what they touch: a HyperNode add/update/delete rebuilds the tree (parents,
children, real nodes); a node add/delete or label change re-matches that node against the Node
members and refreshes the real-node sets of the hypernodes above it. A build error (a hypernode
with two parents, a cycle) marks the info not ready (``ready`` False, ``error`` says why) — allocate
then skips jobs with a network topology, as Volcano does while ``HyperNodesReadyToSchedule`` is
false.

:class:`HyperNodeInfoMap` holds the tree walks the actions and plugins need (ancestors, LCA).
The real-node sets are frozensets so a snapshot can share them (copy-on-write).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

__all__ = ["HyperNodeInfo", "HyperNodeInfoMap", "HyperNodesInfo", "MEMBER_NODE", "MEMBER_HYPERNODE",
           "CLUSTER_TOP_HYPERNODE", "get_members", "label_selector_matches", "member_selector_kind",
           "hyper_node_object"]

MEMBER_NODE = "Node"
MEMBER_HYPERNODE = "HyperNode"
# framework.ClusterTopHyperNode: the virtual hypernode above every parentless one (session only)
CLUSTER_TOP_HYPERNODE = "<cluster-top-hypernode>"
JOB_ALLOCATED_HYPERNODE_ANNOTATION = "volcano.sh/job-allocated-hypernode"

_EMPTY: Mapping[str, Any] = {}


# -- selectors ---------------------------------------------------------------------------------------

def _expr_matches(expr: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key = expr.get("key")
    op = expr.get("operator")
    values = expr.get("values") or []
    present = key in labels
    if op == "In":
        return present and labels[key] in values
    if op == "NotIn":
        return not present or labels[key] not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    return False


def label_selector_matches(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """``metav1.LabelSelectorAsSelector(sel).Matches(labels)``; an empty selector matches nothing
    here (``GetMembers`` returns no member for it)."""
    ml = selector.get("matchLabels") or _EMPTY
    me = selector.get("matchExpressions") or []
    if not ml and not me:
        return False
    for k, v in ml.items():
        if labels.get(k) != v:
            return False
    return all(_expr_matches(e, labels) for e in me)


def member_selector_kind(selector: Mapping[str, Any]) -> str:
    for k in ("exactMatch", "regexMatch", "labelMatch"):
        if selector.get(k) is not None:
            return k
    return ""


def _compile(pattern: str) -> re.Pattern | None:
    try:
        return re.compile(pattern)
    except re.error:
        return None


def _node_matches(selector: Mapping[str, Any], name: str, labels: Mapping[str, str]) -> bool:
    """Whether one node is among ``GetMembers(selector, nodes)``."""
    ex = selector.get("exactMatch")
    if ex is not None and ex.get("name") and ex.get("name") == name:
        return True
    rx = selector.get("regexMatch")
    if rx is not None:
        reg = _compile(rx.get("pattern") or "")
        # Go: MatchString finds the pattern anywhere in the name
        if reg is not None and reg.search(name):
            return True
    lm = selector.get("labelMatch")
    if lm is not None and label_selector_matches(lm, labels):
        return True
    return False


def get_members(selector: Mapping[str, Any], nodes: Mapping[str, Mapping[str, str]]) -> set[str]:
    """``GetMembers``: the node names a Node member's selector selects among ``nodes`` (name ->
    labels). An exactMatch name is selected even when no such node exists."""
    out: set[str] = set()
    ex = selector.get("exactMatch")
    if ex is not None and ex.get("name"):
        out.add(ex["name"])
    if selector.get("regexMatch") is not None or selector.get("labelMatch") is not None:
        for name, labels in nodes.items():
            if _node_matches({k: v for k, v in selector.items() if k != "exactMatch"}, name, labels):
                out.add(name)
    return out


def hyper_node_object(name: str, tier: int, members: Iterable[Mapping[str, Any]] = (), tier_name: str = "",
                      labels: Mapping[str, str] | None = None) -> dict:
    """A HyperNode object in the API server's shape."""
    return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
            "metadata": {"name": name, "uid": name, "labels": dict(labels or {}), "annotations": {}},
            "spec": {"tier": int(tier), "tierName": tier_name, "members": [dict(m) for m in members]},
            "status": {}}


# -- HyperNodeInfo ------------------------------------------------------------------------------------

@dataclass
class HyperNodeInfo:
    """``api.HyperNodeInfo``. ``hyper_node`` is the object (None for a placeholder created for a
    HyperNode member that has no object, and for the session's cluster-top hypernode)."""
    name: str
    tier: int = 0
    tier_name: str = ""
    hyper_node: dict | None = None
    parent: str = ""
    children: set[str] = field(default_factory=set)
    is_deleting: bool = False

    @classmethod
    def from_object(cls, obj: Mapping[str, Any], *, parent: str = "") -> "HyperNodeInfo":
        md = obj.get("metadata") or _EMPTY
        spec = obj.get("spec") or _EMPTY
        return cls(name=md.get("name", ""), tier=int(spec.get("tier") or 0),
                   tier_name=spec.get("tierName") or "", hyper_node=dict(obj), parent=parent)

    @property
    def members(self) -> list[dict]:
        return list(((self.hyper_node or _EMPTY).get("spec") or _EMPTY).get("members") or [])

    def child_names(self) -> list[str]:
        """Exact-match HyperNode members, in member order (Go's ``getChildren``)."""
        out = []
        for m in self.members:
            if m.get("type") == MEMBER_HYPERNODE:
                ex = (m.get("selector") or _EMPTY).get("exactMatch")
                if ex is not None and ex.get("name"):
                    out.append(ex["name"])
        return out

    def clone(self) -> "HyperNodeInfo":
        return HyperNodeInfo(self.name, self.tier, self.tier_name, self.hyper_node, self.parent,
                             set(self.children), self.is_deleting)

    def __repr__(self) -> str:
        return f"HyperNode({self.name}, tier={self.tier}, parent={self.parent!r}, children={sorted(self.children)})"


class HyperNodeInfoMap(dict):
    """``api.HyperNodeInfoMap``: name -> HyperNodeInfo, with the tree walks."""

    def get_ancestors(self, name: str) -> list[str]:
        """``GetAncestors``: the hypernode itself, then its parent, … up to the root."""
        out = [name]
        cur = name
        while True:
            hn = self.get(cur)
            parent = hn.parent if hn is not None and hn.parent else self._parent_by_members(cur)
            if not parent or parent in out:
                return out
            out.append(parent)
            cur = parent

    def _parent_by_members(self, name: str) -> str:
        """``getParent``: a higher-tier hypernode listing ``name`` as an exact HyperNode member
        (used before the tree is built); the first by name, for determinism. Memoised: a map is
        built once (the cache's tree, a session's copy) and its members do not change after."""
        memo = self.__dict__.setdefault("_parent_memo", {})
        if name not in memo:
            memo[name] = self._scan_parent(name)
        return memo[name]

    def _scan_parent(self, name: str) -> str:
        tier = self[name].tier if name in self else -1
        for hn_name in sorted(self):
            hn = self[hn_name]
            if hn.tier <= tier:
                continue
            if name in hn.child_names():
                return hn_name
        return ""

    def get_lca_hyper_node(self, hyper_node: str, job_hyper_node: str) -> str:
        """``GetLCAHyperNode``: the lowest common ancestor ("" when there is none)."""
        if not hyper_node:
            return job_hyper_node
        if not job_hyper_node:
            return hyper_node
        mine = set(self.get_ancestors(hyper_node))
        for a in self.get_ancestors(job_hyper_node):
            if a in mine:
                return a
        return ""

    def clone(self) -> "HyperNodeInfoMap":
        return HyperNodeInfoMap({k: v.clone() for k, v in self.items()})

    def __setitem__(self, key: str, value: HyperNodeInfo) -> None:
        self.__dict__.pop("_parent_memo", None)
        super().__setitem__(key, value)


# -- HyperNodesInfo -----------------------------------------------------------------------------------

class HyperNodesInfo:
    """``api.HyperNodesInfo``: built from HyperNode objects and the cache's nodes.

    ``nodes`` given to the mutators is name -> labels of every node the cache holds.
    """

    def __init__(self) -> None:
        self.objects: dict[str, dict] = {}
        self.hyper_nodes = HyperNodeInfoMap()
        self.set_by_tier: dict[int, set[str]] = {}
        self.real_nodes: dict[str, frozenset[str]] = {}
        # nodes matched by each hypernode's own Node members (before adding its children's)
        self._direct: dict[str, set[str]] = {}
        self.ready = True
        self.error = ""
        self._cyclic = False
        # True when set_by_tier / real_nodes were injected verbatim (the Go unit-test harness)
        self.injected = False

    # ---- mutators -----------------------------------------------------------------------------
    def update_hyper_node(self, obj: Mapping[str, Any], nodes: Mapping[str, Mapping[str, str]]) -> None:
        name = (obj.get("metadata") or _EMPTY).get("name", "")
        self.objects[name] = dict(obj)
        self.rebuild(nodes, changed=name)

    def delete_hyper_node(self, name: str, nodes: Mapping[str, Mapping[str, str]]) -> None:
        self.objects.pop(name, None)
        self.rebuild(nodes, changed=name)

    def node_changed(self, name: str, labels: Mapping[str, str] | None,
                     nodes: Mapping[str, Mapping[str, str]]) -> None:
        """A node was added / changed its labels (``labels``) or was deleted (``labels`` None):
        re-match it against every Node member and refresh the real-node sets above."""
        if self.injected or not self.objects:
            return
        touched = []
        for hn_name, direct in self._direct.items():
            obj = self.objects.get(hn_name)
            if obj is None:
                continue
            want = False
            for m in ((obj.get("spec") or _EMPTY).get("members") or []):
                if m.get("type") != MEMBER_NODE:
                    continue
                sel = m.get("selector") or _EMPTY
                ex = sel.get("exactMatch")
                if ex is not None and ex.get("name") == name:
                    want = True   # exact members stay whether or not the node exists
                    break
                if labels is not None and _node_matches(
                        {k: v for k, v in sel.items() if k != "exactMatch"}, name, labels):
                    want = True
                    break
            if want != (name in direct):
                (direct.add if want else direct.discard)(name)
                touched.append(hn_name)
        if touched and not self._cyclic:
            self._refresh_real_nodes(touched)

    def rebuild(self, nodes: Mapping[str, Mapping[str, str]], changed: str | None = None) -> None:
        """Resolve the hypernodes from the objects: tiers, parent/children, real nodes. With
        ``changed``, only that hypernode's Node members are matched against the nodes again (the
        others' matches are kept: they change only through :meth:`node_changed`)."""
        if self.injected:
            changed = None
        self.injected = False
        hns = HyperNodeInfoMap()
        for name in sorted(self.objects):
            hns[name] = HyperNodeInfo.from_object(self.objects[name])
        errors: list[str] = []
        for name in sorted(self.objects):
            for child in hns[name].child_names():
                c = hns.get(child)
                if c is None:
                    # Go's addChild creates a placeholder for a member without an object
                    c = hns[child] = HyperNodeInfo(child)
                if c.parent and c.parent != name:
                    errors.append(f"HyperNode {child} already has a parent {c.parent}, and cannot set "
                                  f"another parent {name}")
                    continue
                c.parent = name
                hns[name].children.add(child)
        cyc = _find_cycle(hns)
        if cyc:
            errors.append(f"cyclic dependency detected: {' -> '.join(cyc)}")
        self.hyper_nodes = hns
        self.set_by_tier = {}
        for name in sorted(self.objects):
            self.set_by_tier.setdefault(hns[name].tier, set()).add(name)
        direct = {}
        for name in sorted(self.objects):
            if changed is not None and name != changed and name in self._direct:
                direct[name] = self._direct[name]
                continue
            got: set[str] = set()
            for m in hns[name].members:
                if m.get("type") == MEMBER_NODE:
                    got |= get_members(m.get("selector") or _EMPTY, nodes)
            direct[name] = got
        self._direct = direct
        self.real_nodes = {}
        self._cyclic = bool(cyc)
        if not cyc:   # a cycle leaves no real-node sets (nothing to schedule on until it is fixed)
            self._refresh_real_nodes(sorted(self.objects))
        self.error = "; ".join(errors)
        self.ready = not errors

    def _refresh_real_nodes(self, changed: Iterable[str]) -> None:
        """Recompute the real-node sets of ``changed`` and all their ancestors (children first)."""
        todo: set[str] = set()
        for n in changed:
            while n and n not in todo:     # the tree is built: follow the parent links
                todo.add(n)
                hn = self.hyper_nodes.get(n)
                n = hn.parent if hn is not None else ""
        memo: dict[str, frozenset[str]] = {}

        def resolve(name: str, depth: int = 0) -> frozenset[str]:
            if name in memo:
                return memo[name]
            if name not in todo and name in self.real_nodes:
                return self.real_nodes[name]
            if depth > len(self.hyper_nodes):
                return frozenset()
            got = set(self._direct.get(name, ()))
            hn = self.hyper_nodes.get(name)
            if hn is not None:
                for c in sorted(hn.children):
                    got |= resolve(c, depth + 1)
            memo[name] = frozenset(got)
            return memo[name]

        for name in sorted(todo):
            if name in self.objects:
                self.real_nodes[name] = resolve(name)

    def inject(self, hyper_nodes: Mapping[str, HyperNodeInfo], set_by_tier: Mapping[int, Iterable[str]],
               real_nodes: Mapping[str, Iterable[str]]) -> None:
        """``NewHyperNodesInfoWithCache``: take the tier sets and real-node sets verbatim (the Go
        unit-test harness injects them; they may disagree with the objects)."""
        self.injected = True
        self.hyper_nodes = HyperNodeInfoMap({k: v.clone() for k, v in hyper_nodes.items()})
        self.objects = {k: v.hyper_node for k, v in hyper_nodes.items() if v.hyper_node is not None}
        self.set_by_tier = {int(t): set(ns) for t, ns in set_by_tier.items()}
        self.real_nodes = {k: frozenset(v) for k, v in real_nodes.items()}
        self._direct = {}
        self.ready = True
        self.error = ""
        self._cyclic = False

    # ---- views --------------------------------------------------------------------------------
    def tier_name_map(self) -> dict[str, int]:
        """``HyperNodeTierNameMap``: tierName -> tier (the last one by name wins on a clash)."""
        out: dict[str, int] = {}
        for name in sorted(self.hyper_nodes):
            hn = self.hyper_nodes[name]
            if hn.tier_name:
                out[hn.tier_name] = hn.tier
        return out

    def snapshot(self) -> tuple[HyperNodeInfoMap, dict[int, set[str]], dict[str, frozenset[str]], dict[str, int], bool]:
        """Copies for a session: (hypernodes, set by tier, real nodes (shared frozensets),
        tier-name map, ready)."""
        return (self.hyper_nodes.clone(), {t: set(s) for t, s in self.set_by_tier.items()},
                dict(self.real_nodes), self.tier_name_map(), self.ready)

    def find_hyper_node_for_node(self, node: str) -> str:
        """The lowest-tier hypernode holding ``node`` ("" if none)."""
        if not self.set_by_tier:
            return ""
        for name in sorted(self.set_by_tier[min(self.set_by_tier)]):
            if node in self.real_nodes.get(name, ()):
                return name
        return ""


def _find_cycle(hns: HyperNodeInfoMap) -> list[str]:
    """A cycle through HyperNode members, as a path, or []."""
    state: dict[str, int] = {}
    for start in sorted(hns):
        if state.get(start):
            continue
        stack = [(start, iter(sorted(hns[start].child_names())))]
        path = [start]
        state[start] = 1
        while stack:
            name, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                state[name] = 2
                stack.pop()
                path.pop()
                continue
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt in hns and not state.get(nxt):
                state[nxt] = 1
                stack.append((nxt, iter(sorted(hns[nxt].child_names()))))
                path.append(nxt)
    return []
