"""leader_changes (extension): times the Lease changed hands (its leaseTransitions at the end; a
restarted instance comes back under a new identity, so its new term counts)."""
from ha.experiment.checkers import Absent
from ha.experiment.checkers._run import mode

NAME = "leader_changes"
HEADLINE = None
CONTRACT = False


def check(h):
    if mode(h) == "active-active":
        return Absent("active-active: no leader election")
    lease = (h.final or {}).get("lease")
    if not isinstance(lease, dict):
        ls = h.leases()
        lease = ls[-1] if ls else None
    if not lease or lease.get("lease_transitions") is None:
        return Absent("no Lease recorded (never elected, or leases.jsonl empty)")
    return int(lease["lease_transitions"])
