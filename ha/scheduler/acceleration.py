"""The acceleration settings: switches that make the model faster and never change a result, so an
experiment file has no say in them and the environment sets them. Read once, into one
:class:`Acceleration`, when a scheduler cache is built (``SchedulerCache(acceleration=...)``, the
environment's when not given); the cache hands it to every session it opens, and everything that
used to read an environment variable reads the object it was given. A run records the settings it
ran with in metrics.json (``acceleration``), so two runs' figures can be told apart.

============================  ==========================  =============================================
field                         environment                 what it turns on or off
============================  ==========================  =============================================
``allocate_fastpath``         ``HA_ALLOCATE_FASTPATH=0``  allocate's vectorised node scan and scores
                                                          (``actions/allocate/fastpath.py``; off: the
                                                          scalar path, identical results)
``snapshot_reuse``            ``HA_SNAPSHOT_REUSE=0``     a session gets the last session's clone of a
                                                          node or job nothing changed since
                                                          (``snapshot_reuse.py``; off: every one cloned)
``verify_snapshot_reuse``     ``HA_VERIFY_SNAPSHOT_REUSE  every reuse (and every derivation kept with a
                              =1``                        clone) checked against a fresh one; the test
                                                          suite sets it
``profile_sessions``          ``HA_PROFILE_SESSIONS=DIR`` a cProfile of each session's thread into DIR
                                                          (``ha.runtime.session_profile``)
============================  ==========================  =============================================
"""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import Any, Mapping

__all__ = ["Acceleration", "ENVIRONMENT", "acceleration_of"]

# field -> the environment variable that sets it
ENVIRONMENT: dict[str, str] = {
    "allocate_fastpath": "HA_ALLOCATE_FASTPATH",
    "snapshot_reuse": "HA_SNAPSHOT_REUSE",
    "verify_snapshot_reuse": "HA_VERIFY_SNAPSHOT_REUSE",
    "profile_sessions": "HA_PROFILE_SESSIONS",
}

_OFF = ("0", "false", "off", "no")


@dataclass(frozen=True)
class Acceleration:
    allocate_fastpath: bool = True
    snapshot_reuse: bool = True
    verify_snapshot_reuse: bool = False
    profile_sessions: str = ""          # a folder; "" = no profiles

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> "Acceleration":
        env = os.environ if environ is None else environ
        return cls(
            allocate_fastpath=env.get(ENVIRONMENT["allocate_fastpath"], "1").lower() not in _OFF,
            snapshot_reuse=env.get(ENVIRONMENT["snapshot_reuse"], "1") != "0",
            verify_snapshot_reuse=env.get(ENVIRONMENT["verify_snapshot_reuse"], "") == "1",
            profile_sessions=env.get(ENVIRONMENT["profile_sessions"], "") or "",
        )

    def as_record(self) -> dict[str, Any]:
        """The settings as metrics.json's ``acceleration`` holds them."""
        return asdict(self)


def acceleration_of(holder: Any) -> Acceleration:
    """The settings a cache or a session was given. A stand-in without any (a test's fake cache)
    gets the environment's, read now."""
    acc = getattr(holder, "acceleration", None)
    return acc if isinstance(acc, Acceleration) else Acceleration.from_environ()
