"""The grid of a sweep: seeds × profiles × every ``--set`` value, each cell one experiment.

* ``--seeds``: ``A-B`` (inclusive), lists ``1,3,5`` and mixes ``1-3,7``; duplicates kept once,
  order kept.
* ``--set KEY=V1,V2,...``: ``KEY`` is a path into the experiment file as written: dotted keys and
  list indices, ``chaos[0].delay.mean``, ``schedulers.instances``; ``[*]`` applies the value to
  every element of a list that has the next key (``chaos[*].delay``: every entry with a delay). Values are read as YAML scalars (``3`` an
  int, ``1s`` a string, ``true`` a bool). Commas inside brackets or braces do not split values.
* ``--set schedulers.implementation=model,volcano`` is the implementation axis: the model and the
  real vc-scheduler on the same experiment (a volcano cell's standbys are cold, as
  ``--implementation volcano`` makes them; ``--set schedulers.volcano.version=...`` or
  ``schedulers.volcano.source=...`` pick the binary). Volcano cells need ``--engine live``.
* Every cell's experiment is validated before anything runs: a bad path or value is
  :class:`BadInput` naming the ``--set`` entry, the path and the problem (exit 2).

A cell's folder: ``cells/<profile>/<set-values>/seed-<n>/`` where ``<set-values>`` is ``base``
without ``--set`` and ``KEY=V`` joined by ``+`` otherwise (``/`` and spaces become ``_``, ``*``
becomes ``all``).
"""
from __future__ import annotations

import copy
import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ha.errors import BadInput
from ha.experiment.config import Experiment, parse_experiment

__all__ = ["parse_seeds", "parse_profiles", "SetSpec", "parse_set", "apply_path", "Cell", "Grid", "build_grid",
           "set_label"]

_TOKEN = re.compile(r"([^.\[\]]+)|\[(\*|-?\d+)\]")


def parse_seeds(spec: str) -> list[int]:
    """``1-30``, ``1,3,5``, ``1-3,7`` → the seeds, in order, each once."""
    out: list[int] = []
    if not str(spec).strip():
        raise BadInput("--seeds: empty (expected e.g. 1-30 or 1,3,5)")
    for part in str(spec).split(","):
        part = part.strip()
        m = re.fullmatch(r"(\d+)\s*-\s*(\d+)", part)
        if m:
            a, b = int(m.group(1)), int(m.group(2))
            if b < a:
                raise BadInput(f"--seeds {spec}: range {part} runs backwards")
            vals = range(a, b + 1)
        elif re.fullmatch(r"\d+", part):
            vals = [int(part)]
        else:
            raise BadInput(f"--seeds {spec}: {part!r} is not a seed or a range A-B (non-negative integers)")
        for v in vals:
            if v not in out:
                out.append(v)
    return out


def parse_profiles(spec: str) -> list[str]:
    from ha.scheduler.profiles import PROFILES
    names = [p.strip() for p in str(spec).split(",") if p.strip()]
    if not names:
        raise BadInput("--profiles: empty (expected e.g. v1.14,pr5045-fixed)")
    for p in names:
        if p not in PROFILES:
            raise BadInput(f"--profiles: unknown profile {p!r} (known: {', '.join(sorted(PROFILES))})")
    if len(set(names)) != len(names):
        raise BadInput(f"--profiles {spec}: a profile is named twice")
    return names


@dataclass(frozen=True)
class SetSpec:
    key: str
    values: tuple[Any, ...]          # parsed (YAML scalars)
    texts: tuple[str, ...]           # as the user wrote them (labels, folder names)
    path: tuple[Any, ...] = field(default=())


def _split_values(text: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return [v.strip() for v in out]


def parse_path(key: str) -> tuple[Any, ...]:
    """``chaos[0].delay.mean`` → ``("chaos", 0, "delay", "mean")``; ``[*]`` → ``"*"`` marker."""
    toks: list[Any] = []
    pos = 0
    key = key.strip()
    while pos < len(key):
        if key[pos] == "." and toks and pos + 1 < len(key) and key[pos + 1] != "[":
            pos += 1
        m = _TOKEN.match(key, pos)
        if m is None or m.end() == pos:
            raise BadInput(f"--set {key}: not a path (expected e.g. chaos[0].delay.mean or schedulers.instances)")
        if m.group(1) is not None:
            toks.append(m.group(1))
        else:
            toks.append(_Star if m.group(2) == "*" else int(m.group(2)))
        pos = m.end()
    if not toks or not isinstance(toks[0], str):
        raise BadInput(f"--set {key}: not a path (it must start with a key of the experiment)")
    return tuple(toks)


class _StarType:
    def __repr__(self) -> str:
        return "[*]"


_Star = _StarType()


def parse_set(spec: str) -> SetSpec:
    if "=" not in spec:
        raise BadInput(f"--set {spec}: expected KEY=V1,V2,... (e.g. chaos[0].delay.mean=100ms,1s)")
    key, _, vals = spec.partition("=")
    key = key.strip()
    path = parse_path(key)
    texts = _split_values(vals)
    if not vals.strip() or any(t == "" for t in texts):
        raise BadInput(f"--set {spec}: an empty value")
    values = []
    for t in texts:
        try:
            values.append(yaml.safe_load(t))
        except yaml.YAMLError as e:
            raise BadInput(f"--set {key}={t}: not a YAML value: {getattr(e, 'problem', e)}") from None
    if len(set(texts)) != len(texts):
        raise BadInput(f"--set {spec}: a value is given twice")
    return SetSpec(key=key, values=tuple(values), texts=tuple(texts), path=path)


def _where(path: tuple[Any, ...], upto: int) -> str:
    s = ""
    for t in path[:upto]:
        s += f"[{t!r}]" if t is _Star else (f"[{t}]" if isinstance(t, int) else (("." if s else "") + t))
    return s.replace("[[*]]", "[*]") or "(the experiment)"


def apply_path(data: Any, path: tuple[Any, ...], value: Any, key: str) -> None:
    """Set ``value`` at ``path`` inside the raw experiment ``data`` (in place). A missing map key
    is created (the schema then decides whether it exists); a list index must exist."""
    def go(node: Any, i: int) -> None:
        tok = path[i]
        last = i == len(path) - 1
        here = _where(path, i) if i else "the experiment"
        if tok is _Star or isinstance(tok, int):
            if not isinstance(node, list):
                raise BadInput(f"--set {key}: {here} is not a list")
            idxs = range(len(node)) if tok is _Star else [tok]
            if tok is _Star and not node:
                raise BadInput(f"--set {key}: {here} is an empty list")
            if tok is _Star and not last and isinstance(path[i + 1], str):
                # every entry that has the next key (chaos[*].delay: the entries with a delay)
                idxs = [j for j in idxs if isinstance(node[j], dict) and path[i + 1] in node[j]]
                if not idxs:
                    raise BadInput(f"--set {key}: no entry of {here} has {path[i + 1]!r}")
            for j in idxs:
                if not -len(node) <= j < len(node):
                    raise BadInput(f"--set {key}: {here} has {len(node)} entries, no index {j}")
                if last:
                    node[j] = copy.deepcopy(value)
                else:
                    go(node[j], i + 1)
            return
        if not isinstance(node, dict):
            raise BadInput(f"--set {key}: {here} is not a map (cannot take key {tok!r})")
        if last:
            node[tok] = copy.deepcopy(value)
            return
        if node.get(tok) is None:
            if isinstance(path[i + 1], str):
                node[tok] = {}
            else:
                raise BadInput(f"--set {key}: {_where(path, i + 1)} does not exist in the experiment")
        go(node[tok], i + 1)
    go(data, 0)


def _safe(text: str) -> str:
    # a folder name a shell need not quote for globbing: [*] becomes [all]
    return re.sub(r"[/\\\s]+", "_", text).replace("*", "all")


def set_label(assign: dict[str, str]) -> str:
    """The folder name (and table label) of one combination of ``--set`` values."""
    if not assign:
        return "base"
    return "+".join(f"{_safe(k)}={_safe(v)}" for k, v in assign.items())


@dataclass(frozen=True)
class Cell:
    profile: str
    seed: int
    assign: tuple[tuple[str, str], ...]     # (key, value text) per --set, in order

    @property
    def set_label(self) -> str:
        return set_label(dict(self.assign))

    @property
    def rel(self) -> str:
        return f"cells/{_safe(self.profile)}/{self.set_label}/seed-{self.seed}"

    def to_dict(self) -> dict[str, Any]:
        return {"profile": self.profile, "seed": self.seed, "set": dict(self.assign), "set_label": self.set_label,
                "path": self.rel}


@dataclass
class Grid:
    source: str
    data: dict[str, Any]                # the experiment file as written
    seeds: list[int]
    profiles: list[str]
    sets: list[SetSpec]
    cells: list[Cell]
    combos: list[dict[str, str]]        # the --set combinations in grid order

    def experiment_data(self, cell: Cell) -> dict[str, Any]:
        """The raw experiment of a cell (``--set`` values applied; seed and profile overridden
        by :meth:`experiment`)."""
        d = copy.deepcopy(self.data)
        by_key = {s.key: s for s in self.sets}
        for k, text in cell.assign:
            s = by_key[k]
            apply_path(d, s.path, s.values[s.texts.index(text)], k)
        assigned = dict(cell.assign)
        sched = d.get("schedulers")
        if (assigned.get("schedulers.implementation") == "volcano" and "schedulers.standby" not in assigned
                and isinstance(sched, dict)):
            # the implementation axis: vc-scheduler's standbys are cold whatever the model's file says
            # (as --implementation volcano does)
            sched["standby"] = "cold"
        return d

    def experiment(self, cell: Cell) -> Experiment:
        data = self.experiment_data(cell)
        label = f"{self.source} (--set {', '.join(f'{k}={v}' for k, v in cell.assign)})" if cell.assign \
            else self.source
        exp = parse_experiment(data, label, default_name=Path(self.source).stem)
        return exp.with_overrides(seed=cell.seed, profile=cell.profile)

    def to_dict(self) -> dict[str, Any]:
        return {"experiment": self.source, "seeds": self.seeds, "profiles": self.profiles,
                "sets": [{"key": s.key, "values": list(s.texts)} for s in self.sets],
                "cells": len(self.cells)}


def build_grid(source: str, data: dict[str, Any], seeds: list[int], profiles: list[str],
               sets: list[SetSpec]) -> Grid:
    """Every cell of the grid, in order (set combination, profile, seed); every combination's
    experiment validated (BadInput names the --set entry and the problem)."""
    keys = [s.key for s in sets]
    if len(set(keys)) != len(keys):
        raise BadInput(f"--set: a key is given twice ({', '.join(keys)})")
    combos = [dict(zip(keys, vals)) for vals in itertools.product(*(s.texts for s in sets))]
    cells = [Cell(p, seed, tuple(c.items())) for c in combos for p in profiles for seed in seeds]
    grid = Grid(source=source, data=data, seeds=seeds, profiles=profiles, sets=sets, cells=cells, combos=combos)
    # validate each combination once (seed and profile were validated on their own)
    # (an error names the file with the --set values applied, the field and the problem)
    for c in combos:
        grid.experiment(Cell(profiles[0], seeds[0], tuple(c.items())))
    return grid
