"""client-go against the front: the real library vc-scheduler v1.14 links (client-go v0.34.1 and
volcano.sh/apis v1.14.0, in go/clientgo-probe) runs shared informers, a relist after 410, a
field-selector informer, leader election on a Lease and a protobuf pod status update, and reports
what it saw as JSON lines; the tests write through the store and assert on those lines.

Skips where Go is missing; where Go is present and the build fails, fails with Go's error."""
from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from cluster_state.errors import NotFound
from kube_api import protobuf as pb
from kube_api.endpoint import EndpointChaos

from .conftest import go_program
from .read_helpers import NS, node, pod, podgroup

PROBE_DIR = Path(__file__).resolve().parents[2] / "go" / "clientgo-probe"
PROTO = "application/vnd.kubernetes.protobuf"


@pytest.fixture(scope="module")
def probe_binary() -> Path:
    return go_program(PROBE_DIR)


@pytest.fixture(scope="module")
def protobuf_decoder():
    """The front decodes client-go's protobuf bodies through go/k8sproto."""
    go_program(pb.K8SPROTO_DIR, "k8sproto")


class Probe:
    """One running clientgo-probe: its JSON lines collected by a reader thread; stopped by PID."""

    def __init__(self, binary: Path, *args: str):
        self.proc = subprocess.Popen([str(binary), *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, bufsize=1)
        self.lines: list[dict] = []
        self._q: queue.Queue = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for raw in self.proc.stdout:
            try:
                self._q.put(json.loads(raw))
            except json.JSONDecodeError:
                self._q.put({"t": "garbage", "raw": raw})
        self._q.put(None)

    def _drain(self, timeout: float) -> bool:
        try:
            item = self._q.get(timeout=timeout)
        except queue.Empty:
            return True
        if item is None:
            self._q.put(None)
            return False
        self.lines.append(item)
        return True

    def wait_for(self, pred, timeout: float = 30.0, *, since: int = 0) -> dict:
        """The first line (from index ``since``) matching ``pred``, waiting up to ``timeout``."""
        deadline = time.monotonic() + timeout
        checked = since
        while True:
            for i in range(checked, len(self.lines)):
                if pred(self.lines[i]):
                    return self.lines[i]
                if self.lines[i].get("t") == "error":
                    raise AssertionError(f"the probe reported an error: {self.lines[i]['error']}")
            checked = max(checked, len(self.lines))
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no matching line within {timeout}s; last lines: {self.lines[-15:]}; "
                                     f"stderr: {self.stderr_tail()}")
            if not self._drain(min(left, 0.5)) and self.proc.poll() is not None:
                raise AssertionError(f"the probe exited ({self.proc.returncode}) without a matching line; "
                                     f"last lines: {self.lines[-15:]}; stderr: {self.stderr_tail()}")

    def stderr_tail(self) -> str:
        if self.proc.poll() is None:
            return "(still running)"
        return self.proc.stderr.read()[-3000:]

    def send(self, line: str) -> None:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def dump(self, timeout: float = 10.0) -> dict:
        since = len(self.lines)
        self.send("dump")
        return self.wait_for(lambda x: x["t"] == "state", timeout, since=since)["stores"]

    def requests(self, since: int = 0) -> list[dict]:
        return [x for x in self.lines[since:] if x["t"] == "request"]

    def kill(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
        self.kill()
        for f in (self.proc.stdout, self.proc.stderr):
            f.close()


@pytest.fixture
def probes():
    started: list[Probe] = []
    yield started
    for p in started:
        p.close()


def event(informer: str, typ: str, key: str):
    return lambda x: x["t"] == "event" and x["informer"] == informer and x["type"] == typ and x["key"] == key


def store_state(api, kind: str, namespaced: bool = True) -> dict[str, str]:
    items = api.list(kind).items
    return {(f"{o['metadata']['namespace']}/" if namespaced else "") + o["metadata"]["name"]:
            str(o["metadata"]["resourceVersion"]) for o in items}


def test_informers_sync_and_follow_changes(kube_front, probe_binary, probes):
    api = kube_front.api
    api.create(node("n1"))
    api.create(node("n2"))
    api.create(pod("a"))
    api.create(pod("b", "other"))
    api.create(podgroup("pg1"))
    p = Probe(probe_binary, "informers", "--server", kube_front.url,
              "--field-selector", "spec.nodeName=n1,status.phase!=Succeeded")
    probes.append(p)
    synced = p.wait_for(lambda x: x["t"] == "synced", 60)
    assert synced["pods"] == ["default/a", "other/b"]
    assert synced["nodes"] == ["n1", "n2"]
    assert synced["podgroups"] == ["default/pg1"]
    assert synced["pods-selected"] == []
    # the initial LIST is the reflector's: RV 0, limit 500, JSON answered
    lists = [r for r in p.requests() if r["path"] == "/api/v1/pods" and "watch=true" not in r["query"]]
    assert lists and "resourceVersion=0" in lists[0]["query"] and "limit=500" in lists[0]["query"]
    assert lists[0]["code"] == 200 and lists[0]["responseType"].startswith("application/json")

    api.create(pod("c"))
    p.wait_for(event("pods", "add", "default/c"))
    api.bind(NS, "a", "n1")
    assert p.wait_for(event("pods", "update", "default/a"))["nodeName"] == "n1"
    assert p.wait_for(event("pods-selected", "add", "default/a"))["nodeName"] == "n1"
    pg = api.get("PodGroup", "pg1", NS)
    pg["status"] = {"phase": "Running", "running": 1}
    api.update_status(pg)
    p.wait_for(event("podgroups", "update", "default/pg1"))
    api.delete("Node", "n2")
    p.wait_for(event("nodes", "delete", "n2"))

    # a pod that stops matching the field selector arrives as DELETED on that informer only
    a = api.get("Pod", "a", NS)
    a["status"]["phase"] = "Succeeded"
    mark = len(p.lines)
    api.update_status(a)
    deleted = p.wait_for(event("pods-selected", "delete", "default/a"), since=mark)
    assert deleted.get("tombstone") is not True        # a real DELETED event, not a relist's guess
    assert p.wait_for(event("pods", "update", "default/a"), since=mark)["phase"] == "Succeeded"

    # every informer's cache now equals the store, RV for RV
    state = p.dump()
    assert state["pods"] == store_state(api, "Pod")
    assert state["nodes"] == store_state(api, "Node", namespaced=False)
    assert state["podgroups"] == store_state(api, "PodGroup")
    assert state["pods-selected"] == {}
    # the informers watch with the reflector's parameters and never needed a relist
    watches = [r for r in p.requests() if r["path"] == "/api/v1/pods" and "watch=true" in r["query"]]
    assert watches and all("allowWatchBookmarks=true" in r["query"] for r in watches)
    lists = [r["query"] for r in p.requests() if r["path"] == "/api/v1/pods" and "watch=true" not in r["query"]]
    assert len(lists) == 2 and sum("fieldSelector=" in q for q in lists) == 1, lists   # one per pods informer


def test_relist_after_410(kube_front, probe_binary, probes):
    api = kube_front.api
    chaos = EndpointChaos("scheduler-1")
    ep = kube_front.add_endpoint("scheduler-1", chaos=chaos)
    api.create(pod("a"))
    p = Probe(probe_binary, "informers", "--server", ep.url)
    probes.append(p)
    p.wait_for(lambda x: x["t"] == "synced", 60)
    api.create(pod("b"))
    p.wait_for(event("pods", "add", "default/b"))
    # the history the watch started from is compacted away; the stream is expired with a 410
    mark = len(p.lines)
    api.compact("Pod", api.current_resource_version())
    deadline = time.monotonic() + 10
    while not kube_front.front.run(chaos.expire_now(["Pod"]))["Pod"] and time.monotonic() < deadline:
        time.sleep(0.1)       # the reflector's watch may be between two requests
    relist = p.wait_for(lambda x: x["t"] == "request" and x["path"] == "/api/v1/pods"
                        and "watch=true" not in x["query"], 30, since=mark)
    assert relist["code"] == 200
    # after the relist the reflector watches again and the informer follows new writes
    api.create(pod("c"))
    p.wait_for(event("pods", "add", "default/c"), since=mark)
    api.delete("Pod", "a", NS, grace_period_seconds=0)
    p.wait_for(event("pods", "delete", "default/a"), since=mark)
    assert p.dump()["pods"] == store_state(api, "Pod")
    assert len([r for r in p.requests() if r["path"] == "/api/v1/pods" and "watch=true" not in r["query"]]) == 2


def test_leader_election_failover_on_a_lease(kube_front, probe_binary, protobuf_decoder, probes):
    lease_s, renew_s, retry_s = 4.0, 3.0, 0.5
    common = ["--server", kube_front.url, "--lease-namespace", "volcano-system", "--lease-name", "volcano",
              "--lease-duration", f"{lease_s}s", "--renew-deadline", f"{renew_s}s", "--retry-period", f"{retry_s}s"]
    first = Probe(probe_binary, "elect", "--id", "vc-1", *common)
    probes.append(first)
    first.wait_for(lambda x: x["t"] == "leading", 30)
    second = Probe(probe_binary, "elect", "--id", "vc-2", *common)
    probes.append(second)
    assert second.wait_for(lambda x: x["t"] == "new-leader", 30)["leader"] == "vc-1"
    held = kube_front.api.get("Lease", "volcano", "volcano-system")
    assert held["spec"]["holderIdentity"] == "vc-1"
    assert held["spec"]["leaseDurationSeconds"] == int(lease_s)
    # the Lease writes went as protobuf and the front stored them
    lease_writes = [r for r in first.requests() if "/leases" in r["path"] and r["method"] in ("POST", "PUT")]
    assert lease_writes and all(r["contentType"] == PROTO for r in lease_writes)
    assert {r["code"] for r in lease_writes} <= {200, 201}

    killed_at = time.time()
    first.kill(signal.SIGKILL)
    took_over = second.wait_for(lambda x: x["t"] == "leading", 30)
    # the follower waits one lease duration from when it last saw the record change; the dead
    # leader's last renewal is at most a (jittered, 1.2x) retry period old, and the follower polls
    # every retry period; 2 s more for a loaded machine
    assert took_over["wall"] - killed_at <= lease_s + 2 * 1.2 * retry_s + 2.0
    assert took_over["wall"] - killed_at >= lease_s - 1.2 * retry_s - 0.5     # not before the lease ran out
    now = kube_front.api.get("Lease", "volcano", "volcano-system")
    assert now["spec"]["holderIdentity"] == "vc-2"
    assert now["spec"]["leaseTransitions"] == held["spec"].get("leaseTransitions", 0) + 1


def test_pod_status_update_and_delete_in_protobuf(kube_front, probe_binary, protobuf_decoder, probes):
    api = kube_front.api
    api.create(pod("p1"))
    sent_rv = api.get("Pod", "p1", NS)["metadata"]["resourceVersion"]
    p = Probe(probe_binary, "status-update", "--server", kube_front.url, "--namespace", NS, "--name", "p1",
              "--nominated-node", "n2", "--delete")
    probes.append(p)
    updated = p.wait_for(lambda x: x["t"] == "updated", 30)
    put = [r for r in p.requests() if r["method"] == "PUT"]
    assert [(r["path"], r["contentType"], r["code"]) for r in put] == \
        [("/api/v1/namespaces/default/pods/p1/status", PROTO, 200)]
    assert updated["sentRV"] == str(sent_rv) and int(updated["rv"]) > int(sent_rv)
    assert updated["nominatedNodeName"] == "n2"
    p.wait_for(lambda x: x["t"] == "deleted", 30)
    dele = [r for r in p.requests() if r["method"] == "DELETE"]
    assert [(r["path"], r["contentType"], r["code"]) for r in dele] == \
        [("/api/v1/namespaces/default/pods/p1", PROTO, 200)]
    assert p.proc.wait(timeout=10) == 0
    # what the store recorded for the status write before the delete: read it from the history
    with pytest.raises(NotFound):
        api.get("Pod", "p1", NS)
    events = [e for e in api.watch("Pod", int(sent_rv), block_ms=100)
              if e.object is not None and e.object["metadata"]["name"] == "p1"]
    modified = [e for e in events if e.type == "MODIFIED"]
    assert modified, events
    st = modified[0].object["status"]
    assert st["nominatedNodeName"] == "n2"
    cond = [c for c in st["conditions"] if c["type"] == "PodScheduled"]
    assert cond and cond[0]["status"] == "False" and cond[0]["reason"] == "Unschedulable"
    assert cond[0]["message"] == "0/3 nodes are available: 3 Insufficient cpu."
    assert [e.type for e in events][-1] == "DELETED"
