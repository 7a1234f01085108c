"""ClusterInfo: the snapshot a session works on (``api/cluster_info.go``)."""
from __future__ import annotations

from dataclasses import dataclass, field

from .job_info import JobInfo
from .node_info import NodeInfo
from .queue_info import QueueInfo

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
