"""``RequestContext``: one parsed request of the REST API (which endpoint, resource, namespace,
name, subresource), its query options and its body.

``body()`` reads JSON, or a Kubernetes protobuf body (``application/vnd.kubernetes.protobuf``)
through ``kube_api.protobuf.decode`` (imported when first needed: 415 naming the reason when it
is missing or cannot decode here); malformed bodies are 400, other content types 415. Patch
content types (``application/merge-patch+json``, ``application/strategic-merge-patch+json``,
``application/json-patch+json``, ``application/apply-patch+yaml``) are read as JSON documents.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiohttp import web

from kube_api.codec import loads
from kube_api.resources import Resource
from kube_api.status import KubeError

if TYPE_CHECKING:
    from kube_api.endpoint import Endpoint

__all__ = ["RequestContext", "PROTOBUF", "JSON_TYPES", "wants_table", "media_type"]

PROTOBUF = "application/vnd.kubernetes.protobuf"
JSON_TYPES = ("application/json", "application/merge-patch+json", "application/strategic-merge-patch+json",
              "application/json-patch+json", "application/apply-patch+yaml", "")
MAX_BODY = 64 * 1024 * 1024


def media_type(header: str | None) -> str:
    return (header or "").split(";", 1)[0].strip().lower()


def wants_table(accept: str | None) -> bool:
    """Accept asks for a ``meta.k8s.io/v1`` Table (kubectl get: ``application/json;as=Table;v=v1;g=meta.k8s.io``)."""
    if not accept or "as=Table" not in accept:
        return False
    for part in accept.split(","):
        params = {}
        for p in part.split(";")[1:]:
            k, _, v = p.strip().partition("=")
            params[k.strip()] = v.strip()
        if params.get("as") == "Table" and params.get("g") == "meta.k8s.io" and params.get("v") in ("v1", "v1beta1"):
            mt = media_type(part)
            if mt in ("application/json", "*/*", "application/*", ""):
                return True
    return False


@dataclass
class RequestContext:
    request: web.Request
    endpoint: "Endpoint"
    resource: Resource
    namespace: str | None
    name: str | None
    subresource: str | None
    log_extra: dict = field(default_factory=dict)   # extra fields for this request's log record
    _body: Any = field(default=None, repr=False)
    _body_read: bool = field(default=False, repr=False)

    @property
    def method(self) -> str:
        return self.request.method

    @property
    def query(self):
        return self.request.query

    @property
    def verb(self) -> str:
        """The Kubernetes verb: get / list / watch / create / update / patch / delete / deletecollection."""
        m = self.request.method
        if m in ("GET", "HEAD"):
            if self.name is None:
                return "watch" if _truthy(self.request.query.get("watch")) else "list"
            return "get"
        if m == "POST":
            return "create"
        if m == "PUT":
            return "update"
        if m == "PATCH":
            return "patch"
        if m == "DELETE":
            return "delete" if self.name is not None else "deletecollection"
        return m.lower()

    @property
    def wants_table(self) -> bool:
        return wants_table(self.request.headers.get("Accept"))

    @property
    def include_object(self) -> str | None:
        """The ``includeObject`` query parameter of a Table request (None: the default, Metadata)."""
        return self.request.query.get("includeObject")

    @property
    def content_type(self) -> str:
        return media_type(self.request.headers.get("Content-Type"))

    async def raw_body(self) -> bytes:
        if self.request.content_length is not None and self.request.content_length > MAX_BODY:
            raise KubeError(413, "RequestEntityTooLarge", f"request body of {self.request.content_length} bytes "
                            f"exceeds the limit of {MAX_BODY}")
        return await self.request.read()

    async def body(self) -> dict:
        """The request body as a dict (JSON or protobuf); {} for an empty body (e.g. a DELETE)."""
        if self._body_read:
            return self._body
        raw = await self.raw_body()
        ct = self.content_type
        if not raw.strip():
            out: Any = {}
        elif ct == PROTOBUF:
            out = await _decode_protobuf(raw)
        elif ct in JSON_TYPES or ct.endswith("+json") or ct == "application/yaml":
            if ct in ("application/apply-patch+yaml", "application/yaml") and raw.lstrip()[:1] not in (b"{", b"["):
                out = _yaml(raw)
            else:
                try:
                    out = loads(raw)
                except Exception as e:   # orjson.JSONDecodeError
                    raise KubeError(400, "BadRequest", f"the request body is not valid JSON: {e}") from None
        else:
            raise KubeError(415, "UnsupportedMediaType",
                            f'the body of type "{ct}" is unsupported; send application/json or {PROTOBUF}')
        if self.request.method != "PATCH" and not isinstance(out, dict):
            raise KubeError(400, "BadRequest", f"the request body must be a JSON object, got {type(out).__name__}")
        self._body, self._body_read = out, True
        return out


def _yaml(raw: bytes) -> Any:
    import yaml
    try:
        return yaml.safe_load(raw)
    except yaml.YAMLError as e:
        raise KubeError(400, "BadRequest", f"the request body is not valid YAML: {e}") from None


async def _decode_protobuf(raw: bytes) -> dict:
    try:
        from kube_api import protobuf
    except ImportError as e:
        raise KubeError(415, "UnsupportedMediaType",
                        f"protobuf request bodies ({PROTOBUF}) cannot be decoded: the protobuf decoder is "
                        f"not installed ({e}); send application/json") from None
    why = protobuf.available() if hasattr(protobuf, "available") else None
    if why:
        raise KubeError(415, "UnsupportedMediaType",
                        f"protobuf request bodies ({PROTOBUF}) cannot be decoded here: {why}; send application/json")
    try:
        return await protobuf.decode(raw)
    except getattr(protobuf, "ProtobufError", ValueError) as e:
        raise KubeError(400, "BadRequest", f"the protobuf request body is malformed: {e}") from None


def _truthy(v: str | None) -> bool:
    # Kubernetes reads a query bool as true unless it is "false" or "0" (an empty value is true)
    return v is not None and v.lower() not in ("false", "0")
