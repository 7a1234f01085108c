"""What the real-scheduler tests share: the vc-scheduler binary, or the test skipped saying why.

Skipped when the binary is not built and Go is missing, or when it is not built and
``HA_TESTBED_BUILD_VOLCANO`` is unset (a cold build takes many minutes). With the variable set
(CI sets it where Go is installed) the binary is built first, and a build that fails fails the
test with Go's error instead of skipping it.
"""
from __future__ import annotations

import os
import shutil

import pytest

__all__ = ["binary_or_skip"]


def binary_or_skip(version: str = "v1.14.1") -> None:
    from ha.runtime.external.volcano import built_binary
    if built_binary(version) is not None:
        return
    if shutil.which("go") is None:
        pytest.skip(f"vc-scheduler {version} is not built and Go is not installed")
    if not os.environ.get("HA_TESTBED_BUILD_VOLCANO"):
        pytest.skip(f"vc-scheduler {version} is not built (`ha-testbed volcano build {version}`, or set "
                    "HA_TESTBED_BUILD_VOLCANO=1 to build it here)")
    from ha.volcano.build import build
    build(version)
