"""A real instance's sessions from vc-scheduler's log (``Start scheduling ...`` under
``--vmodule=scheduler=4``) instead of gaps between its writes.

The case that made the difference: under load, a session's evictions and the nomination of their
preemptor (written as the session closes) were 0.8 s apart; with sessions inferred from gaps of
half the 1 s schedule period they fell into two sessions, and wasted_evictions counted the
evictions as having no preemptor.
"""
from __future__ import annotations

import datetime as dt

from ha.experiment.checkers.wasted_evictions import WastedEvictions
from ha.runtime.external.observe.request_log import DecisionExtractor
from ha.runtime.external.observe.session_log import SESSION_START, VMODULE_FLAG, SessionLog, klog_wall
from ha.runtime.external.process import ExternalConfig, volcano_argv


def _klog(t: float, text: str) -> str:
    d = dt.datetime.fromtimestamp(t)
    return f"I{d:%m%d %H:%M:%S}.{d.microsecond:06d}   4242 scheduler.go:108] {text}"


def test_klog_headers_read_as_wall_time():
    t = dt.datetime(2026, 11, 28, 4, 59, 8, 602896).timestamp()
    assert klog_wall("I1128 04:59:08.602896   26236 scheduler.go:108] Start scheduling ...",
                     now=lambda: t + 5) == t
    # a line from 31 December read on 1 January is last year's
    jan1 = dt.datetime(2027, 1, 1, 0, 0, 1).timestamp()
    assert klog_wall("I1231 23:59:59.000000 1 x] y", now=lambda: jan1) == dt.datetime(2026, 12, 31, 23, 59, 59).timestamp()
    assert klog_wall("=== scheduler-1 life 0 at 1795841948.240") is None
    assert klog_wall("E0230 00:00:00.000000 1 x] no such day") is None


def test_the_log_is_followed_and_a_half_written_line_waits(tmp_path):
    log = tmp_path / "scheduler-1.log"
    t0 = 1_800_000_000.0
    log.write_text("=== scheduler-1 life 0 at 1.0\n" + _klog(t0, SESSION_START) + "\n"
                   + _klog(t0 + 0.5, "End scheduling ...") + "\n" + _klog(t0 + 1.5, SESSION_START)[:20])
    s = SessionLog(log, now=lambda: t0 + 10)
    assert s.read_new() == [t0]
    with log.open("a") as f:
        f.write(_klog(t0 + 1.5, SESSION_START)[20:] + "\n")
    assert s.read_new() == [t0 + 1.5]
    assert s.read_new() == []


def test_the_flag_is_on_every_command_line():
    cfg = ExternalConfig(name="scheduler-1", binary="/bin/vc", version="v1.14.1", endpoint_url="http://x",
                         kubeconfig="k", workdir="w", log_path="l", request_log="q", delivery_log="d",
                         scheduler_conf_yaml="")
    argv = volcano_argv(cfg, conf_path="c", listen="l", healthz="h", dump_dir="d")
    assert VMODULE_FLAG in argv and "-v=2" in argv


def _status(t, name, **kw):
    return {"t": t, "verb": "update", "resource": "pods", "subresource": "status", "namespace": "default",
            "name": name, "uid": f"u-{name}", "code": 200, **kw}


# one session (started at T): a victim evicted on n1, then at the close, 0.8 s later, the preemptor
# nominated to n1; the next session starts a schedule period after that one ended
T = 1_800_000_000.0
RECORDS = [
    _status(T + 0.20, "victim", conditions={"DisruptionTarget": "True/PreemptionByScheduler"}, node="n1"),
    {"t": T + 0.21, "verb": "delete", "resource": "pods", "namespace": "default", "name": "victim",
     "uid": "u-victim", "code": 200},
    _status(T + 1.01, "preemptor", nominatedNodeName="n1"),
    {"t": T + 2.60, "verb": "create", "resource": "pods", "subresource": "binding", "namespace": "default",
     "name": "preemptor", "uid": "u-preemptor", "node": "n1", "code": 201},
]


def _decisions(x: DecisionExtractor):
    ds = x.feed(RECORDS)
    for d in ds:
        d["node"] = d.get("node") or ("n1" if d["op"] == "evict" else None)
    return ds


def test_a_session_paused_longer_than_the_gap_is_one_session_with_the_logged_starts():
    x = DecisionExtractor("scheduler-1", session_gap_s=0.5)
    x.add_session_starts([T, T + 2.5])
    ds = _decisions(x)
    assert [(d["op"], d["session"]) for d in ds] == [("evict", 1), ("pipeline", 1), ("bind", 2)]
    assert not any(d["session_inferred"] for d in ds)
    w = WastedEvictions()
    w.observe_decisions(ds)
    assert [g.preemptors for g in w.groups()] == [{"default/preemptor"}]


def test_inferred_from_gaps_the_same_writes_leave_the_eviction_without_its_preemptor():
    """The artefact the logged starts remove (and the reason for them)."""
    x = DecisionExtractor("scheduler-1", session_gap_s=0.5)
    ds = _decisions(x)
    assert [d["session"] for d in ds] == [1, 2, 3] and all(d["session_inferred"] for d in ds)
    w = WastedEvictions()
    w.observe_decisions(ds)
    assert [g.preemptors for g in w.groups()] == [set()]
    assert w.summary()["no_preemptor"] == 1


def test_the_observer_reads_the_log_only_when_the_last_vmodule_is_the_testbeds(tmp_path):
    from ha.runtime.external import observe as observation
    from ha.runtime.external.process import ProcessHandle

    def handle(name, *args):
        return ProcessHandle(instance=name, life=0, pid=None, argv=["/bin/vc", "-v=2", *args], dump_dir="",
                             socket_dir="", metrics_url="", healthz_url="", endpoint_url="",
                             request_log=str(tmp_path / f"{name}.jsonl"), delivery_log="",
                             log_path=str(tmp_path / f"{name}.log"), started_at=1.0)
    observation.observe(handle("a", VMODULE_FLAG))
    observation.observe(handle("b", VMODULE_FLAG, "--vmodule=allocate=5"))
    observation.observe(handle("c"))
    obs = {k[0]: v for k, v in observation._OBSERVERS.items() if k[0] in ("a", "b", "c")}
    assert obs["a"].sessions is not None
    assert obs["b"].sessions is None and obs["c"].sessions is None
