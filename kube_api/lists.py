"""GET of one object and LIST of a collection (``limit``/``continue``, ``resourceVersion`` /
``resourceVersionMatch``, label and field selectors, namespaced and all-namespaces paths).

The store answers (``Store.list``: paging consistent at the first page's RV, exact reads of older
RVs, 410 / 504 as Kubernetes); selectors are applied here, page by page, asking the store for no
more than the items still missing, so a ``continue`` token always points at the last item served.
Each object is decoded from msgpack once and converted in place (``codec.to_kube_owned``); a large
list is streamed in chunks of orjson-encoded items. A typed ``XxxList`` with
``metadata.resourceVersion`` a string; ``remainingItemCount`` only without selectors (as in
Kubernetes). A resource the store does not model is an empty list at the current global RV.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from aiohttp import web

from cluster_state import gcpause

from kube_api.codec import dumps, to_kube_owned
from kube_api.context import RequestContext
from kube_api.resources import Resource
from kube_api.selectors import Selector
from kube_api.status import KubeError, from_store_error

__all__ = ["ListOptions", "parse_list_options", "parse_rv", "get_object", "list_objects", "table_module",
           "STREAM_ABOVE", "CHUNK"]

STREAM_ABOVE = 2000     # items: above this a list is written in chunks
CHUNK = 1000


@dataclass
class ListOptions:
    limit: int | None
    continue_: str | None
    resource_version: int | None      # None = unset ("" or absent)
    match: str | None
    selector: Selector
    any_rv: bool = False              # resourceVersion "0" without continue: the whole current state


def _bad(field: str, msg: str) -> KubeError:
    return KubeError(400, "BadRequest", f"{field}: {msg}",
                     details={"causes": [{"reason": "FieldValueInvalid", "field": field, "message": msg}]})


def parse_rv(value: str | None, field: str = "resourceVersion") -> int | None:
    if value is None or value == "":
        return None
    if not (value.isascii() and value.isdigit()) or len(value) > 19:
        raise _bad(field, f"Invalid value: {value!r:.80}: must be a non-negative integer resourceVersion")
    return int(value)


def parse_list_options(query, resource: Resource) -> ListOptions:
    lim = query.get("limit")
    limit = None
    if lim not in (None, ""):
        if not (lim.isascii() and lim.lstrip("-").isdigit()) or len(lim) > 19:
            raise _bad("limit", f"Invalid value: {lim!r:.80}: must be an integer")
        limit = max(int(lim), 0) or None   # <= 0: no limit (as Kubernetes)
    cont = query.get("continue") or None
    rv = parse_rv(query.get("resourceVersion"))
    match = query.get("resourceVersionMatch") or None
    sel = Selector.parse(query.get("labelSelector"), query.get("fieldSelector"), resource)
    if rv == 0 and cont is None and match in (None, "NotOlderThan"):
        # "any" resourceVersion is served whole, as the apiserver's watch cache serves it (client-go's
        # informers list with limit=500&resourceVersion=0): one atomic read instead of pages
        return ListOptions(None, None, rv, match, sel, any_rv=True)
    return ListOptions(limit, cont, rv, match, sel)


def table_module(resource: Resource):
    """kube_api.tables when it can render ``resource``, else None (then a plain list is served)."""
    try:
        from kube_api import tables
    except ImportError:
        return None
    try:
        return tables if tables.supports_table(resource) else None
    except Exception:  # noqa: BLE001 -- a broken tables module must not break reads
        return None


def _key_of(o: dict) -> tuple:
    md = o["metadata"]
    return (md.get("namespace") or "", md.get("name") or "")


def _json(body: dict, status: int = 200) -> web.Response:
    return web.Response(status=status, body=dumps(body), content_type="application/json")


async def get_object(ctx: RequestContext) -> web.StreamResponse:
    r = ctx.resource
    if not r.modelled:
        raise KubeError(404, "NotFound", f'{r.qualified} "{ctx.name}" not found',
                        details={"name": ctx.name, "group": r.group or None, "kind": r.plural})
    try:
        obj = await ctx.endpoint.call("get", r.store_kind, ctx.name, ctx.namespace)
    except Exception as e:  # noqa: BLE001 -- store errors become Status
        raise from_store_error(e, r, ctx.name) from None
    obj = to_kube_owned(obj, r)
    if ctx.wants_table:
        tables = table_module(r)
        if tables is not None:
            return _json(tables.table(r, [obj], list_meta=None, include_columns=True,
                                      include_object=ctx.include_object or "Metadata"))
    return _json(obj)


async def _store_list(ctx: RequestContext, opts: ListOptions):
    r = ctx.resource
    kw = {}
    if opts.any_rv:
        pass       # the store's plain list: one atomic read of everything at the current RV
    elif opts.limit is not None:
        kw["limit"] = opts.limit
    if opts.continue_ is not None:
        kw["continue_"] = opts.continue_
    if opts.resource_version is not None and not opts.any_rv:
        kw["resource_version"] = opts.resource_version
    if opts.match is not None and not opts.any_rv:
        kw["resource_version_match"] = opts.match
    call = ctx.endpoint.call
    try:
        if opts.selector.empty():
            res = await call("list", r.store_kind, ctx.namespace, **kw)
            return res.items, res.resource_version, res.continue_, res.remaining_item_count
        matches = opts.selector.matches
        if opts.limit is None:
            res = await call("list", r.store_kind, ctx.namespace, **kw)
            return [o for o in res.items if matches(o)], res.resource_version, res.continue_, None
        items: list = []
        res = await call("list", r.store_kind, ctx.namespace, **kw)
        rv = res.resource_version
        while True:
            items.extend(o for o in res.items if matches(o))
            if res.continue_ is None or len(items) >= opts.limit:
                return items, rv, res.continue_, None
            res = await call("list", r.store_kind, ctx.namespace, limit=opts.limit - len(items),
                             continue_=res.continue_)
    except KubeError:
        raise
    except Exception as e:  # noqa: BLE001
        raise from_store_error(e, r, None) from None


async def list_objects(ctx: RequestContext) -> web.StreamResponse:
    """A list, with the cyclic GC paused from the store read to the last byte written: every
    object decoded for it dies with the response, so collections meanwhile would only walk them
    over and over (cluster_state.gcpause; an informer's first list pauses it likewise)."""
    opts = parse_list_options(ctx.query, ctx.resource)
    gcpause.begin()
    try:
        return await _list_objects(ctx, opts)
    finally:
        gcpause.end()


async def _list_objects(ctx: RequestContext, opts: ListOptions) -> web.StreamResponse:
    r = ctx.resource
    t0 = time.monotonic()
    if r.modelled:
        items, rv, cont, remaining = await _store_list(ctx, opts)
    else:
        if opts.match is not None and opts.resource_version is None:
            raise KubeError(422, "Invalid", "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden "
                            "unless resourceVersion is provided",
                            details={"causes": [{"reason": "FieldValueForbidden", "field": "resourceVersionMatch",
                                                 "message": "resourceVersionMatch is forbidden unless "
                                                            "resourceVersion is provided"}]})
        try:
            cur = await ctx.endpoint.call("current_resource_version")
        except Exception as e:  # noqa: BLE001
            raise from_store_error(e, r, None) from None
        items, cont, remaining = [], None, None
        rv = opts.resource_version if opts.match == "Exact" and opts.resource_version else cur
    meta: dict = {"resourceVersion": str(rv)}
    if cont:
        meta["continue"] = cont
        if remaining is not None:
            meta["remainingItemCount"] = remaining
    ctx.log_extra.update(count=len(items), rv=rv)
    ep = ctx.endpoint
    now = time.monotonic()
    ep.log_delivery({"kind": r.store_kind or r.kind, "type": "LIST", "rv": rv, "count": len(items),
                     "relist": False, "recv": t0, "delivered": now, "wall": time.time(),
                     "ns": ctx.namespace or "", "continue": bool(opts.continue_)})
    if not opts.limit and not opts.continue_ and opts.resource_version != 0 and len(items) > 1:
        # a whole list is read from a hash: order it by key as etcd (and every paged list) does.
        # resourceVersion 0 ("any", what informers ask for) comes in store order, as the
        # apiserver's watch cache long served it: clients do not depend on the order
        items.sort(key=_key_of)
    if ctx.wants_table:
        tables = table_module(r)
        if tables is not None:
            for o in items:
                to_kube_owned(o, r)
            return _json(tables.table(r, items, list_meta=meta, include_columns=True,
                                      include_object=ctx.include_object or "Metadata"))
    head = {"kind": r.list_kind, "apiVersion": r.api_version, "metadata": meta}
    if len(items) <= STREAM_ABOVE:
        for o in items:
            to_kube_owned(o, r, type_meta=False)
        head["items"] = items
        return _json(head)
    return await _stream_list(ctx, head, items, r)


async def _stream_list(ctx: RequestContext, head: dict, items: list, r: Resource) -> web.StreamResponse:
    """A large list in chunks: each chunk converted, encoded and written before the next is touched,
    so the client reads while the rest is converted."""
    resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
    resp.enable_chunked_encoding()
    await resp.prepare(ctx.request)
    h = dumps(head)
    await resp.write(h[:-1] + b',"items":[')
    for i in range(0, len(items), CHUNK):
        part = items[i:i + CHUNK]
        for o in part:
            to_kube_owned(o, r, type_meta=False)
        chunk = dumps(part)[1:-1]
        await resp.write(chunk if i == 0 else b"," + chunk)
    await resp.write(b"]}")
    await resp.write_eof()
    return resp
