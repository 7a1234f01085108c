"""Leader election (client-go rules) against the real API server on a real Redis, with short leases.

No speed targets: the assertions are client-go's *safety* orderings (a standby never takes over
before the lease expired by its own observation; a partitioned leader stops before a correctly
clocked standby starts) and the hazard the clock-rate fault relies on (a fast-clocked standby
overlaps a partitioned leader)."""
from __future__ import annotations

import asyncio
import random
import time

import pytest

from ha.errors import BadInput
from ha.runtime.clock import ScaledClock
from ha.runtime.election import (DURATION_ANNOTATION, JITTER_FACTOR, LeaderCallbacks,
                                 LeaderElectionConfig, LeaderElector)

LEASE = dict(lease_duration=1.5, renew_deadline=1.0, retry_period=0.2)


async def _api(redis_url, prefix):
    from cluster_state.aio import AsyncApiClient
    return AsyncApiClient.from_url(redis_url, prefix=prefix)


async def _close(api):
    close = getattr(api, "close", None) or getattr(api, "aclose", None)
    if close is not None:
        res = close()
        if asyncio.iscoroutine(res):
            await res


async def _wait(pred, timeout=20.0, step=0.02):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        await asyncio.sleep(step)
    return pred()


class Recorder:
    """Callbacks that record (wall time, event)."""

    def __init__(self, name):
        self.name = name
        self.events: list[tuple[float, str, object]] = []

    def callbacks(self):
        return LeaderCallbacks(on_started_leading=lambda fence: self.events.append((time.time(), "start", fence)),
                               on_stopped_leading=lambda: self.events.append((time.time(), "stop", None)),
                               on_new_leader=lambda who: self.events.append((time.time(), "new", who)))

    def times(self, what):
        return [t for t, e, _ in self.events if e == what]


class FlakyApi:
    """The real client, with a switch that makes every call fail like a lost Redis connection
    (fault injection around a real part, as the partition fault does)."""

    def __init__(self, api):
        self._api = api
        self.down = False

    def __getattr__(self, name):
        attr = getattr(self._api, name)
        if not callable(attr):
            return attr

        async def call(*a, **kw):
            if self.down:
                raise ConnectionError("partitioned (test)")
            return await attr(*a, **kw)
        return call


# ---------------------------------------------------------------------------- configuration

def test_config_validation_follows_client_go():
    LeaderElectionConfig(identity="a")  # defaults 15/10/2 are valid
    assert JITTER_FACTOR == 1.2
    with pytest.raises(BadInput, match="renew deadline"):
        LeaderElectionConfig(identity="a", lease_duration=15, renew_deadline=2.4, retry_period=2)
    with pytest.raises(BadInput, match="lease duration"):
        LeaderElectionConfig(identity="a", lease_duration=10, renew_deadline=10, retry_period=2)
    with pytest.raises(BadInput, match="identity"):
        LeaderElectionConfig(identity="")
    # 2.5 > 1.2 * 2 is fine
    LeaderElectionConfig(identity="a", lease_duration=3, renew_deadline=2.5, retry_period=2)


def test_scaled_clock_rate_changes_are_continuous():
    now = [100.0]
    clock = ScaledClock(2.0, real=lambda: now[0])
    t0 = clock.monotonic()
    now[0] += 1.0
    assert clock.monotonic() == pytest.approx(t0 + 2.0)
    clock.set_rate(0.5)
    assert clock.monotonic() == pytest.approx(t0 + 2.0)   # no jump at the change
    now[0] += 2.0
    assert clock.monotonic() == pytest.approx(t0 + 3.0)
    assert clock.real_seconds(1.0) == pytest.approx(2.0)
    with pytest.raises(ValueError):
        clock.set_rate(0)


# ---------------------------------------------------------------------------- against the API server

async def test_single_candidate_creates_and_holds_the_lease(redis_url, key_prefix):
    api = await _api(redis_url, key_prefix)
    rec = Recorder("a")
    el = LeaderElector(api, LeaderElectionConfig(identity="a", lease_name="l1", namespace="ns", **LEASE),
                       rec.callbacks(), rng=random.Random(1))
    task = asyncio.create_task(el.run())
    try:
        assert await _wait(el.is_leader)
        lease = await api.get("Lease", "l1", "ns")
        assert lease["spec"]["holderIdentity"] == "a"
        assert lease["spec"]["leaseTransitions"] == 0
        assert lease["metadata"]["annotations"][DURATION_ANNOTATION] == "1500"
        assert await _wait(lambda: rec.times("start"))   # on_started_leading runs as a task
        fence = next(x for _, e, x in rec.events if e == "start")
        assert fence.holder == "a" and fence.transitions == 0
        rv1 = lease["metadata"]["resourceVersion"]
        # it keeps renewing: the record changes
        assert await _wait(lambda: el.stats.attempts >= 4)
        lease2 = await api.get("Lease", "l1", "ns")
        assert lease2["metadata"]["resourceVersion"] > rv1
        assert lease2["spec"]["renewTime"] >= lease["spec"]["renewTime"]
        assert el.is_leader() and el.fence().transitions == 0
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    # cancelled: released (holder emptied) and OnStoppedLeading called
    lease = await api.get("Lease", "l1", "ns")
    assert lease["spec"]["holderIdentity"] == ""
    assert rec.times("stop") and not el.is_leader()
    await _close(api)


async def test_stopped_leading_is_called_even_without_leading(redis_url, key_prefix):
    api = await _api(redis_url, key_prefix)
    a = LeaderElector(api, LeaderElectionConfig(identity="a", lease_name="l", namespace="ns", **LEASE))
    ta = asyncio.create_task(a.run())
    assert await _wait(a.is_leader)
    rec = Recorder("b")
    b = LeaderElector(api, LeaderElectionConfig(identity="b", lease_name="l", namespace="ns", **LEASE),
                      rec.callbacks())
    tb = asyncio.create_task(b.run())
    assert await _wait(lambda: b.stats.attempts >= 2)
    assert not b.is_leader() and b.observed_holder() == "a"
    assert rec.times("new") and rec.events[0][2] == "a"
    tb.cancel()
    await asyncio.gather(tb, return_exceptions=True)
    assert rec.times("stop") and not rec.times("start")
    ta.cancel()
    await asyncio.gather(ta, return_exceptions=True)
    await _close(api)


async def test_three_candidates_one_leader_and_release_hands_over(redis_url, key_prefix):
    api = await _api(redis_url, key_prefix)
    els = [LeaderElector(api, LeaderElectionConfig(identity=f"s{i}", lease_name="l", namespace="ns", **LEASE),
                         rng=random.Random(i)) for i in range(3)]
    tasks = [asyncio.create_task(e.run()) for e in els]
    try:
        assert await _wait(lambda: any(e.is_leader() for e in els))
        for _ in range(60):   # sample ~1.2 s: never two leaders
            assert sum(e.is_leader() for e in els) <= 1
            await asyncio.sleep(0.02)
        leader = next(i for i, e in enumerate(els) if e.is_leader())
        tasks[leader].cancel()  # graceful stop: ReleaseOnCancel
        await asyncio.gather(tasks[leader], return_exceptions=True)
        others = [e for i, e in enumerate(els) if i != leader]
        assert await _wait(lambda: any(e.is_leader() for e in others))
        new = next(e for e in others if e.is_leader())
        lease = await api.get("Lease", "l", "ns")
        assert lease["spec"]["holderIdentity"] == new.identity
        assert lease["spec"]["leaseTransitions"] == 1
        assert new.fence().transitions == 1
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await _close(api)


async def test_a_leader_cancelled_as_its_renewal_completes_stops(redis_url, key_prefix):
    """The cancel lands after a renewal finished and before the renew loop resumed: the loop must
    end (and release), not renew on. Python 3.11's asyncio.wait_for dropped exactly this cancel,
    which left a cancelled leader renewing and its canceller waiting forever."""
    api = await _api(redis_url, key_prefix)
    el = LeaderElector(api, LeaderElectionConfig(identity="a", lease_name="l", namespace="ns", **LEASE),
                       rng=random.Random(3))
    task = asyncio.create_task(el.run())
    try:
        assert await _wait(el.is_leader)
        seen = el._observed_rv
        # the renewal's attempt stores the record it wrote and returns in the same step; the
        # renew loop resumes only a few callbacks later: cancel in between
        deadline = time.monotonic() + 10
        while el._observed_rv == seen and time.monotonic() < deadline:
            await asyncio.sleep(0)
        assert el._observed_rv != seen, "no renewal within 10 s"
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=5)
        assert task in done, "the cancelled leader kept renewing"
        assert task.cancelled()
        lease = await api.get("Lease", "l", "ns")
        assert lease["spec"]["holderIdentity"] == ""     # released on the way out
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await _close(api)


async def test_crashed_leader_is_replaced_only_after_the_lease_expires(redis_url, key_prefix):
    api = await _api(redis_url, key_prefix)
    cfg = dict(lease_name="l", namespace="ns", release_on_cancel=False, **LEASE)
    a = LeaderElector(api, LeaderElectionConfig(identity="a", **cfg))
    ta = asyncio.create_task(a.run())
    assert await _wait(a.is_leader)
    rec = Recorder("b")
    b = LeaderElector(api, LeaderElectionConfig(identity="b", **cfg), rec.callbacks(),
                      rng=random.Random(7))
    tb = asyncio.create_task(b.run())
    assert await _wait(lambda: b.stats.attempts >= 2)
    # "crash": the leader stops without releasing; its last renewal is at most a retry period ago
    crash = time.time()
    ta.cancel()
    await asyncio.gather(ta, return_exceptions=True)
    lease = await api.get("Lease", "l", "ns")
    assert lease["spec"]["holderIdentity"] == "a"          # not released
    last_renew = lease["spec"]["renewTime"]                 # a's wall clock, the same as ours
    assert last_renew <= crash
    assert await _wait(b.is_leader, timeout=30)
    # on_started_leading runs as a task: wait until it has been recorded
    assert await _wait(lambda: rec.times("start"), timeout=30)
    took_over = rec.times("start")[0]
    # b saw that record no earlier than it was written, and must then see it unchanged for a
    # whole lease duration (a lower bound: a loaded machine only makes the takeover later)
    assert took_over - last_renew >= LEASE["lease_duration"] - 0.05
    lease = await api.get("Lease", "l", "ns")
    assert lease["spec"]["holderIdentity"] == "b" and lease["spec"]["leaseTransitions"] == 1
    tb.cancel()
    await asyncio.gather(tb, return_exceptions=True)
    await _close(api)


async def test_partitioned_leader_stops_before_standby_starts(redis_url, key_prefix):
    """client-go's nominal gap: the old leader gives up after RenewDeadline, a standby takes over
    after LeaseDuration (here 3 s vs 1 s: a wide margin for a loaded machine)."""
    real = await _api(redis_url, key_prefix)
    flaky = FlakyApi(real)
    lease = dict(lease_duration=3.0, renew_deadline=1.0, retry_period=0.2)
    ra, rb = Recorder("a"), Recorder("b")
    a = LeaderElector(flaky, LeaderElectionConfig(identity="a", lease_name="l", namespace="ns", **lease),
                      ra.callbacks())
    ta = asyncio.create_task(a.run())
    assert await _wait(a.is_leader)
    b = LeaderElector(real, LeaderElectionConfig(identity="b", lease_name="l", namespace="ns", **lease),
                      rb.callbacks())
    tb = asyncio.create_task(b.run())
    assert await _wait(lambda: b.stats.attempts >= 2)
    cut = time.time()
    flaky.down = True
    assert await _wait(lambda: not a.is_leader(), timeout=30)
    await asyncio.gather(ta, return_exceptions=True)   # run() returns after losing
    stopped = ra.times("stop")[0]
    assert stopped - cut >= lease["renew_deadline"] - 0.05     # it did not give up early
    assert a.stats.errors > 0
    assert await _wait(b.is_leader, timeout=30)
    assert await _wait(lambda: rb.times("start"), timeout=30)   # the callback runs as a task
    assert rb.times("start")[0] > stopped                       # no overlap
    tb.cancel()
    await asyncio.gather(tb, return_exceptions=True)
    await _close(real)


async def test_fast_clock_standby_overlaps_a_partitioned_leader(redis_url, key_prefix):
    """The hazard the clock-rate fault injects: only local timestamps are trusted, so a standby
    whose clock runs 6x fast declares the lease expired while the old leader still believes it
    leads (it has not yet hit its renew deadline): two leaders at once."""
    real = await _api(redis_url, key_prefix)
    flaky = FlakyApi(real)
    lease = dict(lease_duration=3.0, renew_deadline=2.4, retry_period=0.2)
    ra, rb = Recorder("a"), Recorder("b")
    a = LeaderElector(flaky, LeaderElectionConfig(identity="a", lease_name="l", namespace="ns", **lease),
                      ra.callbacks())
    ta = asyncio.create_task(a.run())
    assert await _wait(a.is_leader)
    overlap = []
    cbs = rb.callbacks()
    started = cbs.on_started_leading
    cbs.on_started_leading = lambda fence: (overlap.append(a.is_leader()), started(fence))
    b = LeaderElector(real, LeaderElectionConfig(identity="b", lease_name="l", namespace="ns", **lease),
                      cbs, clock=ScaledClock(6.0))
    tb = asyncio.create_task(b.run())
    assert await _wait(lambda: b.stats.attempts >= 2)
    flaky.down = True
    assert await _wait(lambda: overlap, timeout=30)
    assert await _wait(lambda: not a.is_leader(), timeout=30)
    assert overlap[0], "the fast-clocked standby should have taken over while the old leader still led"
    assert await _wait(lambda: rb.times("start") and ra.times("stop"), timeout=30)
    assert rb.times("start")[0] < ra.times("stop")[0]
    for t in (ta, tb):
        t.cancel()
    await asyncio.gather(ta, tb, return_exceptions=True)
    await _close(real)


async def test_abandoned_leader_keeps_its_lease_until_it_expires(redis_url, key_prefix):
    """A crash (Volcano's klog.Fatalf; the instance's in-process restart models it) runs no
    ReleaseOnCancel: the lease stays with the dead term, and the next term (here the same
    process under a new identity, as a restarted pod campaigns) starts only once the lease has
    expired by the candidate's own observation. Before abandon(), the restart released the lease
    and re-won it at once: a leader change within milliseconds that no crash can produce."""
    api = await _api(redis_url, key_prefix)
    lease = dict(lease_duration=2.0, renew_deadline=1.5, retry_period=0.2)
    ra, rb = Recorder("a"), Recorder("b")
    a = LeaderElector(api, LeaderElectionConfig(identity="a_1", lease_name="l", namespace="ns", **lease),
                      ra.callbacks())
    ta = asyncio.create_task(a.run())
    try:
        assert await _wait(a.is_leader)
        a.abandon()
        ta.cancel()
        await asyncio.gather(ta, return_exceptions=True)
        assert ra.times("stop") and not a.is_leader()      # OnStoppedLeading still runs
        rec = await api.get("Lease", "l", "ns")
        assert rec["spec"]["holderIdentity"] == "a_1"      # not released
        assert rec["metadata"]["annotations"][DURATION_ANNOTATION] == "2000"
        last_renew = rec["spec"]["renewTime"]
        # the restarted process campaigns under a new identity
        b = LeaderElector(api, LeaderElectionConfig(identity="a_2", lease_name="l", namespace="ns", **lease),
                          rb.callbacks(), rng=random.Random(3))
        tb = asyncio.create_task(b.run())
        assert await _wait(lambda: rb.times("start"), timeout=30)
        assert rb.times("start")[0] - last_renew >= lease["lease_duration"] - 0.05
        rec = await api.get("Lease", "l", "ns")
        assert rec["spec"]["holderIdentity"] == "a_2" and rec["spec"]["leaseTransitions"] == 1
        tb.cancel()
        await asyncio.gather(tb, return_exceptions=True)
    finally:
        ta.cancel()
        await asyncio.gather(ta, return_exceptions=True)
        await _close(api)


async def test_a_candidate_cancelled_at_any_moment_stops_at_once(redis_url, key_prefix):
    """Cancelling a candidate mid-call (the instance stopping, a wait_for giving up) must end it:
    redis-py's asyncio client can swallow a cancel that lands in a read and wait forever (before
    the lease calls were shielded, this hung within 100 tries; the stop of `test_stopped_leading…`
    hung the same way now and then)."""
    api = await _api(redis_url, key_prefix)
    # candidates, not leaders: the holder renews every 10 ms and keeps the lease unless it stalls
    # for 8 s (with LEASE's 1 s deadline a loaded machine let a candidate win now and then, and
    # a cancelled leader gives its lease back first, which is another test's subject)
    fast = dict(lease_duration=10.0, renew_deadline=8.0, retry_period=0.01)
    holder = LeaderElector(api, LeaderElectionConfig(identity="a", lease_name="l", namespace="ns", **fast))
    ta = asyncio.create_task(holder.run())
    rng = random.Random(7)
    try:
        assert await _wait(holder.is_leader)     # before the first candidate: none can win
        for i in range(150):
            b = LeaderElector(api, LeaderElectionConfig(identity=f"b{i}", lease_name="l", namespace="ns",
                                                        **fast))
            tb = asyncio.create_task(b.run())
            await asyncio.sleep(rng.random() * 0.03)
            tb.cancel()
            done, _ = await asyncio.wait({tb}, timeout=5)
            assert tb in done, f"candidate {i} ignored its cancel"
            assert not b.is_leader() and b.stats.acquired == 0
        assert holder.is_leader()
    finally:
        ta.cancel()
        await asyncio.wait({ta}, timeout=5)
        await _close(api)
