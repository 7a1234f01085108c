"""Both implementations of the instance seam (``ha.runtime.external.protocol``) fulfil it: a model
instance (``SchedulerInstance``) and a vc-scheduler supervisor (``ExternalScheduler``) have every
seam method as a coroutine with the same parameters, so the engines' targets can call either; the
supervisor's typed chaos door answers empty (its chaos is at its endpoint of the front), and the
protocol has no string-dispatch door left."""
from __future__ import annotations

import inspect

import pytest

from ha.runtime.external.process import ExternalConfig
from ha.runtime.external.protocol import SEAM_METHODS, SchedulerInstanceProtocol
from ha.runtime.external.supervisor import ExternalScheduler
from ha.runtime.instance import SchedulerInstance
from tests.runtime.instance_helpers import instance_config


def _params(cls, m: str) -> list[tuple[str, object]]:
    # Ray's tracing adds a _ray_trace_ctx parameter to the methods of a class it has made an actor of
    return [(p.name, p.default) for p in inspect.signature(getattr(cls, m)).parameters.values()
            if p.name != "_ray_trace_ctx"]


@pytest.mark.parametrize("m", SEAM_METHODS)
def test_both_implementations_have_the_seam_method_alike(m):
    for cls in (SchedulerInstance, ExternalScheduler):
        fn = getattr(cls, m, None)
        assert fn is not None and inspect.iscoroutinefunction(fn), (cls.__name__, m)
    # the protocol's parameters (and defaults) open each implementation's, which may add only
    # optional ones of its own (the model's stats(staleness_window=None))
    proto = _params(SchedulerInstanceProtocol, m)
    for cls in (SchedulerInstance, ExternalScheduler):
        got = _params(cls, m)
        assert got[:len(proto)] == proto, (cls.__name__, got, proto)
        assert all(d is not inspect.Parameter.empty for _, d in got[len(proto):]), (cls.__name__, got)


def test_the_protocol_lists_its_methods_and_no_string_door():
    declared = {n for n, v in vars(SchedulerInstanceProtocol).items()
                if inspect.iscoroutinefunction(v)}
    assert declared == set(SEAM_METHODS)
    assert "chaos_call" not in SEAM_METHODS and not hasattr(SchedulerInstance, "chaos_call")
    assert not hasattr(ExternalScheduler, "chaos_call")


def _external(tmp_path) -> ExternalScheduler:
    return ExternalScheduler(ExternalConfig(
        name="scheduler-1", binary="/nonexistent/vc-scheduler", version="v0", endpoint_url="http://127.0.0.1:1",
        kubeconfig=str(tmp_path / "kubeconfig"), workdir=str(tmp_path), log_path=str(tmp_path / "s.log"),
        request_log=str(tmp_path / "requests.jsonl"), delivery_log=str(tmp_path / "delivery.log"),
        scheduler_conf_yaml="actions: allocate\n"))


def test_both_objects_are_instances_of_the_protocol(tmp_path):
    model = SchedulerInstance(instance_config("scheduler-1", "redis://127.0.0.1:1", "ht-seam"))
    assert isinstance(model, SchedulerInstanceProtocol)
    assert isinstance(_external(tmp_path), SchedulerInstanceProtocol)


async def test_the_supervisors_chaos_door_answers_empty(tmp_path):
    sup = _external(tmp_path)
    sf = object()      # whatever the fault, nothing of it acts inside the supervisor
    assert await sup.chaos_set_epoch(1000.0) == {}
    assert await sup.chaos_activate(sf, watch=True, api=False) == {}
    assert await sup.chaos_deactivate(0, watch=False, api=True) == {}
    assert await sup.chaos_expire_now(["Pod"]) == {}
