"""docker-compose.yml: valid for docker-compose (when the binary exists), nothing published on the
host's 0.0.0.0, and every command its services run exists (ha-testbed's CLI, ray start's flags)."""
from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest
import typer.main
import yaml

from ha.cli import app

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
SERVICES = {"redis", "ray-head", "ray-worker", "runner"}


def _compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def _command(svc: dict) -> list[str]:
    cmd = svc.get("command")
    return shlex.split(cmd) if isinstance(cmd, str) else list(cmd or [])


def _published(svc: dict) -> list[str]:
    out = []
    for p in svc.get("ports") or []:
        if isinstance(p, dict):
            out.append(f"{p.get('host_ip', '')}:{p.get('published', '')}:{p.get('target', '')}")
        else:
            out.append(str(p))
    return out


def test_services_and_no_host_exposure():
    doc = _compose()
    assert SERVICES <= set(doc["services"])
    for name, svc in doc["services"].items():
        for p in _published(svc):
            # only loopback publishing is acceptable: "127.0.0.1:HOST:CONTAINER"
            assert p.startswith("127.0.0.1:"), f"service {name} publishes {p} beyond loopback"
        assert svc.get("network_mode") != "host", f"service {name} uses the host network"


def test_runner_command_exists_in_cli():
    doc = _compose()
    argv = _command(doc["services"]["runner"])
    assert argv[0] == "ha-testbed", argv
    group = typer.main.get_command(app)
    ctx = click.Context(group)
    cmd = group.get_command(ctx, argv[1])
    assert cmd is not None, f"ha-testbed has no command {argv[1]!r}"
    opts = {o for p in cmd.params for o in getattr(p, "opts", []) if o.startswith("--")}
    used = [a for a in argv[2:] if a.startswith("--")]
    assert {"--redis-url", "--ray-address"} <= set(used)
    for a in used:
        assert a.split("=")[0] in opts, f"ha-testbed {argv[1]} has no option {a}"
    # click parses the whole command line as the CLI would
    cmd.make_context(argv[1], argv[2:])
    # the experiment it runs is in the repo (the image copies examples/)
    exp = next(a for a in argv[2:] if a.endswith(".yaml"))
    assert (ROOT / exp).is_file(), exp
    assert "redis://redis:" in " ".join(argv) and "ray://ray-head:" in " ".join(argv)


def test_ray_commands_use_existing_flags():
    doc = _compose()
    ray_bin = Path(sys.executable).with_name("ray")
    if not ray_bin.exists():
        pytest.skip(f"the ray CLI is not installed next to {sys.executable}")
    help_text = subprocess.run([str(ray_bin), "start", "--help"], capture_output=True, text=True,
                               timeout=120).stdout
    for name in ("ray-head", "ray-worker"):
        argv = _command(doc["services"][name])
        assert argv[:2] == ["ray", "start"], argv
        for a in argv[2:]:
            flag = a.split("=")[0]
            assert flag in help_text, f"{name}: `ray start` has no flag {flag}"
    assert "--head" in _command(doc["services"]["ray-head"])
    assert any(a.startswith("--address=ray-head:") for a in _command(doc["services"]["ray-worker"]))


def test_dockerfile_builds_what_the_services_use():
    doc = _compose()
    build = doc["services"]["ray-head"]["build"]
    dockerfile = ROOT / build["context"] / build["dockerfile"]
    text = dockerfile.read_text()
    assert "pip install ." in text and "COPY examples" in text
    image = doc["services"]["ray-head"]["image"]
    assert doc["services"]["runner"]["image"] == image == doc["services"]["ray-worker"]["image"]


def test_docker_compose_config_validates():
    exe = shutil.which("docker-compose")
    if exe is None:
        pytest.skip("docker-compose is not installed (Debian package docker-compose; .ci/run installs it)")
    r = subprocess.run([exe, "-f", str(COMPOSE), "config"], capture_output=True, text=True,
                       timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    normal = yaml.safe_load(r.stdout)
    assert SERVICES <= set(normal["services"])


def test_docker_compose_rejects_a_broken_file(tmp_path):
    # the check above can fail: a bogus key makes docker-compose config exit non-zero
    exe = shutil.which("docker-compose")
    if exe is None:
        pytest.skip("docker-compose is not installed (Debian package docker-compose; .ci/run installs it)")
    doc = _compose()
    doc["services"]["redis"]["bogus_key"] = 1
    bad = tmp_path / "docker-compose.yml"
    bad.write_text(yaml.safe_dump(doc))
    r = subprocess.run([exe, "-f", str(bad), "config"], capture_output=True, text=True, timeout=120,
                       cwd=tmp_path)
    assert r.returncode != 0 and "bogus_key" in (r.stderr + r.stdout)
