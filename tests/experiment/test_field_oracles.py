"""Oracles from the field, over literal histories: stale nominations (Volcano #5131) and
split-brain writes (the fencing oracle) — each fires on its violation and stays 0 when quiet."""
from __future__ import annotations

from ha.experiment.checkers import Absent, all_checkers

from .histories import Api, History, HistoryWriter, header, inst, node, pod, queue


def _checker(name):
    return next(c for c in all_checkers() if c.name == name).check


def _nominated_run(tmp_path, held_status, seconds=10):
    api = Api()
    api.create(queue(), node("n1"), pod("p1"))
    api.nominate("default/p1", "n1")
    with HistoryWriter(tmp_path, header(instances=("scheduler-1",))) as w:
        w.events(api.drain())
        for t in range(seconds + 1):
            entry = [held_status, "n1" if held_status == "Pipelined" else ""]
            w.tick(float(t), api.rv, api.rv, {"scheduler-1": inst({"u-p1": entry}, leader=True)})
    return _checker("stale_nominations")(History(tmp_path))


def test_a_nomination_nobody_holds_is_stale(tmp_path):
    got = _nominated_run(tmp_path, "Pending")
    assert got["count"] == 1 and got["episodes"] == 1
    assert got["pod_seconds"] == 10.0 and got["examples"][0]["node"] == "n1"


def test_a_nomination_the_leader_holds_pipelined_is_not(tmp_path):
    assert _nominated_run(tmp_path, "Pipelined")["count"] == 0


def test_a_short_gap_is_within_the_grace(tmp_path):
    assert _nominated_run(tmp_path, "Pending", seconds=3)["count"] == 0


def _lease(holder, renew, ms=4000):
    return {"kind": "Lease", "metadata": {"name": "volcano", "namespace": "volcano-system",
                                          "annotations": {"ha-testbed/lease-duration-ms": str(ms)}},
            "spec": {"holderIdentity": holder, "renewTime": renew, "leaseDurationSeconds": 4}}


def _write(instance, wall, op="bind", ok=True):
    return {"t": wall - 1000.0, "wall": wall, "op": op, "pod": "default/p", "instance": instance,
            "generation": 0, "ok": ok, "dry_run": False}


def _split_brain(tmp_path, decisions, mode="leader-elected"):
    api = Api()
    api.create(_lease("scheduler-1_a", 1000.0))
    api.update("Lease", "volcano-system/volcano", lambda o: o["spec"].update(renewTime=1002.0))
    # scheduler-1 stops renewing (paused): scheduler-2 takes over at 1007
    api.update("Lease", "volcano-system/volcano",
               lambda o: o["spec"].update(holderIdentity="scheduler-2_b", renewTime=1007.0))
    with HistoryWriter(tmp_path, header(mode=mode)) as w:
        w.events(api.drain())
        w.decisions(decisions)
    return _checker("split_brain_writes")(History(tmp_path))


def test_writes_after_the_lease_expired_are_split_brain(tmp_path):
    got = _split_brain(tmp_path, [
        _write("scheduler-1", 1001.0), _write("scheduler-1", 1005.5),   # within 1002 + 4 s
        _write("scheduler-1", 1006.5),                                   # expired at 1006
        _write("scheduler-1", 1008.0, op="status"),                      # scheduler-2 leads
        _write("scheduler-2", 1008.0),
        _write("scheduler-1", 1009.0, ok=False)])                        # refused (fenced): not a write
    assert got["count"] == 2 and got["instances"] == {"scheduler-1": 2}
    assert got["writes"] == 5
    assert [e["op"] for e in got["examples"]] == ["bind", "status"]


def test_a_leader_writing_within_its_lease_is_quiet(tmp_path):
    got = _split_brain(tmp_path, [_write("scheduler-1", 1001.0), _write("scheduler-2", 1010.0)])
    assert got["count"] == 0 and got["writes"] == 2


def test_split_brain_is_absent_without_an_election(tmp_path):
    assert isinstance(_split_brain(tmp_path, [], mode="active-active"), Absent)
