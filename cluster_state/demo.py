"""``ha-testbed demo``: a short live tour of the API server on a real Redis.

Watchers (one thread per kind) print events as they arrive while the main thread creates 3 nodes,
a queue, a podgroup and 3 pods, nominates one pod, binds it (one MODIFIED: nodeName set, the
nomination cleared) and gracefully deletes another; then a final table of the pods.
"""
from __future__ import annotations

import os
import threading
import time
from contextlib import ExitStack

from .client import ApiClient
from .embedded import EmbeddedRedis
from .watch import WatchEvent

KINDS = ("Node", "Queue", "PodGroup", "Pod")


def _describe(e: WatchEvent) -> str:
    if e.object is None:
        return e.error or ""
    md, spec, st = e.object["metadata"], e.object.get("spec", {}), e.object.get("status", {})
    name = f"{md.get('namespace')}/{md['name']}" if md.get("namespace") else md["name"]
    bits = [name]
    if e.kind == "Pod":
        bits.append(f"node={spec.get('nodeName') or '-'} nnn={st.get('nominatedNodeName') or '-'}")
        if md.get("deletionTimestamp"):
            bits.append(f"terminating(grace={md.get('deletionGracePeriodSeconds')}s)")
    elif e.kind == "Node":
        alloc = st.get("allocatable", {})
        bits.append(f"cpu={alloc.get('cpu')} memory={alloc.get('memory')}")
    return " ".join(bits)


def _watch(api: ApiClient, kind: str, stop: threading.Event, seen: list, lock: threading.Lock, console) -> None:
    rv = 0
    while not stop.is_set():
        for e in api.watch(kind, rv, block_ms=100):
            rv = e.resource_version
            if e.type == "BOOKMARK":
                continue
            with lock:
                seen.append(e)
                console.print(f"  [dim]rv={e.resource_version:>3}[/dim] [bold]{e.type:<8}[/bold] "
                              f"{kind:<8} {_describe(e)}")


def run_demo(redis_url: str | None) -> int:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    with ExitStack() as stack:
        if not redis_url:
            server = stack.enter_context(EmbeddedRedis())
            redis_url = server.url
            console.print(f"[green]embedded redis-server[/green] pid {server.pid} at {redis_url}")
        prefix = f"demo{os.getpid()}"
        api = ApiClient.from_url(redis_url, prefix, clear_nnn_on_binding=True)
        stack.callback(api.close)
        stack.callback(lambda: [api.redis.delete(k) for k in api.redis.scan_iter(match=f"{prefix}:*")])

        stop, lock, seen = threading.Event(), threading.Lock(), []
        watchers = [ApiClient.from_url(redis_url, prefix) for _ in KINDS]
        for w in watchers:
            stack.callback(w.close)
        threads = [threading.Thread(target=_watch, args=(w, k, stop, seen, lock, console), daemon=True)
                   for w, k in zip(watchers, KINDS)]
        console.print("[bold]watch events[/bold] (one watcher per kind):")
        for t in threads:
            t.start()

        for i in range(1, 4):
            api.create({"kind": "Node", "metadata": {"name": f"node-{i}", "labels": {"rack": f"r{(i + 1) // 2}"}},
                        "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": 110}}})
        api.create({"kind": "Queue", "metadata": {"name": "research"}, "spec": {"weight": 2}})
        api.create({"kind": "PodGroup", "metadata": {"name": "train", "namespace": "ml"},
                    "spec": {"minMember": 3, "queue": "research"}})
        for i in range(3):
            api.create({"kind": "Pod", "metadata": {"name": f"train-{i}", "namespace": "ml",
                                                    "annotations": {"scheduling.k8s.io/group-name": "train"}},
                        "spec": {"containers": [{"name": "main",
                                                 "resources": {"requests": {"cpu": "1500m", "memory": "2Gi"}}}]}})
        pod = api.get("Pod", "train-0", "ml")
        pod["status"]["nominatedNodeName"] = "node-2"
        api.update_status(pod)                                   # the scheduler's nomination
        bound = api.bind("ml", "train-0", "node-2")              # one MODIFIED: node set, NNN cleared
        gone = api.delete("Pod", "train-2", "ml", grace_period_seconds=1)
        api.finalize_deletions(now=gone["metadata"]["deletionTimestamp"] + 0.01)

        final_rv = api.current_resource_version()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with lock:
                if len(seen) >= final_rv:
                    break
            time.sleep(0.02)
        stop.set()
        for t in threads:
            t.join(timeout=5)

        lr = api.list("Pod", namespace="ml")
        table = Table(title=f"pods at resourceVersion {lr.resource_version}")
        for col in ("pod", "phase", "node", "nominated", "cpu", "memory", "rv"):
            table.add_column(col)
        for p in sorted(lr.items, key=lambda p: p["metadata"]["name"]):
            req = p["spec"]["containers"][0]["resources"]["requests"]
            table.add_row(p["metadata"]["name"], p["status"]["phase"], p["spec"]["nodeName"] or "-",
                          p["status"].get("nominatedNodeName") or "-", req["cpu"], req["memory"],
                          str(p["metadata"]["resourceVersion"]))
        console.print(table)

        bind_events = [e for e in seen if e.kind == "Pod" and e.resource_version == bound["metadata"]["resourceVersion"]]
        ok = (len(seen) == final_rv
              and [e.resource_version for e in sorted(seen, key=lambda e: e.resource_version)] == list(range(1, final_rv + 1))
              and len(bind_events) == 1 and bind_events[0].object["spec"]["nodeName"] == "node-2"
              and bind_events[0].object["status"].get("nominatedNodeName") == ""
              and {p["metadata"]["name"] for p in lr.items} == {"train-0", "train-1"})
        console.print(f"{len(seen)} events for {final_rv} writes; "
                      + ("[green]every write seen exactly once, in order per kind[/green]" if ok
                         else "[red]watch did not see what was written[/red]"))
        return 0 if ok else 1
