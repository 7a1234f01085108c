"""Kubernetes protobuf request bodies -> JSON dicts, through the real codecs.

client-go >= 0.32 sends the bodies of its typed clients for built-in types (Pod status
updates, Lease create/update, DeleteOptions on delete) as ``application/vnd.kubernetes.protobuf``
and cannot be told otherwise. The front decodes them with a small Go program of this
repository, ``go/k8sproto`` (k8s.io/apimachinery's protobuf serializer over client-go's
scheme, then ``json.Marshal`` with apiVersion and kind set), so a body decodes exactly as a
kube-apiserver would read it: Quantity, Time, MicroTime and IntOrString included.

Contract:

* ``available() -> str | None`` -- None when bodies can be decoded (or the decoder is being
  built and may be), else the reason: Go is missing, or the build failed (Go's own error).
  It never blocks: a missing binary is built in a background thread.
* ``async decode(body) -> dict`` -- a body (``k8s\\x00`` + ``runtime.Unknown``) -> the object's
  JSON dict with ``apiVersion`` and ``kind``. Raises :class:`ProtobufError` naming what is
  malformed (the front answers 400); :class:`ProtobufUnavailable` (a ProtobufError) when the
  decoder cannot be built or run (the front should answer 415).
* ``async encode(obj) -> bytes`` -- the reverse (a JSON dict with apiVersion/kind -> wire bytes),
  used by the tests to produce real protobuf bodies.
* ``build_go_program(module_dir)`` -- ``go build`` a Go module of ``go/`` into the user cache
  (``$XDG_CACHE_HOME/ha-testbed/bin`` or ``~/.cache/ha-testbed/bin``), keyed by a hash of its
  go.mod, go.sum and sources; binaries never live in the repository. Raises :class:`GoBuildError`
  carrying Go's output. ``python -m kube_api.protobuf build DIR...`` does it from a shell (CI).

One transcoder process serves the whole Python process (any number of event loops and threads):
requests are framed on its stdin/stdout one at a time under a lock, in a worker thread so no
event loop ever blocks on it. It is stopped by its PID at exit, and restarted if it dies.
"""
from __future__ import annotations

import asyncio
import atexit
import fcntl
import hashlib
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
K8SPROTO_DIR = REPO / "go" / "k8sproto"
MAGIC = b"k8s\x00"
_HEADER = struct.Struct(">cI")


class ProtobufError(Exception):
    """A protobuf body that cannot be decoded; the message names what is wrong."""


class ProtobufUnavailable(ProtobufError):
    """The decoder itself cannot run here (Go missing, build failed, process died)."""


class GoBuildError(Exception):
    """``go build`` failed or Go is missing; ``str()`` carries Go's own output."""


# --------------------------------------------------------------------------- building

def cache_dir() -> Path:
    """Where built Go programs live: outside the repository, like Go's own caches."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "ha-testbed" / "bin"


def source_hash(module_dir: Path) -> str:
    """A hash of what the binary is built from: go.mod, go.sum and every .go file."""
    h = hashlib.sha256()
    files = [module_dir / "go.mod", module_dir / "go.sum"]
    files += sorted(p for p in module_dir.rglob("*.go") if "testdata" not in p.parts)
    for p in files:
        if p.exists():
            h.update(str(p.relative_to(module_dir)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def binary_path(module_dir: Path, name: str | None = None) -> Path:
    name = name or module_dir.name
    return cache_dir() / f"{name}-{source_hash(module_dir)}"


def go_binary() -> str | None:
    return shutil.which("go")


def build_go_program(module_dir: Path, name: str | None = None, *, log=None) -> Path:
    """Build the Go module at ``module_dir`` into the cache unless it is there; return the binary.

    Concurrent builders (threads or processes) wait on a file lock and reuse the result."""
    module_dir = Path(module_dir).resolve()
    out = binary_path(module_dir, name)
    if out.exists():
        return out
    go = go_binary()
    if go is None:
        raise GoBuildError(f"Go is not installed (no `go` on PATH): cannot build {module_dir.name}")
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.parent / f".{out.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if out.exists():
            return out
        tmp = out.with_name(out.name + f".tmp{os.getpid()}")
        cmd = [go, "build", "-trimpath", "-o", str(tmp), "."]
        if log:
            log(f"building {module_dir.relative_to(REPO) if module_dir.is_relative_to(REPO) else module_dir}"
                f" -> {out} ({' '.join(cmd[:3])} ...)")
        env = dict(os.environ, CGO_ENABLED="0")
        proc = subprocess.run(cmd, cwd=module_dir, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            tmp.unlink(missing_ok=True)
            raise GoBuildError(f"`go build` of {module_dir.name} failed (exit {proc.returncode}):\n"
                               f"{(proc.stderr or proc.stdout).strip()}")
        os.replace(tmp, out)
    return out


# --------------------------------------------------------------------------- the transcoder

@dataclass
class _State:
    lock: threading.Lock
    proc: subprocess.Popen | None = None
    build_error: str | None = None
    building: threading.Thread | None = None
    binary: Path | None = None       # known built: available() then costs no file reads


_state = _State(threading.Lock())
_build_lock = threading.Lock()


def _ensure_binary() -> Path:
    with _build_lock:
        if _state.build_error:
            raise ProtobufUnavailable(_state.build_error)
        try:
            _state.binary = build_go_program(K8SPROTO_DIR, "k8sproto")
            return _state.binary
        except GoBuildError as e:
            _state.build_error = f"the protobuf decoder (go/k8sproto) is not available: {e}"
            raise ProtobufUnavailable(_state.build_error) from None


def available() -> str | None:
    if _state.build_error:
        return _state.build_error
    if _state.binary is not None:
        return None
    if binary_path(K8SPROTO_DIR, "k8sproto").exists():
        _state.binary = binary_path(K8SPROTO_DIR, "k8sproto")
        return None
    if go_binary() is None:
        return "Go is not installed (no `go` on PATH), so the protobuf decoder (go/k8sproto) cannot be built"
    if _state.building is None:
        t = threading.Thread(target=_build_quietly, name="k8sproto-build", daemon=True)
        _state.building = t
        t.start()
    return None


def _build_quietly() -> None:
    try:
        _ensure_binary()
    except ProtobufUnavailable:
        pass       # recorded in _state.build_error; available() reports it


def _start() -> subprocess.Popen:
    binary = _ensure_binary()
    proc = subprocess.Popen([str(binary)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    _running_pids.add(proc.pid)
    return proc


def _stop(proc: subprocess.Popen) -> None:
    _running_pids.discard(proc.pid)
    if proc.poll() is None:
        try:
            os.kill(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    try:
        proc.wait(timeout=2)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    for f in (proc.stdin, proc.stdout, proc.stderr):
        if f:
            f.close()


def _request(op: bytes, payload: bytes) -> bytes:
    """One framed round trip; the reply payload, or ProtobufError with the transcoder's message."""
    with _state.lock:
        if _state.proc is None or _state.proc.poll() is not None:
            _state.proc = _start()
        proc = _state.proc
        try:
            proc.stdin.write(_HEADER.pack(op, len(payload)) + payload)
            proc.stdin.flush()
            head = proc.stdout.read(_HEADER.size)
            if len(head) < _HEADER.size:
                raise EOFError
            status, n = _HEADER.unpack(head)
            out = proc.stdout.read(n)
            if len(out) < n:
                raise EOFError
        except (EOFError, BrokenPipeError, OSError):
            _state.proc = None
            proc.kill()
            err = (proc.stderr.read() or b"").decode(errors="replace").strip()
            _stop(proc)
            raise ProtobufUnavailable(f"the protobuf transcoder (pid {proc.pid}) stopped: {err[-2000:] or 'no output'}")
    if status == b"O":
        return out
    raise ProtobufError(out.decode(errors="replace"))


def decode_sync(body: bytes) -> dict:
    if not isinstance(body, (bytes, bytearray, memoryview)):
        raise ProtobufError(f"a protobuf body must be bytes, got {type(body).__name__}")
    body = bytes(body)
    if not body.startswith(MAGIC):
        raise ProtobufError(f"not a Kubernetes protobuf body: it must start with the bytes 6b 38 73 00 "
                            f"(\"k8s\\x00\"), got {body[:8].hex(' ') or 'an empty body'}")
    out = json.loads(_request(b"D", body))
    if not isinstance(out, dict):
        raise ProtobufError(f"the body decoded to a {type(out).__name__}, not an object")
    return out


def encode_sync(obj: dict) -> bytes:
    if not isinstance(obj, dict) or not obj.get("apiVersion") or not obj.get("kind"):
        raise ProtobufError("an object to encode must be a dict with apiVersion and kind")
    return _request(b"E", json.dumps(obj).encode())


async def decode(body: bytes) -> dict:
    return await asyncio.to_thread(decode_sync, body)


async def encode(obj: dict) -> bytes:
    return await asyncio.to_thread(encode_sync, obj)


def transcoder_pid() -> int | None:
    """The PID of the running transcoder, if one runs (for tests and diagnostics)."""
    p = _state.proc
    return p.pid if p is not None and p.poll() is None else None


def stop() -> None:
    """Stop the transcoder (by its PID); the next decode starts a new one."""
    with _state.lock:
        if _state.proc is not None:
            _stop(_state.proc)
            _state.proc = None


_running_pids: set[int] = set()


@atexit.register
def _stop_at_exit() -> None:
    for pid in list(_running_pids):
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] != "build":
        print("usage: python -m kube_api.protobuf build GO_MODULE_DIR...", file=sys.stderr)
        return 2
    for d in argv[1:]:
        path = Path(d)
        if not (path / "go.mod").is_file():
            print(f"error: {d}: no go.mod there", file=sys.stderr)
            return 2
        try:
            out = build_go_program(path, log=lambda m: print(m, flush=True))
        except GoBuildError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        print(f"ok: {out}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
