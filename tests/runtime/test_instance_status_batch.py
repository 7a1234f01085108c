"""A live instance's session close: the PodScheduled conditions of every unschedulable job reach
the API server in one request (``update_status_many``), each recorded and counted as its own
write; with API faults on the instance each write stays a call of its own, so the faults meet it."""
from __future__ import annotations

import time

from chaos.schedule import build_schedule
from ha.runtime.instance import SchedulerInstance
from ha.runtime.workload import pod_object, podgroup_object
from tests.runtime.instance_helpers import instance_config, wait_for

MANUAL = 3600.0   # no periodic session: the test runs one


def _unschedulable_gangs(api, n: int = 3, size: int = 4) -> list[str]:
    """Gangs whose pods ask for more than a node has (8 cpu): they stay Pending."""
    names = []
    for j in range(n):
        api.create(podgroup_object(f"big-{j}", "default", min_member=size, queue="default"))
        for k in range(size):
            api.create(pod_object(f"big-{j}-{k}", "default", job=f"big-{j}", request={"cpu": "16"},
                                  runtime_ms=60_000))
            names.append(f"big-{j}-{k}")
    return names


def _condition(api, name: str) -> dict | None:
    st = api.get("Pod", name, "default").get("status") or {}
    return next((c for c in st.get("conditions") or () if c.get("type") == "PodScheduled"), None)


async def _one_session(inst, n_pods: int) -> None:
    assert await wait_for(lambda: inst.synced() and inst.is_leader_now())
    assert await wait_for(lambda: len(inst.cache.jobs) >= 3 and
                          sum(len(j.tasks) for j in inst.cache.jobs.values()) >= n_pods)
    assert await inst.run_session_now() is not None


async def test_the_conditions_of_every_job_go_in_one_request_and_are_recorded_one_by_one(
        api, redis_url, key_prefix):
    names = _unschedulable_gangs(api)
    inst = SchedulerInstance(instance_config("scheduler-1", redis_url, key_prefix, mode="leader-elected",
                                             period_s=MANUAL))
    await inst.start()
    try:
        assert inst.cache.status_writer.batch_events is True
        calls = []
        real = inst.io.inner.api.update_status_many

        def spy(objs):
            calls.append(len(objs))
            return real(objs)
        inst.io.inner.api = _With(inst.io.inner.api, update_status_many=spy)
        await _one_session(inst, len(names))
        assert calls == [len(names)]                    # one request for the twelve conditions
        for n in names:
            c = _condition(api, n)
            assert c is not None and c["status"] == "False" and c["reason"] == "Unschedulable", (n, c)
        st = await inst.stats()
        assert st["status_writes"] == len(names) and st["session_errors"] == 0
        recs = [d for d in await inst.decisions(0) if d["op"] == "status"]
        assert sorted(d["pod"] for d in recs) == sorted(f"default/{n}" for n in names)
        assert all(d["ok"] for d in recs)
        # the session's record, for a reader that takes each session (bench scale)
        (rec,) = await inst.sessions_since(0)
        assert rec["n"] == 1 and rec["leader"] is True and rec["ms"] == st["last_session_ms"] > 0
        assert rec["phases_ms"]["close"][0] > 0 and rec["cpu_ms"] > 0
        assert await inst.sessions_since(1) == []
    finally:
        await inst.stop()


async def test_with_api_faults_each_condition_write_is_a_call_the_faults_meet(api, redis_url, key_prefix):
    names = _unschedulable_gangs(api)
    faults = build_schedule([{"at": 0, "fault": "api-latency", "target": "scheduler-1",
                              "delay": {"dist": "fixed", "value": "5ms"}, "verbs": ["update_status"]}],
                            1, ["scheduler-1"]).faults
    inst = SchedulerInstance(instance_config("scheduler-1", redis_url, key_prefix, mode="leader-elected",
                                             period_s=MANUAL, chaos_faults=tuple(faults)))
    await inst.start()
    try:
        assert inst.cache.status_writer.batch_events is False
        await inst.chaos_set_epoch(time.time())     # the schedule's clock starts (a driver's job)
        await _one_session(inst, len(names))
        assert all(_condition(api, n) is not None for n in names)
        st = await inst.stats()
        assert st["status_writes"] == len(names) and st["pod_group_writes"] == 3
        # the fault met every write: three PodGroups and the twelve pods, one call each
        assert inst.chaos.api_chaos.stats["delayed"] == len(names) + 3
    finally:
        await inst.stop()


class _With:
    """``inner`` with some attributes replaced."""

    def __init__(self, inner, **attrs):
        self._inner = inner
        self.__dict__.update(attrs)

    def __getattr__(self, name):
        return getattr(self._inner, name)
