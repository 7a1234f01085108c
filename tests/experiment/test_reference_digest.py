"""The reference pass keeps the up-to-date cache's digest incrementally; on random histories
(creations, nominations, binds, completions, deletions, pod groups coming and going, under several
profiles) it equals a full ``cache.digest()`` after every batch of events."""
from __future__ import annotations

import random

import pytest

from ha.experiment.replay import build_replay_cache
from ha.experiment.checkers._fold import EventFold, ReferenceDigest

from .histories import Api, node, pg, pod, queue


def random_events(seed: int, steps: int = 60):
    rnd = random.Random(seed)
    api = Api()
    api.create(queue(), *[node(f"n{i}", cpu="8000m") for i in range(4)])
    jobs, pods, n, m = [], [], 0, 0
    batches = [api.drain()]
    for _ in range(steps):
        for _ in range(rnd.randint(1, 6)):
            r = rnd.random()
            if r < 0.15 or not jobs:
                j = f"j{m}"
                m += 1
                api.create(pg(j, rnd.randint(1, 3)))
                jobs.append(j)
            elif r < 0.4:
                p = f"p{n}"
                n += 1
                api.create(pod(p, cpu=f"{rnd.choice([500, 1000, 3000])}m", group=rnd.choice(jobs)))
                pods.append(p)
            elif r < 0.55 and pods:
                p = rnd.choice(pods)
                o = api.objects[("Pod", f"default/{p}")]
                if not o["spec"]["nodeName"]:
                    api.nominate(f"default/{p}", f"n{rnd.randrange(4)}")
            elif r < 0.75 and pods:
                p = rnd.choice(pods)
                o = api.objects[("Pod", f"default/{p}")]
                if not o["spec"]["nodeName"]:
                    api.bind(f"default/{p}", f"n{rnd.randrange(4)}")
            elif r < 0.82 and pods:
                p = rnd.choice(pods)
                api.update("Pod", f"default/{p}", lambda o: o["status"].__setitem__("phase", "Succeeded"))
            elif r < 0.92 and pods:
                p = pods.pop(rnd.randrange(len(pods)))
                api.delete("Pod", f"default/{p}")
            elif r < 0.96 and jobs:
                j = rnd.choice(jobs)
                api.update("PodGroup", f"default/{j}", lambda o: o["status"].__setitem__("phase", "Running"))
            elif jobs:
                j = jobs.pop(rnd.randrange(len(jobs)))
                api.delete("PodGroup", f"default/{j}")
        batches.append(api.drain())
    return batches


@pytest.mark.parametrize("profile", ["v1.14", "pr5045", "annotations", "nomination-only"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_incremental_digest_equals_the_full_digest(profile, seed):
    batches = random_events(seed)
    cache = build_replay_cache(profile=profile)
    fold = EventFold([e for b in batches for e in b], cache=cache)
    ref = ReferenceDigest(cache)
    fold.listener = ref.on_event
    snapshots = []
    for b in batches:
        if b:
            fold.advance(b[-1]["rv"])
        got = ref.digest()
        full = cache.digest()
        assert got["tasks"] == full["tasks"]
        assert got["nodes"] == full["nodes"]
        snapshots.append((got, {"tasks": dict(full["tasks"]), "nodes": dict(full["nodes"])}))
    for got, then in snapshots:        # earlier snapshots were never changed afterwards
        assert got["tasks"] == then["tasks"] and got["nodes"] == then["nodes"]
    assert sum(len(b) for b in batches) > 150


def test_events_the_cache_does_not_handle_do_not_force_a_full_digest():
    api = Api()
    api.create(queue(), node("n1"), pg("j", 1), pod("a", group="j"))
    lease = {"kind": "Lease", "metadata": {"name": "volcano", "namespace": "kube-system"},
             "spec": {"holderIdentity": "scheduler-1_x"}}
    api.create(lease)
    cache = build_replay_cache()
    fold = EventFold(api.drain(), cache=cache)
    ref = ReferenceDigest(cache)
    fold.listener = ref.on_event
    fold.advance(10**9)
    first = ref.digest()
    api.update("Lease", "kube-system/volcano", lambda o: o["spec"].__setitem__("holderIdentity", "scheduler-2_y"))
    fold.events.extend(api.drain())
    fold.advance(10**9)
    assert not ref._full and ref.digest() is not None and ref.digest()["tasks"] == first["tasks"]
    assert fold.store["Lease"]["kube-system/volcano"]["spec"]["holderIdentity"] == "scheduler-2_y"


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_reference_pass_rejudging_changed_tasks_equals_the_exact_pass(tmp_path, seed):
    """Instances lag at random RVs, drop out, resync; windows open and close: the pass that re-judges
    only the changed tasks gives the exact pass's numbers, columns and examples."""
    from ha.experiment.checkers._fold import reference_pass
    from ha.experiment.history import History, HistoryWriter
    from .histories import header, inst
    rnd = random.Random(seed)
    batches = random_events(seed, steps=50)
    w = HistoryWriter(tmp_path, header(instances=("s1", "s2", "s3")))
    cache = build_replay_cache()
    events = [e for b in batches for e in b]
    w.events(events)
    for k, b in enumerate(batches):
        if not b:
            continue
        rv_after = b[-1]["rv"]
        rv_before = rnd.choice([rv_after, max(1, rv_after - rnd.randint(0, 3)), None])
        states = {}
        for name in ("s1", "s2", "s3"):
            if rnd.random() < 0.1:
                states[name] = None                      # not sampled
                continue
            at = rnd.choice([rv_after, rv_after, rv_before or rv_after, max(1, rv_after - rnd.randint(0, 20))])
            c = build_replay_cache()
            f = EventFold(events, cache=c)
            f.advance(at)
            d = c.digest()
            tasks = dict(d["tasks"])
            if rnd.random() < 0.2 and tasks:            # an instance ahead of the truth
                uid = rnd.choice(sorted(tasks))
                tasks[uid] = ["Allocated", "n1"]
            states[name] = inst(tasks, d["nodes"], synced=rnd.random() > 0.05,
                                gen=1 if (name == "s3" and k > 30) else 0)
        w.tick(float(k), rv_before, rv_after, states)
    w.close()
    fast, exact = reference_pass(History(tmp_path)), reference_pass(History(tmp_path), exact=True)
    assert fast.per_tick == exact.per_tick
    assert fast.examples == exact.examples
    assert fast.divergence.summary() == exact.divergence.summary()
    assert exact.divergence.summary()["max"] > 0


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_node_usage_from_pod_changes_equals_overcommitted_nodes(seed):
    from ha.experiment.oracles import NodeUsage, overcommitted_nodes
    batches = random_events(seed, steps=80)
    events = [e for b in batches for e in b]
    # a node resized half-way: every node is re-judged
    resized = dict(events[1]["object"])
    resized["status"] = {"allocatable": {"cpu": "2000m", "memory": "8589934592", "pods": "10"}}
    fold = EventFold(events)
    usage = NodeUsage()
    seen_over = 0
    for i, b in enumerate(batches):
        fold.pod_changes, fold.nodes_changed = [], False
        if b:
            fold.advance(b[-1]["rv"])
        if i == 40:
            fold.store["Node"][resized["metadata"]["name"]] = resized
            fold.nodes_changed = True
        for old, new in fold.pod_changes:
            usage.pod_changed(old, new)
        if fold.nodes_changed:
            usage.nodes_changed()
        got = usage.current(fold.truth.nodes)
        assert got == overcommitted_nodes(fold.truth.pods.values(), fold.truth.nodes)
        seen_over += len(got)
    assert seen_over > 0
