"""The base of every bad-input error (exit code 2), shared by the API server's typed errors
(``cluster_state.errors.BadRequest`` / ``Invalid``) and the testbed's own (``ha.errors``), so the
CLI maps both the same way while neither package imports the other."""
from __future__ import annotations

__all__ = ["BadInput"]


class BadInput(Exception):
    """Bad input from the user. The message names the file, the field or object, and the problem."""

    exit_code = 2
