"""QueueInfo (``api/queue_info.go``)."""
from __future__ import annotations

from .resource import Resource

__all__ = ["QueueInfo", "QueueState", "new_queue_info"]

_EMPTY: dict = {}
HIERARCHY_ANNOTATION = "volcano.sh/hierarchy"
HIERARCHY_WEIGHT_ANNOTATION = "volcano.sh/hierarchy-weights"


class QueueState:
    OPEN = "Open"
    CLOSED = "Closed"
    CLOSING = "Closing"
    UNKNOWN = "Unknown"


class QueueInfo:
    """A Queue dict (docs/object-shapes.md) plus the fields Volcano caches. ``uid`` is the name."""

    __slots__ = ("uid", "name", "weight", "weights", "hierarchy", "queue")

    def __init__(self, queue: dict):
        md = queue.get("metadata") or _EMPTY
        ann = md.get("annotations") or _EMPTY
        self.uid = md.get("name", "")
        self.name = self.uid
        self.weight = int((queue.get("spec") or _EMPTY).get("weight") or 0)
        self.hierarchy = ann.get(HIERARCHY_ANNOTATION, "")
        self.weights = ann.get(HIERARCHY_WEIGHT_ANNOTATION, "")
        self.queue = queue

    def clone(self) -> "QueueInfo":
        q = QueueInfo.__new__(QueueInfo)
        q.uid, q.name, q.weight = self.uid, self.name, self.weight
        q.hierarchy, q.weights, q.queue = self.hierarchy, self.weights, self.queue  # queue shared, as in Go
        return q

    @property
    def spec(self) -> dict:
        return self.queue.get("spec") or {}

    def reclaimable(self) -> bool:
        """spec.reclaimable, default true when unset."""
        r = self.spec.get("reclaimable")
        return True if r is None else bool(r)

    @property
    def state(self) -> str:
        """status.state; a queue without one counts as Open."""
        return (self.queue.get("status") or _EMPTY).get("state") or QueueState.OPEN

    @property
    def priority(self) -> int:
        return int(self.spec.get("priority") or 0)

    @property
    def parent(self) -> str:
        return self.spec.get("parent") or ""

    # Resources parsed from the spec (None when the field is absent/null), for capacity/proportion.
    def capability(self) -> Resource | None:
        c = self.spec.get("capability")
        return Resource.from_quantities(c) if c else None

    def deserved(self) -> Resource | None:
        d = self.spec.get("deserved")
        return Resource.from_quantities(d) if d else None

    def guarantee(self) -> Resource | None:
        g = self.spec.get("guarantee")
        if not g:
            return None
        r = g.get("resource") if isinstance(g, dict) else None
        return Resource.from_quantities(r) if r else None

    def __repr__(self) -> str:
        return f"Queue({self.name}, weight {self.weight}, state {self.state})"


def new_queue_info(queue: dict) -> QueueInfo:
    return QueueInfo(queue)
