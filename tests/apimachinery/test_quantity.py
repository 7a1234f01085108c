import pytest
from hypothesis import given, strategies as st

from cluster_state.quantity import QuantityError, format_quantity, normalise_resources, parse_quantity


@pytest.mark.parametrize("resource,value,expected", [
    ("cpu", "500m", 500), ("cpu", "2", 2000), ("cpu", 1.5, 1500), ("cpu", "0.1", 100),
    ("cpu", "1u", 1),  # rounds up like ScaledValue
    ("memory", "1Gi", 2**30), ("memory", "1G", 10**9), ("memory", "1.5Gi", 3 * 2**29),
    ("memory", "128974848", 128974848), ("memory", "129e6", 129000000), ("memory", "123Mi", 123 * 2**20),
    ("pods", 110, 110), ("pods", "1k", 1000), ("nvidia.com/gpu", "2", 2),
])
def test_parse_quantity(resource, value, expected):
    assert parse_quantity(resource, value) == expected


@pytest.mark.parametrize("value,why", [
    ("-1", "negative"), ("abc", "malformed"), ("1Xi", "malformed"), ("", "malformed"),
    (True, "boolean"), (None, "expected a string or number"), ([1], "expected a string or number"),
    (float("nan"), "finite"),
])
def test_parse_quantity_rejects(value, why):
    with pytest.raises(QuantityError) as e:
        parse_quantity("memory", value)
    assert why in str(e.value) and "memory" in str(e.value)


def test_normalise_names_the_field():
    assert normalise_resources({"cpu": "1", "memory": "1Ki"}) == {"cpu": "1000m", "memory": "1024"}
    with pytest.raises(QuantityError) as e:
        normalise_resources({"cpu": "1", "memory": "-5"}, where="Pod ns/p spec.containers[0].resources.requests")
    assert "Pod ns/p spec.containers[0].resources.requests.memory" in str(e.value)


@given(st.sampled_from(["cpu", "memory", "pods"]), st.integers(min_value=0, max_value=10**15))
def test_canonical_form_round_trips(resource, amount):
    assert parse_quantity(resource, format_quantity(resource, amount)) == amount
