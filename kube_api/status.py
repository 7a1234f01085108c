"""Kubernetes ``Status`` errors: what the front answers when a request fails.

client-go branches on ``reason`` (``IsNotFound``, ``IsAlreadyExists``, ``IsConflict``,
``IsResourceExpired``...), so every failure is a ``Status`` with the right code and reason:

* :class:`KubeError` -- raise it anywhere in a handler; the server turns it into the response;
* :func:`from_store_error` -- ``cluster_state.errors`` (and a lost Redis connection) -> KubeError,
  with Kubernetes' messages for NotFound / AlreadyExists / Conflict;
* :func:`status_body` / :func:`success_status` / :func:`error_response` -- the JSON.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import orjson
from aiohttp import web

if TYPE_CHECKING:
    from kube_api.resources import Resource

__all__ = ["KubeError", "status_body", "from_store_error", "success_status", "error_response",
           "bad_request", "not_found", "method_not_allowed", "REASONS"]

# HTTP code -> Kubernetes' default reason (apimachinery's reasonForError / NewGenericServerResponse)
REASONS = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound",
           405: "MethodNotAllowed", 406: "NotAcceptable", 409: "Conflict", 410: "Expired",
           413: "RequestEntityTooLarge", 415: "UnsupportedMediaType", 422: "Invalid",
           429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable", 504: "Timeout"}


class KubeError(Exception):
    """A failed request, answered as a ``Status``. ``details``: {"name", "group", "kind",
    "causes": [{"field", "message", "reason"}], "retryAfterSeconds"}."""

    def __init__(self, code: int, reason: str, message: str, *, details: dict | None = None):
        super().__init__(f"{code} {reason}: {message}")
        self.code = int(code)
        self.reason = reason
        self.message = message
        self.details = details

    def body(self) -> dict:
        return status_body(self.code, self.reason, self.message, self.details)


def status_body(code: int, reason: str, message: str, details: dict | None = None) -> dict:
    out = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": message, "reason": reason}
    if details:
        out["details"] = {k: v for k, v in details.items() if v is not None}
    out["code"] = int(code)
    return out


def success_status(details: dict | None = None, code: int = 200) -> dict:
    out = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}
    if details:
        out["details"] = {k: v for k, v in details.items() if v is not None}
    out["code"] = int(code)
    return out


def error_response(err: KubeError) -> web.Response:
    headers = None
    if err.details and err.details.get("retryAfterSeconds"):
        headers = {"Retry-After": str(int(err.details["retryAfterSeconds"]))}
    return web.Response(status=err.code, body=orjson.dumps(err.body()), content_type="application/json",
                        headers=headers)


def bad_request(message: str, *, field: str | None = None) -> KubeError:
    details = {"causes": [{"reason": "FieldValueInvalid", "message": message, "field": field}]} if field else None
    return KubeError(400, "BadRequest", message, details=details)


def not_found(message: str) -> KubeError:
    return KubeError(404, "NotFound", message)


def method_not_allowed(message: str) -> KubeError:
    return KubeError(405, "MethodNotAllowed", message)


def _details(resource: "Resource | None", name: str | None, **extra) -> dict:
    d: dict = {}
    if name:
        d["name"] = name
    if resource is not None:
        if resource.group:
            d["group"] = resource.group
        d["kind"] = resource.plural
    d.update({k: v for k, v in extra.items() if v is not None})
    return d


def from_store_error(err: Exception, resource: "Resource | None", name: str | None) -> KubeError:
    """A ``cluster_state.errors.ApiError`` (or a Redis connection failure) as a KubeError."""
    from cluster_state import errors as E
    if isinstance(err, KubeError):
        return err
    qual = resource.qualified if resource is not None else "objects"
    name = name or getattr(err, "name", None)
    if isinstance(err, E.NotFound):
        msg = f'{qual} "{name}" not found' if name else err.message
        return KubeError(404, "NotFound", msg, details=_details(resource, name))
    if isinstance(err, E.AlreadyExists):
        msg = f'{qual} "{name}" already exists' if name else err.message
        return KubeError(409, "AlreadyExists", msg, details=_details(resource, name))
    if isinstance(err, E.Conflict):
        msg = f'Operation cannot be fulfilled on {qual} "{name}": {err.message}' if name else err.message
        causes = [{"reason": "FieldValueInvalid", "message": err.message, "field": err.field}] if err.field else None
        return KubeError(409, "Conflict", msg, details=_details(resource, name, causes=causes))
    if isinstance(err, E.Invalid):
        kind = resource.kind if resource is not None else (err.kind or "object")
        where = f"{err.field}: " if err.field else ""
        msg = f'{kind} "{name}" is invalid: {where}{err.message}' if name else f"{kind} is invalid: {where}{err.message}"
        causes = [{"reason": "FieldValueInvalid", "message": err.message, "field": err.field}]
        d = _details(resource, name, causes=causes)
        if resource is not None:
            d["kind"] = resource.kind   # StatusReasonInvalid names the kind, not the resource
        return KubeError(422, "Invalid", msg, details=d)
    if isinstance(err, E.BadRequest):
        causes = [{"reason": "FieldValueInvalid", "message": err.message, "field": err.field}] if err.field else None
        return KubeError(400, "BadRequest", err.message, details=_details(resource, name, causes=causes))
    if isinstance(err, E.Gone):
        return KubeError(410, "Expired", err.message, details=_details(resource, name))
    if isinstance(err, E.TooLargeResourceVersion):
        d = _details(resource, name, retryAfterSeconds=int(err.details.get("retry_after_seconds", 1) or 1),
                     causes=[{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}])
        return KubeError(504, "Timeout", err.message, details=d)
    if isinstance(err, E.ApiError):
        return KubeError(err.code if 400 <= err.code < 600 else 500, REASONS.get(err.code, "InternalError"),
                         err.message, details=_details(resource, name))
    from redis.exceptions import ConnectionError as RedisConnectionError, TimeoutError as RedisTimeoutError
    if isinstance(err, (RedisConnectionError, RedisTimeoutError, ConnectionError, OSError)):
        return KubeError(503, "ServiceUnavailable", f"the API server's store is unreachable: {err}",
                         details=_details(resource, name, retryAfterSeconds=1))
    return KubeError(500, "InternalError", f"{type(err).__name__}: {err}", details=_details(resource, name))
