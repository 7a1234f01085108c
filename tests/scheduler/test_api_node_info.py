"""NodeInfo accounting (Volcano's ``api/node_info.go``), with worked numbers: two Running pods, an
Unknown pod exceeding Idle, a Pipelined task that becomes Allocated."""
from __future__ import annotations

import pytest

from ha.scheduler.api import FatalCacheError, NodeInfo, ResourceUnderflow, TaskInfo, TaskNodeError, TaskStatus
from tests.scheduler.cachekit import make_node, make_pod

S = TaskStatus
G = 10**9


def task(name, cpu, mem, status=S.RUNNING, node="n1", ns="c1"):
    t = TaskInfo(make_pod(name, ns, cpu=cpu, memory=mem, node=node, phase="Running"))
    t.status = status
    return t


def test_worked_numbers_add_two_running_pods():
    ni = NodeInfo(make_node("n1", cpu=8000, memory=10 * G, pods=20))
    ni.add_task(task("p1", 1000, 1 * G))
    ni.add_task(task("p2", 2000, 2 * G))
    assert ni.idle.to_plain() == {"cpu": 5000, "memory": 7 * G, "pods": 18}
    assert ni.used.to_plain() == {"cpu": 3000, "memory": 3 * G, "pods": 2}


def test_worked_numbers_unknown_pod_exceeding_idle():
    ni = NodeInfo(make_node("n1", cpu=2000, memory=1 * G, pods=20))
    ni.add_task(task("p1", 1000, 2 * G, status=S.UNKNOWN))
    assert ni.idle.to_plain() == {"cpu": 1000, "memory": -1 * G, "pods": 19}


def test_worked_numbers_pipelined_then_allocated():
    ni = NodeInfo(make_node("n1", cpu=8000, memory=10 * G, pods=20))
    t = task("p1", 1000, 1 * G, status=S.PIPELINED, node="")
    ni.add_task(t)
    assert ni.pipelined.to_plain() == {"cpu": 1000, "memory": 1 * G, "pods": 1}
    assert ni.idle.to_plain() == {"cpu": 8000, "memory": 10 * G, "pods": 20} and ni.used.to_plain() == {}
    t.status = S.ALLOCATED
    ni.update_task(t)
    assert ni.pipelined.to_plain() == {} and ni.used.to_plain() == {"cpu": 1000, "memory": 1 * G, "pods": 1}
    assert ni.idle.to_plain() == {"cpu": 7000, "memory": 9 * G, "pods": 19}


def test_releasing_and_future_idle_and_overflow():
    ni = NodeInfo(make_node("n1", cpu=4000, memory=8 * G, pods=10))
    ni.add_task(task("v", 4000, 1 * G, status=S.RELEASING))
    assert ni.idle.milli_cpu == 0 and ni.releasing.milli_cpu == 4000 and ni.used.milli_cpu == 4000
    assert ni.future_idle().milli_cpu == 4000 and not ni.has_pipelined_overflow()
    ni.add_task(task("p", 4000, 1 * G, status=S.PIPELINED, node=""))
    assert ni.future_idle().milli_cpu == 0 and not ni.has_pipelined_overflow()
    ni.add_task(task("q", 1000, 1 * G, status=S.PIPELINED, node=""))
    assert ni.future_idle().milli_cpu == -1000 and ni.has_pipelined_overflow()
    ni.remove_task(task("v", 4000, 1 * G))
    assert ni.releasing.milli_cpu == 0 and ni.idle.milli_cpu == 4000


def test_add_task_errors_have_volcano_messages():
    ni = NodeInfo(make_node("n1", cpu=2000, memory=10 * G))
    with pytest.raises(TaskNodeError, match=r"task <c1/p1> already on different node <n2>"):
        ni.add_task(task("p1", 1000, G, node="n2"))
    ni.add_task(task("p1", 1000, G))
    with pytest.raises(TaskNodeError, match=r"task <c1/p1> already on node <n1>"):
        ni.add_task(task("p1", 1000, G))
    big = task("p2", 5000, 50 * G, status=S.BINDING)
    before = (ni.idle.to_plain(), dict(ni.tasks))
    with pytest.raises(TaskNodeError, match=r"node n1 resources \[cpu memory\] are not enough to put task <c1/p2>"):
        ni.add_task(big)
    assert (ni.idle.to_plain(), dict(ni.tasks)) == before


def test_update_task_failure_is_fatal():
    ni = NodeInfo(make_node("n1", cpu=2000, memory=10 * G))
    t = task("p1", 1000, G, status=S.PIPELINED, node="")
    ni.add_task(t)
    ni.add_task(task("p0", 1500, G))     # Idle now 500
    t.status = S.BINDING                 # Binding must fit Idle: 1000 > 500
    with pytest.raises(FatalCacheError):
        ni.update_task(t)
    assert issubclass(FatalCacheError, BaseException) and not issubclass(FatalCacheError, Exception)


def test_remove_missing_task_is_noop_and_stored_status_decides():
    ni = NodeInfo(make_node("n1", cpu=2000, memory=10 * G))
    ni.remove_task(task("ghost", 1000, G))
    ni.add_task(task("p1", 1000, G, status=S.PIPELINED, node=""))
    other = task("p1", 1000, G, status=S.RUNNING)   # a different object with a different status
    ni.remove_task(other)                            # accounting by the stored copy: Pipelined
    assert ni.pipelined.to_plain() == {} and ni.used.to_plain() == {}


def test_stored_task_is_a_clone_and_node_name_set():
    ni = NodeInfo(make_node("n1"))
    t = task("p1", 1000, G, node="")
    ni.add_task(t)
    assert t.node_name == "n1" and ni.tasks["c1/p1"] is not t and ni.tasks["c1/p1"].pod is t.pod


def test_clone_recomputes_and_drops_binding_that_does_not_fit():
    ni = NodeInfo(make_node("n1", cpu=2000, memory=10 * G))
    ni.add_task(task("b", 1000, G, status=S.BINDING))
    ni.idle.milli_cpu = 0          # corrupt the accounting: Clone recomputes from tasks
    c = ni.clone()
    assert c.idle.milli_cpu == 1000 and "c1/b" in c.tasks
    ni.set_node(make_node("n1", cpu=500, memory=10 * G))   # shrink: Idle goes negative, only logged
    assert ni.idle.milli_cpu == -500 and "c1/b" in ni.tasks
    c2 = ni.clone()                    # Volcano ignores Clone's AddTask error: the Binding task is gone
    assert "c1/b" not in c2.tasks and c2.idle.milli_cpu == 500


def test_placeholder_node_and_set_node():
    ph = NodeInfo(None)
    ph.name = "n9"
    assert not ph.ready() and ph.state.reason == "UnInitialized"
    ph.add_task(task("p1", 1000, G, node="n9"))
    assert ph.used.to_plain() == {}            # no accounting without a node object
    ph.set_node(make_node("n9", cpu=4000, memory=8 * G, pods=10))
    assert ph.ready() and ph.used.milli_cpu == 1000 and ph.idle.milli_cpu == 3000


def test_underflow_is_detected():
    ni = NodeInfo(make_node("n1", cpu=2000, memory=10 * G))
    t = task("p1", 1000, G)
    ni.add_task(t)
    ni.used.milli_cpu = 0   # corrupt: RemoveTask's asserting Sub must notice
    with pytest.raises(ResourceUnderflow):
        ni.remove_task(t)


def _clone_by_add_task(ni: NodeInfo) -> NodeInfo:
    """Volcano's Clone spelled out: NewNodeInfo + AddTask of every task, errors ignored."""
    res = NodeInfo(ni.node)
    for t in ni.tasks.values():
        try:
            res.add_task(t)
        except TaskNodeError:
            pass
    res.others = dict(ni.others)
    res.bind_generation = ni.bind_generation
    return res


def test_clone_equals_add_task_of_every_task_for_every_status():
    """The snapshot's clone loop (no add_task call per task) gives what add_task gives: the same
    tasks in the same order, the same four resources, Binding tasks dropped where AddTask fails."""
    import random
    rng = random.Random(5)
    statuses = [S.RUNNING, S.RELEASING, S.PIPELINED, S.BINDING, S.BOUND, S.ALLOCATED, S.UNKNOWN]
    for trial in range(40):
        ni = NodeInfo(make_node("n1", cpu=rng.choice([4000, 8000]), memory=rng.choice([4, 8]) * G, pods=30))
        for i in range(rng.randint(0, 14)):
            st = rng.choice(statuses)
            t = task(f"p{i}", rng.choice([250, 1000, 1500]), rng.choice([G // 2, G, 2 * G]), status=st,
                     node="" if st == S.PIPELINED else "n1")
            try:
                ni.add_task(t)
            except TaskNodeError:
                pass
        if trial % 3 == 0:     # shrink the node: Binding tasks may no longer fit on a re-add
            ni.set_node(make_node("n1", cpu=1000, memory=1 * G, pods=30))
        want, got = _clone_by_add_task(ni), ni.clone()
        assert list(got.tasks) == list(want.tasks), trial
        for k in want.tasks:
            a, b = got.tasks[k], want.tasks[k]
            assert (a.status, a.node_name, a.uid) == (b.status, b.node_name, b.uid) and a is not ni.tasks[k]
        for r in ("idle", "used", "releasing", "pipelined", "allocatable", "capacity"):
            assert getattr(got, r).to_plain() == getattr(want, r).to_plain(), (trial, r)
        assert got.state == want.state and got.name == want.name


def test_clone_shares_each_task_request_and_the_pod():
    """Requests are never mutated in place, so a clone shares them (Volcano copies them)."""
    t = task("p1", 1000, G)
    c = t.clone()
    assert c.resreq is t.resreq and c.init_resreq is t.init_resreq and c.pod is t.pod
    assert c.k8s_requests is t.k8s_requests
