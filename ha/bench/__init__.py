"""Benchmarks behind ``ha-testbed bench NAME``.

Each benchmark measures its figure beside a baseline in the same run (these machines are noisy) and
reports the ratio. A module ``ha.bench.<name>`` exposes ``run(quick: bool) -> BenchResult``.
"""
from __future__ import annotations

import importlib
from dataclasses import asdict, dataclass, field
from typing import Any

# CLI name -> module under ha.bench
BENCHMARKS: dict[str, str] = {
    "api-write": "api_write",
    "informer": "informer",
    "session": "session",
    "e2e": "e2e",
    "scale": "scale",
    "sim": "sim",
    "kube-api": "kube_api",
    "hunt": "hunt",
}


@dataclass
class BenchResult:
    name: str
    value: float
    unit: str
    baseline: float | None
    ratio: float | None
    params: dict[str, Any] = field(default_factory=dict)
    # further figures of the same run (e.g. batched writes beside single writes), each a dict with
    # the same keys as the top level; printed as extra rows
    extra: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        if not d["extra"]:
            d.pop("extra")
        return d


def load(name: str):
    mod = BENCHMARKS.get(name)
    if mod is None:
        return None
    try:
        return importlib.import_module(f"ha.bench.{mod}")
    except ModuleNotFoundError as e:
        if e.name == f"ha.bench.{mod}":
            return None
        raise


def parse_params(name: str, run: Any, params: list[str]) -> dict[str, str]:
    """``--param KEY=VALUE`` options -> keyword arguments of the benchmark's ``run`` (BadInput for
    a malformed one or a key the benchmark does not take)."""
    import inspect
    from ha.errors import BadInput
    accepted = [p for p in inspect.signature(run).parameters if p != "quick"]
    out: dict[str, str] = {}
    for raw in params:
        key, sep, value = raw.partition("=")
        key = key.strip()
        if not sep or not key:
            raise BadInput(f"bench {name}: --param {raw!r}: expected KEY=VALUE")
        if key not in accepted:
            raise BadInput(f"bench {name}: --param {key!r}: unknown parameter; known: "
                           f"{', '.join(accepted) or '(none)'}")
        out[key] = value.strip()
    return out
