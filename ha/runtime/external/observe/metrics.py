"""vc-scheduler's ``/metrics`` page (Prometheus text format 0.0.4), parsed, and the scheduler's
own figures taken from it.

* :func:`parse_prometheus` -- the text -> ``{family: [Sample]}`` (a histogram's ``_bucket`` /
  ``_sum`` / ``_count`` samples are kept under their own names); comments, ``# TYPE`` lines,
  escaped label values (``\\\\``, ``\\"``, ``\\n``), ``+Inf`` / ``-Inf`` / ``NaN`` and optional
  timestamps are handled. A malformed line raises :class:`MetricsFormatError` naming its number.
* :func:`volcano_figures` -- the samples -> one record of what the testbed keeps
  (``pkg/scheduler/metrics/metrics.go``, v1.14):

  ``e2e_scheduling_latency_ms``   ``volcano_e2e_scheduling_latency_milliseconds``: one observation
                                  per session: ``{"count", "sum", "buckets": [[le, cumulative], ...]}``
  ``action_latency_ms``           ``volcano_action_scheduling_latency_milliseconds{action}``: the same
                                  per action
  ``pod_preemption_victims``      ``volcano_pod_preemption_victims`` (a gauge: the last session's)
  ``total_preemption_attempts``   ``volcano_total_preemption_attempts`` (a counter)
  ``sessions``                    the e2e histogram's count: the sessions run so far

  A family the page does not carry is left out of the record (never a zero): the caller records
  it as not observed. Counters start again at each process life.
* :class:`MetricsScraper` -- GETs the page (urllib; a short timeout) and returns the record;
  :class:`MetricsUnavailable` says why it could not.
* :func:`histogram_quantile` -- a quantile from cumulative buckets, as PromQL's
  ``histogram_quantile`` interpolates.
"""
from __future__ import annotations

import math
import re
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

__all__ = ["Sample", "MetricsFormatError", "MetricsUnavailable", "parse_prometheus", "volcano_figures",
           "histogram_quantile", "MetricsScraper", "E2E_LATENCY", "ACTION_LATENCY", "PREEMPTION_VICTIMS",
           "PREEMPTION_ATTEMPTS"]

E2E_LATENCY = "volcano_e2e_scheduling_latency_milliseconds"
ACTION_LATENCY = "volcano_action_scheduling_latency_milliseconds"
PREEMPTION_VICTIMS = "volcano_pod_preemption_victims"
PREEMPTION_ATTEMPTS = "volcano_total_preemption_attempts"


class MetricsFormatError(ValueError):
    """A /metrics page that is not the Prometheus text format; names the line."""


class MetricsUnavailable(RuntimeError):
    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Sample:
    name: str
    labels: tuple[tuple[str, str], ...]
    value: float
    timestamp_ms: int | None = None

    def label(self, key: str) -> str | None:
        for k, v in self.labels:
            if k == key:
                return v
        return None


_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL = re.compile(r"\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*\"")
_ESC = {"\\": "\\", '"': '"', "n": "\n"}


def _value(tok: str, lineno: int) -> float:
    t = tok.strip()
    low = t.lower()
    if low in ("+inf", "inf"):
        return math.inf
    if low == "-inf":
        return -math.inf
    if low == "nan":
        return math.nan
    try:
        return float(t)
    except ValueError:
        raise MetricsFormatError(f"line {lineno}: {t!r:.40} is not a sample value") from None


def _labels(line: str, i: int, lineno: int) -> tuple[tuple[tuple[str, str], ...], int]:
    """Parse ``{k="v",...}`` starting after the ``{`` at ``i``; returns (labels, index after ``}``)."""
    out: list[tuple[str, str]] = []
    n = len(line)
    while True:
        while i < n and line[i] in " \t":
            i += 1
        if i < n and line[i] == "}":
            return tuple(out), i + 1
        m = _LABEL.match(line, i)
        if not m:
            raise MetricsFormatError(f"line {lineno}: malformed label at column {i + 1}")
        key, i = m.group(1), m.end()
        buf: list[str] = []
        while True:
            if i >= n:
                raise MetricsFormatError(f"line {lineno}: unterminated label value of {key!r}")
            c = line[i]
            if c == "\\":
                if i + 1 >= n:
                    raise MetricsFormatError(f"line {lineno}: dangling escape in label {key!r}")
                buf.append(_ESC.get(line[i + 1], "\\" + line[i + 1]))
                i += 2
            elif c == '"':
                i += 1
                break
            else:
                buf.append(c)
                i += 1
        out.append((key, "".join(buf)))
        while i < n and line[i] in " \t":
            i += 1
        if i < n and line[i] == ",":
            i += 1
        elif i < n and line[i] == "}":
            continue
        else:
            raise MetricsFormatError(f"line {lineno}: expected ',' or '}}' after label {key!r}")


def parse_prometheus(text: str) -> dict[str, list[Sample]]:
    """Every sample of the page, by sample name (in page order)."""
    out: dict[str, list[Sample]] = {}
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = _NAME.match(line)
        if not m:
            raise MetricsFormatError(f"line {lineno}: {line!r:.60} does not start with a metric name")
        name, i = m.group(0), m.end()
        labels: tuple[tuple[str, str], ...] = ()
        if i < len(line) and line[i] == "{":
            labels, i = _labels(line, i + 1, lineno)
        rest = line[i:].split()
        if not rest or len(rest) > 2:
            raise MetricsFormatError(f"line {lineno}: expected a value (and an optional timestamp) after {name}")
        ts = None
        if len(rest) == 2:
            try:
                ts = int(rest[1])
            except ValueError:
                raise MetricsFormatError(f"line {lineno}: {rest[1]!r:.40} is not a timestamp") from None
        out.setdefault(name, []).append(Sample(name, labels, _value(rest[0], lineno), ts))
    return out


def _num(v: float) -> float | int | None:
    if not math.isfinite(v):
        return None
    return int(v) if float(v).is_integer() else round(v, 6)


def _histogram(samples: Mapping[str, list[Sample]], family: str, by: str | None) -> dict[Any, dict[str, Any]]:
    """{label value (or None): {"count", "sum", "buckets"}} of one histogram family."""
    out: dict[Any, dict[str, Any]] = {}
    for s in samples.get(f"{family}_bucket", ()):
        le = s.label("le")
        if le is None:
            continue
        h = out.setdefault(s.label(by) if by else None, {"buckets": []})
        h["buckets"].append([le if le == "+Inf" else _num(_value(le, 0)), _num(s.value)])
    for suffix in ("sum", "count"):
        for s in samples.get(f"{family}_{suffix}", ()):
            out.setdefault(s.label(by) if by else None, {"buckets": []})[suffix] = _num(s.value)
    for h in out.values():
        h["buckets"].sort(key=lambda b: math.inf if b[0] == "+Inf" else b[0])
    return out


def volcano_figures(samples: Mapping[str, list[Sample]]) -> dict[str, Any]:
    """The record the testbed keeps of one scrape (see the module docstring)."""
    rec: dict[str, Any] = {}
    e2e = _histogram(samples, E2E_LATENCY, None).get(None)
    if e2e is not None and "count" in e2e:
        rec["e2e_scheduling_latency_ms"] = e2e
        rec["sessions"] = e2e["count"]
    actions = _histogram(samples, ACTION_LATENCY, "action")
    if actions:
        rec["action_latency_ms"] = {a: h for a, h in sorted(actions.items()) if a is not None}
    for key, family in (("pod_preemption_victims", PREEMPTION_VICTIMS),
                        ("total_preemption_attempts", PREEMPTION_ATTEMPTS)):
        ss = samples.get(family)
        if ss:
            rec[key] = _num(sum(s.value for s in ss))
    return rec


def histogram_quantile(q: float, buckets: Iterable[Iterable[Any]]) -> float | None:
    """PromQL's ``histogram_quantile`` over cumulative ``[[le, count], ...]`` (None: no observations)."""
    bs = [(math.inf if le == "+Inf" else float(le), float(c)) for le, c in buckets]
    bs.sort()
    if not bs or bs[-1][1] <= 0:
        return None
    rank = q * bs[-1][1]
    prev_le, prev_c = 0.0, 0.0
    for le, c in bs:
        if c >= rank:
            if math.isinf(le):
                return prev_le        # the highest finite bound, as Prometheus answers
            if c == prev_c:
                return le
            return prev_le + (le - prev_le) * (rank - prev_c) / (c - prev_c)
        prev_le, prev_c = le, c
    return prev_le


class MetricsScraper:
    """GET one vc-scheduler's /metrics and reduce it to :func:`volcano_figures`."""

    def __init__(self, url: str, *, timeout_s: float = 2.0):
        self.url = url
        self.timeout_s = timeout_s

    def text(self) -> str:
        try:
            with urllib.request.urlopen(self.url, timeout=self.timeout_s) as resp:   # noqa: S310 — loopback
                return resp.read().decode("utf-8", "replace")
        except (urllib.error.URLError, OSError, TimeoutError) as e:
            raise MetricsUnavailable(f"GET {self.url}: {getattr(e, 'reason', e)}") from None

    def scrape(self) -> dict[str, Any]:
        # only Volcano's families are kept: the page is mostly Go runtime and client-go series
        text = "\n".join(ln for ln in self.text().splitlines() if ln.startswith("volcano_"))
        try:
            return volcano_figures(parse_prometheus(text))
        except MetricsFormatError as e:
            raise MetricsUnavailable(f"{self.url}: {e}") from None
