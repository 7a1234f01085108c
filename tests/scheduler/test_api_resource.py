"""Resource arithmetic and comparisons (api/resource_info.go semantics)."""
from __future__ import annotations

import pytest

from ha.scheduler.api import INFINITY, ZERO, Resource, ResourceUnderflow, set_panic_on_error
from ha.scheduler.api import resource as resource_mod


def R(**kw) -> Resource:
    return Resource.from_plain({("nvidia.com/gpu" if k == "nvidia_com_gpu" else k): v for k, v in kw.items()})


def test_from_quantities_units():
    r = Resource.from_quantities({"cpu": "1500m", "memory": "1Gi", "pods": "20", "nvidia.com/gpu": "2",
                                  "ephemeral-storage": "1k", "count/pods": "5"})
    assert r.milli_cpu == 1500 and r.memory == 2**30
    assert r.scalar_resources["pods"] == 20 and r.max_task_num == 20        # pods: plain count
    assert r.scalar_resources["nvidia.com/gpu"] == 2000                      # other scalars x1000
    assert r.scalar_resources["ephemeral-storage"] == 1_000_000
    assert "count/pods" not in r.scalar_resources                            # count quotas ignored
    assert Resource.from_quantities({"cpu": 2}).milli_cpu == 2000           # numbers are cores
    assert r.to_plain()["nvidia.com/gpu"] == 2


def test_less_equal_epsilon_and_defaults():
    a = Resource(1000.05, 10)
    assert a.less_equal(Resource(1000, 10))            # within 0.1
    assert not Resource(1000.2, 10).less_equal(Resource(1000, 10))
    gpu = R(cpu=1, nvidia_com_gpu=1)
    assert not gpu.less_equal(R(cpu=2), ZERO)         # missing right dimension counts as 0
    assert gpu.less_equal(R(cpu=2), INFINITY)         # ... or is ignored
    assert not R(cpu=1).less_equal(R(cpu=2, nvidia_com_gpu=1), INFINITY)  # right-only scalar: left must have it


def test_pods_dimension_blocks_nodes_without_pods():
    task = Resource.from_quantities({"cpu": "1"})
    task.add_scalar("pods", 1)
    assert not task.less_equal(Resource.from_quantities({"cpu": "4"}), ZERO)
    assert task.less_equal(Resource.from_quantities({"cpu": "4", "pods": "1"}), ZERO)


def test_less_and_partly():
    assert R(cpu=1, memory=1).less(R(cpu=2, memory=2))
    assert not R(cpu=1, memory=2).less(R(cpu=2, memory=2))
    assert R(cpu=1, memory=5).less_partly(R(cpu=2, memory=2))
    assert not R(cpu=3, memory=5).less_partly(R(cpu=2, memory=2))
    assert R(cpu=2, memory=5).less_equal_partly(R(cpu=2, memory=2))
    # Zero default: a right-only scalar makes LessPartly true
    assert R(cpu=3).less_partly(R(cpu=2, nvidia_com_gpu=1), ZERO)


def test_sub_asserts_and_sub_without_assert():
    r = R(cpu=1000, memory=10)
    with pytest.raises(ResourceUnderflow):
        r.clone().sub(R(cpu=2000))
    assert r.clone().sub_without_assert(R(cpu=2000)).milli_cpu == -1000
    set_panic_on_error(False)
    try:
        before = len(resource_mod.assert_failures)
        out = r.clone().sub(R(cpu=2000))
        assert out.milli_cpu == -1000 and len(resource_mod.assert_failures) == before + 1
    finally:
        set_panic_on_error(True)


def test_nil_scalar_map_sub_skips_scalars_like_go():
    left = Resource(1000, 0)                 # ScalarResources == nil
    left.sub_without_assert(R(cpu=500, pods=1))
    assert left.scalar_resources is None and left.milli_cpu == 500


def test_add_multi_clone_independent():
    a = R(cpu=1000, nvidia_com_gpu=1)
    b = a.clone().add(a).multi(0.5)
    assert b.milli_cpu == 1000 and b.scalar_resources["nvidia.com/gpu"] == 1000
    b.add_scalar("nvidia.com/gpu", 1)
    assert a.scalar_resources["nvidia.com/gpu"] == 1000


def test_fit_delta_diff_min_dimension_set_max():
    fd = R(cpu=2000, memory=100).fit_delta(R(cpu=1000))
    assert fd.milli_cpu == pytest.approx(999.9) and fd.memory == 100
    inc, dec = R(cpu=3000, memory=1).diff(R(cpu=1000, memory=5), ZERO)
    assert inc.milli_cpu == 2000 and dec.memory == 4
    m = R(cpu=3000, nvidia_com_gpu=2).min_dimension_resource(R(cpu=1000), ZERO)
    assert m.milli_cpu == 1000 and m.scalar_resources["nvidia.com/gpu"] == 0
    m2 = R(cpu=3000, nvidia_com_gpu=2).min_dimension_resource(R(cpu=1000), INFINITY)
    assert m2.scalar_resources["nvidia.com/gpu"] == 2000
    s = R(cpu=1000)
    s.set_max_resource(R(cpu=500, memory=7))
    assert s.milli_cpu == 1000 and s.memory == 7


def test_is_empty_ignores_pods_and_resource_names():
    r = Resource()
    r.add_scalar("pods", 1)
    assert r.is_empty()
    assert not R(nvidia_com_gpu=1).is_empty()
    assert R(cpu=1000, memory=0, pods=1).resource_names() == ["cpu", "pods"]


def test_less_equal_with_resources_name_lists_failures():
    ok, names = R(cpu=5000, memory=5, pods=1).less_equal_with_resources_name(R(cpu=2000, memory=1, pods=10))
    assert not ok and names == ["cpu", "memory"]


def test_positive_part_is_the_diff_with_an_empty_resource_key_for_key():
    """positive_part(r) gives what r.diff(Resource(), ZERO)[0] gives: the same values, the same
    scalar keys (a dimension at -1, the infinity sentinel, kept as diff keeps it)."""
    from hypothesis import given, settings, strategies as st
    from ha.scheduler.api.resource import ZERO, positive_part
    amount = st.sampled_from([0.0, -0.0, 1.0, 2.5, -3.0, -1.0, 1e18, 1000.0])
    scalars = st.none() | st.dictionaries(st.sampled_from(["pods", "nvidia.com/gpu", "x"]), amount, max_size=3)

    def fields(r):
        return (r.milli_cpu, r.memory, r.scalar_resources, r.max_task_num)

    @settings(max_examples=500, deadline=None, derandomize=True)
    @given(amount, amount, scalars)
    def check(m, b, sc):
        r = Resource(m, b, dict(sc) if sc is not None else None)
        want = r.diff(Resource(), ZERO)[0]
        got = positive_part(r)
        assert fields(got) == fields(want), (fields(r), fields(got), fields(want))
        assert fields(r) == (m, b, sc, 0)          # the argument is left as it was
    check()
