"""The demo and the api-write benchmark run for real (no speed assertions: benchmarks hold those)."""
from __future__ import annotations

import redis

from cluster_state.demo import run_demo


def test_demo_runs_against_the_given_redis_and_cleans_up(redis_url, capsys):
    assert run_demo(redis_url) == 0
    out = capsys.readouterr().out
    assert "MODIFIED" in out and "DELETED" in out and "node-2" in out
    assert "every write seen exactly once" in out
    r = redis.Redis.from_url(redis_url)
    assert not list(r.scan_iter(match="demo*"))


def test_api_write_bench_quick(redis_url, monkeypatch):
    from ha.bench import load
    monkeypatch.setenv("REDIS_URL", redis_url)
    res = load("api-write").run(quick=True)
    assert res.unit == "writes/s" and res.value > 0 and res.baseline > 0
    # the ratio of the unrounded rates, to 3 decimals (value and baseline are rounded apart)
    assert abs(res.ratio - res.value / res.baseline) <= 0.001
    assert res.extra and res.extra[0]["value"] > 0 and res.extra[0]["baseline"] > 0
    assert res.params["single_writes"] > 0 and res.params["batched_binds"] > 0
    status = res.extra[1]
    assert status["name"].startswith("api-write status batched") and status["value"] > 0
    assert status["baseline"] > 0 and res.params["status_writes"] == status["params"]["per_request"] * 6
    d = res.to_json()
    assert set(d) >= {"name", "value", "unit", "baseline", "ratio", "params"}
    r = redis.Redis.from_url(redis_url)
    assert not list(r.scan_iter(match="bench*"))
