"""``ha-testbed replay DIR --instance NAME [--until RV]``: rebuild one instance's scheduler cache from
its delivery log, deterministically, and print its digest.

The delivery log (``DIR/delivery/NAME.log``, cluster_state.delivery) holds every notification that
instance's informers gave their handlers, in the order they gave them (``seq``, across kinds),
tombstones of relists included. Replay feeds them, in that order, to a fresh
``ha.scheduler.cache.SchedulerCache`` wired as the instance wires its own (``ha.scheduler.wiring.
build_cache``: same switches, scheduler name, default queue, handlers) with in-memory IO, and returns
``cache.digest()``. Chaos acted *before* the handlers (delay, reorder, stall, relists), so the log
already carries its effect: replay needs no fault model.

``until_rv``: stop before the first record whose RV is beyond it -- the cache as it stood when the
instance had applied everything up to that RV (records are in delivery order, so with cross-object
reordering "up to RV" means "the prefix of the log before anything newer arrived").
``until_seq``: stop after that many records (exact prefix).

What replay cannot hold: cache changes made by the instance's own scheduling sessions that no
informer event reflects yet (an assumed bind in flight, a pipeline kept only in the cache); the
digest of a standby -- or of any instance between sessions once its writes came back through the
informers -- is what replay rebuilds. The log of the *current* incarnation is ``NAME.log``; earlier
incarnations (instance restarts) are ``NAME.1.log`` ... and replay separately (``log_path``).
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ha.errors import BadInput

__all__ = ["replay_instance", "replay_records", "replay_cli", "digest_of_cache", "build_replay_cache"]


def build_replay_cache(*, profile: str = "v1.14", switches: dict | None = None,
                       scheduler_name: str = "volcano", default_queue: str = "default"):
    return _wire(profile=profile, switches=switches, scheduler_name=scheduler_name,
                 default_queue=default_queue, errors=[]).cache


def _wire(*, profile, switches, scheduler_name, default_queue, errors: list[str]):
    from ha.scheduler.wiring import build_cache
    try:
        return build_cache(profile=profile, switches=switches, scheduler_name=scheduler_name,
                           default_queue=default_queue, bind_mode="sync", batch_num=1_000_000,
                           on_fatal=lambda e: errors.append(f"fatal: {e}"),
                           on_error=lambda e: errors.append(f"{type(e).__name__}: {e}"))
    except BadInput as e:
        raise BadInput(f"replay: {e}") from None


def digest_of_cache(cache: Any) -> dict:
    d = cache.digest()
    return {"tasks": d["tasks"], "nodes": d["nodes"]}


def replay_records(records: list[dict], *, until_rv: int | None = None, until_seq: int | None = None,
                   profile: str = "v1.14", switches: dict | None = None,
                   scheduler_name: str = "volcano", default_queue: str = "default") -> dict:
    """Replay records (read_delivery_log's) into a fresh cache; the digest plus replay facts."""
    from cluster_state.delivery import replay
    errors: list[str] = []
    cache, handlers = _wire(profile=profile, switches=switches, scheduler_name=scheduler_name,
                            default_queue=default_queue, errors=errors)
    recs = sorted(records, key=lambda r: r["seq"])
    if until_seq is not None:
        recs = [r for r in recs if r["seq"] <= until_seq]
    used = []
    for r in recs:   # the prefix replay() will apply (same rule), for the report below
        if until_rv is not None and r.get("rv", 0) > until_rv:
            break
        used.append(r)
    replay(used, handlers)
    rvs: dict[str, int] = {}
    for r in used:
        if r.get("rv") is not None:
            rvs[r["kind"]] = max(rvs.get(r["kind"], 0), int(r["rv"]))
    out = digest_of_cache(cache)
    out.update({"records": len(used), "last_seq": used[-1]["seq"] if used else 0, "rvs": rvs,
                "until_rv": until_rv, "until_seq": until_seq, "errors": errors})
    return out


def _instance_settings(results_dir: Path) -> dict:
    """profile / switches / scheduler name from metrics.json, when the folder has one."""
    m = results_dir / "metrics.json"
    if not m.exists():
        return {}
    try:
        doc = json.loads(m.read_text())
    except (OSError, ValueError) as e:
        raise BadInput(f"{m}: unreadable ({e})") from None
    exp = doc.get("experiment") or {}
    out: dict[str, Any] = {}
    if exp.get("profile"):
        out["profile"] = exp["profile"]
    if isinstance(exp.get("switches"), dict) and exp["switches"]:
        out["switches"] = exp["switches"]
    sched = exp.get("schedulers") or {}
    if sched.get("scheduler_name"):
        out["scheduler_name"] = sched["scheduler_name"]
    return out


def replay_instance(results_dir: str | os.PathLike, instance: str, until_rv: int | None = None, *,
                    until_seq: int | None = None, profile: str | None = None,
                    switches: dict | None = None, scheduler_name: str | None = None,
                    default_queue: str = "default", log_path: str | os.PathLike | None = None) -> dict:
    """The digest of ``instance``'s cache rebuilt from ``results_dir/delivery/<instance>.log``.

    Profile/switches/scheduler name: the arguments, else metrics.json's experiment, else v1.14.
    """
    from cluster_state.delivery import DeliveryLogError, read_delivery_log
    d = Path(results_dir)
    if not d.is_dir():
        raise BadInput(f"{d}: not a results folder (no such directory)")
    path = Path(log_path) if log_path is not None else d / "delivery" / f"{instance}.log"
    if not path.exists():
        have = sorted(p.stem for p in (d / "delivery").glob("*.log")) if (d / "delivery").is_dir() else []
        raise BadInput(f"{path}: no delivery log for instance {instance!r}"
                       + (f" (logs: {', '.join(have)})" if have else " (no delivery/ folder)"))
    if until_rv is not None and until_rv < 0:
        raise BadInput(f"--until: a resourceVersion is ≥ 0, got {until_rv}")
    settings = _instance_settings(d)
    try:
        header, records = read_delivery_log(path)
    except DeliveryLogError as e:
        raise BadInput(str(e)) from None
    out = replay_records(records, until_rv=until_rv, until_seq=until_seq,
                         profile=profile or settings.get("profile", "v1.14"),
                         switches=switches if switches is not None else settings.get("switches"),
                         scheduler_name=scheduler_name or settings.get("scheduler_name", "volcano"),
                         default_queue=default_queue)
    out["name"] = instance
    out["log"] = str(path)
    out["log_records"] = len(records)
    return out


def replay_cli(results_dir: str | os.PathLike, instance: str, until: int | None = None, *,
               until_seq: int | None = None, as_json: bool = True, echo=print) -> int:
    """The ``replay`` command: prints the digest as JSON; exit 0 (BadInput propagates: exit 2)."""
    if until_seq is not None and until_seq < 0:
        raise BadInput(f"--until-seq: a delivery-log position is ≥ 0, got {until_seq}")
    out = replay_instance(results_dir, instance, until, until_seq=until_seq)
    if as_json:
        echo(json.dumps(out, indent=1, sort_keys=True, default=str))
    else:
        counts: dict[str, int] = {}
        for st, _node in out["tasks"].values():
            counts[st] = counts.get(st, 0) + 1
        echo(f"{instance}: {out['records']} records replayed (of {out['log_records']}), "
             f"tasks {len(out['tasks'])} {counts}, nodes {len(out['nodes'])}, errors {len(out['errors'])}")
    return 0
