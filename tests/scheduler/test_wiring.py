"""ha.scheduler.wiring: the one place a cache is built with its informer handlers; the clock it is
given is the only time its sessions read."""
from __future__ import annotations

import copy

import pytest

from ha.errors import BadInput
from ha.scheduler.cache import SchedulerCache
from ha.scheduler.conf import default_conf
from ha.scheduler.interfaces import FixedClock, RecordingIO
from ha.scheduler.profiles import profile
from ha.scheduler.scheduler import Scheduler
from ha.scheduler.wiring import KINDS, CacheEventHandler, build_cache, resolve_switches
from tests.scheduler.cachekit import make_node, make_pod, make_pod_group, make_queue


def _objects():
    pods = [make_pod(f"p{i}", group="pg", cpu=1000) for i in range(3)]
    return ([("Queue", make_queue("default")), ("Node", make_node("n1")), ("Node", make_node("n2")),
             ("PodGroup", make_pod_group("pg", min_member=3))] + [("Pod", p) for p in pods])


def test_handlers_feed_the_cache_as_its_own_methods_do():
    wired, handlers = build_cache(profile="pr5045", switches={"clear_nnn_on_binding": True})
    assert tuple(handlers) == KINDS
    assert wired.switches == profile("pr5045").with_(clear_nnn_on_binding=True)
    direct = SchedulerCache(switches=wired.switches, binder=RecordingIO())
    for kind, obj in _objects():
        handlers[kind].on_add(copy.deepcopy(obj), False)
        {"Queue": direct.add_queue, "Node": direct.add_node, "PodGroup": direct.add_pod_group,
         "Pod": direct.add_pod}[kind](copy.deepcopy(obj))
    old = make_pod("p0", group="pg", cpu=1000)
    new = copy.deepcopy(old)
    new["spec"]["nodeName"], new["metadata"]["resourceVersion"] = "n2", 2
    handlers["Pod"].on_update(copy.deepcopy(old), copy.deepcopy(new))
    direct.update_pod(copy.deepcopy(old), copy.deepcopy(new))
    handlers["Pod"].on_delete(make_pod("p2", group="pg", cpu=1000), False)
    direct.delete_pod(make_pod("p2", group="pg", cpu=1000))
    assert wired.digest() == direct.digest()
    assert wired.digest()["tasks"]["ns-p0"][1] == "n2" and "ns-p2" not in wired.digest()["tasks"]


def test_the_sessions_read_the_clock_they_are_given():
    for t in (1000.0, 2000.0):
        cache, handlers = build_cache(clock=FixedClock(t))
        for kind, obj in _objects():
            handlers[kind].on_add(obj, False)
        seen: list = []
        Scheduler(cache, default_conf()).run_once(
            session_hook=lambda ssn: seen.extend(j.schedule_start_timestamp for j in ssn.jobs.values()))
        writes = [pg for _, pg in cache.binder.pod_group_writes]
        assert writes, "the gang plugin wrote no PodGroup condition"
        times = {c["lastTransitionTime"] for pg in writes for c in pg["status"].get("conditions", [])}
        assert times == {t}
        assert set(seen) == {t}          # enqueue's scheduleStartTimestamp


def test_an_unknown_profile_is_bad_input_naming_it():
    with pytest.raises(BadInput, match="nope"):
        resolve_switches("nope")
    with pytest.raises(BadInput, match="nope"):
        build_cache(profile="nope")


def test_handler_errors_go_where_the_caller_chose():
    """A FatalCacheError goes to on_fatal (else on_error, else raised); any other exception to
    on_error (else raised) -- for adds, updates and deletes alike."""
    from ha.scheduler.api.types import FatalCacheError

    class Cache:
        def __init__(self, exc):
            self.exc = exc

        def handlers(self, kind):
            def boom(*args):
                raise self.exc
            return boom, boom, boom

    fatal, other = FatalCacheError("fatal"), ValueError("other")
    for exc, kw, want in [(fatal, {"on_fatal": 1, "on_error": 1}, "on_fatal"),
                          (fatal, {"on_error": 1}, "on_error"),
                          (other, {"on_fatal": 1, "on_error": 1}, "on_error"),
                          (other, {"on_fatal": 1}, None), (fatal, {}, None)]:
        got: list = []
        h = CacheEventHandler(Cache(exc), "Pod",
                              **{k: (lambda e, k=k: got.append((k, e))) for k in kw})
        calls = (lambda: h.on_add({}, True), lambda: h.on_update({}, {}), lambda: h.on_delete({}, False))
        for call in calls:
            if want is None:
                with pytest.raises(type(exc)) as info:
                    call()
                assert info.value is exc
            else:
                call()
        assert got == ([] if want is None else [(want, exc)] * 3)
