"""ClusterInfo: the snapshot a session works on (``api/cluster_info.go``)."""
from __future__ import annotations

from dataclasses import dataclass, field

from .job_info import JobInfo
from .node_info import NodeInfo
from .queue_info import QueueInfo
from .hypernode_info import HyperNodeInfoMap

__all__ = ["ClusterInfo"]


@dataclass
class ClusterInfo:
    jobs: dict[str, JobInfo] = field(default_factory=dict)
    nodes: dict[str, NodeInfo] = field(default_factory=dict)
    queues: dict[str, QueueInfo] = field(default_factory=dict)
    namespace_info: dict[str, dict] = field(default_factory=dict)
    revocable_nodes: dict[str, NodeInfo] = field(default_factory=dict)
    node_list: list[str] = field(default_factory=list)
    # priority class name -> value, for plugins that need it (not a Volcano field)
    priority_classes: dict[str, int] = field(default_factory=dict)
    # HyperNodes (api/hyper_node_info.go): infos, tier -> names, hypernode -> node names (shared
    # frozensets), tierName -> tier, and whether the tree built without error
    hyper_nodes: HyperNodeInfoMap = field(default_factory=HyperNodeInfoMap)
    hyper_nodes_set_by_tier: dict[int, set[str]] = field(default_factory=dict)
    real_nodes_set: dict[str, frozenset[str]] = field(default_factory=dict)
    hyper_node_tier_name_map: dict[str, int] = field(default_factory=dict)
    hyper_nodes_ready_to_schedule: bool = True
    # (not a Volcano field) the cache lent these node clones: give them back with this token once
    # the session is done (SchedulerCache.give_back); None: nothing to give back
    lent_token: tuple[int | None, int | None] | None = None   # (nodes, jobs): SchedulerCache.give_back

    def __str__(self) -> str:
        lines = ["Cache:"]
        for n in self.nodes.values():
            lines.append(f"  {n.name}: idle({n.idle}) used({n.used}) allocatable({n.allocatable}) "
                         f"pods({len(n.tasks)})")
        for j in self.jobs.values():
            lines.append(f"  Job({j.uid}) name({j.name}) minAvailable({j.min_available})")
            for t in j.tasks.values():
                lines.append(f"    {t!r}")
        return "\n".join(lines)
