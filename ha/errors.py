"""Errors the CLI turns into exit codes (2: bad input, 1: a check failed)."""
from __future__ import annotations


class BadInput(Exception):
    """Bad input from the user. The message names the file, the field or object, and the problem."""

    exit_code = 2


class CheckFailed(Exception):
    """A ``--check`` (or similar oracle) found a mismatch."""

    exit_code = 1
