"""Where the scheduler instances run on a Ray cluster: one per node while there are enough nodes,
Ray's ``SPREAD`` otherwise; a restarted instance goes back to its own node, or to the alive node
with the fewest instances when its own is gone.

Strategy: the driver chooses a node per instance and pins it with Ray's
``NodeAffinitySchedulingStrategy`` (soft: a node that vanished between the choice and the actor's
creation does not leave the instance pending; the instance reports where it really runs, which is
what the history records). Not a ``STRICT_SPREAD`` placement group, because a group reserves its
bundles' resources for the whole run (the instances hold none while running), is all-or-nothing
(one infeasible bundle keeps every instance pending), and re-creates a dead node's bundle only
where the spread still holds — with fewer nodes left a restarted instance would wait forever,
where the driver can simply choose again.

Node preference: worker nodes before the head and the driver's node (a ``node-kill`` refuses
those, so instances off them can all be hit), then by address and node id; a node must offer at
least one CPU (an actor needs one to be scheduled, none while it runs). Pure planning over
:class:`RayNode` records; :func:`ray_nodes` and :func:`strategy` are the two calls into Ray.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

__all__ = ["RayNode", "ray_nodes", "driver_node_id", "plan", "replacement", "strategy", "HEAD_RESOURCE"]

# the resource Ray gives the head node only
HEAD_RESOURCE = "node:__internal_head__"


@dataclass(frozen=True)
class RayNode:
    node_id: str
    host: str
    address: str          # the raylet's (node manager's) address and port
    port: int
    alive: bool
    head: bool
    cpu: float

    @classmethod
    def from_ray(cls, n: Mapping[str, Any]) -> "RayNode":
        res = n.get("Resources") or {}
        return cls(node_id=str(n.get("NodeID")), host=str(n.get("NodeManagerHostname") or ""),
                   address=str(n.get("NodeManagerAddress") or ""), port=int(n.get("NodeManagerPort") or 0),
                   alive=bool(n.get("Alive")), head=HEAD_RESOURCE in res, cpu=float(res.get("CPU") or 0.0))


def ray_nodes() -> list[RayNode]:
    """The cluster's nodes as Ray's GCS lists them (dead ones included, ``alive`` False)."""
    import ray
    return [RayNode.from_ray(n) for n in ray.nodes()]


def driver_node_id() -> str | None:
    """The node the driver runs on (through the Ray Client: the head's)."""
    import ray
    try:
        return ray.get_runtime_context().get_node_id()
    except Exception:  # noqa: BLE001 — an older Ray or no node: nothing to protect
        return None


def _eligible(nodes: Iterable[RayNode], driver: str | None, exclude: Iterable[str] = ()) -> list[RayNode]:
    gone = set(exclude)
    ok = [n for n in nodes if n.alive and n.cpu >= 1 and n.node_id not in gone]
    return sorted(ok, key=lambda n: (n.head or n.node_id == driver, n.address, n.port, n.node_id))


def plan(nodes: Iterable[RayNode], instances: list[str], driver: str | None = None,
         exclude: Iterable[str] = ()) -> dict[str, str | None]:
    """instance -> the node id it is pinned to, or None for ``SPREAD`` (fewer eligible nodes than
    instances). ``exclude``: nodes known dead that Ray may still list as alive."""
    el = _eligible(nodes, driver, exclude)
    if len(el) < len(instances):
        return {name: None for name in instances}
    return {name: n.node_id for name, n in zip(instances, el)}


def replacement(nodes: Iterable[RayNode], own: str | None, occupied: Mapping[str, int],
                driver: str | None = None, exclude: Iterable[str] = ()) -> str | None:
    """The node a restarted instance goes to: its own while alive, else the eligible node with the
    fewest live instances (``occupied``: node id -> count); None (``SPREAD``) when none is left."""
    el = _eligible(nodes, driver, exclude)
    if own is not None and any(n.node_id == own for n in el):
        return own
    if not el:
        return None
    rank = {n.node_id: i for i, n in enumerate(el)}
    return min(el, key=lambda n: (occupied.get(n.node_id, 0), rank[n.node_id])).node_id


def strategy(node_id: str | None) -> Any:
    """Ray's scheduling strategy for a planned node (None: ``SPREAD``)."""
    if node_id is None:
        return "SPREAD"
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
    return NodeAffinitySchedulingStrategy(node_id=node_id, soft=True)
