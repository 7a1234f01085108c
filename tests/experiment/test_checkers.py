"""Every checker over literal histories (written with the real HistoryWriter): each one sees its
constructed violation and stays at zero (or absent, with a reason) when the run is quiet."""
from __future__ import annotations

import pytest

from ha.experiment.replay import build_replay_cache
from ha.experiment.checkers import Absent, all_checkers, run_checkers
from ha.experiment.checkers._fold import EventFold

from .histories import Api, History, HistoryWriter, header, inst, node, pg, pod, queue

S1, S2 = "scheduler-1", "scheduler-2"


def uptodate(events, until=None):
    """The digest an up-to-date cache holds after ``events`` (what a quiet instance reports)."""
    cache = build_replay_cache(profile="v1.14")
    fold = EventFold(sorted(events, key=lambda e: e["rv"]), cache=cache)
    fold.advance(until if until is not None else 10**9)
    d = cache.digest()
    return {"tasks": d["tasks"], "nodes": d["nodes"]}


def run(tmp_path, h=None):
    return run_checkers(History(tmp_path))


def dec(op, pod_name, node_name, t, session=1, instance=S1, ok=True, dry=False, gen=0):
    return {"t": t, "op": op, "pod": f"default/{pod_name}", "node": node_name, "session": session,
            "instance": instance, "generation": gen, "ok": ok, "dry_run": dry, "leader": True}


class Run:
    """A small run: write events, decisions and ticks in time order."""

    def __init__(self, tmp_path, **hdr):
        self.api = Api()
        self.all_events: list[dict] = []
        self.w = HistoryWriter(tmp_path, header(**hdr))
        self.out = tmp_path

    def flush_events(self):
        evs = self.api.drain()
        self.all_events.extend(evs)
        self.w.events(evs)

    def tick(self, t, instances=None, *, lag=None, **counters):
        """Both instances up to date (default), or ``lag={name: rv}``: that one stuck at an RV."""
        self.flush_events()
        lag = lag or {}
        if instances is None:
            instances = {}
            for n in (S1, S2):
                d = uptodate(self.all_events, lag.get(n))
                instances[n] = inst(d["tasks"], d["nodes"], leader=(n == S1), **counters)
        self.w.tick(t, self.api.rv, self.api.rv, instances)

    def close(self, **final):
        self.flush_events()
        self.w.final({"elapsed_s": final.pop("elapsed_s", 10.0), **final})
        self.w.close()
        return History(self.out)


def cluster(r: Run, pods=("a", "b"), min_member=1):
    r.api.create(queue(), node("n1"), node("n2"), pg("j1", min_member))
    for p in pods:
        r.api.create(pod(p, group="j1"))


def check(h, name):
    return {c.name: c for c in all_checkers()}[name].check(h)


# ---------------------------------------------------------------------------------- registry

def test_registry_is_sorted_and_holds_every_design_metric():
    names = [c.name for c in all_checkers()]
    assert names == sorted(names)
    for m in ("cache_divergence", "pairwise_drift", "resource_drift", "staleness_ms", "allocation_drift",
              "wasted_evictions", "cyclic_evictions", "overcommit_violations", "partial_gang_binds",
              "bind_conflicts", "failover_recovery_s", "pods_bound_per_s", "leader_changes",
              "lease_losses", "fatal_cache_errors", "convergence", "api_consistency"):
        assert m in names


# ------------------------------------------------------------------------ cache divergence

def test_cache_divergence_sees_a_lagging_instance_and_zero_when_caught_up(tmp_path):
    r = Run(tmp_path)
    cluster(r)
    r.tick(0.0)
    lag_rv = r.api.rv
    r.api.bind("default/a", "n1")
    r.tick(1.0, lag={S2: lag_rv})          # scheduler-2 has not seen the bind
    r.tick(2.0, lag={S2: lag_rv})
    r.tick(3.0)                            # caught up
    h = r.close()
    cd = check(h, "cache_divergence")
    assert cd["instances"][S1]["max"] == 0
    assert cd["instances"][S2]["max"] == 1 and cd["instances"][S2]["final"] == 0 and cd["max"] == 1
    rd = check(h, "resource_drift")
    assert rd["instances"][S2]["max"] > 0 and rd["instances"][S1]["max"] == 0 and rd["final_max"] == 0
    cols = {c.name: c for c in all_checkers()}["cache_divergence"].columns(h)
    assert [t.get(S2) for t in cols["cache_divergence"]] == [0, 1, 1, 0]
    assert [t.get(S2) for t in cols["cache_divergence_persistent"]] == [0, 0, 1, 0]


def test_cache_divergence_forgives_only_the_sampling_window(tmp_path):
    r = Run(tmp_path)
    cluster(r)
    r.flush_events()
    before = r.api.rv
    old = uptodate(r.all_events)
    r.api.bind("default/a", "n1")          # lands while the instances are being asked
    r.flush_events()
    new = uptodate(r.all_events)
    r.w.tick(0.0, before, r.api.rv, {S1: inst(old["tasks"], old["nodes"]), S2: inst(new["tasks"], new["nodes"])})
    h = r.close()
    cd = check(h, "cache_divergence")
    assert cd["max"] == 0                  # either state was right at some moment of the window


def test_cache_divergence_absent_without_events_or_rvs(tmp_path):
    w = HistoryWriter(tmp_path, header())
    w.tick(0.0, None, None, {S1: inst({"u": ["Pending", ""]})})
    w.close()
    h = History(tmp_path)
    v = check(h, "cache_divergence")
    assert isinstance(v, Absent) and "no API-server events" in v.reason
    assert isinstance(check(h, "convergence"), Absent)


# ---------------------------------------------------------------------------- pairwise drift

def test_pairwise_drift_per_pair_and_absent_with_one_cache(tmp_path):
    w = HistoryWriter(tmp_path, header())
    w.tick(0.0, 1, 1, {S1: inst({"u1": ["Pending", ""], "u2": ["Bound", "n1"]}, leader=True),
                       S2: inst({"u1": ["Pending", ""], "u2": ["Bound", "n1"]})})
    w.tick(1.0, 1, 1, {S1: inst({"u1": ["Pipelined", "n1"], "u2": ["Bound", "n1"]}, leader=True),
                       S2: inst({"u1": ["Pending", ""], "u2": ["Bound", "n1"]})})
    w.tick(2.0, 1, 1, {S1: inst({"u1": ["Pipelined", "n1"]}, leader=True), S2: None})
    w.close()
    h = History(tmp_path)
    pw = check(h, "pairwise_drift")
    assert pw["pairs"] == {f"{S1}|{S2}": {"max": 1, "mean": 0.5, "samples": 2}} and pw["max"] == 1
    cols = {c.name: c for c in all_checkers()}["pairwise_drift"].columns(h)
    assert cols["drift_to_leader"][:2] == [{S2: 0}, {S2: 1}]
    w = HistoryWriter(tmp_path / "one", header(instances=(S1,)))
    w.tick(0.0, 1, 1, {S1: inst({"u1": ["Pending", ""]})})
    w.close()
    assert isinstance(check(History(tmp_path / "one"), "pairwise_drift"), Absent)


# ------------------------------------------------------------------------------- staleness

def test_staleness_percentiles_per_instance_and_absent_without_samples(tmp_path):
    w = HistoryWriter(tmp_path, header())
    w.staleness(1.0, S1, 0, [1.0, 2.0, 3.0])
    w.staleness(2.0, S1, 1, [100.0])           # a later life of the same instance
    w.staleness(2.0, S2, 0, [5.0])
    w.tick(2.5, 1, 1, {S1: inst({}), S2: inst({})})
    w.close()
    st = check(History(tmp_path), "staleness_ms")
    assert st == {S1: {"p50": 2.0, "p99": 100.0, "max": 100.0, "n": 4},
                  S2: {"p50": 5.0, "p99": 5.0, "max": 5.0, "n": 1}}
    w = HistoryWriter(tmp_path / "q", header())
    w.close()
    assert "no informer staleness" in check(History(tmp_path / "q"), "staleness_ms").reason


# ----------------------------------------------------------------- decisions vs the truth

def test_allocation_drift_bound_away_from_its_nomination_and_quiet(tmp_path):
    r = Run(tmp_path)
    cluster(r)
    r.tick(0.0)
    r.w.decisions([dec("pipeline", "a", "n1", 0.5), dec("pipeline", "b", "n2", 0.5)])
    r.api.bind("default/a", "n2")               # nominated n1, bound n2: drift
    r.api.bind("default/b", "n2")               # as nominated
    r.tick(1.0)
    h = r.close()
    ad = check(h, "allocation_drift")
    assert ad["count"] == 1 and ad["nominated_then_bound"] == 2 and ad["rate"] == 0.5
    assert ad["examples"][0]["pod"] == "default/a"


def test_allocation_drift_from_the_api_servers_nominations(tmp_path):
    r = Run(tmp_path)
    cluster(r)
    r.api.nominate("default/a", "n1")           # status.nominatedNodeName, no decision record
    r.tick(0.0)
    r.api.bind("default/a", "n1")
    r.tick(1.0)
    assert check(r.close(), "allocation_drift")["count"] == 0


def test_wasted_eviction_preemptor_bound_elsewhere_and_a_used_one(tmp_path):
    r = Run(tmp_path)
    r.api.create(queue(), node("n1"), node("n2"), pg("j1", 1))
    for p in ("v1", "v2", "pre1", "pre2"):
        r.api.create(pod(p, group="j1"))
    r.api.bind("default/v1", "n1")
    r.api.bind("default/v2", "n2")
    r.tick(0.0)
    r.w.decisions([dec("evict", "v1", "n1", 0.5, session=3), dec("pipeline", "pre1", "n1", 0.5, session=3),
                   dec("evict", "v2", "n2", 0.5, session=4), dec("pipeline", "pre2", "n2", 0.5, session=4)])
    r.api.delete("Pod", "default/v1")
    r.api.delete("Pod", "default/v2")
    r.api.bind("default/pre1", "n2")            # the preemptor went elsewhere: wasted
    r.api.bind("default/pre2", "n2")            # used the freed node
    r.tick(1.0)
    we = check(r.close(), "wasted_evictions")
    assert we["count"] == 1 and we["used"] == 1 and we["evictions"] == 2
    assert we["examples"][0]["victims"] == ["default/v1"]


def test_cyclic_eviction_recreated_and_evicted_again_and_quiet(tmp_path):
    r = Run(tmp_path)
    r.api.create(queue(), node("n1"), pg("j1", 1), pod("w-0", group="j1"), pod("x-0", group="j1"))
    r.tick(0.0)
    r.w.decisions([dec("evict", "w-0", "n1", 0.5), dec("evict", "x-0", "n1", 0.5)])
    r.api.delete("Pod", "default/w-0")
    r.api.create(pod("w-0-r1", group="j1"))
    r.tick(1.0)
    r.w.decisions([dec("evict", "w-0-r1", "n1", 1.5)])
    r.tick(2.0)
    ce = check(r.close(), "cyclic_evictions")
    assert ce["count"] == 1 and ce["slots"] == 1 and ce["jobs"] == 1 and ce["max_attempt_evicted"] == 1

    q = Run(tmp_path / "q")
    q.api.create(queue(), node("n1"), pg("j1", 1), pod("w-0", group="j1"), pod("x-0", group="j1"))
    q.tick(0.0)
    q.w.decisions([dec("evict", "w-0", "n1", 0.5), dec("evict", "x-0", "n1", 0.5)])
    q.tick(1.0)
    assert check(q.close(), "cyclic_evictions")["count"] == 0


def test_overcommit_node_ticks_in_the_truth_and_quiet(tmp_path):
    r = Run(tmp_path)
    r.api.create(queue(), node("n1", cpu="4000m"), pg("j1", 1), pod("a", cpu="3000m", group="j1"),
                 pod("b", cpu="3000m", group="j1"))
    r.tick(0.0)
    r.w.decisions([dec("bind", "a", "n1", 0.5), dec("bind", "b", "n1", 0.5, instance=S2)])
    r.api.bind("default/a", "n1")
    r.api.bind("default/b", "n1")
    r.tick(1.0)
    r.tick(2.0)
    h = r.close()
    oc = check(h, "overcommit_violations")
    assert oc["count"] == 2 and oc["ticks"] == 3 and oc["episodes"] == 1 and oc["nodes"] == {"n1": 2}
    ex = oc["examples"][0]
    assert ex["t"] == 1.0 and [p["bound_by"] for p in ex["pods"]] == [[S1, 0, 1], [S2, 0, 1]]
    q = Run(tmp_path / "q")
    q.api.create(queue(), node("n1", cpu="4000m"), pg("j1", 1), pod("a", cpu="3000m", group="j1"))
    q.api.bind("default/a", "n1")
    q.tick(0.0)
    assert check(q.close(), "overcommit_violations")["count"] == 0


def test_partial_gang_binds_two_of_three_and_a_whole_gang(tmp_path):
    r = Run(tmp_path)
    cluster(r, pods=("a", "b", "c"), min_member=3)
    r.tick(0.0)
    r.w.decisions([dec("bind", "a", "n1", 0.5), dec("bind", "b", "n1", 0.5)])
    r.api.bind("default/a", "n1")
    r.api.bind("default/b", "n1")
    r.tick(1.0)
    pgb = check(r.close(), "partial_gang_binds")
    assert pgb["count"] == 1 and pgb["binds"] == 2 and pgb["examples"][0]["min_member"] == 3
    q = Run(tmp_path / "q")
    cluster(q, pods=("a", "b"), min_member=2)
    q.tick(0.0)
    q.w.decisions([dec("bind", "a", "n1", 0.5), dec("bind", "b", "n2", 0.5)])
    q.tick(1.0)
    pgb = check(q.close(), "partial_gang_binds")
    assert pgb["count"] == 0 and pgb["groups"] == 1


# ---------------------------------------------------------------------------- counters

def test_counters_sum_every_life_of_every_instance(tmp_path):
    w = HistoryWriter(tmp_path, header())
    w.tick(1.0, 1, 1, {S1: inst({}, binds=4, bind_conflicts=1, elections_lost=1, fatal_cache_errors=0),
                       S2: inst({}, binds=1)})
    w.tick(2.0, 1, 1, {S1: None, S2: inst({}, binds=2)})                        # S1 killed
    w.tick(3.0, 1, 1, {S1: inst({}, gen=1, binds=3, bind_conflicts=2, fatal_cache_errors=1),
                       S2: inst({}, binds=3)})
    w.final({"elapsed_s": 5.0})
    w.close()
    h = History(tmp_path)
    assert check(h, "bind_conflicts") == 3
    assert check(h, "pods_bound_per_s") == round((4 + 3 + 3) / 5.0, 3)
    assert check(h, "lease_losses") == 1 and check(h, "fatal_cache_errors") == 1
    w = HistoryWriter(tmp_path / "q", header(mode="active-active"))
    w.tick(1.0, 1, 1, {S1: inst({}, binds=0), S2: inst({}, binds=0)})
    w.close()
    q = History(tmp_path / "q")
    assert check(q, "bind_conflicts") == 0 and check(q, "pods_bound_per_s") == 0.0
    assert isinstance(check(q, "lease_losses"), Absent) and isinstance(check(q, "leader_changes"), Absent)
    w = HistoryWriter(tmp_path / "none", header())
    w.tick(1.0, 1, 1, {S1: None, S2: None})
    w.close()
    assert "no instance counters" in check(History(tmp_path / "none"), "bind_conflicts").reason


def test_leader_changes_from_the_lease_records(tmp_path):
    w = HistoryWriter(tmp_path, header())
    w.lease(0.5, {"holder": f"{S1}_aa", "lease_transitions": 0})
    w.lease(4.0, {"holder": f"{S2}_bb", "lease_transitions": 1})
    w.lease(7.0, {"holder": f"{S1}_cc", "lease_transitions": 2})
    w.close()
    assert check(History(tmp_path), "leader_changes") == 2
    w = HistoryWriter(tmp_path / "q", header())
    w.close()
    assert isinstance(check(History(tmp_path / "q"), "leader_changes"), Absent)


# ---------------------------------------------------------------------------- failover

def _failover_history(tmp_path, *, lives, leases, binds, ticks=()):
    w = HistoryWriter(tmp_path, header())
    for t, name, ev, info in lives:
        w.life(t, name, ev, 0, **info)
    for t, holder in leases:
        w.lease(t, {"holder": holder, "lease_transitions": 0})
    w.decisions([dec("bind", f"p{i}", "n1", t, instance=who) for i, (t, who) in enumerate(binds)])
    for t, inst_states in ticks:
        w.tick(t, 1, 1, inst_states)
    w.close()
    return History(tmp_path)


def test_kill_of_the_leader_is_timed_to_the_new_leaders_first_bind(tmp_path):
    h = _failover_history(tmp_path, lives=[(2.0, S1, "kill", {"was_leader": True})],
                          leases=[(0.1, f"{S1}_a"), (5.0, f"{S2}_b")],
                          binds=[(1.0, S1), (4.0, S2), (6.5, S2), (7.0, S2)])
    assert check(h, "failover_recovery_s") == 4.5     # the bind at 4.0 came before the takeover


def test_a_kill_that_never_recovered_is_null_and_a_quiet_run_is_absent(tmp_path):
    h = _failover_history(tmp_path, lives=[(2.0, S1, "kill", {"was_leader": True})],
                          leases=[(0.1, f"{S1}_a")], binds=[(1.0, S1)])
    assert check(h, "failover_recovery_s") is None
    q = _failover_history(tmp_path / "q", lives=[(2.0, S2, "kill", {"was_leader": False})],
                          leases=[(0.1, f"{S1}_a")], binds=[(1.0, S1)])
    assert "no leader loss" in check(q, "failover_recovery_s").reason


def test_a_pause_the_leader_survived_is_no_failover_and_one_that_lost_the_lease_is(tmp_path):
    # lease 4 s + retry 1 s: a takeover must come before resume + 5 s
    kept = _failover_history(tmp_path, lives=[(2.0, S1, "pause", {"was_leader": True}), (3.0, S1, "resume", {})],
                             leases=[(0.1, f"{S1}_a"), (20.0, f"{S2}_b")], binds=[(21.0, S2)])
    assert isinstance(check(kept, "failover_recovery_s"), Absent)
    lost = _failover_history(tmp_path / "lost",
                             lives=[(2.0, S1, "pause", {"was_leader": True}), (9.0, S1, "resume", {})],
                             leases=[(0.1, f"{S1}_a"), (6.5, f"{S2}_b")], binds=[(7.0, S2)])
    assert check(lost, "failover_recovery_s") == 5.0


def test_failover_without_lease_records_uses_the_ticks(tmp_path):
    h = _failover_history(tmp_path, lives=[(2.0, S1, "kill", {"was_leader": True})], leases=[],
                          binds=[(3.6, S2)],
                          ticks=[(1.0, {S1: inst({}, leader=True), S2: inst({})}),
                                 (3.0, {S1: None, S2: inst({}, leader=True)})])
    assert check(h, "failover_recovery_s") == 1.6


# ------------------------------------------------------------- convergence, API consistency

def _listing(api):
    kinds: dict[str, dict[str, int]] = {}
    for (kind, key), o in api.objects.items():
        kinds.setdefault(kind, {})[key] = int(o["metadata"]["resourceVersion"])
    return {"rv": api.rv, "kinds": kinds}


def test_api_consistency_ok_lost_write_and_phantom(tmp_path):
    r = Run(tmp_path)
    cluster(r)
    r.api.bind("default/a", "n1")
    r.tick(0.0)
    h = r.close(api_state=_listing(r.api))
    assert check(h, "api_consistency")["ok"] is True

    r = Run(tmp_path / "bad")
    cluster(r)
    r.tick(0.0)
    listing = _listing(r.api)
    listing["kinds"]["Pod"]["default/a"] += 100       # the list holds a state the stream never sent
    del listing["kinds"]["Pod"]["default/b"]          # and lacks one the stream created
    listing["rv"] += 100
    c = check(r.close(api_state=listing), "api_consistency")
    assert c["ok"] is False and c["lost_writes"] == 1 and c["phantoms"] == 1
    assert c["kinds"]["Pod"]["lost"] == ["default/a"] and c["kinds"]["Pod"]["phantoms"] == ["default/b"]


def test_convergence_after_the_last_fault(tmp_path):
    def make(path, lag_until):
        r = Run(path, measure={"every": "1s", "converge_within": "3s"})
        cluster(r)
        r.tick(0.0)
        stuck = r.api.rv
        r.w.fault({"t": 1.0, "index": 0, "fault": "watch-stall", "action": "start", "targets": [S2],
                   "status": "applied", "detail": ""})
        r.w.fault({"t": 3.0, "index": 0, "fault": "watch-stall", "action": "end", "targets": [S2],
                   "status": "applied", "detail": ""})
        r.api.bind("default/a", "n1")
        for t in range(1, 12):
            r.tick(float(t), lag={S2: stuck} if t < lag_until else None)
        return r.close(api_state=_listing(r.api))
    ok = check(make(tmp_path / "ok", 5), "convergence")
    assert ok["ok"] is True and ok["last_fault_s"] == 3.0 and ok["instances"][S2]["settled_s"] == 2.0
    assert ok["api_consistency_ok"] is True and ok["value"] == 2.0
    late = check(make(tmp_path / "late", 9), "convergence")
    assert late["ok"] is False and "settled for good only 6" in late["instances"][S2]["reason"]


def test_a_broken_checker_is_absent_with_its_error(tmp_path):
    w = HistoryWriter(tmp_path, header())
    w.close()
    h = History(tmp_path)
    from ha.experiment.checkers import Checker

    def boom(h):
        raise RuntimeError("kaputt")
    summary, absent = run_checkers(h, [Checker("x", boom, None, "t")])
    assert summary == {} and absent == {"x": "checker failed: RuntimeError: kaputt"}


def test_final_counters_are_the_last_word_on_their_generation(tmp_path):
    w = HistoryWriter(tmp_path, header())
    w.tick(1.0, 1, 1, {S1: inst({}, binds=4), S2: inst({}, gen=2, binds=1)})
    w.final({"elapsed_s": 2.0, "instances": {S1: {"generation": 0, "counters": {"binds": 6}},
                                              S2: {"generation": 2, "binds": 3, "is_leader": True}}})
    w.close()
    assert check(History(tmp_path), "pods_bound_per_s") == 4.5
