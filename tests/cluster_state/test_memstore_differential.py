"""The in-memory API server against the Redis one: the same seeded random operation sequences,
run in lockstep on both, must give identical results (returned objects, RVs, error types, codes,
messages, fields and details, list pages and continue tokens) and identical watch histories.

Both sides get the same injected clock and the same uid / snapshot-id sequences, so timestamps,
uids and continue tokens are comparable. A mutant memory server (stale resourceVersions accepted;
no history trimming) must be caught, or this test could not fail."""
from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass

import pytest

from cluster_state.client import ApiClient
from cluster_state.errors import ApiError
from cluster_state.memstore import DEFAULT_EPOCH, MemoryServer, SeqIds
from cluster_state.watch import ListResult, WatchEvent

from .helpers import node, pod, queue

HISTORY = 24   # small: trimming, 410 Gone and exact-read failures happen within a few hundred ops
NAMESPACES = ("a", "b")
PODS = [f"p{i}" for i in range(8)]
NODES = ["n0", "n1", "n2"]
QUEUES = ["q0", "q1"]
FINALIZERS = ["example.com/x", "example.com/y"]


class ManualClock:
    def __init__(self) -> None:
        self.t = DEFAULT_EPOCH

    def __call__(self) -> float:
        return self.t


@dataclass
class Pair:
    redis: ApiClient
    mem: object
    clock: ManualClock
    server: MemoryServer


def _norm(x):
    """A comparable form of a result: objects as they are, errors by what they say."""
    if isinstance(x, ApiError):
        return ("error", type(x).__name__, x.code, x.reason, x.message, x.kind, x.namespace, x.name,
                x.field, sorted((k, repr(v)) for k, v in x.details.items()))
    if isinstance(x, ListResult):
        return ("list", x.resource_version, x.items, x.corrupt, x.continue_, x.remaining_item_count)
    if isinstance(x, list) and x and all(isinstance(e, WatchEvent) for e in x):
        return ("events", [(e.type, e.kind, e.object, e.resource_version, e.error) for e in x])
    if isinstance(x, list):
        return ("values", [_norm(v) for v in x])
    return ("value", x)


def _call(api, name, args, kw):
    try:
        res = getattr(api, name)(*args, **kw)
    except ApiError as e:
        return e
    if name == "list" and kw.get("limit") is None and kw.get("continue_") is None and \
            kw.get("resource_version") is None:
        # a plain list is one atomic read in hash order on Redis (unspecified): compare by key
        res.items.sort(key=lambda o: (o["metadata"].get("namespace") or "", o["metadata"]["name"]))
    return res


class Driver:
    """Seeded random operations, run on both servers in lockstep."""

    def __init__(self, pair: Pair, seed: int) -> None:
        self.p = pair
        self.rng = random.Random(seed)
        self.seen: list[dict] = []          # objects returned so far (stale RVs come from here)
        self.tokens: list[tuple] = []       # (kind, ns, continue token)
        self.max_rv = 0
        self.log: list[str] = []
        self.outcomes: dict[str, int] = {}  # "op" / "op:EVENT" / "Error:field" -> how often
        self.messages: list[str] = []       # error messages (coverage checks)

    def both(self, name: str, *args, **kw):
        r1 = _call(self.p.redis, name, args, kw)
        r2 = _call(self.p.mem, name, args, kw)
        n1, n2 = _norm(r1), _norm(r2)
        self.log.append(f"{name}{args!r:.120} {kw!r:.120}")
        assert n1 == n2, (f"step {len(self.log)}: {name}{args!r:.200} {kw!r:.200}\n redis: {n1!r:.1500}\n"
                          f" mem:   {n2!r:.1500}")
        self._remember(r1)
        for v in (r1 if isinstance(r1, list) else [r1]):
            if isinstance(v, ApiError):
                key = f"{type(v).__name__}:{v.field}"
                self.messages.append(v.message)
            elif isinstance(v, WatchEvent):
                key = f"{name}:{v.type}"
            else:
                key = name
            self.outcomes[key] = self.outcomes.get(key, 0) + 1
        return r1

    def _remember(self, r) -> None:
        objs = []
        if isinstance(r, dict):
            objs = [r]
        elif isinstance(r, ListResult):
            objs = r.items
            self.max_rv = max(self.max_rv, r.resource_version)
        elif isinstance(r, list):
            objs = [x for x in r if isinstance(x, dict)]
        for o in objs:
            if isinstance(o, dict) and isinstance(o.get("metadata"), dict):
                self.seen.append(o)
                self.max_rv = max(self.max_rv, o["metadata"].get("resourceVersion") or 0)
        del self.seen[:-60]

    # --- generators ---------------------------------------------------------------------------
    def _pod(self) -> dict:
        r = self.rng
        p = pod(r.choice(PODS), r.choice(NAMESPACES), cpu=r.choice(["1", "500m", "2"]))
        if r.random() < 0.3:
            p["metadata"]["finalizers"] = r.sample(FINALIZERS, r.randint(1, 2))
        if r.random() < 0.15:
            p["spec"]["schedulingGates"] = [{"name": "gate-a"}]
        if r.random() < 0.3:
            p["spec"]["terminationGracePeriodSeconds"] = r.choice([0, 5, 30])
        if r.random() < 0.3:
            p["status"]["nominatedNodeName"] = r.choice(NODES)
        if r.random() < 0.05:
            p["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "-1"   # 422
        return p

    def _known(self, kind: str | None = None) -> dict | None:
        cands = [o for o in self.seen if kind is None or o.get("kind") == kind]
        return self.rng.choice(cands) if cands else None

    def _ref(self):
        r = self.rng
        k = r.choice(["Pod", "Pod", "Pod", "Node", "Queue"])
        if k == "Pod":
            return k, r.choice(PODS), r.choice(NAMESPACES)
        return k, r.choice(NODES if k == "Node" else QUEUES), None

    def step(self) -> None:
        r = self.rng
        c = self.p.clock
        op = r.choices(
            ["create_pod", "create_other", "get", "update", "update_status", "bind", "bind_many",
             "patch", "delete", "evict", "finalize", "tick", "list", "list_paged", "list_continue",
             "list_rv", "watch", "watch_list", "compact", "current", "update_status_many"],
            weights=[10, 3, 4, 8, 6, 7, 2, 3, 5, 2, 3, 3, 3, 3, 2, 4, 6, 2, 1, 1, 3])[0]
        if op == "create_pod":
            self.both("create", self._pod())
        elif op == "create_other":
            if r.random() < 0.5:
                self.both("create", node(r.choice(NODES)))
            else:
                self.both("create", queue(r.choice(QUEUES), weight=r.randint(1, 3)))
        elif op == "get":
            k, name, ns = self._ref()
            self.both("get", k, name, ns)
        elif op == "update":
            o = self._known()
            if o is None:
                return
            new = {**o, "metadata": dict(o["metadata"]), "spec": dict(o.get("spec") or {})}
            md = new["metadata"]
            choice = r.random()
            if choice < 0.4:   # fresh RV: read first
                cur = _call(self.p.redis, "get", (o["kind"], md["name"], md.get("namespace")), {})
                if isinstance(cur, dict):
                    md["resourceVersion"] = cur["metadata"]["resourceVersion"]
            elif choice < 0.6:
                md.pop("resourceVersion", None)
            # else: whatever RV we saw (often stale -> 409)
            md["labels"] = {"v": str(r.randint(0, 9))}
            if r.random() < 0.4 and md.get("finalizers"):
                md["finalizers"] = md["finalizers"][1:]
            elif r.random() < 0.1:
                md["finalizers"] = [FINALIZERS[0]]
            if r.random() < 0.3 and new["spec"].get("schedulingGates"):
                new["spec"]["schedulingGates"] = []
            elif o.get("kind") == "Pod" and r.random() < 0.1:
                new["spec"]["schedulingGates"] = [{"name": "gate-b"}]   # only removal is allowed: 422
            if r.random() < 0.05:
                md["deletionTimestamp"] = c.t   # 422 unless already deleting (then carried over)
            self.both("update", new)
        elif op == "update_status":
            o = self._known("Pod")
            if o is None:
                return
            new = {**o, "metadata": dict(o["metadata"]), "status": dict(o.get("status") or {})}
            new["status"]["nominatedNodeName"] = r.choice(NODES + [""])
            new["status"]["phase"] = r.choice(["Pending", "Running"])
            if r.random() < 0.4:
                new["metadata"].pop("resourceVersion", None)
            self.both("update_status", new)
        elif op == "update_status_many":
            news = []
            for _ in range(r.randint(1, 4)):
                o = self._known("Pod")
                if o is None:
                    return
                new = {**o, "metadata": dict(o["metadata"]), "status": dict(o.get("status") or {})}
                new["status"]["phase"] = r.choice(["Pending", "Running"])
                if r.random() < 0.3:
                    new["metadata"].pop("resourceVersion", None)
                news.append(new)
            if r.random() < 0.3:
                news.append(news[0])     # a pod written twice: the second is stale after the first
            self.both("update_status_many", news)
        elif op == "bind":
            o = self._known("Pod") if r.random() < 0.3 else None
            uid = o["metadata"].get("uid") if o else None
            name = o["metadata"]["name"] if o else r.choice(PODS)
            ns = o["metadata"]["namespace"] if o else r.choice(NAMESPACES)
            self.both("bind", ns, name, r.choice(NODES), uid=uid)
        elif op == "bind_many":
            bs = [(r.choice(NAMESPACES), r.choice(PODS), r.choice(NODES)) for _ in range(r.randint(1, 5))]
            if r.random() < 0.5:
                bs.append(bs[0])     # a pod named twice: the second sees the first binding
            self.both("bind_many", bs)
        elif op == "patch":
            k, name, ns = self._ref()
            self.both("patch_annotations", k, name, ns,
                      {"x": r.choice(["1", "2", None]), "y": r.choice(["1", None])})
        elif op == "delete":
            k, name, ns = self._ref()
            kw = {}
            if r.random() < 0.5:
                kw["grace_period_seconds"] = r.choice([0, 0, 3, 10])
            if r.random() < 0.2:
                o = self._known(k)
                if o is not None:
                    kw["resource_version"] = o["metadata"]["resourceVersion"]
            self.both("delete", k, name, ns, **kw)
        elif op == "evict":
            self.both("evict", r.choice(NAMESPACES), r.choice(PODS),
                      grace_period_seconds=r.choice([None, 0, 5]))
        elif op == "finalize":
            self.both("finalize_deletions")
        elif op == "tick":
            c.t += r.choice([0.5, 2.0, 7.0])
        elif op == "list":
            k = r.choice(["Pod", "Node", "Queue"])
            self.both("list", k, r.choice(NAMESPACES) if k == "Pod" and r.random() < 0.5 else None)
        elif op == "list_paged":
            ns = r.choice([None, *NAMESPACES])
            res = self.both("list", "Pod", ns, limit=r.randint(1, 4))
            if isinstance(res, ListResult) and res.continue_:
                self.tokens.append(("Pod", ns, res.continue_))
        elif op == "list_continue":
            if not self.tokens:
                return
            kind, ns, tok = self.tokens.pop(r.randrange(len(self.tokens)))
            res = self.both("list", kind, ns, limit=r.randint(1, 4), continue_=tok)
            if isinstance(res, ListResult) and res.continue_:
                self.tokens.append((kind, ns, res.continue_))
            elif isinstance(res, ApiError) and res.details.get("continue"):
                self.tokens.append((kind, ns, res.details["continue"]))   # the fresh-list hint
        elif op == "list_rv":
            rv = r.randint(0, self.max_rv + 2)
            match = r.choice([None, "Exact", "NotOlderThan"])
            kw = {"resource_version": rv, "resource_version_match": match}
            if r.random() < 0.3:
                kw["limit"] = r.randint(1, 3)
            res = self.both("list", "Pod", None, **kw)
            if isinstance(res, ListResult) and res.continue_:
                self.tokens.append(("Pod", None, res.continue_))
        elif op == "watch":
            k = r.choice(["Pod", "Pod", "Node", "Queue"])
            self.both("watch", k, r.randint(0, self.max_rv + 1), block_ms=0, count=r.choice([3, 1000]))
        elif op == "watch_list":
            self.both("watch_list", r.choice(["Pod", "Node"]),
                      r.choice([None, 0, r.randint(0, self.max_rv + 2)]))
        elif op == "compact":
            self.both("compact", r.choice(["Pod", "Node"]), r.randint(0, self.max_rv))
        elif op == "current":
            self.both("current_resource_version")

    def check_histories(self) -> None:
        """Every kind's whole kept watch history (or the same 410) and the stored state."""
        for k in ("Pod", "Node", "Queue"):
            self.both("watch", k, 0, block_ms=0, count=100_000)
            compacted = self.p.server.compacted.get(k, 0)
            self.both("watch", k, compacted, block_ms=0, count=100_000)
            self.both("list", k)


def _pair(redis_url: str, prefix: str, server_cls=MemoryServer, clear_nnn: bool = True) -> Pair:
    clock = ManualClock()
    ids = SeqIds()   # the memory server's id sequences, for the Redis side
    # (a paged list's snapshot expires after Store.continue_ttl: on Redis's wall clock there, on
    # the injected clock here; a run advances the clock far less than that, ~50 s per 400 steps)
    api = ApiClient.from_url(redis_url, prefix, history=HISTORY, clear_nnn_on_binding=clear_nnn,
                             clock=clock, new_uid=ids.uid, new_snapshot_id=ids.snapshot_id)
    server = server_cls(prefix, history=HISTORY, clear_nnn_on_binding=clear_nnn, clock=clock)
    return Pair(api, server.client(), clock, server)


def _run(pair: Pair, seed: int, steps: int) -> Driver:
    d = Driver(pair, seed)
    for i in range(steps):
        d.step()
        if i % 50 == 49:
            d.check_histories()
    d.check_histories()
    # snapshot expiry is on different clocks on the two sides (see _pair): keep out of its reach
    assert pair.clock.t - DEFAULT_EPOCH < pair.server.store.continue_ttl
    return d


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_same_operations_same_results_and_event_streams(redis_url, key_prefix, seed):
    pair = _pair(redis_url, key_prefix, clear_nnn=seed % 2 == 1)   # both binding modes
    try:
        d = _run(pair, seed, 400)
    finally:
        pair.redis.close()
    # the sequence did reach what it is meant to compare (else a quiet run would pass)
    for want in ("Conflict:metadata.resourceVersion", "Conflict:spec.nodeName", "Gone:resourceVersion",
                 "NotFound:None", "bind", "bind_many", "finalize_deletions", "watch_list:BOOKMARK"):
        assert d.outcomes.get(want, 0) > 0, (want, sorted(d.outcomes))
    assert pair.server.rv > 100 and pair.server.compacted, (pair.server.rv, pair.server.compacted)


def test_the_runs_meet_every_outcome_in_the_contract(redis_url, key_prefix):
    """Over the seeds, every error the contract names and every operation occurs."""
    seen: dict[str, int] = {}
    messages: list[str] = []
    for seed in (1, 2, 3, 4):
        pair = _pair(redis_url, f"{key_prefix}s{seed}", clear_nnn=seed % 2 == 1)
        try:
            d = _run(pair, seed, 400)
        finally:
            pair.redis.close()
        for k, v in d.outcomes.items():
            seen[k] = seen.get(k, 0) + v
        messages += d.messages
    for words in ("is being deleted, cannot be assigned", "precondition failed: uid", "too old",
                  "no new finalizers", "only deletion is allowed", "field is immutable"):
        assert any(words in m for m in messages), words
    for want in ("Conflict:metadata.resourceVersion", "Conflict:spec.nodeName", "Conflict:None",
                 "Conflict:spec.schedulingGates", "Gone:resourceVersion", "Gone:continue",
                 "NotFound:None", "AlreadyExists:None", "TooLargeResourceVersion:resourceVersion",
                 "Invalid:metadata.finalizers", "Invalid:metadata.deletionTimestamp",
                 "Invalid:spec.containers[0].resources.requests.cpu",
                 "list", "create", "update", "update_status", "update_status_many", "patch_annotations",
                 "delete", "evict",
                 "compact", "current_resource_version", "watch:ADDED", "watch:MODIFIED", "watch:DELETED",
                 "watch:BOOKMARK", "watch_list:BOOKMARK"):
        assert seen.get(want, 0) > 0, (want, sorted(seen))


class _StaleRVBlind(MemoryServer):
    """Mutant: the apply script ignores the resourceVersion precondition (no 409 on a stale RV)."""

    def _apply(self, history, packed):
        import msgpack
        a = msgpack.unpackb(packed, raw=True)
        for i in range(3, len(a), 7):
            a[i] = b""
        return super()._apply(history, msgpack.packb(a, use_bin_type=False))


class _NoTrim(MemoryServer):
    """Mutant: the watch history is never trimmed (no 410 Gone)."""

    def _trim_touched(self):
        self._touched = {}


@pytest.mark.parametrize("mutant", [_StaleRVBlind, _NoTrim])
def test_a_broken_memory_server_is_caught(redis_url, key_prefix, mutant):
    pair = _pair(redis_url, key_prefix, mutant)
    try:
        with pytest.raises(AssertionError, match="step"):
            _run(pair, 1, 400)
    finally:
        pair.redis.close()


class _Blocking:
    """An async client driven from synchronous code on a private (real) event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, client) -> None:
        self._loop, self._client = loop, client

    def __getattr__(self, name):
        fn = getattr(self._client, name)

        def call(*args, **kw):
            return self._loop.run_until_complete(fn(*args, **kw))
        return call


def test_the_async_clients_agree_too(redis_url, key_prefix):
    from cluster_state.aio import AsyncApiClient
    loop = asyncio.new_event_loop()
    try:
        clock, ids = ManualClock(), SeqIds()

        async def make():
            return AsyncApiClient.from_url(redis_url, key_prefix, history=HISTORY, clear_nnn_on_binding=True,
                                           clock=clock, new_uid=ids.uid, new_snapshot_id=ids.snapshot_id)
        aredis = loop.run_until_complete(make())
        server = MemoryServer(key_prefix, history=HISTORY, clear_nnn_on_binding=True, clock=clock)
        pair = Pair(_Blocking(loop, aredis), _Blocking(loop, server.async_client()), clock, server)  # type: ignore[arg-type]
        d = _run(pair, 11, 250)
        assert d.outcomes.get("Conflict:metadata.resourceVersion", 0) > 0 and server.compacted
        loop.run_until_complete(aredis.close())
    finally:
        loop.close()


def test_corrupt_data_is_reported_alike(redis_url, key_prefix):
    """Raw bytes put where objects and events live (what chaos or a bad writer could do) reach
    the same CORRUPT paths on both servers."""
    import redis as redis_py
    pair = _pair(redis_url, key_prefix)
    raw = redis_py.Redis.from_url(redis_url)
    try:
        d = Driver(pair, 0)
        d.both("create", pod("p0", "a"))
        raw.hset(f"{key_prefix}:obj:Pod", "a/bad", b"\xc1\xc1")
        pair.server.put_raw("Pod", "a/bad", b"\xc1\xc1")
        rv = raw.incr(f"{key_prefix}:rv")
        raw.xadd(f"{key_prefix}:ev:Pod", {"t": "MODIFIED", "o": b"\xc1"}, id=f"{rv}-0")
        assert pair.server.add_raw_event("Pod", b"MODIFIED", b"\xc1") == rv
        d.both("create", pod("p1", "a"))
        lst = d.both("list", "Pod")
        assert len(lst.corrupt) == 1
        ev = d.both("watch", "Pod", 0, block_ms=0)
        assert [e.type for e in ev] == ["ADDED", "CORRUPT", "ADDED"]
        assert [e.type for e in d.both("watch_list", "Pod")] == ["CORRUPT", "ADDED", "ADDED", "BOOKMARK"]
        d.both("list", "Pod", limit=1)
        d.both("get", "Pod", "bad", "a")   # a CorruptObject error, the same words
        assert d.outcomes.get("CorruptObject:None") == 1
    finally:
        raw.close()
        pair.redis.close()
