"""``ha-testbed scenario run PATH... [--profile P] [--switch S[=false]]... [--check] [--json]``
(docs/design.md "CLI contract"; ``--switch`` turns one behaviour switch on (or off) on top of the profile).

Exit codes: 0 ok, 1 a ``--check`` found a mismatch, 2 bad input (raised as ``BadInput``; the
message names the file, the field and the problem). Every file is loaded and validated before any
runs, so a bad file never leaves half a report behind.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from ha.errors import BadInput
from ha.scenario.loader import Scenario, ScenarioError, expand_paths, load_json, load_scenario
from ha.scenario.runner import ScenarioResult, resolve_profile, run_scenario

__all__ = ["run_scenarios", "collect"]

UNIT_KIND_MESSAGE = ("'unit' scenarios (NodeInfo / cache / getTaskStatus cases, their steps in "
                     "prose) are for the project's own tests; `scenario run` runs kind 'action' files")


def collect(paths: list[str]) -> tuple[list[Scenario], list[str]]:
    """Load every file. A unit-kind file named explicitly is bad input; one found inside a named
    directory is skipped (returned in the second list) so that a folder mixing both kinds runs."""
    if not paths:
        raise BadInput("scenario run: no scenario files given")
    explicit = {p for p in paths if not Path(p).is_dir()}
    scenarios: list[Scenario] = []
    skipped: list[str] = []
    for f in expand_paths(paths):
        data = load_json(f)
        if isinstance(data, dict) and data.get("kind") == "unit":
            if f in explicit:
                raise ScenarioError(f, "kind", UNIT_KIND_MESSAGE)
            skipped.append(f)
            continue
        scenarios.append(load_scenario(f, data))
    if not scenarios:
        raise BadInput(f"scenario run: no kind 'action' scenarios in {', '.join(paths)} "
                       f"({len(skipped)} unit-kind file(s) skipped)")
    return scenarios, skipped


def _fmt_map(m: dict[str, str]) -> str:
    return ", ".join(f"{k} -> {v}" for k, v in sorted(m.items())) or "-"


def _text(res: ScenarioResult, check: bool) -> str:
    o = res.outcome
    head = f"{res.name}  [{res.profile}]  ({res.path})"
    if check:
        head += "  OK" if res.ok else "  MISMATCH"
    lines = [head] + ([f"  FATAL: {o.fatal}"] if o.fatal else []) + [
             f"  bound     ({len(o.bind_list)}): {_fmt_map(o.binds)}",
             f"  evicted   ({len(o.evicted)}): {', '.join(o.evicted) or '-'}",
             f"  pipelined ({len(o.pipelined)}): {_fmt_map(o.pipelined)}"]
    if check:
        lines += [f"  ! {m}" for m in res.mismatches]
    return "\n".join(lines)


def parse_switches(items: list[str] | None) -> dict[str, bool]:
    """``--switch NAME`` / ``NAME=true|false`` -> {NAME: bool}; unknown names are bad input."""
    out: dict[str, bool] = {}
    for item in items or []:
        name, _, val = item.partition("=")
        name = name.strip()
        v = val.strip().lower() if val else "true"
        if v not in ("true", "false", "1", "0", "on", "off"):
            raise BadInput(f"--switch {item}: the value must be true or false")
        out[name] = v in ("true", "1", "on")
    from ha.scheduler.profiles import Switches
    Switches().with_(**out)     # unknown switch -> BadInput naming the known ones
    return out


def run_scenarios(paths: list[str], profile: str = "v1.14", check: bool = False,
                  as_json: bool = False, switches: list[str] | None = None) -> int:
    sw = resolve_profile(profile)  # an unknown profile is bad input before anything runs
    overrides = parse_switches(switches)
    sw = sw.with_(**overrides)
    scenarios, skipped = collect(list(paths))
    for s in scenarios:
        if check and s.expected is None:
            raise ScenarioError(s.path, "expected", "missing (needed by --check)")
    for f in skipped:
        print(f"note: skipped {f}: kind {UNIT_KIND_MESSAGE}", file=sys.stderr)
    label = profile + "".join(f" +{k}" if v else f" -{k}" for k, v in sorted(overrides.items()))
    results = [run_scenario(s, label, switches=sw) for s in scenarios]
    failed = [r for r in results if check and not r.ok]
    if as_json:
        docs = [r.to_json(check) for r in results]
        print(json.dumps(docs[0] if len(docs) == 1 else docs, indent=None))
    else:
        for r in results:
            print(_text(r, check))
        if check:
            print(f"{len(results) - len(failed)}/{len(results)} scenarios match their expected "
                  f"outcome under profile {label}")
    return 1 if failed else 0
