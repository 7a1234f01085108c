"""ha-testbed volcano build: bad input exits 2 with a clear message; the pinned build module
carries Volcano's own replace block; --source generates the right go.mod; a real build (too slow
for the suite on a cold cache) runs when the binary is already cached or HA_TESTBED_BUILD_VOLCANO
is set."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ha.volcano import build as vb

CLI = [sys.executable, "-c", "import sys; from ha.cli import main; sys.exit(main())"]


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, "volcano", "build", *args], capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("args, words", [
    (["v9.9.9"], "unknown version 'v9.9.9'; buildable: v1.14.1"),
    (["v1.14.0"], "v1.14.0 cannot be built here: the Go module proxy refuses volcano.sh/volcano@v1.14.0"),
    (["pr5045"], "--source PATH"),
    (["v1.15.1"], "QueueAllocationGateKey"),
    (["--source", "/nonexistent/volcano"], "/nonexistent/volcano does not exist"),
    ([], "give a VERSION or --source PATH"),
    (["v1.14.1", "--source", "/tmp"], "give a VERSION or --source PATH (not both)"),
])
def test_bad_input_exits_2_with_a_clear_message(args, words):
    r = cli(*args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert words in r.stderr
    assert r.stdout == ""


def test_source_that_is_not_a_volcano_checkout(tmp_path):
    r = cli("--source", str(tmp_path))
    assert r.returncode == 2 and "has no go.mod" in r.stderr
    (tmp_path / "go.mod").write_text("module example.com/other\n\ngo 1.24.0\n")
    (tmp_path / "cmd" / "scheduler").mkdir(parents=True)
    r = cli("--source", str(tmp_path))
    assert r.returncode == 2 and "is not Volcano's (module example.com/other" in r.stderr


def test_source_go_mod_carries_the_checkouts_replaces_with_absolute_paths(tmp_path):
    (tmp_path / "go.mod").write_text(
        "module volcano.sh/volcano\n\ngo 1.24.0\n\nrequire k8s.io/api v0.0.0\n\n"
        "replace (\n\tk8s.io/api => k8s.io/api v0.34.1\n\t// a comment line\n"
        "\tvolcano.sh/apis => ./staging/src/volcano.sh/apis\n)\n"
        "replace google.golang.org/grpc => google.golang.org/grpc v1.64.0\n")
    mod = vb.source_go_mod(tmp_path)
    assert "go 1.24.0" in mod
    assert f"\tvolcano.sh/volcano => {tmp_path.resolve()}\n" in mod
    assert "\tk8s.io/api => k8s.io/api v0.34.1\n" in mod
    assert f"\tvolcano.sh/apis => {tmp_path.resolve() / 'staging/src/volcano.sh/apis'}\n" in mod
    assert "\tgoogle.golang.org/grpc => google.golang.org/grpc v1.64.0\n" in mod
    assert "tool volcano.sh/volcano/cmd/scheduler" in mod
    assert "comment" not in mod


def _replaces(text: str) -> dict[str, str]:
    block = re.search(r"^replace\s*\((.*?)^\)", text, re.S | re.M).group(1)
    out = {}
    for ln in block.splitlines():
        ln = ln.split("//", 1)[0].strip()
        if "=>" in ln:
            left, right = (s.strip() for s in ln.split("=>", 1))
            out[left] = right
    return out


@pytest.mark.parametrize("version", vb.pinned_versions())
def test_pinned_module_carries_volcanos_own_replace_block(version):
    """The pinned go.mod's replaces are Volcano's, but volcano.sh/apis from its own module."""
    if shutil.which("go") is None:
        pytest.skip("Go is not installed (no `go` on PATH)")
    ours = (vb.PINNED_DIR / version / "go.mod").read_text()
    assert re.search(rf"^\s*(require\s+)?volcano.sh/volcano {re.escape(version)}\b", ours, re.M)
    assert "tool volcano.sh/volcano/cmd/scheduler" in ours
    r = subprocess.run(["go", "mod", "download", "-json", f"volcano.sh/volcano@{version}"],
                       capture_output=True, text=True, timeout=300, cwd=vb.PINNED_DIR / version)
    info = json.loads(r.stdout)
    assert "Error" not in info, info
    upstream = _replaces(Path(info["GoMod"]).read_text())
    assert upstream.pop("volcano.sh/apis") == "./staging/src/volcano.sh/apis"
    mine = _replaces(ours)
    assert mine.pop("volcano.sh/apis").startswith("volcano.sh/apis v1.")
    assert mine == upstream


@pytest.mark.timeout(7200)
def test_real_build_starts():
    """Build the smallest buildable version (or reuse it) and run --version and --help."""
    version = vb.pinned_versions()[0]
    binary = vb.binary_path(version)
    if not binary.exists() and not os.environ.get("HA_TESTBED_BUILD_VOLCANO"):
        pytest.skip(f"vc-scheduler {version} is not in the cache ({binary}) and HA_TESTBED_BUILD_VOLCANO is "
                    f"unset: a cold build takes many minutes (ha-testbed volcano build {version})")
    if shutil.which("go") is None and not binary.exists():
        pytest.skip("Go is not installed (no `go` on PATH)")
    r = cli(version, timeout=7000)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip().splitlines()[-1] == str(binary)
    assert f"Version: {version}" in r.stderr
    # pflag prints the usage and exits 2 on --help
    out = subprocess.run([str(binary), "--help"], capture_output=True, text=True, timeout=60)
    assert "Usage of" in out.stdout + out.stderr
    for flag in ("--scheduler-conf", "--leader-elect", "--kubeconfig", "--master"):
        assert flag in out.stdout + out.stderr
