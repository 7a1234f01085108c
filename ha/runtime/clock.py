"""A local monotonic clock whose rate can be scaled at run time (the clock-rate fault).

Leader election uses only locally captured timestamps (client-go's rule), so it tolerates skew but
not a different clock *rate*: an instance whose clock runs at 0.5x believes its lease is still
valid twice as long as it really is. ``ScaledClock(rate)`` reproduces that: ``monotonic()``
advances ``rate`` seconds per real second, and ``sleep(d)`` sleeps ``d / rate`` real seconds.
Changing the rate is continuous (no jump): the clock is rebased at the moment of the change.
``now()`` is the wall clock (seconds since the epoch, unscaled: timestamps in records and the
scheduler model's time — ``ha.scheduler.interfaces.Clock``).
"""
from __future__ import annotations

import asyncio
import threading
import time

__all__ = ["ScaledClock", "Clock"]


class ScaledClock:
    def __init__(self, rate: float = 1.0, *, real=time.monotonic, wall=time.time):
        if rate <= 0:
            raise ValueError(f"clock rate must be > 0, got {rate}")
        self._real = real
        self._wall = wall
        self._lock = threading.Lock()
        self._rate = float(rate)
        self._real0 = real()
        self._local0 = self._real0

    @property
    def rate(self) -> float:
        return self._rate

    def set_rate(self, rate: float) -> None:
        if rate <= 0:
            raise ValueError(f"clock rate must be > 0, got {rate}")
        with self._lock:
            now_real = self._real()
            self._local0 = self._local0 + (now_real - self._real0) * self._rate
            self._real0 = now_real
            self._rate = float(rate)

    def now(self) -> float:
        return self._wall()

    def monotonic(self) -> float:
        with self._lock:
            return self._local0 + (self._real() - self._real0) * self._rate

    def real_seconds(self, local_seconds: float) -> float:
        """How many real seconds ``local_seconds`` of this clock take at the current rate."""
        return max(0.0, local_seconds) / self._rate

    async def sleep(self, local_seconds: float) -> None:
        await asyncio.sleep(self.real_seconds(local_seconds))


Clock = ScaledClock
