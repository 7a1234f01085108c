"""Build the unmodified ``vc-scheduler`` (``volcano.sh/volcano/cmd/scheduler``) from its Go module.

A pinned version is a Go module of this repository, ``go/volcano/<version>/`` (go.mod + go.sum):
it requires ``volcano.sh/volcano`` at that version, records the scheduler as a ``tool``, and
carries Volcano's own ``replace`` block (replace directives apply only in the main module), with
``volcano.sh/apis`` taken from its own module at the version whose ``pkg/`` tree equals the
staging copy (the staging copy is not in the module zip). ``--source PATH`` generates such a
go.mod in the cache for a local Volcano checkout (``replace volcano.sh/volcano => PATH`` plus
the checkout's replace block, its relative paths made absolute) and builds the user's change.

The binary goes to the user cache (``$XDG_CACHE_HOME/ha-testbed/bin`` or ``~/.cache/ha-testbed/bin``),
named ``vc-scheduler-<version>-<hash of go.mod and go.sum>``; a pinned build is reused when it is
there. Upstream code is used as it is: nothing is copied into the repository or patched.

Errors: an unknown or unbuildable version, or a bad ``--source`` path, raise :class:`BadInput`
naming what is wrong; a failing ``go`` command raises :class:`VolcanoBuildError` carrying Go's own
error. The CLI maps both to exit 2.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ha.errors import BadInput

REPO = Path(__file__).resolve().parents[2]
PINNED_DIR = REPO / "go" / "volcano"
SCHEDULER_PKG = "volcano.sh/volcano/cmd/scheduler"
VERSION_PKG = "volcano.sh/volcano/pkg/version"

# Versions asked for that this machine's Go module proxy does not let us build, and why
# (docs/real-volcano-build.md has the exact commands and errors).
UNBUILDABLE: dict[str, str] = {
    "v1.14.0": "the Go module proxy refuses volcano.sh/volcano@v1.14.0 (403 Forbidden: This module "
               "version is not available); v1.14.1 is built from the same volcano.sh/apis v1.14.0 "
               "and Kubernetes v1.34.1",
    "pr5045": "the Go module proxy refuses PR #5045's head 2053c711409b both as "
              "volcano.sh/volcano@v1.14.0-alpha.1.0.20260303075223-2053c711409b and as "
              "github.com/hajnalmt/volcano@v0.0.0-20260303075223-2053c711409b; build it from a "
              "checkout of branch fix/pipelined-statement-handling with --source PATH",
    "v1.14.2": "the Go module proxy refuses volcano.sh/volcano@v1.14.2",
    "v1.14.3": "the Go module proxy refuses volcano.sh/volcano@v1.14.3",
    "v1.14.4": "the Go module proxy refuses volcano.sh/volcano@v1.14.4",
    "v1.15.0": "its scheduler needs volcano.sh/apis v1.15.0 (it uses QueueAllocationGateKey, new in "
               "1.15), which the Go module proxy refuses, and v1.14.0's API does not compile with it",
    "v1.15.1": "its scheduler needs volcano.sh/apis v1.15.x (it uses QueueAllocationGateKey, new in "
               "1.15), which the Go module proxy refuses (v1.15.0, v1.15.1), and v1.14.0's API does "
               "not compile with it",
}
UNBUILDABLE["pr-5045"] = UNBUILDABLE["pr5045"]


class VolcanoBuildError(Exception):
    """A ``go`` command failed; the message carries Go's own output."""

    exit_code = 2


@dataclass(frozen=True)
class BuildResult:
    binary: Path
    version: str
    cached: bool           # reused a binary already in the cache
    seconds: float


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "ha-testbed"


def pinned_versions() -> list[str]:
    if not PINNED_DIR.is_dir():
        return []
    return sorted(p.name for p in PINNED_DIR.iterdir() if (p / "go.mod").is_file())


def _module_hash(module_dir: Path) -> str:
    h = hashlib.sha256()
    for name in ("go.mod", "go.sum"):
        p = module_dir / name
        h.update(name.encode() + b"\0" + (p.read_bytes() if p.exists() else b"") + b"\0")
    return h.hexdigest()[:16]


def binary_path(version: str) -> Path:
    """Where the pinned ``version``'s binary is (or would be) in the cache."""
    return cache_dir() / "bin" / f"vc-scheduler-{version}-{_module_hash(PINNED_DIR / version)}"


def resolve_version(version: str) -> str:
    """The pinned version directory for ``version`` (``1.14.1`` and ``v1.14.1`` alike)."""
    pinned = pinned_versions()
    v = version if version.startswith(("v", "pr")) else f"v{version}"
    if v in pinned:
        return v
    if v in UNBUILDABLE:
        raise BadInput(f"volcano build: {version} cannot be built here: {UNBUILDABLE[v]}. "
                       f"Buildable: {', '.join(pinned) or 'none'}; or --source PATH")
    raise BadInput(f"volcano build: unknown version {version!r}; buildable: {', '.join(pinned) or 'none'} "
                   f"(or --source PATH for a local Volcano checkout)")


# --------------------------------------------------------------------------- go.mod for a checkout

_REPLACE_BLOCK = re.compile(r"^replace\s*\((.*?)^\)", re.S | re.M)
_REPLACE_LINE = re.compile(r"^replace\s+(.+)$", re.M)


def source_go_mod(source: Path) -> str:
    """The go.mod of a build module for the checkout at ``source``: Volcano's replace block
    (relative paths made absolute against the checkout) plus ``volcano.sh/volcano => source``."""
    text = (source / "go.mod").read_text()
    m = re.search(r"^module\s+(\S+)", text, re.M)
    if not m or m.group(1) != "volcano.sh/volcano":
        raise BadInput(f"volcano build --source: {source / 'go.mod'} is not Volcano's "
                       f"(module {m.group(1) if m else '?'}; want volcano.sh/volcano)")
    go_line = re.search(r"^go\s+(\S+)", text, re.M)
    lines = []
    for block in _REPLACE_BLOCK.findall(text):
        lines += [ln.strip() for ln in block.splitlines()]
    lines += [ln.strip() for ln in _REPLACE_LINE.findall(text) if not ln.strip().startswith("(")]
    replaces = []
    for ln in lines:
        ln = ln.split("//", 1)[0].strip()
        if not ln or "=>" not in ln:
            continue
        left, right = (s.strip() for s in ln.split("=>", 1))
        if left.split()[0] == "volcano.sh/volcano":
            continue
        target = right.split()
        if target[0].startswith(("./", "../")):      # a local path: relative to the checkout
            right = str((source / target[0]).resolve())
        replaces.append(f"\t{left} => {right}")
    return "\n".join([
        "// Generated by ha-testbed volcano build --source: builds the checkout's vc-scheduler.",
        "module ha-testbed/volcano/source",
        "",
        f"go {go_line.group(1) if go_line else '1.24.0'}",
        "",
        "require volcano.sh/volcano v0.0.0-00010101000000-000000000000",
        "",
        f"tool {SCHEDULER_PKG}",
        "",
        "replace (",
        f"\tvolcano.sh/volcano => {source}",
        *replaces,
        ")",
        "",
    ])


def prepare_source(source: Path, log: Callable[[str], None]) -> Path:
    """A build module for the checkout, in the cache; returns its directory."""
    source = Path(source).expanduser()
    if not source.exists():
        raise BadInput(f"volcano build --source: {source} does not exist")
    source = source.resolve()
    if not (source / "go.mod").is_file():
        raise BadInput(f"volcano build --source: {source} has no go.mod (want a Volcano checkout)")
    if not (source / "cmd" / "scheduler").is_dir():
        raise BadInput(f"volcano build --source: {source} has no cmd/scheduler (want a Volcano checkout)")
    mod = source_go_mod(source)
    key = hashlib.sha256(str(source).encode()).hexdigest()[:12]
    work = cache_dir() / "volcano-source" / key
    work.mkdir(parents=True, exist_ok=True)
    if not (work / "go.mod").exists() or (work / "go.mod").read_text() != mod:
        (work / "go.mod").write_text(mod)
        if (source / "go.sum").exists():
            shutil.copyfile(source / "go.sum", work / "go.sum")
        log(f"generated {work / 'go.mod'} (replace volcano.sh/volcano => {source})")
        _run(["go", "mod", "tidy"], work, log, "resolving the module graph (go mod tidy)")
    return work


# --------------------------------------------------------------------------- running go

def _go() -> str:
    go = shutil.which("go")
    if go is None:
        raise VolcanoBuildError("Go is not installed (no `go` on PATH): vc-scheduler cannot be built")
    return go


def _run(cmd: list[str], cwd: Path, log: Callable[[str], None], what: str, *, env: dict | None = None,
         progress: bool = False) -> None:
    """Run a go command, streaming its -v package lines as progress; raise with Go's error."""
    cmd = [_go(), *cmd[1:]] if cmd[0] == "go" else cmd
    log(f"{what}: {' '.join(['go', *cmd[1:]])} (in {cwd})")
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env or os.environ.copy(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, bufsize=1)
    tail: list[str] = []
    packages = 0
    last = t0
    for line in proc.stdout:
        line = line.rstrip("\n")
        tail.append(line)
        del tail[:-200]
        if progress and line and not line.startswith(("#", " ", "\t")) and ":" not in line:
            packages += 1           # `go build -v` names each package as it compiles it
            now = time.monotonic()
            if now - last >= 10 or packages % 100 == 0:
                log(f"  {packages} packages compiled, {now - t0:.0f}s: {line}")
                last = now
    code = proc.wait()
    if code != 0:
        errors = [ln for ln in tail if ln and not (progress and ":" not in ln and not ln.startswith("#"))]
        raise VolcanoBuildError(f"{what} failed (`{' '.join(['go', *cmd[1:]])}` exit {code}):\n"
                                + "\n".join(errors[-60:]))
    log(f"  done in {time.monotonic() - t0:.0f}s" + (f" ({packages} packages compiled)" if progress else ""))


def _compile(module_dir: Path, out: Path, version: str, log: Callable[[str], None]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    env = dict(os.environ, CGO_ENABLED="0")
    _run(["go", "mod", "download"], module_dir, log, "downloading modules", env=env)
    ldflags = f"-X {VERSION_PKG}.Version={version}"
    try:
        _run(["go", "build", "-v", "-trimpath", "-ldflags", ldflags, "-o", str(tmp), SCHEDULER_PKG],
             module_dir, log, f"building vc-scheduler {version} (CGO_ENABLED=0)", env=env, progress=True)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, out)


def build(version: str | None = None, source: Path | str | None = None, *,
          log: Callable[[str], None] = print, force: bool = False) -> BuildResult:
    """Build vc-scheduler (a pinned ``version``, or the checkout at ``source``) into the cache."""
    t0 = time.monotonic()
    if (version is None) == (source is None):
        raise BadInput("volcano build: give a VERSION or --source PATH (not both)")
    if source is not None:
        work = prepare_source(Path(source), log)
        out = cache_dir() / "bin" / f"vc-scheduler-source-{work.name}"
        _compile(work, out, f"source:{Path(source).resolve()}", log)      # go build is incremental
        return BuildResult(out, "source", False, time.monotonic() - t0)
    v = resolve_version(version)
    out = binary_path(v)
    if out.exists() and not force:
        log(f"vc-scheduler {v} is already built: {out}")
        return BuildResult(out, v, True, time.monotonic() - t0)
    _compile(PINNED_DIR / v, out, v, log)
    return BuildResult(out, v, False, time.monotonic() - t0)


def check_binary(binary: Path, timeout: float = 60) -> str:
    """Run ``binary --version``; its output (the binary starts), or VolcanoBuildError."""
    proc = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0 or "Version:" not in proc.stdout:
        raise VolcanoBuildError(f"{binary} --version failed (exit {proc.returncode}): "
                                f"{(proc.stderr or proc.stdout).strip()[-2000:]}")
    return proc.stdout.strip()


def build_cli(version: str | None, source: str | None, *, force: bool = False,
              echo: Callable[[str], None] = print, out: Callable[[str], None] = print) -> int:
    """Progress goes to ``echo``; the binary's --version and its path (last line) to ``out``."""
    res = build(version, source, log=echo, force=force)
    echo(check_binary(res.binary))
    echo("cached" if res.cached else f"built in {res.seconds:.0f}s")
    out(str(res.binary))
    return 0


if __name__ == "__main__":
    sys.exit(build_cli(sys.argv[1] if len(sys.argv) > 1 else None, None))
