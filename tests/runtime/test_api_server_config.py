"""One API server configuration per run: the switch ``clear_nnn_on_binding`` (binding clears
status.nominatedNodeName) reaches every API client of a run — the instances' binders and the
cluster actor's kubelet / controller / workload — from the experiment's profile and switches."""
from __future__ import annotations

import pytest

from cluster_state.apiserver import ApiServerConfig
from ha.experiment.config import parse_experiment
from ha.runtime.apiserver import api_server_config, for_profile
from ha.runtime.cluster import ClusterConfig, ClusterSim
from ha.runtime.instance import SchedulerInstance
from tests.runtime.instance_helpers import bound_nodes, create_jobs, instance_config, wait_for

MANUAL = 3600.0


def _exp(**kw):
    return parse_experiment({"name": "x", "duration": "5s", "cluster": {"nodes": 1}, **kw})


def test_the_experiment_decides_the_api_server_config():
    assert api_server_config(_exp()) == ApiServerConfig(clear_nnn_on_binding=False)
    assert api_server_config(_exp(switches={"clear_nnn_on_binding": True})).clear_nnn_on_binding
    assert api_server_config(_exp(profile="v1.14")).to_dict() == {"clear_nnn_on_binding": False,
                                                                   "history": 100_000}
    assert for_profile("v1.14", {"clear_nnn_on_binding": True}).clear_nnn_on_binding
    with pytest.raises(ValueError, match="history"):
        ApiServerConfig(history=0)


@pytest.mark.parametrize("clear", [True, False])
async def test_binding_clears_the_nomination_only_with_the_switch(api, redis_url, key_prefix, clear):
    names = create_jobs(api, n_jobs=1, size=2)
    for n in names:   # a nomination made earlier (a pipeline decision written to the API server)
        pod = api.get("Pod", n, "default")
        pod["status"]["nominatedNodeName"] = "node-2"
        api.update_status(pod)
    server = for_profile("v1.14", {"clear_nnn_on_binding": clear})
    # the runner gives the instance its profile + switches and the cluster the same server config
    inst = SchedulerInstance(instance_config("scheduler-1", redis_url, key_prefix, mode="active-active",
                                             period_s=MANUAL, switches={"clear_nnn_on_binding": clear}))
    cluster = ClusterSim(ClusterConfig(redis_url=redis_url, prefix=key_prefix, api_server=server))
    await inst.start()
    await cluster.start()
    try:
        assert inst.cfg.api_server_config() == server
        assert (await inst.stats())["api_server"] == {"clear_nnn_on_binding": clear, "history": 100_000}
        assert cluster._api.store.clear_nnn_on_binding is clear
        assert await inst.wait_synced(60)
        res = await inst.run_session_now()
        assert res is not None and res["bind_count"] == 2
        assert await wait_for(lambda: all(bound_nodes(api).values()))
        # the kubelet runs them (its status writes go through the cluster's client)
        assert await wait_for(lambda: all(p["status"].get("phase") == "Running"
                                          for p in api.list("Pod").items))
        nnn = {p["metadata"]["name"]: p["status"].get("nominatedNodeName") for p in api.list("Pod").items}
        assert nnn == {n: ("" if clear else "node-2") for n in names}
    finally:
        await cluster.stop()
        await inst.stop()
