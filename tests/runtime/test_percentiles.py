"""``ha.runtime.incarnation.percentiles``: nearest-rank p50 / p99 / max of staleness samples. An
instance's stats ask it of up to 100,000 samples a kind several times a second, so from 4,096
samples on it selects the three ranks instead of sorting; both give the same figures."""
from __future__ import annotations

from collections import deque

import numpy as np
from hypothesis import given, settings, strategies as st

from ha.runtime.incarnation import _SELECT_FROM, _Samples, _ranked, percentiles

floats = st.floats(min_value=0.0, max_value=1e7, allow_nan=False, allow_infinity=False)


@settings(max_examples=60, deadline=None)
@given(st.lists(floats, min_size=1, max_size=50), st.integers(min_value=0, max_value=3))
def test_selecting_the_ranks_gives_what_sorting_gives(head, repeat):
    xs = (head * (_SELECT_FROM // len(head) + 1 + repeat))[: _SELECT_FROM + 17 * repeat]
    assert len(xs) >= _SELECT_FROM
    want = _ranked(sorted(xs))
    assert percentiles(xs) == want
    assert percentiles(deque(xs)) == want
    assert percentiles(np.asarray(xs)) == want
    got = percentiles(xs)
    assert all(type(got[k]) is float for k in ("p50", "p99", "max"))   # (JSON, msgpack: plain floats)


def test_nearest_rank_by_hand():
    xs = list(range(1, 10_001))            # 1 .. 10,000: p50 is the 5,000th, p99 the 9,900th
    assert percentiles(xs) == {"p50": 5000.0, "p99": 9900.0, "max": 10000.0, "n": 10_000}
    assert percentiles(xs[:100]) == {"p50": 50, "p99": 99, "max": 100, "n": 100}
    assert percentiles([]) is None and percentiles(np.array([])) is None


def test_samples_since_a_reader_looked():
    s = _Samples(maxlen=5)
    for x in range(8):
        s.append(float(x))
    assert s.since(6) == [6.0, 7.0]
    assert s.since(0) == [3.0, 4.0, 5.0, 6.0, 7.0]      # as many as are kept
    assert s.since(8) == []
