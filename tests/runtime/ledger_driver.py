"""A driver for the SIGKILL test of the process ledger: opens a ledger, starts what a run starts
(the embedded redis-server, a local Ray with one actor), prints the ledger's path, then waits to
be killed. ``python -m tests.runtime.ledger_driver RUN_ID``."""
from __future__ import annotations

import json
import sys
import time


def main(run_id: str) -> None:
    from cluster_state.embedded import EmbeddedRedis
    from ha.runtime import ledger
    from ha.runtime.ray_local import start_ray
    import ray

    led = ledger.begin(run_id)
    EmbeddedRedis(on_start=lambda pid: ledger.add(pid, "redis-server")).start()
    start_ray(num_cpus=1)

    @ray.remote
    class Probe:
        def pid(self) -> int:
            import os
            return os.getpid()

    probe = Probe.remote()
    actor_pid = ray.get(probe.pid.remote(), timeout=120)
    print(json.dumps({"ledger": str(led.path), "actor_pid": actor_pid}), flush=True)
    while True:
        time.sleep(1)


if __name__ == "__main__":
    main(sys.argv[1])
