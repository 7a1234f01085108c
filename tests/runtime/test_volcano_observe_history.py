"""What the observation of a real vc-scheduler puts in a history, and how the checkers read it:
``unobserved`` reasons in the tick records (a cold standby's cache, staleness from outside),
``history/scrapes.jsonl`` (its /metrics), and metrics that are absent or annotated with the reason
rather than zero. Histories are written through the real Recorder and HistoryWriter; the scrapes
are the real /metrics page captured from vc-scheduler v1.14.1 (tests/data/volcano/)."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

from ha.experiment.analyze import _base_rows
from ha.experiment.checkers import Absent, registry
from ha.experiment.recorder import Observation, Recorder
from ha.runtime.external.observe import COLD_STANDBY, STALENESS_UNOBSERVED
from ha.runtime.external.observe.metrics import parse_prometheus, volcano_figures
from tests.experiment.histories import Api, History, HistoryWriter, header, node, pg, pod, queue

DATA = Path(__file__).resolve().parents[1] / "data" / "volcano"


class _SyncApi:
    """The Recorder's view of the API server over the literal ``Api`` (current RV and its events)."""

    def __init__(self, api: Api):
        self.api = api
        self.log: list[dict] = []

    def current_resource_version(self) -> int:
        self.log.extend(self.api.drain())
        return self.api.rv

    def watch(self, kind, rv, block_ms=0, count=5000):
        from types import SimpleNamespace
        return [SimpleNamespace(type=e["type"], kind=e["kind"], object=e["object"], resource_version=e["rv"])
                for e in self.log if e["kind"] == kind and e["rv"] > rv][:count]

    def get(self, *a, **k):
        raise KeyError("no lease")


def _figures() -> dict:
    with gzip.open(DATA / "metrics-v1.14.1.txt.gz", "rt") as f:
        return volcano_figures(parse_prometheus(f.read()))


def _real_history(tmp_path) -> Path:
    """scheduler-1 leads and is sampled (its digest equals the truth); scheduler-2 is a cold
    standby every tick; both are scraped (scheduler-2's scrapes fail)."""
    api = Api()
    api.create(queue(), node("n1"), pg("g", 1), pod("p1", group="g"))
    sync = _SyncApi(api)
    out = tmp_path / "real"
    with HistoryWriter(out, header()) as w:
        rec = Recorder(w, sync, t0_wall=1000.0)
        for i in range(3):
            if i == 1:
                api.bind("default/p1", "n1")
            rv = sync.current_resource_version()
            status, nn = ("Pending", "") if i == 0 else ("Running", "n1")
            leader = {"digest": {"tasks": {"u-p1": [status, nn]}, "nodes": {}, "rvs": {"Pod": rv}, "synced": True,
                                 "is_leader": True, "unobserved": {"staleness_ms": STALENESS_UNOBSERVED}},
                      "stats": {"binds": i and 1, "sessions": 10 + i},
                      "decisions": ([{"t": 1001.0, "op": "bind", "pod": "default/p1", "uid": "u-p1", "node": "n1",
                                      "ok": True, "session": 1, "seq": 1, "leader": True, "dry_run": False}]
                                    if i == 1 else []),
                      "scrape": {**_figures(), "life": 0}}
            standby = {"digest": {"synced": False, "is_leader": False,
                                  "unobserved": {"cache": COLD_STANDBY, "staleness_ms": STALENESS_UNOBSERVED}},
                       "stats": {}, "decisions": [],
                       "scrape": {"unobserved": "GET http://127.0.0.1:1/metrics: Connection refused", "life": 0}}
            rec.tick(float(i), rv, [Observation("scheduler-1", 0, True, leader),
                                    Observation("scheduler-2", 0, True, standby)], rv)
    return out


def test_records_carry_the_reasons_and_scrapes(tmp_path):
    out = _real_history(tmp_path)
    h = History(out)
    ticks = h.ticks()
    assert ticks[0]["instances"]["scheduler-2"]["unobserved"]["cache"] == COLD_STANDBY
    assert ticks[0]["instances"]["scheduler-2"]["synced"] == 0
    assert "cache" not in ticks[0]["instances"]["scheduler-1"]["unobserved"]
    scrapes = h.scrapes()
    assert len(scrapes) == 6 and {s["instance"] for s in scrapes} == {"scheduler-1", "scheduler-2"}
    assert [s["t"] for s in scrapes if s["instance"] == "scheduler-1"] == [0.0, 1.0, 2.0]
    assert scrapes[0]["e2e_scheduling_latency_ms"]["count"] == 81
    assert [d["op"] for d in h.decisions()] == ["bind"] and h.decisions()[0]["t"] == 1.0


def test_a_model_history_is_unchanged(tmp_path):
    """Without the new keys nothing new is written: no scrapes file, no ``unobserved``."""
    api = Api()
    api.create(queue(), node("n1"))
    sync = _SyncApi(api)
    out = tmp_path / "model"
    with HistoryWriter(out, header()) as w:
        rec = Recorder(w, sync, t0_wall=0.0)
        rv = sync.current_resource_version()
        data = {"digest": {"tasks": {}, "nodes": {}, "synced": True}, "stats": {}, "decisions": [],
                "staleness_ms": [1.0]}
        rec.tick(0.0, rv, [Observation("scheduler-1", 0, True, data)], rv)
    assert not (out / "history" / "scrapes.jsonl").exists()
    line = json.loads((out / "history" / "ticks.jsonl").read_text())
    assert "unobserved" not in line["instances"]["scheduler-1"]
    checks = registry()
    got = checks["session_latency_ms"].check(History(out))
    assert isinstance(got, Absent) and "no /metrics scrapes" in got.reason


def test_checkers_say_why_instead_of_zero(tmp_path):
    h = History(_real_history(tmp_path))
    checks = registry()
    # the leader's cache equals the truth: divergence 0 for it, and the standby named with its reason
    cd = checks["cache_divergence"].check(h)
    assert set(cd["instances"]) == {"scheduler-1"} and cd["max"] == 0
    assert cd["unobserved"] == {"scheduler-2": {"reason": COLD_STANDBY, "ticks": 3}}
    rd = checks["resource_drift"].check(h)
    assert rd["unobserved"]["scheduler-2"]["ticks"] == 3
    # never two observed caches at once: absent, and the reason names the standby
    pw = checks["pairwise_drift"].check(h)
    assert isinstance(pw, Absent) and f"scheduler-2: {COLD_STANDBY} (3 ticks)" in pw.reason
    st = checks["staleness_ms"].check(h)
    assert isinstance(st, Absent) and f"scheduler-1: {STALENESS_UNOBSERVED} (3 ticks)" in st.reason
    # the timeseries: the standby's task counts are blank, the leader's counted
    rows = _base_rows(h)
    assert [r["tasks_running"] for r in (row[0] for row in rows)] == [0, 1, 1]
    assert [r["tasks_pending"] for r in (row[0] for row in rows)] == [1, 0, 0]
    assert all(row[1]["tasks_running"] is None and row[1]["tasks_pipelined"] is None for row in rows)
    # /metrics: the scraped sessions and latencies; the failing instance says why
    sl = checks["session_latency_ms"].check(h)
    s1 = sl["scheduler-1"]
    assert s1["sessions"] == 81 and s1["preemption_attempts"] == 104
    assert s1["mean"] == round(_figures()["e2e_scheduling_latency_ms"]["sum"] / 81, 3)
    assert 80 < s1["p50"] < 160 and s1["p50"] <= s1["p99"]
    assert set(s1["actions"]) == {"allocate", "backfill", "enqueue", "preempt"}
    assert sl["scheduler-2"] == {"unobserved": "GET http://127.0.0.1:1/metrics: Connection refused"}


def test_session_latency_sums_the_lives(tmp_path):
    fig = _figures()
    second = {**fig, "e2e_scheduling_latency_ms": {"count": 2, "sum": 30.0,
                                                   "buckets": [[10, 1], [20, 2], ["+Inf", 2]]},
              "sessions": 2, "total_preemption_attempts": 5, "pod_preemption_victims": 7}
    out = tmp_path / "lives"
    with HistoryWriter(out, header(instances=("scheduler-1",))) as w:
        w.scrape(0.0, "scheduler-1", 0, {**fig, "life": 0})
        w.scrape(1.0, "scheduler-1", 0, {**second, "life": 1})
        w.scrape(2.0, "scheduler-1", 0, {**second, "life": 1})
    s = registry()["session_latency_ms"].check(History(out))["scheduler-1"]
    assert s["sessions"] == 83 and s["preemption_attempts"] == 109 and s["preemption_victims"] == 7
    assert s["mean"] == round((fig["e2e_scheduling_latency_ms"]["sum"] + 30.0) / 83, 3)
