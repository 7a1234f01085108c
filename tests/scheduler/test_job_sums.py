"""drf and proportion take a job's allocated figure from its clone's running sum when the clone
found that exact (JobInfo.sums_plain), instead of adding its tasks up again: the same numbers,
field for field -- checked here against the tasks added up, with the verifier the suite runs
under, and with requests for which a sum could not be exact."""
from __future__ import annotations

import dataclasses

import pytest

from ha.scheduler.framework.session import open_session
from ha.scheduler.plugins.drf import DrfPlugin
from ha.scheduler.plugins.proportion import ProportionPlugin

from .fw_helpers import conf, make_cache, node, pod, podgroup

DRF_PROP = conf(["allocate"], [[{"name": "drf"}, {"name": "proportion"}]])


def _cache():
    pods = []
    for j in range(4):
        for k in range(3):
            bound = k < 2
            pods.append(pod(f"j{j}-{k}", f"pg{j}", 300 + 100 * k, node_name=f"n{j % 2 + 1}" if bound else "",
                            phase="Running" if bound else "Pending"))
    return make_cache("v1.14", nodes=[node("n1", 8000), node("n2", 8000)],
                      podgroups=[podgroup(f"pg{j}", 1) for j in range(4)], pods=pods)[0]


def _figures(ssn):
    drf = ssn.plugins["drf"]
    prop = ssn.plugins["proportion"]
    r = lambda x: (x.milli_cpu, x.memory, x.scalar_resources)   # noqa: E731
    return ({u: r(a.allocated) for u, a in drf.job_attrs.items()},
            {q: (r(a.allocated), r(a.request)) for q, a in prop.queue_opts.items()})


def _added_up(cache, monkeypatch):
    """The same session's figures with every job's sums added up task by task."""
    from ha.scheduler.api import job_info
    clone = job_info.JobInfo.clone

    def unplain(self):
        c = clone(self)
        c.sums_plain = False
        return c
    with monkeypatch.context() as m:
        m.setattr(job_info.JobInfo, "clone", unplain)
        ssn = open_session(cache, DRF_PROP, seed=1)
        assert not any(j.sums_plain for j in ssn.jobs.values())
        return _figures(ssn)


def test_the_running_sums_give_the_figures_the_tasks_added_up_give(monkeypatch):
    cache = _cache()
    ssn = open_session(cache, DRF_PROP, seed=1)
    assert all(j.sums_plain for j in ssn.jobs.values())
    drf, prop = _figures(ssn)
    assert drf == _added_up(cache, monkeypatch)[0] and prop == _added_up(cache, monkeypatch)[1]
    assert drf["ns/pg0"] == (700.0, 2.0 * 2**20, {"pods": 2.0})
    assert prop["q1"] == ((2800.0, 8.0 * 2**20, {"pods": 8.0}), (4800.0, 12.0 * 2**20, {"pods": 12.0}))


def test_a_changed_task_ends_the_shortcut():
    cache = _cache()
    ssn = open_session(cache, DRF_PROP, seed=1)
    job = ssn.jobs["ns/pg0"]
    task = next(t for t in job.tasks.values() if not t.node_name)
    from ha.scheduler.api import TaskStatus
    job.update_task_status(task, TaskStatus.ALLOCATED)
    assert not job.sums_plain


def test_the_verifier_finds_a_running_sum_out_of_step(monkeypatch):
    monkeypatch.setenv("HA_VERIFY_SNAPSHOT_REUSE", "1")
    ssn = open_session(_cache(), DRF_PROP, seed=1)
    ssn.jobs["ns/pg2"].allocated.milli_cpu += 1.0     # a sum its tasks do not add up to
    for plugin in (DrfPlugin(), ProportionPlugin()):
        with pytest.raises(AssertionError, match=r"job ns/pg2: allocated sum .* != its tasks added up"):
            plugin.on_session_open(ssn)
    # unchecked (the session's settings, read when its cache was built), the sum is what counts
    ssn.acceleration = dataclasses.replace(ssn.acceleration, verify_snapshot_reuse=False)
    drf = DrfPlugin()
    drf.on_session_open(ssn)
    assert drf.job_attrs["ns/pg2"].allocated.milli_cpu == 701.0


def test_a_fractional_pending_request_makes_proportion_add_task_by_task(monkeypatch):
    """A request that is not a whole number (never from a pod's quantities; written here) could
    round differently grouped: proportion adds every task one by one again."""
    cache = _cache()
    job = next(j for j in cache.jobs.values() if j.name == "pg1")
    pending = next(t for t in job.tasks.values() if not t.node_name)
    pending.resreq = pending.resreq.clone()
    pending.resreq.milli_cpu = 0.1
    calls = []
    from ha.scheduler.plugins import queue_attrs
    inner = queue_attrs.account_job

    def spy(attr, job, check=False, sums=True):
        calls.append(sums)
        return inner(attr, job, check, sums)
    monkeypatch.setattr(queue_attrs, "account_job", spy)
    ssn = open_session(cache, DRF_PROP, seed=1)
    assert calls == [True] * 4 + [False] * 4
    assert _figures(ssn)[1] == _added_up(cache, monkeypatch)[1]


def test_queue_sums_beyond_2_53_make_proportion_add_task_by_task(monkeypatch):
    cache = _cache()
    calls = []
    from ha.scheduler.plugins import queue_attrs
    inner = queue_attrs.account_job

    def spy(attr, job, check=False, sums=True):
        calls.append(sums)
        out = inner(attr, job, check, sums)
        if sums:
            attr.request.memory += 2.0 ** 53   # as if the queue's requests had reached 8 PiB
        return out
    monkeypatch.setattr(queue_attrs, "account_job", spy)
    open_session(cache, DRF_PROP, seed=1)
    assert calls == [True] * 4 + [False] * 4


def test_drf_and_proportion_are_the_plugins_under_test():
    ssn = open_session(_cache(), DRF_PROP, seed=1)
    assert isinstance(ssn.plugins["drf"], DrfPlugin) and isinstance(ssn.plugins["proportion"], ProportionPlugin)
