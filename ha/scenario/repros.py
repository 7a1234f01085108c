"""The multi-session bug reproductions (tests/data/bug-repros.json, docs/volcano-semantics.md §13).

Each repro has a cluster (``initial``), a configuration (``actions`` + ``tiers`` + priority
classes) and ``steps``: sessions with expected outcomes, and events between them in prose. This
module loads the structural part into a ``ScenarioCluster``; the events are coded per repro in the
tests (tests/scheduler/test_bug_repros.py) because the file states them in prose.

Which ``expect_*`` block of a step applies to which profile:

* ``v1.14``: ``expect_both``, ``expect_baseline``, ``expect_after_close_baseline``,
  ``expect_with_v1.14.0_guard``;
* ``pr5045`` (the PR as coded): ``expect_both``, ``expect_fix_as_coded_2053c7114_by_reading``,
  ``expect_fix_5045``, ``expect_fix_5045_by_reading``, ``expect_fix``, ``expect_after_close_fix``,
  ``expect_with_fix_guard``;
* ``pr5045-fixed`` (the intended fix): ``expect_both``, ``expect_fix_intended``, ``expect_fix``,
  ``expect_after_close_fix``, ``expect_with_fix_guard``, and the PR's own blocks where the repro
  does not involve self-competition (``expect_fix_5045``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ha.scenario.loader import (ClusterObjects, PluginSpec, build_objects, load_json, new_context,
                                parse_tiers)
from ha.scenario.runner import ScenarioCluster, SessionOutcome, make_conf, resolve_profile

__all__ = ["Repro", "load_repros", "EXPECT_KEYS", "expectation"]

EXPECT_KEYS: dict[str, tuple[str, ...]] = {
    "v1.14": ("expect_both", "expect_baseline", "expect_after_close_baseline",
              "expect_with_v1.14.0_guard"),
    "pr5045": ("expect_both", "expect_fix_as_coded_2053c7114_by_reading", "expect_fix_5045",
               "expect_fix_5045_by_reading", "expect_fix", "expect_after_close_fix",
               "expect_with_fix_guard"),
    "pr5045-fixed": ("expect_both", "expect_fix_intended", "expect_fix", "expect_after_close_fix",
                     "expect_with_fix_guard", "expect_fix_5045"),
    "nomination-only": ("expect_both", "expect_alt_5663"),
}


def expectation(step: dict, profile_name: str, *, keys: tuple[str, ...] | None = None) -> dict:
    """The merged ``expect_*`` blocks of a step that apply to a profile (first one wins per key)."""
    out: dict = {}
    for k in keys or EXPECT_KEYS[profile_name]:
        block = step.get(k)
        if isinstance(block, dict):
            for kk, v in block.items():
                out.setdefault(kk, v)
    return out


@dataclass
class Repro:
    id: str
    bug: str
    objects: ClusterObjects
    actions: list[str]
    tiers: list[list[PluginSpec]]
    steps: list[dict]
    source: str
    raw: dict = field(default_factory=dict)

    @property
    def short(self) -> str:
        return self.id.split("-", 1)[0]

    def sessions(self) -> list[dict]:
        return [s for s in self.steps if "session" in s]

    def session(self, n: int) -> dict:
        for s in self.steps:
            if s.get("session") == n:
                return s
        raise KeyError(f"{self.id}: no session {n}")

    def conf(self):
        actions = [a for a in self.actions if not a.startswith("(")]
        return make_conf(actions, self.tiers, {}, source=f"{self.source}: {self.short}")

    def cluster(self, profile_name: str, **overrides: bool) -> ScenarioCluster:
        sw = resolve_profile(profile_name)
        if overrides:
            sw = sw.with_(**overrides)
        return ScenarioCluster(self.objects, sw, source=f"{self.source}: {self.short}")

    def run_session(self, cluster: ScenarioCluster) -> SessionOutcome:
        """One session with the repro's actions and tiers, then the informer round trip."""
        out = cluster.run_session(self.conf(), update_all_before_close=False)
        cluster.sync()
        return out


def load_repros(path: str | Path) -> dict[str, Repro]:
    """All repros of the file, keyed by their short id (``BR1`` ... ``BR7``)."""
    p = str(path)
    data = load_json(path)
    ctx = new_context(p)
    if not isinstance(data, list):
        raise ctx.err("", "the bug-repro file holds a list of repros")
    out: dict[str, Repro] = {}
    for i, r in enumerate(data):
        where = f"[{i}]"
        if not isinstance(r, dict) or "id" not in r:
            raise ctx.err(where, "a repro is an object with an 'id'")
        objects = build_objects(ctx, r.get("initial") or {}, f"{where}.initial",
                                priority_classes=r.get("priority_classes") or [])
        actions = [a for a in r.get("actions") or [] if isinstance(a, str)]
        tiers = parse_tiers(ctx, r.get("tiers") or [], f"{where}.tiers")
        rep = Repro(id=r["id"], bug=r.get("bug", ""), objects=objects, actions=actions, tiers=tiers,
                    steps=list(r.get("steps") or []), source=p, raw=r)
        out[rep.short] = rep
    return out


def pod_template(cluster_objects: ClusterObjects, key: str) -> dict[str, Any]:
    for p in cluster_objects.pods:
        if f"{p['metadata']['namespace']}/{p['metadata']['name']}" == key:
            return p
    raise KeyError(key)
