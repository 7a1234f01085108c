"""WATCH: a chunked ``application/json`` stream, one ``{"type":..,"object":..}`` per line.

Per stream (:class:`WatchStream`): a reader task follows the store (``Store.watch`` polls, or for
``resourceVersion`` unset / "0" and for ``sendInitialEvents=true`` the watch-list reply first) and
hands each event, wrapped as a ``cluster_state.delivery.Delivery``, to the endpoint's watch hook
(``EndpointChaos.new_hook``: delay / stall / reorder / expire act here; without chaos a
pass-through); what the hook emits is encoded (``codec.to_kube``, or a one-row Table when Accept asks
for one) and written by the request's handler, each write flushed. Bookmarks (periodic with
``allowWatchBookmarks``, and the ``k8s.io/initial-events-end`` one of a watch-list) and a final 410
ERROR travel through the hook as barriers, so they never overtake a held event.

Semantics, as kube-apiserver:

* ``resourceVersion`` N: every event after N; N older than the kept history -> an ERROR event
  with a 410 ``Expired`` Status, then the stream ends (client-go relists);
* unset or "0": synthetic ADDED for the current state, then changes (legacy watch);
* ``sendInitialEvents=true`` (needs ``resourceVersionMatch=NotOlderThan``): the same, plus the
  ``k8s.io/initial-events-end`` bookmark (422 for bad option combinations, before the stream);
* with a label or field selector the stream tracks which keys its client holds: an object that
  stops matching is sent as DELETED, one that starts matching as ADDED; for a watch from N the
  held set is seeded by an exact list at N;
* ``timeoutSeconds``: the stream ends then (default 1800 s); a client that goes away ends it
  at the next wake (at most a second): the reader task and the hook are stopped, nothing leaks;
* a watch-expire fault (``request_relist``) ends the stream with a 410 ERROR event.
* a resource the store does not model: only bookmarks (with ``allowWatchBookmarks``) until the
  timeout; never 410.
"""
from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from aiohttp import web

from cluster_state.aio import shielded
from cluster_state.delivery import Delivery
from cluster_state.store import INITIAL_EVENTS_END
import orjson

from kube_api.codec import dumps, to_kube, to_kube_owned
from kube_api.context import RequestContext, _truthy
from kube_api.lists import parse_rv, table_module
from kube_api.selectors import Selector
from kube_api.status import KubeError, from_store_error, status_body
from cluster_state.timeouts import wait_for

__all__ = ["WatchOptions", "parse_watch_options", "watch", "WatchStream", "DEFAULT_TIMEOUT_S"]

log = logging.getLogger("kube_api.watch")

DEFAULT_TIMEOUT_S = 1800.0
_NL = orjson.OPT_APPEND_NEWLINE


def _dumps_line(obj) -> bytes:
    return orjson.dumps(obj, option=_NL)

BOOKMARK = "BOOKMARK"
ERROR = "ERROR"


@dataclass
class WatchOptions:
    resource_version: int | None
    timeout_s: float
    bookmarks: bool
    send_initial_events: bool
    match: str | None
    selector: Selector


def _invalid(field: str, msg: str) -> KubeError:
    return KubeError(422, "Invalid", f"{field}: Forbidden: {msg}",
                     details={"causes": [{"reason": "FieldValueForbidden", "field": field, "message": msg}]})


def parse_watch_options(ctx: RequestContext) -> WatchOptions:
    q = ctx.query
    rv = parse_rv(q.get("resourceVersion"))
    t = q.get("timeoutSeconds")
    timeout = DEFAULT_TIMEOUT_S
    if t not in (None, ""):
        if not (t.isascii() and t.isdigit()) or len(t) > 12:
            raise KubeError(400, "BadRequest", f"timeoutSeconds: Invalid value: {t!r:.80}: must be a non-negative integer",
                            details={"causes": [{"reason": "FieldValueInvalid", "field": "timeoutSeconds",
                                                 "message": "must be a non-negative integer"}]})
        timeout = float(int(t)) or DEFAULT_TIMEOUT_S
    sie_raw = q.get("sendInitialEvents")
    sie = sie_raw is not None and _truthy(sie_raw)
    match = q.get("resourceVersionMatch") or None
    # validateWatchOptions / ValidateListOptions for a watch
    if sie:
        if match != "NotOlderThan":
            raise _invalid("resourceVersionMatch", "sendInitialEvents requires setting resourceVersionMatch to "
                           f"NotOlderThan, got {match!r}")
    elif match is not None:
        raise _invalid("resourceVersionMatch", "resourceVersionMatch is forbidden for watch unless "
                       "sendInitialEvents is provided")
    if sie and not _truthy(q.get("allowWatchBookmarks")) and sie_raw is not None:
        raise _invalid("allowWatchBookmarks", "allowWatchBookmarks must be set to true when sendInitialEvents "
                       "is provided")
    sel = Selector.parse(q.get("labelSelector"), q.get("fieldSelector"), ctx.resource)
    return WatchOptions(rv, timeout, _truthy(q.get("allowWatchBookmarks")), sie, match, sel)


def _key(obj: dict) -> tuple[str, str]:
    md = obj["metadata"]
    return (md.get("namespace") or "", md["name"])


class WatchStream:
    """One HTTP watch: a reader task, the endpoint's hook, and the lines for the handler to write."""

    def __init__(self, ctx: RequestContext, opts: WatchOptions):
        self.ctx = ctx
        self.ep = ctx.endpoint
        self.r = ctx.resource
        self.kind = self.r.store_kind if self.r.modelled else self.r.kind
        self.opts = opts
        self.id = self.ep.next_watch_id()
        self.lines: list[bytes] = []
        self.wake = asyncio.Event()
        self.finished = False         # an ERROR line was queued: end after writing it
        self.reader_done = False
        self.expired = False
        self.sent = 0
        self.tables = table_module(self.r) if ctx.wants_table else None
        self.include_object = ctx.include_object or "Metadata"
        self._first_table = True
        self.held_keys: set | None = None if opts.selector.empty() else set()
        self.namespace = ctx.namespace
        self.last_bookmark = time.monotonic()
        self._wake_set = False
        chaos = self.ep.chaos
        self._chaos_hook = None           # the WatchChaosHook, when the endpoint has chaos
        if chaos is not None:
            self.hook = self._chaos_hook = chaos.new_hook(self.kind)
        else:
            from kube_api.endpoint import PassThroughHook
            self.hook = PassThroughHook()

    # -- the hook's side -------------------------------------------------------------------------
    def _deliver(self, d: Delivery) -> None:
        """The hook's emit: encode ``d`` as one line for the client."""
        self._emit_now(d.type, d.object, d.resource_version, d.initial, d.received)

    def _emit_now(self, typ: str, obj: dict | None, rv: int, initial: bool, received: float) -> None:
        if self.finished:
            return
        if typ == BOOKMARK:
            md = dict((obj or {}).get("metadata") or {})
            md["resourceVersion"] = str(md.get("resourceVersion", rv))
            self.lines.append(_dumps_line({"type": BOOKMARK, "object": {
                "kind": self.r.kind, "apiVersion": self.r.api_version, "metadata": md}}))
        elif typ == ERROR:
            self.lines.append(_dumps_line({"type": ERROR, "object": obj}))
            self.finished = True
        else:
            self.sent += 1
            ep = self.ep
            if ep.logs_deliveries:
                md = obj.get("metadata") or {}
                ep.log_delivery({"kind": self.kind, "type": typ, "ns": md.get("namespace") or "",
                                 "name": md.get("name"), "uid": md.get("uid"), "rv": rv,
                                 "recv": received, "delivered": time.monotonic(), "wall": time.time(),
                                 "initial": initial, "tombstone": False, "object": obj, "watch": self.id})
            # the object is this stream's own (decoded for it); a log kept in memory holds it, so
            # convert a copy then, else in place (a file log has packed it already)
            kobj = to_kube(obj, self.r) if ep.delivery_log.keep else to_kube_owned(obj, self.r)
            if self.tables is not None:
                try:
                    kobj = self.tables.table(self.r, [kobj], list_meta=None, include_columns=self._first_table,
                                                 include_object=self.include_object)
                    self._first_table = False
                except Exception:  # noqa: BLE001 -- a broken table must not end the watch
                    log.exception("table for a watch event of %s", self.r.plural)
            self.lines.append(_dumps_line({"type": typ, "object": kobj}))
        if not self._wake_set:
            self._wake_set = True
            self.wake.set()

    def request_relist(self) -> None:
        """watch-expire: end this stream with a 410 Expired ERROR event (the client relists)."""
        if self.finished:
            return
        self.expired = True
        self.lines.append(dumps({"type": ERROR, "object": status_body(
            410, "Expired", f"watch of {self.r.qualified} expired (chaos watch-expire on endpoint {self.ep.name}); "
                            "relist")}) + b"\n")
        self.finished = True
        self._wake_set = True
        self.wake.set()

    # -- the reader's side -----------------------------------------------------------------------
    async def _submit(self, typ: str, obj: dict | None, rv: int, *, initial: bool = False) -> None:
        hook = self.hook
        if self._chaos_hook is not None and not hook.activations and not hook.held():
            # no fault has ever acted on this stream and nothing is held: what the hook would do
            # (emit at once, count it), without building a Delivery for it
            st = hook.stats
            st.submitted += 1
            st.emitted += 1
            self._emit_now(typ, obj, rv, initial, time.monotonic())
            return
        key = _key(obj) if obj is not None and typ not in (BOOKMARK, ERROR) else None
        await hook.submit(Delivery(typ, self.kind, key, obj, rv, time.monotonic(), initial))

    async def _event(self, typ: str, obj: dict, rv: int, *, initial: bool = False) -> None:
        """One store event -> what this client must see (namespace, selectors, held keys)."""
        if self.namespace is not None and (obj.get("metadata") or {}).get("namespace") != self.namespace:
            return
        held = self.held_keys
        if held is None:
            await self._submit(typ, obj, rv, initial=initial)
            return
        key = _key(obj)
        if typ == "DELETED":
            if key in held:
                held.discard(key)
                await self._submit("DELETED", obj, rv)
            return
        if self.opts.selector.matches(obj):
            if key in held:
                await self._submit("MODIFIED", obj, rv)
            else:
                held.add(key)
                await self._submit("ADDED", obj, rv, initial=initial)
        elif key in held:
            held.discard(key)
            await self._submit("DELETED", obj, rv)

    async def _bookmark(self, rv: int, annotations: dict | None = None) -> None:
        md: dict = {"resourceVersion": rv}
        if annotations:
            md["annotations"] = annotations
        self.last_bookmark = time.monotonic()
        await self._submit(BOOKMARK, {"kind": self.r.kind, "apiVersion": self.r.api_version, "metadata": md}, rv)

    async def _error(self, err: Exception) -> None:
        ke = from_store_error(err, self.r, None)
        await self._submit(ERROR, ke.body(), 0)

    def _periodic_due(self) -> bool:
        return self.opts.bookmarks and time.monotonic() - self.last_bookmark >= self.ep.bookmark_interval

    async def start_events(self) -> list | None:
        """The first store read, before the response starts (its errors are plain HTTP errors):
        the watch-list reply for a watch from unset/"0" or with sendInitialEvents; None otherwise."""
        if not self.r.modelled:
            return None
        o = self.opts
        if o.send_initial_events or not o.resource_version:
            try:
                return await self.ep.call("watch_list", self.kind, o.resource_version or None)
            except Exception as e:  # noqa: BLE001
                raise from_store_error(e, self.r, None) from None
        return None

    async def run_reader(self, initial: list | None, deadline: float) -> None:
        try:
            if self.r.modelled:
                await self._follow(initial, deadline)
            else:
                await self._idle(deadline)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 -- the store failed mid-stream: tell the client, end
            log.debug("watch %s/%s on %s ended: %s", self.r.plural, self.id, self.ep.name, e)
            try:
                await self._error(e)
            except Exception:  # noqa: BLE001
                pass
        finally:
            self.reader_done = True
            self.wake.set()

    async def _idle(self, deadline: float) -> None:
        o = self.opts
        if o.send_initial_events:
            cur = await self.ep.call("current_resource_version")
            await self._bookmark(cur, {INITIAL_EVENTS_END: "true"})
        while time.monotonic() < deadline and not self.finished:
            await asyncio.sleep(min(1.0, max(0.0, deadline - time.monotonic())))
            if self._periodic_due():
                await self._bookmark(await self.ep.call("current_resource_version"))

    async def _follow(self, initial: list | None, deadline: float) -> None:
        o = self.opts
        rv = o.resource_version or 0
        if initial is not None:
            for ev in initial:
                if ev.type == "ADDED":
                    await self._event("ADDED", ev.object, ev.resource_version, initial=True)
                elif ev.type == BOOKMARK:
                    rv = ev.resource_version
                    if o.send_initial_events and o.bookmarks:
                        await self._bookmark(rv, {INITIAL_EVENTS_END: "true"})
        elif self.held_keys is not None:
            # what the client holds at rv: the objects matching the selectors then
            try:
                res = await self.ep.call("list", self.kind, self.namespace, resource_version=rv,
                                         resource_version_match="Exact")
            except Exception as e:  # noqa: BLE001 -- 410 / 504: as an ERROR event
                await self._error(e)
                return
            self.held_keys.update(_key(x) for x in res.items if o.selector.matches(x))
        block = self.ep.watch_block_ms
        while not self.finished:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            events = await shielded(self.ep.call("watch", self.kind, rv, block_ms=int(min(block, left * 1000)) or 1))
            for ev in events:
                t = ev.type
                if t == BOOKMARK:
                    rv = max(rv, ev.resource_version)
                elif t == "CORRUPT":
                    log.warning("watch %s on %s: skipped a corrupt event: %s", self.r.plural, self.ep.name, ev.error)
                    rv = max(rv, ev.resource_version)
                else:
                    rv = ev.resource_version
                    await self._event(t, ev.object, rv)
            if self._periodic_due():
                await self._bookmark(rv)


def _closing(request: web.Request) -> bool:
    tr = request.transport
    return tr is None or tr.is_closing()


async def watch(ctx: RequestContext) -> web.StreamResponse:
    opts = parse_watch_options(ctx)
    stream = WatchStream(ctx, opts)
    initial = await stream.start_events()
    deadline = time.monotonic() + opts.timeout_s
    resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json",
                                                   "Cache-Control": "no-cache, private"})
    resp.enable_chunked_encoding()
    await resp.prepare(ctx.request)
    hook = stream.hook
    await hook.start(stream._deliver)
    reader = asyncio.get_running_loop().create_task(stream.run_reader(initial, deadline),
                                                    name=f"kube-watch-{ctx.endpoint.name}-{stream.id}")
    ctx.endpoint.open_watches.add(stream)
    try:
        while True:
            if stream.lines:
                data = b"".join(stream.lines)
                stream.lines.clear()
                await resp.write(data)
                if stream.finished:
                    break
                continue
            if stream.finished:
                break
            if stream.reader_done and not hook.held():
                break
            left = deadline - time.monotonic()
            if left <= 0 or _closing(ctx.request):
                break
            stream.wake.clear()
            stream._wake_set = False
            if stream.lines:
                continue
            try:
                await wait_for(stream.wake.wait(), min(left, 1.0))
            except asyncio.TimeoutError:
                pass
        try:
            await resp.write_eof()
        except Exception:  # noqa: BLE001 -- the client is gone
            pass
    except ConnectionError:   # the client went away mid-write
        pass
    finally:
        ctx.endpoint.open_watches.discard(stream)
        reader.cancel()
        try:
            await reader
        except (asyncio.CancelledError, Exception):  # noqa: BLE001
            pass
        await hook.stop()
        if ctx.endpoint.chaos is not None:
            ctx.endpoint.chaos.retire(stream.kind, hook)
        ctx.log_extra.update(events=stream.sent, expired=stream.expired, watch=stream.id)
    return resp
