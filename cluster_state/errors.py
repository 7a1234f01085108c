"""Typed API errors, shaped like Kubernetes ``Status`` failures: an HTTP-like ``code``, a ``reason``,
and the object they are about (kind / namespace / name) plus the offending ``field`` when known.

``BadRequest`` and ``Invalid`` are also :class:`apimachinery.errors.BadInput` (= ``ha.errors.BadInput``), so the CLI maps bad objects that
reach the API server from user files to exit code 2.
"""
from __future__ import annotations

from apimachinery.errors import BadInput

__all__ = ["ApiError", "BadRequest", "Invalid", "NotFound", "AlreadyExists", "Conflict", "Gone",
           "TooLargeResourceVersion", "CorruptObject", "ServerError"]


class ApiError(Exception):
    code: int = 500
    reason: str = "InternalError"

    def __init__(self, message: str, *, kind: str | None = None, namespace: str | None = None,
                 name: str | None = None, field: str | None = None, **details):
        self.message = message
        self.kind, self.namespace, self.name, self.field = kind, namespace, name, field
        self.details = details
        super().__init__(self._render())

    @property
    def ref(self) -> str:
        """``Kind ns/name`` (or ``Kind name`` for cluster-scoped objects), as far as it is known."""
        parts = [self.kind or "<unknown kind>"]
        if self.name is not None or self.namespace is not None:
            parts.append(f"{self.namespace}/{self.name}" if self.namespace else f"{self.name}")
        return " ".join(parts)

    def _render(self) -> str:
        where = f" field {self.field}:" if self.field else ""
        return f"{self.code} {self.reason}: {self.ref}:{where} {self.message}"

    def to_status(self) -> dict:
        """A Kubernetes-``Status``-like map (what an ERROR watch event would carry)."""
        return {"kind": "Status", "status": "Failure", "code": self.code, "reason": self.reason,
                "message": str(self), "details": {"kind": self.kind, "namespace": self.namespace,
                                                  "name": self.name, "field": self.field}}


class BadRequest(ApiError, BadInput):
    code, reason = 400, "BadRequest"


class Invalid(BadRequest):
    """The object is well-formed data but violates the kind's schema (422 in Kubernetes)."""
    code, reason = 422, "Invalid"


class NotFound(ApiError):
    code, reason = 404, "NotFound"


class AlreadyExists(ApiError):
    code, reason = 409, "AlreadyExists"


class Conflict(ApiError):
    """Stale resourceVersion, or a subresource precondition (already bound, being deleted)."""
    code, reason = 409, "Conflict"


class Gone(ApiError):
    """The requested resourceVersion is older than the kept history: relist (reason as client-go
    expects in ``isExpiredError``)."""
    code, reason = 410, "Expired"


class TooLargeResourceVersion(ApiError):
    """A read asked for a resourceVersion the server has not reached yet (Kubernetes:
    ``NewTooLargeResourceVersionError``, a 504 Timeout with ``retryAfterSeconds``). Retry later."""
    code, reason = 504, "Timeout"


class CorruptObject(ApiError):
    """Bytes from Redis that do not decode to an object (msgpack map with metadata)."""
    code, reason = 500, "CorruptObject"


class ServerError(ApiError):
    code, reason = 500, "InternalError"
