"""repeat_pipelines (extension): pipeline decisions per distinct (pod, node), per instance — the
claim of PR #5045's description that a task already Pipelined on its node is not pipelined
again, measured.

Counted over the records a session *decided* (``new``: not a reservation kept from an earlier
session; records without the flag, from older runs, all count): 1.0 means every (pod, node) was
pipelined once; above it, the same placement was decided again after the reservation was lost (a
failed nomination write, an un-pipeline / re-pipeline cycle: examples/README.md "The re-pipeline
surprise"). ``held``: the same ratio over every record, i.e. how many sessions a reservation
waited. Dry-run (shadow) records are left out. Absent when no instance pipelined anything."""
from ha.experiment.checkers import Absent
from ha.experiment.repeat_pipelines import repeat_pipelines

NAME = "repeat_pipelines"
HEADLINE = None
CONTRACT = False


def check(h):
    ds = [d for d in h.decisions() if d.get("op") == "pipeline" and not d.get("dry_run")]
    held = repeat_pipelines(ds)
    if not held:
        return Absent("no pipeline decision in the run")
    decided = repeat_pipelines([d for d in ds if d.get("new", True)])
    per = {inst: {"ratio": None if decided.get(inst) is None else round(decided[inst], 4),
                  "held": round(held[inst], 4)} for inst in sorted(held)}
    ratios = [v["ratio"] for v in per.values() if v["ratio"] is not None]
    return {"max": max(ratios) if ratios else None, "instances": per}
