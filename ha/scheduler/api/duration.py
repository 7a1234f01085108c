"""Go's ``time.ParseDuration`` for the durations Volcano reads from arguments and annotations
(``sla-waiting-time: 1h2m3s4ms5us6ns``): a signed sequence of decimal numbers, each with a unit
``ns``, ``us``/``µs``, ``ms``, ``s``, ``m``, ``h``; a bare ``0`` is zero. Results are seconds."""
from __future__ import annotations

import re

__all__ = ["parse_go_duration", "GoDurationError"]

_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


class GoDurationError(ValueError):
    """Not a Go duration (time.ParseDuration would return an error)."""


def parse_go_duration(text: str) -> float:
    if not isinstance(text, str):
        raise GoDurationError(f"time: invalid duration {text!r}")
    s = text
    sign = 1.0
    if s[:1] in "+-" and s:
        sign = -1.0 if s[0] == "-" else 1.0
        s = s[1:]
    if s == "0":
        return 0.0
    if not s:
        raise GoDurationError(f"time: invalid duration {text!r}")
    total, pos = 0.0, 0
    while pos < len(s):
        m = _PART.match(s, pos)
        if m is None:
            raise GoDurationError(f"time: invalid duration {text!r}")
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    return sign * total
