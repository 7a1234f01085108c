"""failover_recovery_s: which leadership change answers which leader loss (runner.match_failover)."""
from __future__ import annotations

from ha.experiment.runner import FailoverEvent, match_failover


def st(became=None, first=None, leader=True):
    return {"became_leader_at": became, "first_bind_after_leading_at": first, "is_leader": leader}


def test_kill_matches_the_next_leader_and_times_its_first_bind():
    ev = FailoverEvent("kill", "s1", 30.0, 1000.0)
    match_failover(ev, {"s1": st(990, 991), "s2": st(1004, 1004.5)}, None, 1005)
    assert ev.new_leader == "s2" and ev.recovery_s == 4.5


def test_a_pause_the_leader_survived_is_not_matched_to_a_later_unrelated_takeover():
    # paused at 1000 for 4 s, resumed at 1004; lease 4 s + retry 0.5 s -> window ends 1008.5
    ev = FailoverEvent("pause", "s1", 130.0, 1000.0, resumed_wall=1004.0)
    match_failover(ev, {"s1": st(900, 901), "s2": st(None)}, 1008.5, 1010)
    assert ev.no_takeover and ev.recovery_s is None
    # a takeover 70 s later (another fault's) must not be booked against this pause
    match_failover(ev, {"s1": st(900, 901, leader=False), "s3": st(1070, 1076)}, 1008.5, 1080)
    assert ev.recovery_s is None and ev.new_leader is None


def test_a_pause_that_lost_the_lease_is_timed_and_a_pending_takeover_keeps_it_open():
    ev = FailoverEvent("pause", "s1", 130.0, 1000.0, resumed_wall=1004.0)
    match_failover(ev, {"s2": st(1004.2, None)}, 1008.5, 1009)        # leading, no bind yet
    assert not ev.no_takeover and ev.recovery_s is None
    match_failover(ev, {"s2": st(1004.2, 1005.0)}, 1008.5, 1010)
    assert ev.new_leader == "s2" and ev.recovery_s == 5.0
