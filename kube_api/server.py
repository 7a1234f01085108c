"""The front's HTTP server (aiohttp): endpoints, routing, discovery, health, start/stop.

``KubeFront(redis_url, prefix, api_server=ApiServerConfig(...))`` serves the store under
``prefix`` (Redis Streams stay the only truth: the front keeps no copy of objects). Each
``await front.add_endpoint(name, chaos=...)`` opens one listener (its own port, its own store
client, chaos and logs: kube_api.endpoint); ``front.stop()`` closes them all.
``ThreadedFront`` runs a front on a private event-loop thread for synchronous callers (the CLI,
test fixtures). ``write_kubeconfig(path, url)`` writes a plain-http kubeconfig for a listener.

Routing (every listener alike): ``/version``, ``/healthz``, ``/readyz``, ``/livez``, ``/api``,
``/api/v1``, ``/apis``, ``/apis/<g>``, ``/apis/<g>/<v>`` (kube_api.discovery); resource paths
``/api/v1/[namespaces/<ns>/]<plural>[/<name>[/<sub>]]`` and the same under ``/apis/<g>/<v>``.
GET is served here (kube_api.lists, kube_api.watches); POST / PUT / PATCH / DELETE go to
``kube_api.writes.handle(ctx)`` (405 with a Status while that module is absent). Every failure is
a Kubernetes ``Status`` (kube_api.status). Every request is logged on its endpoint (a handler that
logged it itself through ``Endpoint.log_request`` is not logged twice).
"""
from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from typing import Any

import yaml
from aiohttp import web

from kube_api import discovery
from kube_api.codec import dumps
from kube_api.context import RequestContext, _truthy
from kube_api.endpoint import _REQUEST_LOGGED, Endpoint, EndpointChaos
from kube_api.resources import lookup
from kube_api.status import KubeError, error_response

__all__ = ["KubeFront", "ThreadedFront", "write_kubeconfig", "kubeconfig_dict"]

log = logging.getLogger("kube_api.server")

EP_KEY = web.AppKey("endpoint", Endpoint)
FRONT_KEY = web.AppKey("front", object)
NAMESPACE_SUBRESOURCES = ("status", "finalize")
HEALTH = ("healthz", "readyz", "livez")


def _json(body: Any, status: int = 200) -> web.Response:
    return web.Response(status=status, body=dumps(body), content_type="application/json")


def _not_found(path: str) -> KubeError:
    return KubeError(404, "NotFound", f"the server could not find the requested resource (path {path})",
                     details={"causes": [{"reason": "UnexpectedServerResponse", "message": "404 page not found"}]})


class KubeFront:
    def __init__(self, redis_url: str, prefix: str = "ht", *, api_server: Any = None, host: str = "127.0.0.1",
                 version: tuple[str, str] = discovery.DEFAULT_VERSION, log_dir: str | os.PathLike | None = None,
                 keep_logs: bool = True, bookmark_interval: float = 10.0, watch_block_ms: int = 1000):
        from cluster_state.apiserver import ApiServerConfig
        self.redis_url = redis_url
        self.prefix = prefix
        self.api_server = api_server if api_server is not None else ApiServerConfig()
        self.host = host
        self.version = (str(version[0]), str(version[1]))
        self.log_dir = os.fspath(log_dir) if log_dir is not None else None
        self.keep_logs = keep_logs
        self.bookmark_interval = bookmark_interval
        self.watch_block_ms = watch_block_ms
        self.endpoints: dict[str, Endpoint] = {}
        self._runners: dict[str, web.AppRunner] = {}

    def endpoint(self, name: str) -> Endpoint:
        return self.endpoints[name]

    async def add_endpoint(self, name: str, *, port: int = 0, chaos: EndpointChaos | None = None,
                           partition_proxy: bool = False, host: str | None = None) -> Endpoint:
        """Open a listener named ``name`` (``port`` 0 = a free one) with its own store client;
        ``partition_proxy``: its store connections pass a ``RedisProxy`` (``partition()``)."""
        if name in self.endpoints:
            raise ValueError(f"endpoint {name!r} exists already")
        proxy = None
        url = self.redis_url
        if partition_proxy:
            from chaos.injectors.proxy import RedisProxy
            proxy = await RedisProxy(self.redis_url, name=f"kube-api-{name}").start()
            url = proxy.url
        api = self.api_server.async_client(url, self.prefix)
        ep = Endpoint(name, api, chaos=chaos, proxy=proxy,
                      log_dir=os.path.join(self.log_dir, name) if self.log_dir else None,
                      keep_logs=self.keep_logs, bookmark_interval=self.bookmark_interval,
                      watch_block_ms=self.watch_block_ms)
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app[EP_KEY] = ep
        app[FRONT_KEY] = self
        app.router.add_route("*", "/{tail:.*}", _handle)
        runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=1.0)
        await runner.setup()
        site = web.TCPSite(runner, host or self.host, port)
        await site.start()
        addr = runner.addresses[0]
        ep.port = int(addr[1])
        h = addr[0]
        ep.url = f"http://[{h}]:{ep.port}" if ":" in h else f"http://{h}:{ep.port}"
        self.endpoints[name] = ep
        self._runners[name] = runner
        log.info("kube-api endpoint %s listening on %s", name, ep.url)
        return ep

    async def remove_endpoint(self, name: str) -> None:
        ep = self.endpoints.pop(name)
        runner = self._runners.pop(name)
        await runner.cleanup()
        await ep.close()

    async def stop(self) -> None:
        for name in list(self.endpoints):
            try:
                await self.remove_endpoint(name)
            except Exception:  # noqa: BLE001 -- close the others anyway
                log.exception("closing endpoint %s", name)


async def _handle(request: web.Request) -> web.StreamResponse:
    ep: Endpoint = request.app[EP_KEY]
    front: KubeFront = request.app[FRONT_KEY]
    mark: list = []
    token = _REQUEST_LOGGED.set(mark)
    t0 = time.monotonic()
    held: list[RequestContext] = []     # the request's context, once parsed (kept when a handler raises)
    code = 500
    verb = request.method.lower()
    try:
        try:
            resp = await _dispatch(request, ep, front, held)
            code = resp.status
            return resp
        except KubeError as e:
            code = e.code
            return error_response(e)
        except (ConnectionResetError, asyncio.CancelledError):
            code = 499
            raise
        except Exception as e:  # noqa: BLE001 -- never a bare 500 page: a Status naming the failure
            log.exception("%s %s on %s", request.method, request.path_qs, ep.name)
            code = 500
            return error_response(KubeError(500, "InternalError", f"{type(e).__name__}: {e}"))
    finally:
        _REQUEST_LOGGED.reset(token)
        ctx = held[0] if held else None
        if not mark:
            extra = {"path": request.path, "ms": round((time.monotonic() - t0) * 1000, 3)}
            if ctx is not None:
                extra.update(ctx.log_extra)
                verb = ctx.verb
            ep.log_request(verb, ctx.resource if ctx else None, ctx.namespace if ctx else None,
                           ctx.name if ctx else None, ctx.subresource if ctx else None, code, **extra)


async def _dispatch(request: web.Request, ep: Endpoint, front: KubeFront, held: list):
    parts = [p for p in request.path.split("/") if p]
    method = request.method
    if not parts:
        return _json({"paths": ["/api", "/api/v1", "/apis", "/healthz", "/livez", "/readyz", "/version"]})
    head = parts[0]
    if head in HEALTH:
        return web.Response(text="ok", content_type="text/plain")
    if head == "version" and len(parts) == 1:
        return _json(discovery.version_info(*front.version))
    if head == "api":
        if len(parts) == 1:
            return _json(discovery.core_versions(request.host or "127.0.0.1"))
        if parts[1] != "v1":
            raise _not_found(request.path)
        if len(parts) == 2:
            return _json(discovery.api_resource_list("", "v1"))
        return await _resource(request, ep, "", "v1", parts[2:], held)
    if head == "apis":
        if len(parts) == 1:
            return _json(discovery.api_group_list())
        if len(parts) == 2:
            doc = discovery.api_group(parts[1])
            if doc is None:
                raise _not_found(request.path)
            return _json(doc)
        if len(parts) == 3:
            doc = discovery.api_resource_list(parts[1], parts[2])
            if doc is None:
                raise _not_found(request.path)
            return _json(doc)
        return await _resource(request, ep, parts[1], parts[2], parts[3:], held)
    raise _not_found(request.path)


def _split(group: str, version: str, rest: list[str], path: str):
    """(resource, namespace, name, subresource) of a resource path's tail."""
    ns = None
    if rest[0] == "namespaces" and len(rest) >= 3 and not (
            group == "" and len(rest) == 3 and rest[2] in NAMESPACE_SUBRESOURCES):
        ns, rest = rest[1], rest[2:]
    if len(rest) > 3:
        raise _not_found(path)
    r = lookup(group, version, rest[0])
    if r is None:
        raise _not_found(path)
    name = rest[1] if len(rest) > 1 else None
    sub = rest[2] if len(rest) > 2 else None
    if ns is not None and not r.namespaced:
        raise _not_found(path)
    if sub is not None and sub not in r.subresources and not (r.kind == "Namespace" and sub in NAMESPACE_SUBRESOURCES):
        raise _not_found(path)
    return r, ns, name, sub


async def _resource(request: web.Request, ep: Endpoint, group: str, version: str, rest: list[str], held: list):
    r, ns, name, sub = _split(group, version, rest, request.path)
    ctx = RequestContext(request, ep, r, ns, name, sub)
    held.append(ctx)
    method = request.method
    if method in ("GET", "HEAD"):
        if sub not in (None, "status"):
            raise KubeError(405, "MethodNotAllowed", f"GET is not supported on {r.plural}/{sub}")
        if name is None:
            if _truthy(request.query.get("watch")):
                from kube_api.watches import watch
                return await watch(ctx)
            from kube_api.lists import list_objects
            return await list_objects(ctx)
        if r.namespaced and ns is None:
            raise _not_found(request.path)
        from kube_api.lists import get_object
        return await get_object(ctx)
    try:
        from kube_api import writes
    except ModuleNotFoundError as e:
        if e.name != "kube_api.writes":
            raise
        raise KubeError(405, "MethodNotAllowed",
                        f"{method} on {r.qualified} is not served yet (the write path is not installed)") from None
    return await writes.handle(ctx)


# --- kubeconfig ---------------------------------------------------------------------------------

def kubeconfig_dict(url: str, name: str = "ha-testbed", namespace: str = "default") -> dict:
    """A plain-http kubeconfig for ``url`` (no auth: the front has none)."""
    return {"apiVersion": "v1", "kind": "Config", "preferences": {},
            "clusters": [{"name": name, "cluster": {"server": url}}],
            "users": [{"name": name, "user": {}}],
            "contexts": [{"name": name, "context": {"cluster": name, "user": name, "namespace": namespace}}],
            "current-context": name}


def write_kubeconfig(path: str | os.PathLike, url: str, name: str = "ha-testbed", namespace: str = "default") -> str:
    path = os.fspath(path)
    d = os.path.dirname(path)
    if d:
        os.makedirs(d, exist_ok=True)
    with open(path, "w") as fh:
        yaml.safe_dump(kubeconfig_dict(url, name, namespace), fh, sort_keys=False)
    return path


# --- a front on its own loop thread ------------------------------------------------------------

class ThreadedFront:
    """A :class:`KubeFront` on a private event-loop thread (sync callers: CLI, fixtures)."""

    def __init__(self, *args, **kw):
        self._args, self._kw = args, kw
        self.loop: asyncio.AbstractEventLoop | None = None
        self.front: KubeFront | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> "ThreadedFront":
        ready = threading.Event()

        def main() -> None:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            self.loop = loop
            ready.set()
            loop.run_forever()
            pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for t in pending:
                t.cancel()
            if pending:
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.close()

        self._thread = threading.Thread(target=main, name="kube-api-front", daemon=True)
        self._thread.start()
        ready.wait()

        async def make():
            return KubeFront(*self._args, **self._kw)
        self.front = self.run(make())
        return self

    def run(self, coro, timeout: float | None = 60):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def add_endpoint(self, name: str, **kw) -> Endpoint:
        return self.run(self.front.add_endpoint(name, **kw))

    def endpoint(self, name: str) -> Endpoint:
        return self.front.endpoint(name)

    def stop(self) -> None:
        if self.loop is None:
            return
        try:
            self.run(self.front.stop(), 30)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(30)
            self.loop = None
