"""Drawing one hunt run's experiment from the hunt's seed (VOPR's random workloads and faults,
FoundationDB's fault schedules, with swarm testing's per-run feature choice).

Contract: :func:`draw_experiment` ``(seed, index, profile, switches, intensity)`` returns the data of
an ordinary experiment file (the shape ``ha.experiment.config.parse_experiment`` validates), a pure
function of its arguments: the same hunt seed and run index give the same experiment in any process
(one ``random.Random`` seeded from the text ``hunt:<seed>:<index>``; nothing else is read). Every
value is drawn:

* the cluster: 2–8 nodes of 4–16 cpu, sometimes racks and spines as HyperNodes (then some gangs
  ask for hard network topology, and the configuration has the network-topology-aware plugin);
* 1–3 queues with weights, the workload's arrival rate, gang sizes, runtimes, priority classes and
  the request per pod; arrivals stop before the quiet tail (below);
* the scheduler instances (1–4), their mode (mostly leader-elected, some shadow and active-active),
  warm or cold standby, the session period and short lease timings (so failovers fit in a run);
* the fault schedule: the run first chooses which fault kinds it may use (swarm testing: every kind
  of the registry that the sim engine can run, each on or off; a share of runs keep one kind
  only), then how many faults, by the :data:`INTENSITIES` profile (``low`` / ``medium`` / ``high``);
  each fault gets its target, start, window and parameters.

Every fault ends, and the workload stops arriving, ``TAIL_S`` seconds before the end of the run, so
the convergence oracle judges a quiet cluster; ``measure.converge_within`` is the lease duration
plus 4 s (a failover may follow the last fault), so the verdict's quiet stretch fits in the tail. ``crash-point`` is never drawn: the sim engine runs
every instance in one process and refuses it (docs/simulation.md).
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

__all__ = ["Intensity", "INTENSITIES", "draw_experiment", "FAULT_KINDS", "TAIL_S", "experiment_name"]

TAIL_S = 15.0          # faults end and arrivals stop this long before the end of the run
MIN_QUIET_S = 5.0      # the convergence verdict's all-zero stretch (ha.experiment.oracles)
MEASURE_EVERY_S = 0.5  # every drawn run measures twice a second


@dataclass(frozen=True)
class Intensity:
    """How many faults a run draws, and how its fault kinds are chosen (swarm testing)."""
    name: str
    faults: tuple[int, int]        # faults per run, uniform in [min, max]
    kind_p: float                  # chance that a fault kind is enabled in a run
    one_kind_p: float              # chance that a run keeps a single fault kind
    window: tuple[float, float]    # windowed faults last this long (s)


INTENSITIES: dict[str, Intensity] = {
    "low": Intensity("low", (0, 2), 0.35, 0.4, (0.5, 4.0)),
    "medium": Intensity("medium", (1, 5), 0.5, 0.25, (1.0, 8.0)),
    "high": Intensity("high", (3, 10), 0.7, 0.1, (1.0, 12.0)),
}


def _fault_kinds() -> tuple[str, ...]:
    from chaos.faults import FAULTS
    # crash-point: the sim engine refuses it (every instance shares one process)
    return tuple(name for name in FAULTS if name != "crash-point")


FAULT_KINDS = _fault_kinds()


def experiment_name(seed: int, index: int) -> str:
    return f"hunt-{seed}-{index:05d}"


def _ms(s: float) -> str:
    return f"{int(round(s * 1000))}ms"


def _delay(r: random.Random, scale: float) -> dict[str, Any]:
    """A delay distribution around ``scale`` seconds."""
    dist = r.choice(("fixed", "uniform", "exponential", "exponential", "pareto"))
    if dist == "fixed":
        return {"dist": "fixed", "value": _ms(r.uniform(0.2, 1.5) * scale)}
    if dist == "uniform":
        lo = r.uniform(0.0, 0.5) * scale
        return {"dist": "uniform", "min": _ms(lo), "max": _ms(lo + r.uniform(0.5, 2.0) * scale)}
    if dist == "exponential":
        return {"dist": "exponential", "mean": _ms(r.uniform(0.3, 1.5) * scale)}
    return {"dist": "pareto", "scale": _ms(r.uniform(0.05, 0.3) * scale), "alpha": round(r.uniform(1.1, 2.5), 2),
            "max": _ms(r.uniform(2.0, 6.0) * scale)}


def _target(r: random.Random, accepts: tuple[str, ...], n: int, mode: str) -> str | None:
    if not accepts:
        return None
    choices: list[str] = []
    if "instance" in accepts:
        choices += [f"scheduler-{i}" for i in range(1, n + 1)]
    if "leader" in accepts and mode != "active-active":
        choices += ["leader"] * max(1, n)          # the leader is the interesting target
    if "all" in accepts:
        choices.append("all")
    return r.choice(choices)


def _fault(r: random.Random, kind: str, n: int, mode: str, lo: float, hi: float,
           window: tuple[float, float]) -> dict[str, Any]:
    from chaos.faults import FAULTS
    pkg = FAULTS[kind]
    at = round(r.uniform(lo, hi), 1)
    e: dict[str, Any] = {"at": f"{at:g}s", "fault": kind}
    tgt = _target(r, tuple(pkg.targets), n, mode)
    if tgt is not None:
        e["target"] = tgt
    room = max(0.5, hi - at)
    w = round(min(room, r.uniform(*window)), 1)
    w = max(w, 0.5)
    if kind in ("watch-delay", "watch-stall", "watch-reorder", "watch-expire"):
        if r.random() < 0.6:
            e["kinds"] = sorted(r.sample(["Pod", "Node", "PodGroup"], r.randint(1, 2)))
    if kind == "watch-delay":
        e["for"] = f"{w:g}s"
        e["delay"] = _delay(r, r.choice((0.1, 0.5, 1.0)))
    elif kind == "watch-stall":
        e["for"] = f"{w:g}s"
    elif kind == "watch-reorder":
        e["for"] = f"{w:g}s"
        e["window"] = _ms(r.uniform(0.05, 0.8))
    elif kind == "partition":
        e["for"] = f"{w:g}s"
    elif kind == "kill":
        if r.random() < 0.6:
            e["restart_after"] = f"{round(r.uniform(0.5, max(0.6, min(5.0, room))), 1):g}s"
    elif kind == "pause":
        e["for"] = f"{w:g}s"
    elif kind == "api-latency":
        e["for"] = f"{w:g}s"
        e["delay"] = _delay(r, r.choice((0.01, 0.05, 0.3)))
    elif kind == "api-conflict":
        e["for"] = f"{w:g}s"
        e["probability"] = round(r.uniform(0.05, 0.6), 2)
    elif kind == "redis-restart":
        e["for"] = f"{round(r.uniform(0.2, min(3.0, room)), 1):g}s"
    elif kind == "clock-rate":
        e["for"] = f"{w:g}s"
        e["rate"] = round(r.choice((r.uniform(0.3, 0.9), r.uniform(1.2, 3.0))), 2)
    return e


def draw_experiment(seed: int, index: int, profile: str, switches: dict[str, bool] | None = None,
                    intensity: str = "medium") -> dict[str, Any]:
    """The experiment file (data) of run ``index`` of the hunt seeded ``seed`` (module docstring)."""
    inten = INTENSITIES[intensity]
    r = random.Random(f"hunt:{seed}:{index}")
    duration = r.choice((25, 30, 30, 35))
    active_end = duration - TAIL_S

    # -- the cluster ---------------------------------------------------------------------------
    nodes = r.randint(2, 8)
    cpu = r.choice((4, 8, 8, 16))
    cluster: dict[str, Any] = {"nodes": nodes, "node": {"cpu": cpu, "memory": f"{cpu * 4}Gi", "pods": 110}}
    topology = nodes >= 4 and r.random() < 0.2
    if topology:
        cluster["topology"] = {"rack_size": r.randint(2, max(2, nodes // 2)), "racks_per_spine": r.randint(1, 2)}
    nq = r.choice((1, 2, 2, 3))
    queues = [{"name": f"q{i}", "weight": r.randint(1, 4)} for i in range(1, nq + 1)]

    # -- the workload --------------------------------------------------------------------------
    gmax = r.choice((1, 2, 4, 4, 6))
    gmin = r.randint(1, gmax)
    rt_lo = r.choice((2, 4, 6))
    req_cpu = r.choice((1, 1, 2, 3)) if cpu >= 4 else 1
    wl: dict[str, Any] = {"arrivals": r.choice(("poisson", "poisson", "constant")),
                          "rate": f"{r.choice((0.5, 1, 1, 1.5, 2, 3)):g}/s",
                          "gang_size": [gmin, gmax], "runtime": [f"{rt_lo}s", f"{rt_lo + r.choice((0, 2, 4, 8))}s"],
                          "queues": [q["name"] for q in queues],
                          "request": {"cpu": req_cpu, "memory": f"{req_cpu * r.choice((1, 2, 4))}Gi"},
                          "until": f"{active_end:g}s"}
    if r.random() < 0.6:
        wl["priority_classes"] = {"high": 1000, "low": 10}
    if topology and r.random() < 0.7:
        wl["network_topology"] = {"mode": "hard", "highestTierAllowed": r.choice((1, 2))}

    # -- the scheduler instances ---------------------------------------------------------------
    n = r.choice((1, 2, 2, 3, 3, 3, 4))
    mode = "leader-elected"
    if n > 1:
        mode = r.choices(("leader-elected", "shadow", "active-active"), weights=(75, 15, 10))[0]
    lease_d = r.choice((3, 4, 6))
    sched: dict[str, Any] = {"instances": n, "mode": mode, "period": r.choice(("500ms", "1s", "1s")),
                             "lease": {"duration": f"{lease_d}s", "renew_deadline": f"{lease_d * 2 // 3}s",
                                       "retry": "500ms"}}
    if mode == "leader-elected":
        sched["standby"] = r.choice(("warm", "cold"))
    if r.random() < 0.2:
        sched["resync"] = "after-session"

    # -- the faults (swarm testing: which kinds this run may use) -------------------------------
    kinds = list(FAULT_KINDS)
    if r.random() < inten.one_kind_p:
        enabled = [r.choice(kinds)]
    else:
        enabled = [k for k in kinds if r.random() < inten.kind_p] or [r.choice(kinds)]
    count = r.randint(*inten.faults)
    chaos = [_fault(r, r.choice(enabled), n, mode, 0.0, active_end, inten.window) for _ in range(count)]
    chaos.sort(key=lambda e: float(e["at"].rstrip("s")))

    conf = None
    if r.random() < 0.5:
        conf = {"actions": ["enqueue", "allocate", "preempt", "backfill"],
                "tiers": [[{"name": "priority"}, {"name": "gang"}, {"name": "conformance"}],
                          [{"name": "drf"}, {"name": "predicates"}, {"name": "proportion"}, {"name": "nodeorder"}]]}
        if topology:
            conf["tiers"][1].append({"name": "network-topology-aware"})
    if conf is None and "network_topology" in wl:
        # hard-topology gangs need the plugin that keeps them in one domain: Volcano's default
        # configuration, made explicit, plus network-topology-aware
        conf = {"actions": ["enqueue", "allocate", "preempt", "reclaim", "backfill"],
                "tiers": [[{"name": "priority"}, {"name": "gang"}, {"name": "conformance"}],
                          [{"name": "overcommit"}, {"name": "drf"}, {"name": "predicates"}, {"name": "proportion"},
                           {"name": "nodeorder"}, {"name": "network-topology-aware"}]]}
    exp: dict[str, Any] = {"name": experiment_name(seed, index), "seed": r.randrange(1 << 31),
                           "duration": f"{duration}s", "profile": profile}
    if switches:
        exp["switches"] = dict(sorted(switches.items()))
    exp.update({"cluster": cluster, "queues": queues, "workload": wl, "schedulers": sched, "chaos": chaos})
    if conf is not None:
        exp["scheduler_conf"] = conf
    # a failover (lease expiry, a new leader's first session) may follow the last fault: the
    # caches have that long, plus a few seconds, to converge; the tail leaves MIN_QUIET_S after it
    within = min(lease_d + 4.0, TAIL_S - MIN_QUIET_S - 1.0)
    exp["measure"] = {"every": "500ms", "converge_within": f"{within:g}s"}
    return exp
