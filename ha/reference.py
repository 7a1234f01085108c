"""The user reference (docs/reference.md), generated from the code: every fault (its package under
chaos/faults/: keys, types, defaults, targets, window or point, example), every experiment key (the
pydantic model, ha/experiment/config.py), every behaviour switch and profile
(ha/scheduler/profiles.py: a switch's doc is its comment there), every metric (the checkers'
registry ``ha.experiment.checkers.registry()`` — each checker's ``NAME`` and the
first line of its docstring) and the commands.

``render()`` returns the text; ``python -m ha.reference`` rewrites docs/reference.md and
``python -m ha.reference --check`` exits 1 when the file is stale (a test runs the check).
"""
from __future__ import annotations

import inspect
import io
import sys
import tokenize
import typing
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, TypeAdapter

__all__ = ["render", "write", "main", "PATH"]

PATH = Path(__file__).resolve().parents[1] / "docs" / "reference.md"

# ------------------------------------------------------------------------------------- helpers

def _cell(s: Any) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def _table(head: list[str], rows: list[list[Any]]) -> list[str]:
    out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    out += ["| " + " | ".join(_cell(c) for c in r) + " |" for r in rows]
    return out


def _flow(obj: Any) -> str:
    """A value as YAML flow style, the way experiment files write chaos entries."""
    text = yaml.safe_dump(obj, default_flow_style=True, sort_keys=False, width=1000,
                          allow_unicode=True).strip()
    return text.removesuffix("...").strip()


def _describe(schema: dict[str, Any]) -> str:
    """A short type name from a JSON Schema fragment."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return "distribution" if name == "Distribution" else "map"
    if "anyOf" in schema:
        alts = [a for a in schema["anyOf"] if a.get("type") != "null"]
        if any("pattern" in a and "ms|s|m" in a["pattern"] for a in alts):
            rest = [a for a in alts if not ("pattern" in a and "ms|s|m" in a["pattern"])
                    and a.get("const") != 0]
            return " or ".join(["duration"] + [_describe(a) for a in rest])
        return " or ".join(_describe(a) for a in alts)
    if "enum" in schema:
        return "one of " + ", ".join(map(str, schema["enum"]))
    t = schema.get("type")
    if t == "array":
        if "prefixItems" in schema:
            return "[" + ", ".join(_describe(i) for i in schema["prefixItems"]) + "]"
        n = schema.get("minItems")
        item = _describe(schema.get("items", {}))
        if n == 2 and schema.get("maxItems") == 2:
            return f"[{item}, {item}]"
        return f"list of ({item})"
    if t == "object":
        return "map"
    if t in ("integer", "number"):
        bounds = []
        for k, sym in (("minimum", "≥"), ("exclusiveMinimum", ">"), ("maximum", "≤"), ("exclusiveMaximum", "<")):
            if k in schema:
                bounds.append(f"{sym} {schema[k]}")
        return t + (" " + ", ".join(bounds) if bounds else "")
    if t == "string" and "pattern" in schema:
        if "scheduler-" in schema["pattern"]:
            return "target"
        return "rate" if "/" in schema["pattern"] else f"string ({schema['pattern']})"
    return t or "any"


def _type_of(annotation: Any) -> str:
    return _describe(TypeAdapter(annotation).json_schema(mode="validation"))


def _doc_of(info: Any) -> str:
    """A field's description, or that of its type (``Optional[For]`` keeps it inside)."""
    if info.description:
        return info.description
    for arg in typing.get_args(info.annotation):
        for meta in typing.get_args(arg)[1:] if typing.get_origin(arg) is typing.Annotated else ():
            if getattr(meta, "description", None):
                return meta.description
    return ""


def _default(info: Any, annotation: Any) -> str:
    if info.is_required():
        return "required"
    v = info.get_default(call_default_factory=True)
    if v is None:
        return "—"
    if isinstance(v, BaseModel):
        return "(see its keys)"
    try:
        v = TypeAdapter(annotation).dump_python(v, mode="json")
    except Exception:  # noqa: BLE001 -- a default the type cannot dump is shown as it is
        pass
    return _flow(v)


# --------------------------------------------------------------------------------------- faults

def _faults() -> list[str]:
    from chaos.faults import FAULTS
    from chaos.faults.distribution import DIST_FIELDS
    out = ["## Faults", "",
           "A `chaos:` entry is `{at: <duration>, fault: <name>, ...}` plus the keys of its fault. "
           "Targets: `scheduler-<N>`, `leader` (resolved when the fault starts) or `all`. A windowed "
           "fault starts at `at` and ends after `for` (without `for`: at the end of the run) and is "
           "shaded in the report; a point fault fires once at `at` and is a marker.", ""]
    out += _table(["fault", "what it does", "targets", "kind"],
                  [[f"[`{n}`](#{n})", p.doc, p.target_words(), "windowed" if p.windowed else "point"]
                   for n, p in FAULTS.items()])
    for name, pkg in FAULTS.items():
        out += ["", f"### {name}", "", pkg.doc + ".", ""]
        rows = []
        for key, info in pkg.keys().items():
            ann = info.rebuild_annotation()
            if key == "target":
                rows.append(["`target`", "target", _default(info, ann), pkg.target_words()])
                continue
            rows.append([f"`{key}`", _type_of(ann), _default(info, ann), _doc_of(info)])
        out += _table(["key", "type", "default", "meaning"], rows) if rows else ["Takes only `at`."]
        out += ["", f"- targets: {pkg.target_words()}"
                    + (f" (default `{pkg.default_target}`)" if pkg.default_target else ""),
                f"- {'windowed: start at `at`, end after `for`' if pkg.windowed else 'point: fires once at `at`'}"
                + ("; `restart_after` adds a restart" if name == "kill" else ""),
                f"- injector: {pkg.injector}" + (" (runs inside the instances from the run's start)"
                                                  if pkg.self_driven else ""),
                f"- report: {pkg.draw.mark} labelled “{pkg.draw.label}”",
                "", "```yaml", f"- {_flow(pkg.example)}", "```"]
    out += ["", "### Delay distributions", "",
            "`delay` is a map with `dist` and its keys, or a bare duration (`delay: 200ms` = fixed).", ""]
    out += _table(["dist", "needs", "may have"],
                  [[f"`{d}`", ", ".join(sorted(r)), ", ".join(sorted(o)) or "—"]
                   for d, (r, o) in DIST_FIELDS.items()])
    out += ["", "`pareto` is type I (`scale` is the minimum x_m; `alpha` ≤ 1 has an infinite mean); "
                "`max` caps a long tail."]
    return out


# ---------------------------------------------------------------------------- experiment keys

def _model_rows(model: type[BaseModel], prefix: str, rows: list[list[str]], seen: set) -> None:
    for name, info in model.model_fields.items():
        key = info.alias or name
        path = f"{prefix}{key}"
        ann = info.rebuild_annotation()
        sub = _submodel(info.annotation)
        if sub is not None and sub.__name__ == "ChaosEntry":
            rows.append([f"`{path}`", "list of chaos entries", "[]", "see [Faults](#faults)"])
            continue
        meaning = info.description or field_comments(model)[0].get(name, "")
        rows.append([f"`{path}`", _type_of(ann), _default(info, ann), meaning])
        if sub is not None and sub not in seen:
            many = typing.get_origin(_unoptional(info.annotation)) in (list, tuple)
            _model_rows(sub, f"{path}[]." if many else f"{path}.", rows, seen | {sub})


def _unoptional(tp: Any) -> Any:
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    if typing.get_origin(tp) in (typing.Union, getattr(__import__("types"), "UnionType")) and len(args) == 1:
        return args[0]
    return tp


def _submodel(tp: Any) -> type[BaseModel] | None:
    tp = _unoptional(tp)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return tp
    if typing.get_origin(tp) in (list, tuple):
        args = typing.get_args(tp)
        if len(args) == 1 and isinstance(args[0], type) and issubclass(args[0], BaseModel):
            return args[0]
    return None


def _experiment() -> list[str]:
    from ha.experiment.config import Experiment
    rows: list[list[str]] = []
    _model_rows(Experiment, "", rows, {Experiment})
    rows[0][2] = "the file's name"      # load_experiment names a file without `name` after itself
    return ["## Experiment files", "",
            "YAML, validated by `ha-testbed run`; unknown keys are errors (`ha-testbed schema` prints "
            "the JSON Schema). Durations: `500ms`, `10s`, `2m`; rates: `20/s`. `name` defaults to "
            "the file's name. A `[]` in a path is one item of a list.", ""] + _table(
        ["key", "type", "default", "meaning"], rows)


# --------------------------------------------------------------------------- switches, profiles

def field_comments(cls: type) -> tuple[dict[str, str], dict[str, str]]:
    """(field -> its comment, field -> the group comment above it) from a class body's source: a
    field's comment is the one on its line, else the comment block right above it; a block above a
    field that has its own comment heads a group."""
    src = inspect.getsource(cls)
    comments: dict[int, str] = {}
    for tok in tokenize.generate_tokens(io.StringIO(src).readline):
        if tok.type == tokenize.COMMENT:
            comments[tok.start[0]] = tok.string.lstrip("#").strip()
    docs: dict[str, str] = {}
    groups: dict[str, str] = {}
    block: list[str] = []
    group = ""
    names = set(getattr(cls, "model_fields", None) or getattr(cls, "__dataclass_fields__", {}))
    for i, line in enumerate(src.splitlines(), start=1):
        s = line.strip()
        if s.startswith("#"):
            block.append(comments.get(i, ""))
            continue
        name = s.split(":", 1)[0].strip() if ":" in s else ""
        if name in names and line.startswith("    ") and not line.startswith("     "):
            if i in comments:
                if block:
                    group = " ".join(block)
                docs[name] = comments[i]
            else:
                docs[name] = " ".join(block)
            groups[name] = group
        block = []
    return docs, groups


def _switches() -> list[str]:
    from dataclasses import fields

    from ha.scheduler.profiles import PROFILES, Switches, profile_names
    docs, groups = field_comments(Switches)
    out = ["## Behaviour switches", "",
           "Each part of each proposed fix is a switch (`switches:` in an experiment file overrides "
           "the profile's).", ""]
    out += _table(["switch", "group", "what it changes"],
                  [[f"`{f.name}`", groups.get(f.name, ""), docs.get(f.name, "")] for f in fields(Switches)])
    out += ["", "## Profiles", "", "Named sets of switches (`profile:` in an experiment file, "
            "`--profile` on the command line).", ""]
    out += _table(["profile", "switches on"],
                  [[f"`{p}`", ", ".join(f"`{s}`" for s in PROFILES[p].enabled()) or "none (Volcano v1.14.0)"]
                   for p in profile_names()])
    return out


# -------------------------------------------------------------------------------------- metrics

def _first_sentence(doc: str) -> str:
    """A checker module's docstring up to its first blank line, joined into one line."""
    para = doc.strip().split("\n\n", 1)[0]
    return " ".join(line.strip() for line in para.splitlines())


def metrics() -> tuple[list[tuple[str, str]], str]:
    """(name, one-line definition) and where they came from."""
    from ha.experiment.checkers import registry
    out = []
    for c in sorted(registry().values(), key=lambda c: c.name):
        doc = inspect.getdoc(sys.modules.get(c.module)) or ""
        first = _first_sentence(doc)
        if first.startswith(c.name):     # "name (where from): definition" -> the definition
            first = first[len(c.name):].split(":", 1)[-1].strip()
        out.append((c.name, first))
    return out, "the checkers (ha/experiment/checkers/)"


def _metrics() -> list[str]:
    rows, _source = metrics()
    return ["## Metrics", "", "Names are a contract (metrics.json, `ha-testbed compare`, sweeps).", ""] + \
        _table(["metric", "definition"], [[f"`{n}`", d] for n, d in rows])


# ------------------------------------------------------------------------------------- commands

def _commands() -> list[str]:
    from ha.cli import app
    rows = []

    def add(typer_app, prefix: str) -> None:
        for cmd in typer_app.registered_commands:
            name = cmd.name or cmd.callback.__name__.replace("_", "-")
            doc = (inspect.getdoc(cmd.callback) or "").splitlines()
            rows.append([f"`ha-testbed {prefix}{name}`", doc[0] if doc else ""])
        for grp in typer_app.registered_groups:
            add(grp.typer_instance, f"{prefix}{grp.name} ")
    add(app, "")
    return ["## Commands", "", "`ha-testbed COMMAND --help` shows every option. Exit codes: 0 ok, "
            "1 a check failed, 2 bad input.", ""] + _table(["command", "does"], rows)


# ----------------------------------------------------------------------------------------- main

def render() -> str:
    parts = ["# ha-testbed reference", "",
             "<!-- generated by `python -m ha.reference` from the code; do not edit by hand -->", "",
             "Contents: [Commands](#commands) · [Experiment files](#experiment-files) · "
             "[Faults](#faults) · [Behaviour switches](#behaviour-switches) · [Profiles](#profiles) · "
             "[Metrics](#metrics)", ""]
    for section in (_commands, _experiment, _faults, _switches, _metrics):
        parts += section() + [""]
    return "\n".join(parts).rstrip() + "\n"


def write(path: Path | None = None) -> bool:
    """Rewrite the reference (default docs/reference.md); True when it changed."""
    path = PATH if path is None else path
    text = render()
    old = path.read_text(encoding="utf-8") if path.exists() else None
    if old != text:
        path.write_text(text, encoding="utf-8")
        return True
    return False


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["--check"]:
        stale = not PATH.exists() or PATH.read_text(encoding="utf-8") != render()
        if stale:
            print(f"{PATH} is stale: run python -m ha.reference", file=sys.stderr)
        return 1 if stale else 0
    if argv:
        print("usage: python -m ha.reference [--check]", file=sys.stderr)
        return 2
    print(f"{PATH}: {'rewritten' if write() else 'up to date'}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
