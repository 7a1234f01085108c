"""What one fault package declares (Jepsen's nemesis packages: the fault, its schedule, how it is
drawn), and the shared plumbing of its start / end / fire against :class:`chaos.targets.Targets`.

A fault module under ``chaos/faults/`` defines a subclass of :class:`FaultPackage` and exposes one
instance as ``FAULT``; :mod:`chaos.faults.registry` finds it. The package declares:

* ``name``, ``doc`` (one line), ``order`` (its place in listings and in the reference);
* ``Params``: a :class:`chaos.faults.fields.FaultParams` model — the keys it takes, their types,
  which are required (no default) and the defaults;
* ``targets``: the target kinds it accepts (``instance``, ``leader``, ``all``; ``()`` = none);
* ``windowed``: True = ``start`` at ``at`` and ``end`` after ``for`` (a span in the report);
  False = one ``fire`` at ``at`` (a point marker), plus whatever :meth:`actions` adds;
* ``injector``: what acts (``watch``, ``api``, ``proxy``, ``process``, ``clock``, ``redis``);
  ``self_driven``: the instances' own hooks apply it from the schedule once given the run's epoch,
  so the nemesis only records it for named targets (a ``leader`` one it activates);
* ``example``: a valid ``chaos:`` entry (the reference shows it, a test validates it);
* ``draw``: how a report draws it (:class:`Draw`).

``start`` / ``end`` / ``fire`` (and ``restart`` for kill) take the targets, the scheduled fault and
the instance names it resolved to, and return the record's detail; :class:`chaos.targets.Skip`
marks the action skipped.
"""
from __future__ import annotations

import asyncio
import inspect
from dataclasses import dataclass
from typing import Any, Callable, ClassVar

from chaos.faults.fields import TARGET_WORDS, FaultParams, target_kind
from chaos.targets import Skip, Targets

__all__ = ["FaultPackage", "HookFault", "Draw", "call", "method", "each", "per_instance",
           "in_thread_if_blocking"]


@dataclass(frozen=True)
class Draw:
    """How a report draws a fault: ``span`` (shaded from start to end) or ``point`` (a vertical
    marker at its time), the label it writes beside it, and a matplotlib colour."""
    mark: str          # "span" | "point"
    label: str
    color: str


async def call(fn: Callable, *args) -> Any:
    """Call a target method that may be sync or async."""
    res = fn(*args)
    if inspect.isawaitable(res):
        res = await res
    return res


def method(targets: Targets, name: str) -> Callable:
    """The targets' method ``name``, or :class:`Skip` naming what the driver lacks."""
    fn = getattr(targets, name, None)
    if not callable(fn):
        raise Skip(f"the driver gives no {name}()")
    return fn


async def each(targets: Targets, names: list[str], getter: str, fn: Callable[[Any], Any]) -> str:
    """Apply ``fn`` to each instance's injector from ``targets.<getter>(name)`` (watch hooks, API
    chaos, proxy). An instance without one is noted; when none has one the action is skipped."""
    get = method(targets, getter)
    out: list[str] = []
    hit = False
    for n in names:
        obj = await call(get, n)
        if obj is None:
            out.append(f"{n}: no {getter}")
            continue
        hit = True
        r = await call(fn, obj)
        out.append(f"{n}: {r}" if isinstance(r, str) else n)
    if not hit:
        raise Skip("; ".join(out))
    return "; ".join(out)


async def per_instance(targets: Targets, names: list[str], meth: str, *args) -> str:
    """``targets.<meth>(name, *args)`` for each instance; the detail is what each returned (a str)
    or ``"<meth> <name>"``."""
    fn = method(targets, meth)
    out = []
    for n in names:
        r = await call(fn, n, *args)
        out.append(r if isinstance(r, str) and r else f"{meth} {n}")
    return "; ".join(out)


class FaultPackage:
    """One fault (see the module doc). Subclasses set the class attributes and the actions."""
    name: ClassVar[str]
    doc: ClassVar[str]
    order: ClassVar[int]
    Params: ClassVar[type[FaultParams]]
    targets: ClassVar[tuple[str, ...]] = ("instance", "leader", "all")
    windowed: ClassVar[bool] = True
    injector: ClassVar[str]
    self_driven: ClassVar[bool] = False
    example: ClassVar[dict]
    draw: ClassVar[Draw]

    # ------------------------------------------------------------------------ declaration
    @property
    def label(self) -> str:
        return self.draw.label

    @property
    def default_target(self) -> str | None:
        """The target when the entry gives none (its Params' default), None when it needs one."""
        info = self.Params.model_fields.get("target")
        return None if info is None or info.is_required() else info.default

    def keys(self) -> dict[str, Any]:
        """The keys it takes (YAML spelling) -> their pydantic FieldInfo, in declaration order."""
        return {(f.alias or n): f for n, f in self.Params.model_fields.items()}

    def required(self) -> list[str]:
        return [k for k, f in self.keys().items() if f.is_required()]

    def optional(self) -> list[str]:
        return [k for k, f in self.keys().items() if not f.is_required()]

    def defaults(self) -> dict[str, Any]:
        """Optional keys with a default other than None (applied when the entry leaves them out)."""
        return {k: f.default for k, f in self.keys().items()
                if not f.is_required() and f.default is not None}

    def target_words(self) -> str:
        return " or ".join(TARGET_WORDS[t] for t in self.targets) or "no target"

    # ------------------------------------------------------------------------ validation
    def problems(self, given: dict[str, Any]) -> list[tuple[str | None, str]]:
        """What is wrong with an entry of this fault whose keys already have the right types:
        ``given`` = the keys set (YAML spelling) -> value. Returns (key or None, message)."""
        keys = self.keys()
        missing = [k for k in self.required() if k not in given]
        extra = [k for k in given if k not in keys]
        out: list[tuple[str | None, str]] = []
        if missing:
            out.append((None, f"fault {self.name} needs {', '.join(missing)}"))
        if extra:
            takes = ", ".join(sorted(keys)) or "nothing but at"
            out.append((None, f"fault {self.name} does not take {', '.join(sorted(extra))} "
                              f"(it takes {takes})"))
        target = given.get("target")
        if target is not None and "target" in keys:
            if target_kind(target) not in self.targets:
                out.append(("target", f"fault {self.name} cannot target {target!r} "
                                      f"(it takes {self.target_words()})"))
        out.extend(self.check(given))
        return out

    def check(self, given: dict[str, Any]) -> list[tuple[str | None, str]]:
        """Rules of this fault beyond its keys' types (none by default)."""
        return []

    # ------------------------------------------------------------------------ schedule
    def actions(self, fault) -> list[tuple[float, str]]:
        """(time from the run's start, action) of one validated entry (:class:`chaos.faults.Fault`)."""
        if not self.windowed:
            return [(fault.at, "fire")]
        acts = [(fault.at, "start")]
        if fault.end is not None:
            acts.append((fault.end, "end"))
        return acts

    async def act(self, action: str, targets: Targets, sf, names: list[str]) -> str:
        fn = getattr(self, action, None) if action in ("start", "end", "fire", "restart") else None
        if fn is None:
            raise Skip(f"fault {self.name} has no {action}")
        return await fn(targets, sf, names)

    async def start(self, targets: Targets, sf, names: list[str]) -> str:
        raise Skip(f"fault {self.name} has no start")

    async def end(self, targets: Targets, sf, names: list[str]) -> str:
        raise Skip(f"fault {self.name} has no end")

    async def fire(self, targets: Targets, sf, names: list[str]) -> str:
        raise Skip(f"fault {self.name} has no fire")

    def __repr__(self) -> str:
        return f"<fault {self.name}>"


async def in_thread_if_blocking(fn: Callable, *args) -> Any:
    """Await a coroutine function; run a plain (blocking) one in a worker thread so the loop that
    carries the proxies keeps going."""
    if inspect.iscoroutinefunction(fn):
        return await fn(*args)
    return await asyncio.to_thread(fn, *args)


class HookFault(FaultPackage):
    """A windowed fault applied by an injector inside the instance (watch hooks, API chaos):
    ``start`` activates it there, ``end`` deactivates it. Self-driven: named targets' hooks run it
    from the schedule themselves."""
    self_driven = True

    async def start(self, targets: Targets, sf, names: list[str]) -> str:
        return await each(targets, names, self.injector, lambda h: h.activate(sf))

    async def end(self, targets: Targets, sf, names: list[str]) -> str:
        return await each(targets, names, self.injector, lambda h: h.deactivate(sf.index))
