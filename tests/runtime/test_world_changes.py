"""The hollow kubelet and the job controller act on what changed (the mirrors' change
subscriptions), not on a walk of every pod each tick. Against the real API server: the same
random history of creates, binds, evictions, failures, PodGroups that come late or go, relists
and failed writes, played into two API servers, one world acting on changes and one made to walk
everything every tick (every tick a relist for its readers: what the world did before), must
write the same things in the same order, tick by tick."""
from __future__ import annotations

import random
import time

import pytest

from cluster_state.errors import ApiError
from ha.runtime.controller import ControllerConfig, JobController
from ha.runtime.kubelet import Kubelet, KubeletConfig
from ha.runtime.mirror import KindMirror
from ha.runtime.workload import GROUP_ANNOTATION, RUNTIME_ANNOTATION, make_nodes, make_queue


class Recorder:
    """The real client, with every write the world makes written down (verb, object, what
    it sets); every ``fail_every``-th write raises instead of reaching the server."""

    def __init__(self, api, fail_every: int = 0):
        self.api = api
        self.log: list[tuple] = []
        self.fail_every = fail_every
        self._n = 0

    def __getattr__(self, name):
        return getattr(self.api, name)

    def _write(self, entry: tuple) -> None:
        self._n += 1
        failed = bool(self.fail_every) and self._n % self.fail_every == 0
        self.log.append(entry + (("failed",) if failed else ()))
        if failed:
            raise ApiError(f"injected failure of write {self._n}")

    async def update_status(self, obj):
        st = obj.get("status") or {}
        self._write(("update_status", obj["kind"], obj["metadata"]["name"], st.get("phase"),
                     st.get("running"), st.get("succeeded"), st.get("failed")))
        return await self.api.update_status(obj)

    async def create(self, obj):
        self._write(("create", obj["kind"], obj["metadata"]["name"]))
        return await self.api.create(obj)

    async def delete(self, kind, name, namespace=None, **kw):
        self._write(("delete", kind, name))
        return await self.api.delete(kind, name, namespace, **kw)

    async def finalize_deletions(self):
        self._write(("finalize_deletions",))
        return await self.api.finalize_deletions()


class World:
    """Mirrors, kubelet and job controller over one API server. ``clock``: [monotonic, wall
    offset]; the wall is the real one (deletion timestamps come from the server) moved on by
    the offset, which the histories move in jumps far from any grace period's end."""

    def __init__(self, api, *, walk_everything: bool, clock: list[float]):
        self.rec = Recorder(api, fail_every=7)
        self.pods = KindMirror(self.rec, "Pod")
        self.pgs = KindMirror(self.rec, "PodGroup")
        self.kubelet = Kubelet(self.rec, KubeletConfig(startup_delay_s=0.5), pods=self.pods,
                               now=lambda: clock[0], wall=lambda: time.time() + clock[1])
        self.ctrl = JobController(self.rec, ControllerConfig(), pods=self.pods, podgroups=self.pgs)
        self.walk_everything = walk_everything
        self.failed_ticks = 0

    async def step(self, relist: bool) -> list[tuple]:
        mark = len(self.rec.log)
        if relist:
            await self.pods.relist()
            await self.pgs.relist()
        else:
            await self.pods.sync(block_ms=20)
            await self.pgs.sync(block_ms=5)
        if self.walk_everything:
            for ch, mirror in ((self.kubelet._changes, self.pods), (self.ctrl._pod_changes, self.pods),
                               (self.ctrl._pg_changes, self.pgs)):
                ch.keys.update(dict.fromkeys(mirror.objects))
        try:   # as the cluster's world loop: a failed tick is counted, the next one goes on
            await self.kubelet.tick()
            await self.ctrl.tick()
        except ApiError:
            self.failed_ticks += 1
        return self.rec.log[mark:]


def _pod(job: str, k: int, runtime_ms: int | None) -> dict:
    ann = {GROUP_ANNOTATION: job}
    if runtime_ms is not None:
        ann[RUNTIME_ANNOTATION] = str(runtime_ms)
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{job}-{k}", "namespace": "default", "annotations": ann},
            "spec": {"nodeName": "", "containers": [{"name": "c", "resources": {
                "requests": {"cpu": "100m"}}}]},
            "status": {"phase": "Pending", "conditions": []}}


def _podgroup(job: str, min_member: int) -> dict:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": job, "namespace": "default"},
            "spec": {"minMember": min_member, "queue": "default"},
            "status": {"phase": "Pending"}}


async def _play(api, op: tuple) -> None:
    """One operation of the history, done by the world's users (not recorded)."""
    from cluster_state.errors import ApiError as Err
    kind = op[0]
    try:
        if kind == "podgroup":
            await api.create(_podgroup(op[1], op[2]))
        elif kind == "pod":
            await api.create(_pod(op[1], op[2], op[3]))
        elif kind == "bind":
            await api.bind("default", op[1], op[2])
        elif kind == "evict":
            await api.evict("default", op[1], grace_period_seconds=op[2])
        elif kind == "fail":
            pod = await api.get("Pod", op[1], "default")
            await api.update_status({**pod, "status": {**pod["status"], "phase": "Failed"}})
        elif kind == "delete-podgroup":
            await api.delete("PodGroup", op[1], "default")
    except Err:
        pass   # the same on both sides: the two servers hold the same objects


def _history(seed: int, steps: int) -> list[list[tuple]]:
    """Per step, the users' operations: jobs (PodGroup first, or its pods first), binds,
    evictions, failures, PodGroups deleted; names only, so both servers get the same."""
    rng = random.Random(seed)
    jobs: list[tuple[str, int]] = []
    out = []
    for step in range(steps):
        ops: list[tuple] = []
        if rng.random() < 0.5:
            job, size = f"j{step}", rng.randint(1, 3)
            runtime = rng.choice([None, 300, 900])
            pods = [("pod", job, k, runtime) for k in range(size)]
            pg = [("podgroup", job, size)]
            ops += pods + pg if rng.random() < 0.3 else pg + pods
            jobs.append((job, size))
        for _ in range(rng.randint(0, 3)):
            if not jobs:
                break
            job, size = rng.choice(jobs)
            name = f"{job}-{rng.randrange(size)}"
            if rng.random() < 0.3:
                name += f"-r{rng.randint(1, 2)}"
            what = rng.random()
            if what < 0.55:
                ops.append(("bind", name, f"node-{rng.randint(1, 3)}"))
            elif what < 0.75:
                ops.append(("evict", name, rng.choice([0, 30])))
            elif what < 0.93:
                ops.append(("fail", name))
            else:
                ops.append(("delete-podgroup", job))
        out.append(ops)
    return out


async def _client(redis_url, prefix):
    from cluster_state.aio import AsyncApiClient
    api = AsyncApiClient.from_url(redis_url, prefix=prefix)
    for obj in make_nodes(3, cpu="8", memory="8Gi", pods=50):
        await api.create(obj)
    await api.create(make_queue("default"))
    return api


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_acting_on_changes_writes_what_walking_everything_wrote(redis_url, key_prefix, seed):
    clock = [0.0, 0.0]
    a_api = await _client(redis_url, f"{key_prefix}-changes")
    b_api = await _client(redis_url, f"{key_prefix}-walk")
    changes = World(a_api, walk_everything=False, clock=clock)
    walk = World(b_api, walk_everything=True, clock=clock)
    rng = random.Random(seed * 1000)
    writes = 0
    try:
        for n, ops in enumerate(_history(seed, 60)):
            for op in ops:
                await _play(a_api, op)
                await _play(b_api, op)
            clock[0] += 0.35
            if n % 10 == 9:
                clock[1] += 100.0     # every pod being deleted so far is due
            relist = rng.random() < 0.08
            a, b = await changes.step(relist), await walk.step(relist)
            assert a == b, f"step {n} (seed {seed}): acting on changes wrote {a}, walking wrote {b}"
            writes += len(a)
        # the histories did make the world act: starts, completions, re-creations, statuses,
        # finalizations, and failed writes that had to be done again without a new event
        verbs = {e[0] for e in changes.rec.log}
        assert {"update_status", "create", "finalize_deletions"} <= verbs, verbs
        assert any(e[-1] == "failed" for e in changes.rec.log) and changes.failed_ticks > 0
        assert writes > 40
        assert changes.kubelet.stats.started > 5 and changes.ctrl.stats.recreated > 0
    finally:
        for api in (a_api, b_api):
            await api.close()


async def test_what_is_gone_is_forgotten(redis_url, key_prefix):
    """A pod deleted, a name re-used by a new pod, a PodGroup deleted (the last learnt from a
    relist): nothing of the old ones stays in the kubelet's or the controller's books."""
    clock = [0.0, 0.0]
    api = await _client(redis_url, key_prefix)
    w = World(api, walk_everything=False, clock=clock)
    w.rec.fail_every = 0
    try:
        for op in [("podgroup", "j", 2), ("pod", "j", 0, None), ("pod", "j", 1, None),
                   ("bind", "j-0", "node-1"), ("bind", "j-1", "node-1")]:
            await _play(api, op)
        await w.step(False)
        uids = dict(w.kubelet._uid_of)
        assert set(uids) == {("default", "j-0"), ("default", "j-1")}
        assert set(w.kubelet._bound_seen) == set(uids.values())
        # the same name again, a new pod: its startup delay counts from its own first sight
        await api.delete("Pod", "j-0", "default", grace_period_seconds=0)
        await _play(api, ("pod", "j", 0, None))
        await _play(api, ("bind", "j-0", "node-2"))
        clock[0] += 0.4
        await w.step(False)
        assert uids[("default", "j-0")] not in w.kubelet._bound_seen
        assert w.kubelet._uid_of[("default", "j-0")] != uids[("default", "j-0")]
        clock[0] += 0.2     # j-1 is due (0.6 s); the new j-0 is not (0.2 s)
        started = [e[2] for e in await w.step(False) if e[:2] == ("update_status", "Pod")]
        assert started == ["j-1"]
        # everything deleted, and learnt from a relist (no DELETED event seen): the books are empty
        await api.delete("PodGroup", "j", "default")
        for name in ("j-0", "j-1"):
            await api.delete("Pod", name, "default", grace_period_seconds=0)
        await w.step(True)
        assert not w.kubelet._uid_of and not w.kubelet._waiting
        assert not w.kubelet._bound_seen and not w.kubelet._running_since
        assert not w.ctrl._job_of and not w.ctrl._pods_of and not w.ctrl._slots
        assert not w.pods.objects and not w.pods._place
    finally:
        await api.close()


async def test_a_podgroup_that_comes_after_its_pods_still_gets_its_pods_re_created(redis_url, key_prefix):
    clock = [0.0, 0.0]
    api = await _client(redis_url, key_prefix)
    w = World(api, walk_everything=False, clock=clock)
    w.rec.fail_every = 0
    try:
        for op in [("pod", "late", 0, None), ("pod", "late", 1, None), ("bind", "late-0", "node-1")]:
            await _play(api, op)
        await w.step(False)
        assert ("default", "late") not in w.ctrl._slots      # no PodGroup: nothing to keep
        await _play(api, ("podgroup", "late", 2))
        await w.step(False)
        assert set(w.ctrl._slots[("default", "late")]) == {"late-0", "late-1"}
        await _play(api, ("evict", "late-0", 0))
        made = []
        for _ in range(4):
            clock[0] += 0.3
            made += [e[2] for e in await w.step(False) if e[:2] == ("create", "Pod")]
        assert made == ["late-0-r1"]
    finally:
        await api.close()
