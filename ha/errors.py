"""Errors the CLI turns into exit codes (2: bad input, 1: a check failed)."""
from __future__ import annotations

from apimachinery.errors import BadInput

__all__ = ["BadInput", "CheckFailed"]


class CheckFailed(Exception):
    """A ``--check`` (or similar oracle) found a mismatch."""

    exit_code = 1
