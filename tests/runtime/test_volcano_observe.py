"""The observation of a real vc-scheduler (ha/runtime/external/observe) on output the real binary
wrote: a cache dump (SIGUSR1), a /metrics page and an endpoint's request log, captured from
vc-scheduler v1.14.1 running a preempting scheduler configuration against ``ha-testbed serve``
(tests/data/volcano/README.md says how). The dumper's file protocol is also driven by a small
process that writes snapshot files as Volcano does (truncate, write the sections one by one).
"""
from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from ha.experiment.oracles import task_entry
from ha.experiment.results import task_status_counts
from ha.runtime.external.observe.cache_dump import (TASK_STATUS_NAMES, CacheDumper, CacheDumpError,
                                                    CacheDumpUnavailable, catches_sigusr1, dump_digest,
                                                    parse_dump, process_state)
from ha.runtime.external.observe.metrics import (MetricsFormatError, histogram_quantile, parse_prometheus,
                                                 volcano_figures)
from ha.runtime.external.observe.request_log import DecisionExtractor, RequestLogTail
from ha.scheduler.api.types import TaskStatus

DATA = Path(__file__).resolve().parents[1] / "data" / "volcano"


def _text(name: str) -> str:
    with gzip.open(DATA / name, "rt", encoding="utf-8") as f:
        return f.read()


@pytest.fixture(scope="module")
def dump_text() -> str:
    return _text("cache-dump-v1.14.1.json.gz")


@pytest.fixture(scope="module")
def raw_sections(dump_text) -> list:
    return [json.loads(line) for line in dump_text.splitlines() if line.strip()]


# ------------------------------------------------------------------------------------ cache dump

def test_status_numbers_are_the_models(dump_text):
    """Volcano's TaskStatus numbers name the same statuses as the model's enum."""
    for n, name in TASK_STATUS_NAMES.items():
        assert str(TaskStatus(n)) == name


def test_real_dump_parses_into_the_models_digest(dump_text, raw_sections):
    assert len(raw_sections) == 6          # Volcano encodes six values, one per line
    dump = parse_dump(dump_text, "real")
    d = dump_digest(dump)
    # every task of every job, with Volcano's status number spelled as the model spells it
    expected = {}
    for job in raw_sections[5].values():
        for t in job["Tasks"].values():
            expected[t["UID"]] = [str(TaskStatus(t["Status"])), t["NodeName"]]
    for node in raw_sections[0].values():
        for t in node["Tasks"].values():
            expected.setdefault(t["UID"], [str(TaskStatus(t["Status"])), t["NodeName"]])
    assert d["tasks"] == expected
    counts = task_status_counts(d["tasks"])
    assert sum(counts.values()) == len(expected) == 16
    # this capture holds a preemption in flight: the victim Releasing, others Bound/Running/...
    assert {s for s, n in counts.items() if n} == {"PENDING", "BOUND", "RUNNING", "RELEASING", "SUCCEEDED"}
    releasing = [u for u, e in d["tasks"].items() if task_entry(e)[0] == "RELEASING"]
    assert len(releasing) == 1 and d["tasks"][releasing[0]][1] == "node-2"
    assert all(e[1] == "" for e in d["tasks"].values() if e[0] == "Pending")
    # nodes in plain units; Volcano keeps Idle + Used = Allocatable on each node
    assert set(d["nodes"]) == {"node-1", "node-2"}
    for name, n in d["nodes"].items():
        alloc = raw_sections[0][name]["Allocatable"]
        assert n["idle"]["cpu"] + n["used"]["cpu"] == alloc["MilliCPU"] == 4000
        assert n["idle"]["memory"] + n["used"]["memory"] == alloc["Memory"]
        assert n["idle"]["pods"] + n["used"]["pods"] == 110
        assert n["pipelined"] == {}
    assert d["nodes"]["node-2"]["releasing"] == {"cpu": 1000, "memory": 1073741824, "pods": 1}
    assert d["nodes"]["node-1"]["releasing"] == {}
    # the RVs: the newest object of each kind the cache holds
    pods = [int(t["Pod"]["metadata"]["resourceVersion"]) for j in raw_sections[5].values()
            for t in j["Tasks"].values()]
    assert d["rvs"]["Pod"] == max(pods)
    assert d["rvs"]["PodGroup"] == max(int(j["PodGroup"]["metadata"]["resourceVersion"])
                                       for j in raw_sections[5].values())
    assert d["rvs"]["Node"] == max(int(n["Node"]["metadata"]["resourceVersion"]) for n in raw_sections[0].values())


def test_a_dump_cut_short_or_wrong_is_named(dump_text):
    cut = dump_text[: len(dump_text) * 2 // 3]
    with pytest.raises(CacheDumpError, match=r"snap\.json: section 6 \(Jobs\) is not complete JSON"):
        parse_dump(cut, "snap.json")
    first_line = dump_text.split("\n", 1)[0] + "\n"
    with pytest.raises(CacheDumpError, match=r"1 of 6 sections \(missing HyperNodesSetByTier"):
        parse_dump(first_line, "snap.json")
    with pytest.raises(CacheDumpError, match="unexpected data after the 6 sections"):
        parse_dump(dump_text + "{}\n", "snap.json")
    bad = dump_text.replace('"Status":32', '"Status":3', 1)
    assert bad != dump_text
    with pytest.raises(CacheDumpError, match=r"snap\.json: Nodes\[node-\d\]\.Tasks\[default/job-\d+-\d\]\.Status: 3 is not a TaskStatus"):
        dump_digest(parse_dump(bad, "snap.json"))


# A stand-in for vc-scheduler's dumper's file protocol: on SIGUSR1 it opens
# snapshot-<unix>.json with O_TRUNC and writes the six lines of one of two real dumps (taking turns)
# one by one, pausing between them, so a reader sees half-written files and same-second overwrites.
_WRITER = r"""
import os, signal, sys, time
dumps = [open(p).read().splitlines(True) for p in sys.argv[2:4]]
n = [0]
pending = []
signal.signal(signal.SIGUSR1, lambda *a: pending.append(1))
print("ready", flush=True)
while True:
    if not pending:
        time.sleep(0.002)
        continue
    pending.pop()
    lines = dumps[n[0] % 2]
    n[0] += 1
    fd = os.open(os.path.join(sys.argv[1], "snapshot-%d.json" % int(time.time())),
                 os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    for ln in lines:
        os.write(fd, ln.encode())
        time.sleep(0.02)
    os.close(fd)
"""


def test_dumper_waits_for_whole_files_and_same_second_dumps(tmp_path, dump_text):
    a = tmp_path / "a.json"
    a.write_text(dump_text)
    # a second real state: the same dump without its last job (one fewer task set)
    secs = [json.loads(x) for x in dump_text.splitlines() if x.strip()]
    dropped = sorted(secs[5])[-1]
    secs[5].pop(dropped)
    b = tmp_path / "b.json"
    b.write_text("".join(json.dumps(s) + "\n" for s in secs))
    dump_dir = tmp_path / "dumps"
    dump_dir.mkdir()
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(dump_dir), str(a), str(b)],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        dumper = CacheDumper(proc.pid, dump_dir)
        digests = []
        t0 = time.time()
        for _ in range(4):                  # four dumps well within two seconds: same-second names
            digests.append(dump_digest(dumper.sample(timeout=5)))
        assert time.time() - t0 < 2.5
        full = dump_digest(parse_dump(dump_text))
        assert digests[0]["tasks"] == digests[2]["tasks"] == full["tasks"]
        assert len(digests[1]["tasks"]) < len(full["tasks"])
        assert digests[1]["tasks"] == digests[3]["tasks"] != digests[0]["tasks"]
        assert list(dump_dir.iterdir()) == []          # each file read is removed
        assert dumper.samples == 4
    finally:
        proc.kill()
        proc.wait()


def test_dumper_says_why_there_is_no_dump(tmp_path):
    # a process that catches SIGUSR1 and does nothing (vc-scheduler until it leads and has synced:
    # Go's runtime catches the signal, no dumper listens)
    proc = subprocess.Popen([sys.executable, "-c",
                             "import signal,time; signal.signal(signal.SIGUSR1, lambda *a: None); "
                             "print('ready', flush=True); time.sleep(60)"], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        with pytest.raises(CacheDumpUnavailable, match="no cache dump within 0.3s of SIGUSR1.*standby holds no cache"):
            CacheDumper(proc.pid, tmp_path).sample(timeout=0.3)
        proc.send_signal(signal.SIGSTOP)       # a paused process is not waited for
        t0 = time.monotonic()
        while process_state(proc.pid) != "T":
            assert time.monotonic() - t0 < 5
            time.sleep(0.01)
        with pytest.raises(CacheDumpUnavailable, match=r"is stopped \(SIGSTOP\)"):
            CacheDumper(proc.pid, tmp_path).sample(timeout=5)
        assert time.monotonic() - t0 < 2
        proc.send_signal(signal.SIGCONT)
    finally:
        proc.kill()
        proc.wait()
    with pytest.raises(CacheDumpUnavailable, match=f"pid {proc.pid}.* not running"):
        CacheDumper(proc.pid, tmp_path).sample(timeout=0.3)
    with pytest.raises(CacheDumpUnavailable, match="does not exist"):
        CacheDumper(os.getpid(), tmp_path / "nope").sample(timeout=0.1)
    # a process with SIGUSR1's default action (it would end it) is not signalled
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        _wait_exec(sleeper.pid, "sleep")
        assert catches_sigusr1(sleeper.pid) is False
        with pytest.raises(CacheDumpUnavailable, match="does not catch SIGUSR1 yet"):
            CacheDumper(sleeper.pid, tmp_path).sample(timeout=0.3)
        time.sleep(0.2)
        assert sleeper.poll() is None          # still alive: never signalled
    finally:
        sleeper.kill()
        sleeper.wait()


def _wait_exec(pid: int, comm: str) -> None:
    deadline = time.monotonic() + 10
    while Path(f"/proc/{pid}/comm").read_text().strip() != comm:
        assert time.monotonic() < deadline
        time.sleep(0.01)


# ------------------------------------------------------------------------------------ /metrics

def test_real_metrics_page():
    text = _text("metrics-v1.14.1.txt.gz")
    samples = parse_prometheus(text)
    fig = volcano_figures(samples)
    # the figures against the page's own lines, read independently
    lines = {ln.split(" ")[0]: ln.split(" ")[1] for ln in text.splitlines()
             if ln.startswith(("volcano_e2e_scheduling_latency_milliseconds_",
                               "volcano_total_preemption_attempts", "volcano_pod_preemption_victims"))}
    e2e = fig["e2e_scheduling_latency_ms"]
    assert e2e["count"] == int(lines["volcano_e2e_scheduling_latency_milliseconds_count"]) == fig["sessions"] == 81
    assert e2e["sum"] == pytest.approx(float(lines["volcano_e2e_scheduling_latency_milliseconds_sum"]))
    assert fig["total_preemption_attempts"] == int(lines["volcano_total_preemption_attempts"]) == 104
    assert fig["pod_preemption_victims"] == int(lines["volcano_pod_preemption_victims"])
    assert e2e["buckets"][-1] == ["+Inf", 81]
    counts = [c for _, c in e2e["buckets"]]
    assert counts == sorted(counts)
    assert set(fig["action_latency_ms"]) == {"allocate", "backfill", "enqueue", "preempt"}
    assert all(h["count"] == 81 for h in fig["action_latency_ms"].values())
    # labelled families outside Volcano's are parsed too (client-go's request counters)
    rest = samples["rest_client_requests_total"]
    assert {s.label("method") for s in rest} >= {"GET", "PUT", "POST", "DELETE", "PATCH"}
    p50 = histogram_quantile(0.5, e2e["buckets"])
    assert 80 < p50 < 160          # 24 sessions under 80 ms, 63 under 160: the median lies between


def test_prometheus_text_details():
    page = ('# HELP x_total a counter\n# TYPE x_total counter\n'
            'x_total{path="/a\\"b\\\\c\\nd",code="200"} 3 1700000000000\n'
            'y NaN\nz +Inf\nw -1.5e3\n'
            'h_bucket{le="1"} 1\nh_bucket{le="2"} 3\nh_bucket{le="+Inf"} 4\nh_sum 6\nh_count 4\n')
    s = parse_prometheus(page)
    x = s["x_total"][0]
    assert x.label("path") == '/a"b\\c\nd' and x.label("code") == "200"
    assert x.value == 3 and x.timestamp_ms == 1700000000000
    assert s["z"][0].value == float("inf") and s["w"][0].value == -1500.0
    assert s["y"][0].value != s["y"][0].value       # NaN
    assert histogram_quantile(0.5, [[1, 1], [2, 3], ["+Inf", 4]]) == pytest.approx(1.5)
    assert histogram_quantile(0.99, [[1, 1], [2, 3], ["+Inf", 4]]) == 2     # in +Inf: the highest bound
    assert histogram_quantile(0.5, [[1, 0], ["+Inf", 0]]) is None
    for bad, where in (('a{b="c} 1\n', "line 1: unterminated label value"), ("ok 1\n9bad 1\n", "line 2"),
                       ("a 1 2 3\n", "line 1: expected a value"), ('a{b=c} 1\n', "line 1: malformed label"),
                       ("a x\n", "line 1: 'x' is not a sample value")):
        with pytest.raises(MetricsFormatError, match=where):
            parse_prometheus(bad)
    assert volcano_figures(parse_prometheus("other 1\n")) == {}     # nothing of Volcano: nothing, not zeros


# ------------------------------------------------------------------------------------ request log

@pytest.fixture(scope="module")
def requests() -> list[dict]:
    return [json.loads(ln) for ln in _text("requests-v1.14.1.jsonl.gz").splitlines() if ln.strip()]


def test_real_request_log_to_decisions(requests):
    x = DecisionExtractor("scheduler-1", session_gap_s=0.5)
    ds = x.feed(requests)
    ops = Counter(d["op"] for d in ds)
    binds = [r for r in requests if r["resource"] == "pods" and r.get("subresource") == "binding"]
    assert ops["bind"] == len(binds) == x.counters["binds"] > 0
    assert all(d["instance"] == "scheduler-1" and d["leader"] and not d["dry_run"] for d in ds)
    by_pod_bind = {(d["pod"], d["node"]) for d in ds if d["op"] == "bind"}
    assert by_pod_bind == {(f"{r['namespace']}/{r['name']}", r["node"]) for r in binds}
    # evictions: each one a DELETE preceded by a DisruptionTarget status write of the same pod
    evicts = [d for d in ds if d["op"] == "evict"]
    deletes = [r for r in requests if r["verb"] == "delete" and r["resource"] == "pods"]
    assert len(evicts) == len(deletes) == x.counters["evictions"] > 0
    for d in evicts:
        assert d["reason"] == "PreemptionByScheduler" and d["uid"] and d["node"]
        first = next(r for r in requests if r.get("subresource") == "status" and
                     f"{r['namespace']}/{r['name']}" == d["pod"] and
                     (r.get("conditions") or {}).get("DisruptionTarget", "").startswith("True"))
        assert first["t"] < d["t"]
    # pipelines: a status write that nominated a node the pod's previous write did not
    pipes = [d for d in ds if d["op"] == "pipeline"]
    assert pipes and all(d["node"] and d["new"] for d in pipes)
    nominating = [r for r in requests if r.get("subresource") == "status" and r.get("nominatedNodeName")]
    assert len(pipes) <= len(nominating)
    assert {(d["pod"], d["node"]) for d in pipes} == {(f"{r['namespace']}/{r['name']}", r["nominatedNodeName"])
                                                    for r in nominating}
    # the evictor's status writes are not "status" decisions; the others are
    status_writes = [r for r in requests if r.get("subresource") == "status" and r["resource"] == "pods"]
    assert ops["status"] + ops["pipeline"] + len(evicts) == len(status_writes)
    # seq counts from 1 without gaps; sessions are inferred and never go back
    assert [d["seq"] for d in ds] == list(range(1, len(ds) + 1))
    sessions = [d["session"] for d in ds]
    assert sessions == sorted(sessions) and all(d["session_inferred"] for d in ds)
    # the PodGroup writes that lost a race (409) are the only podgroup decisions, as in the model
    pg409 = [r for r in requests if r["resource"] == "podgroups" and r["code"] == 409]
    assert ops["podgroup"] == len(pg409) == x.counters["pod_group_errors"]
    assert x.counters["pod_group_writes"] == sum(1 for r in requests if r["resource"] == "podgroups"
                                                 and r["verb"] == "update" and r["code"] == 200)


def test_request_log_edge_cases(tmp_path):
    x = DecisionExtractor("scheduler-2")
    pod = {"group": "", "resource": "pods", "namespace": "ns", "name": "p"}
    recs = [
        {**pod, "t": 1.0, "verb": "create", "subresource": "binding", "code": 409, "reason": "Conflict",
         "node": "n1"},
        {**pod, "t": 1.1, "verb": "delete", "subresource": None, "code": 200},            # not an eviction
        {**pod, "t": 1.2, "verb": "update", "subresource": "status", "code": 200, "uid": "u",
         "nominatedNodeName": "n2", "conditions": {"PodScheduled": "False/Unschedulable"}},
        {**pod, "t": 1.3, "verb": "update", "subresource": "status", "code": 200, "uid": "u",
         "nominatedNodeName": "n2"},                                                        # same nomination
        {**pod, "t": 5.0, "verb": "update", "subresource": "status", "code": 200, "uid": "u",
         "conditions": {"DisruptionTarget": "True/PreemptionByScheduler"}},
        {**pod, "t": 5.1, "verb": "delete", "subresource": None, "code": 404, "reason": "NotFound"},
    ]
    ds = x.feed(recs)
    assert [(d["op"], d["ok"]) for d in ds] == [("bind", False), ("pipeline", True), ("status", True),
                                                ("evict", False)]
    assert ds[0]["error"] == "409 Conflict" and x.counters["bind_conflicts"] == 1 and x.counters["binds"] == 0
    assert ds[1]["node"] == "n2" and ds[2]["node"] == "n2"
    assert ds[3]["error"] == "404 NotFound" and ds[3]["uid"] == "u" and x.counters["evict_errors"] == 1
    assert [d["session"] for d in ds] == [1, 1, 1, 2]
    # the tail reads whole lines only, skipping (and counting) malformed ones
    p = tmp_path / "requests.jsonl"
    p.write_bytes(b'{"a": 1}\nnot json\n{"b": 2}\n{"c": ')
    tail = RequestLogTail(p)
    assert tail.read_new() == [{"a": 1}, {"b": 2}] and tail.malformed == 1
    assert tail.read_new() == []
    with open(p, "ab") as f:
        f.write(b'3}\n')
    assert tail.read_new() == [{"c": 3}]
    assert RequestLogTail(tmp_path / "missing.jsonl").read_new() == []


def test_observe_generations_share_the_request_log(tmp_path, requests):
    """observe() as the supervisor calls it: a standby is not signalled and says why; a new
    supervisor of the instance (life 0 again, later) does not take the earlier one's decisions."""
    from ha.runtime.external.observe import COLD_STANDBY, observe
    from ha.runtime.external.process import ProcessHandle
    log = tmp_path / "requests.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in requests))

    def handle(started_at: float, life: int = 0) -> ProcessHandle:
        return ProcessHandle(instance="scheduler-9", life=life, pid=None, argv=["vc-scheduler", "--leader-elect=true"],
                             dump_dir=str(tmp_path), socket_dir="", metrics_url="", healthz_url="",
                             endpoint_url="", request_log=str(log), delivery_log="", log_path="",
                             started_at=started_at)

    first = observe(handle(0.0), 0)
    everything = DecisionExtractor("scheduler-9").feed(requests)
    assert [(d["op"], d["pod"], d["seq"]) for d in first["decisions"]] == \
        [(d["op"], d["pod"], d["seq"]) for d in everything]
    assert first["digest"] == {"synced": False, "unobserved": {"cache": COLD_STANDBY,
                                                               "staleness_ms": first["digest"]["unobserved"]["staleness_ms"]}}
    assert first["scrape"]["unobserved"].startswith("no metrics URL") and "sessions" not in first["stats"]
    assert observe(handle(0.0, life=1), len(everything))["decisions"] == []     # a later life: nothing new
    # the instance killed and started again: a new supervisor, whose first life starts mid-log
    mid = requests[len(requests) // 2]["t"]
    second = observe(handle(mid), 0)
    later = DecisionExtractor("x").feed(r for r in requests if r["t"] >= mid)
    assert len(second["decisions"]) == len(later) < len(everything)
    assert [d["seq"] for d in second["decisions"]] == list(range(1, len(later) + 1))
    assert second["stats"]["binds"] == sum(1 for d in later if d["op"] == "bind" and d["ok"])


def test_scraper_over_http(tmp_path):
    """The scraper GETs the page (here the captured one, served on loopback) and keeps Volcano's
    families; an endpoint that does not answer is unavailable with the reason."""
    import http.server
    import threading

    from ha.runtime.external.observe.metrics import MetricsScraper, MetricsUnavailable
    page = _text("metrics-v1.14.1.txt.gz").encode()

    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):     # noqa: N802
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *a):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        got = MetricsScraper(f"http://127.0.0.1:{srv.server_port}/metrics").scrape()
        # observe(): each process life's counters start at zero; a generation's sessions add up
        from ha.runtime.external.observe import observe
        from ha.runtime.external.process import ProcessHandle
        url = f"http://127.0.0.1:{srv.server_port}/metrics"
        lives = [observe(ProcessHandle(instance="scheduler-8", life=life, pid=None, argv=[], dump_dir="",
                                       socket_dir="", metrics_url=url, healthz_url="", endpoint_url="",
                                       request_log=str(tmp_path / "none.jsonl"), delivery_log="", log_path="",
                                       started_at=5.0), 0) for life in (0, 0, 1)]
    finally:
        srv.shutdown()
        srv.server_close()
    assert [o["stats"]["sessions"] for o in lives] == [81, 81, 162]
    assert [o["scrape"]["life"] for o in lives] == [0, 0, 1] and lives[2]["digest"]["sessions"] == 162
    assert got == volcano_figures(parse_prometheus(page.decode()))
    with pytest.raises(MetricsUnavailable, match=f"GET http://127.0.0.1:{srv.server_port}/metrics: "):
        MetricsScraper(f"http://127.0.0.1:{srv.server_port}/metrics", timeout_s=1).scrape()


def test_a_refused_nomination_is_still_the_sessions_pipeline_decision():
    """Volcano writes a Pipelined task's nomination in a status write; when the API server refuses
    it (409 on a stale pod copy, S6) the session decided the pipeline all the same, and the model
    records it: the extractor reads the nomination the write asked for (``sentNominatedNodeName``)."""
    pod = {"group": "", "resource": "pods", "namespace": "ns", "name": "p", "uid": "u",
           "verb": "update", "subresource": "status"}
    refused = {**pod, "code": 409, "reason": "Conflict"}
    x = DecisionExtractor("scheduler-1", session_gap_s=0.5)
    ds = x.feed([
        {**refused, "t": 1.0, "sentNominatedNodeName": "n1"},          # session 1: refused
        {**refused, "t": 2.0, "sentNominatedNodeName": "n1"},          # session 2: the same, refused again
        {**refused, "t": 3.0, "sentNominatedNodeName": ""},            # a refused write without a nomination
        {**pod, "t": 4.0, "code": 200, "nominatedNodeName": "n1"},     # session 4: lands
        {**refused, "t": 5.0, "sentNominatedNodeName": "n1"},          # asks for what is written: no decision
        {**refused, "t": 6.0, "sentNominatedNodeName": "n2"},          # a new node, refused
    ])
    assert [(d["session"], d["op"], d["node"], d["ok"], d.get("new")) for d in ds] == [
        (1, "pipeline", "n1", True, True), (1, "status", None, False, None),
        (2, "pipeline", "n1", True, False), (2, "status", None, False, None),
        (3, "status", None, False, None),
        (4, "pipeline", "n1", True, True),
        (5, "status", None, False, None),
        (6, "pipeline", "n2", True, True), (6, "status", None, False, None)]
    assert ds[0]["write_error"] == "409 Conflict" and x.counters["status_errors"] == 5
    assert x.counters["pipelines"] == 1       # written nominations only
    # a refused write logged before the front logged what it asked for: no decision invented
    y = DecisionExtractor("scheduler-1")
    assert [(d["op"], d["ok"]) for d in y.feed([{**refused, "t": 1.0}])] == [("status", False)]
