"""Client-side resilience for faults that cut Redis (``partition``, ``redis-restart``): API clients
whose calls retry with tenacity on connection errors (exponential backoff with jitter, bounded by a
deadline). API errors (409, 404, 410 ...) are answers, not outages: they are never retried here.

A write whose reply was lost may have been applied: its retry then gets the API server's answer to
a repeat (AlreadyExists for a create, Conflict for a bind) -- as a Kubernetes client would.
"""
from __future__ import annotations

import logging
from typing import Any

import redis.exceptions as rex
from tenacity import (AsyncRetrying, Retrying, retry_if_exception_type, stop_after_delay,
                      wait_random_exponential)

__all__ = ["RetryingApiClient", "AsyncRetryingApiClient", "OUTAGE_ERRORS", "RetryStats"]

log = logging.getLogger("ha.runtime.retry")

OUTAGE_ERRORS = (rex.ConnectionError, rex.TimeoutError, ConnectionError, TimeoutError)
_PASSTHROUGH = frozenset({"close", "aclose", "prefix", "store", "keys", "redis", "stream_key"})


class RetryStats:
    def __init__(self) -> None:
        self.calls = 0
        self.retries = 0
        self.gave_up = 0

    def as_dict(self) -> dict:
        return dict(self.__dict__)


class _Base:
    def __init__(self, inner: Any, *, deadline_s: float = 60.0, initial_s: float = 0.05,
                 max_wait_s: float = 2.0) -> None:
        self.inner = inner
        self.deadline_s = deadline_s
        self.initial_s = initial_s
        self.max_wait_s = max_wait_s
        self.retry_stats = RetryStats()

    def _before_sleep(self, state) -> None:
        self.retry_stats.retries += 1
        if self.retry_stats.retries <= 5 or self.retry_stats.retries % 100 == 0:
            log.info("retrying %s after %r (attempt %d)", getattr(state.fn, "__name__", "?"),
                     state.outcome.exception(), state.attempt_number)

    def _kw(self) -> dict:
        return dict(retry=retry_if_exception_type(OUTAGE_ERRORS),
                    wait=wait_random_exponential(multiplier=self.initial_s, max=self.max_wait_s),
                    stop=stop_after_delay(self.deadline_s), reraise=True,
                    before_sleep=self._before_sleep)


class RetryingApiClient(_Base):
    """Wraps a sync ``ApiClient``: every verb retries on outages (see the module doc)."""

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name in _PASSTHROUGH or not callable(attr):
            return attr

        def call(*args, **kw):
            self.retry_stats.calls += 1
            try:
                for attempt in Retrying(**self._kw()):
                    with attempt:
                        return attr(*args, **kw)
            except OUTAGE_ERRORS:
                self.retry_stats.gave_up += 1
                raise
        call.__name__ = name
        return call


class AsyncRetryingApiClient(_Base):
    """Wraps an ``AsyncApiClient`` likewise (awaitable verbs)."""

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name in _PASSTHROUGH or not callable(attr):
            return attr

        async def call(*args, **kw):
            self.retry_stats.calls += 1
            try:
                async for attempt in AsyncRetrying(**self._kw()):
                    with attempt:
                        return await attr(*args, **kw)
            except OUTAGE_ERRORS:
                self.retry_stats.gave_up += 1
                raise
        call.__name__ = name
        return call
