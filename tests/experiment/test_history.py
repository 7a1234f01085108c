"""history/: the writer's deltas fold back to the full digests; a crashed run's truncated tail is
skipped and counted; bad folders are BadInput."""
import json

import pytest

from ha.errors import BadInput
from ha.experiment.history import History, HistoryWriter


def _digest(tasks, nodes=None, **kw):
    return {"tasks": tasks, "nodes": nodes or {}, "rvs": {"Pod": 5}, "is_leader": False,
            "synced": True, "sessions": 1, **kw}


def test_round_trip_folds_to_the_full_digests(tmp_path):
    given = [
        {"s1": _digest({"u1": ["Pending", ""], "u2": ["Bound", "n1"]}, {"n1": {"idle": {"cpu": 1}}}),
         "s2": _digest({"u1": ["Pending", ""]})},
        {"s1": _digest({"u1": ["Pipelined", "n2"], "u3": ["Pending", ""]}, {"n1": {"idle": {"cpu": 2}}}),
         "s2": None},
        {"s1": _digest({"u3": ["Bound", "n1"]}, {}),
         "s2": _digest({"u9": ["Pending", ""]}, generation=1)},
        {"s1": _digest({"u3": ["Bound", "n1"]}, {}),
         "s2": _digest({"u9": ["Bound", "n1"]}, generation=1, stats={"binds": 4, "is_leader": True})},
    ]
    with HistoryWriter(tmp_path, {"experiment": {"name": "x"}, "instances": ["s1", "s2"]}) as w:
        for i, inst in enumerate(given):
            w.tick(i * 0.25, 10 + i, 11 + i, inst)
    h = History(tmp_path)
    got = list(h.digests())
    assert len(got) == 4
    for (tk, states), inst in zip(got, given):
        for name, d in inst.items():
            if d is None:
                assert states[name] == {"alive": 0}
            else:
                assert states[name]["tasks"] == d["tasks"]
                assert states[name]["nodes"] == d["nodes"]
                assert states[name]["generation"] == d.get("generation", 0)
    assert got[3][1]["s2"]["counters"] == {"binds": 4}
    raw = h.ticks()
    # deltas on disk: the second record of s1 holds only what changed (u2 removed)
    assert raw[1]["instances"]["s1"]["tasks"] == {"u1": ["Pipelined", "n2"], "u2": None, "u3": ["Pending", ""]}
    assert "full" not in raw[1]["instances"]["s1"]
    # a new generation starts with a full digest
    assert raw[2]["instances"]["s2"]["full"] is True
    assert raw[3]["instances"]["s1"]["tasks"] == {} and raw[3]["rv_before"] == 13
    assert h.skipped == {}


def test_truncated_last_lines_are_skipped_and_counted(tmp_path):
    w = HistoryWriter(tmp_path, {"instances": ["s1"]})
    w.tick(0.0, 1, 1, {"s1": _digest({"u1": ["Pending", ""]})})
    w.events([{"rv": 1, "type": "ADDED", "kind": "Pod", "object": {"metadata": {"name": "p"}}},
              {"rv": 2, "type": "DELETED", "kind": "Pod", "object": {"metadata": {"name": "p"}}}])
    w.decisions([{"t": 0.1, "op": "bind", "pod": "ns/p", "instance": "s1", "generation": 0}])
    w.close()
    hist = tmp_path / "history"
    with open(hist / "ticks.jsonl", "a") as f:
        f.write('{"tick": 1, "t": 0.25, "rv_bef')       # the crash cut this line short
    with open(hist / "events.msgpack", "ab") as f:
        f.write(b"\x84\xa2rv\x03")                       # and this event
    h = History(tmp_path)
    assert [tk["tick"] for tk in h.ticks()] == [0]
    assert [e["rv"] for e in h.events()] == [1, 2]
    assert h.skipped == {"ticks.jsonl": 1, "events.msgpack": 5}
    assert len(h.warnings) == 2 and "ticks.jsonl" in h.warnings[0]
    assert len(h.decisions()) == 1 and h.final is None


def test_a_bad_line_in_the_middle_is_bad_input(tmp_path):
    HistoryWriter(tmp_path, {}).close()
    (tmp_path / "history" / "lives.jsonl").write_text('{"t": 1}\nnot json\n{"t": 2}\n')
    with pytest.raises(BadInput, match=r"lives.jsonl: line 2"):
        History(tmp_path).lives()


def test_missing_history_is_bad_input(tmp_path):
    with pytest.raises(BadInput, match="no recorded history"):
        History(tmp_path)
    with pytest.raises(BadInput, match="no such folder"):
        History(tmp_path / "nope")


def test_final_and_streams(tmp_path):
    w = HistoryWriter(tmp_path, {"seed": 3})
    w.fault({"t": 1.0, "index": 0, "fault": "kill", "action": "fire", "targets": ["s1"], "status": "applied"})
    w.lease(1.5, {"holder": "s2_ab", "lease_transitions": 2})
    w.life(1.0, "s1", "kill", 0, pid=123, was_leader=True, host=None)
    w.staleness(2.0, "s1", 0, [1.23456, 7])
    w.staleness(2.0, "s2", 0, [])
    w.final({"elapsed_s": 3.5, "interrupted": False})
    w.close()
    h = History(tmp_path)
    assert h.header == {"seed": 3}
    assert h.faults()[0]["fault"] == "kill"
    assert h.leases() == [{"t": 1.5, "holder": "s2_ab", "lease_transitions": 2}]
    assert h.lives() == [{"t": 1.0, "instance": "s1", "generation": 0, "event": "kill", "pid": 123,
                          "was_leader": True}]
    assert h.staleness() == [{"t": 2.0, "instance": "s1", "generation": 0, "ms": [1.235, 7.0]}]
    assert h.final == {"elapsed_s": 3.5, "interrupted": False} and h.duration() == 3.5
    json.loads((tmp_path / "history" / "run.json").read_text())


def test_decisions_wall_time_converted_and_api_state_from_lists(tmp_path):
    from ha.experiment.history import api_state
    w = HistoryWriter(tmp_path, {})
    w.decisions([{"t": 1000.75, "op": "bind", "instance": "s1", "generation": 0}], t0_wall=1000.0)
    w.final({"api_state": api_state({"Pod": [{"metadata": {"name": "p", "namespace": "ns", "resourceVersion": "7"}}],
                                     "Node": [{"metadata": {"name": "n1", "resourceVersion": "3"}}]}, 9)})
    w.close()
    h = History(tmp_path)
    assert h.decisions()[0]["t"] == 0.75
    assert h.final["api_state"] == {"rv": 9, "kinds": {"Node": {"n1": 3}, "Pod": {"ns/p": 7}}}


def test_a_tick_without_its_fields_is_bad_input_naming_the_record(tmp_path):
    HistoryWriter(tmp_path, {}).close()
    (tmp_path / "history" / "ticks.jsonl").write_text('{"tick": 0, "t": 0.0, "instances": {}}\n{"tick": 1}\n')
    with pytest.raises(BadInput, match=r"ticks.jsonl: tick record 2"):
        History(tmp_path).ticks()


def test_a_bad_event_is_bad_input_naming_it(tmp_path):
    w = HistoryWriter(tmp_path, {})
    w.events([{"rv": 1, "type": "ADDED", "kind": "Pod", "object": {}}])
    w.close()
    import msgpack
    with open(tmp_path / "history" / "events.msgpack", "ab") as f:
        f.write(msgpack.packb({"rv": "2", "type": "BOOKMARK", "kind": "Pod"}))
    with pytest.raises(BadInput, match=r"events.msgpack: event 2"):
        History(tmp_path).events()
