"""The vc-scheduler log lines the supervisor reads, in the forms of the Volcano releases it runs.

The lines are copied from real runs: v1.14.1 (client-go of Kubernetes 1.34, printf logging) and
v1.15.0 (client-go 1.35, structured logging). A life that wins the Lease must be seen as leading
whichever it prints: unseen, a run records no leader, its kill-the-leader faults find none and its
failover is not measured.
"""
from __future__ import annotations

import pytest

from ha.bench.scale_volcano import sync_from_log
from ha.runtime.external.supervisor import LEASE_ACQUIRED

V1141 = "I1127 22:23:02.066868   23655 leaderelection.go:271] successfully acquired lease volcano-system/volcano"
V1150 = ('I1128 04:59:08.602896   26236 leaderelection.go:272] "Successfully acquired lease" '
         'lock="volcano-system/volcano"')
SYNCED = "I1128 04:59:09.102896   26236 scheduler.go:97] Scheduler completes Initialization and start to run"


@pytest.mark.parametrize("line", [V1141, V1150], ids=["v1.14.1", "v1.15.0"])
def test_the_lease_won_is_read_in_both_forms(line):
    m = LEASE_ACQUIRED.search(line)
    assert m is not None and m.group(1) == "volcano-system/volcano"
    assert sync_from_log(f"{line}\n{SYNCED}\n") is not None


@pytest.mark.parametrize("line", [
    'I1128 04:59:08.528214   26236 leaderelection.go:258] "Attempting to acquire leader lease..." '
    'lock="volcano-system/volcano"',
    "I1127 22:23:01.066868   23655 leaderelection.go:257] attempting to acquire leader lease volcano-system/volcano...",
    'I1128 04:59:30.000000   26236 leaderelection.go:297] "Failed to renew lease" lock="volcano-system/volcano"',
])
def test_trying_or_failing_is_not_winning(line):
    assert LEASE_ACQUIRED.search(line) is None
