"""The acceleration settings: read from the environment once, when a cache is built, handed to its
sessions, and what the fast path and snapshot reuse obey -- not the environment at call time."""
from __future__ import annotations

from ha.scheduler.acceleration import Acceleration, acceleration_of
from ha.scheduler.actions.allocate import fastpath
from ha.scheduler.framework.session import open_session
from ha.scheduler.wiring import build_cache


def test_the_environment_spells_every_setting():
    acc = Acceleration.from_environ({"HA_ALLOCATE_FASTPATH": "off", "HA_SNAPSHOT_REUSE": "0",
                                     "HA_VERIFY_SNAPSHOT_REUSE": "1", "HA_PROFILE_SESSIONS": "/tmp/p"})
    assert acc == Acceleration(allocate_fastpath=False, snapshot_reuse=False,
                               verify_snapshot_reuse=True, profile_sessions="/tmp/p")
    assert Acceleration.from_environ({}) == Acceleration()
    assert Acceleration().as_record() == {"allocate_fastpath": True, "snapshot_reuse": True,
                                          "verify_snapshot_reuse": False, "profile_sessions": ""}


def test_a_cache_reads_them_once_and_its_sessions_obey_it(monkeypatch):
    monkeypatch.setenv("HA_ALLOCATE_FASTPATH", "0")
    monkeypatch.setenv("HA_SNAPSHOT_REUSE", "0")
    cache = build_cache().cache
    monkeypatch.setenv("HA_ALLOCATE_FASTPATH", "1")       # too late for this cache
    monkeypatch.setenv("HA_SNAPSHOT_REUSE", "1")
    assert cache.acceleration.allocate_fastpath is False
    assert cache.node_clones.enabled is False and cache.job_clones.enabled is False
    ssn = open_session(cache)
    assert ssn.acceleration is cache.acceleration
    assert fastpath.for_session(ssn) is None


def test_given_settings_win_over_the_environment(monkeypatch):
    monkeypatch.setenv("HA_VERIFY_SNAPSHOT_REUSE", "1")
    given = Acceleration(verify_snapshot_reuse=False, snapshot_reuse=False)
    cache = build_cache(acceleration=given).cache
    assert cache.acceleration is given and acceleration_of(cache) is given
    assert cache.node_clones.verify is False and cache.node_clones.enabled is False
