"""``HA_PROFILE_SESSIONS=<dir>``: a cProfile of each session's own thread, one file a session.

A session at scale is seconds of Python; which part grows is a question a profile answers and a
wall time does not. The profile covers the session worker's thread only (the informers and the
bind worker run on others), and roughly doubles the session's time: a run with it on measures
where the time goes, not how much there is.
"""
from __future__ import annotations

import cProfile
import os
from contextlib import contextmanager
from typing import Iterator

from ha.scheduler.acceleration import Acceleration

__all__ = ["ENV", "session_profile"]

ENV = "HA_PROFILE_SESSIONS"


@contextmanager
def session_profile(instance: str, session: int, directory: str | None = None) -> Iterator[str | None]:
    """Profile the block into ``<dir>/<instance>-<pid>-<session>.pstats`` when ``directory`` (else
    the environment's ``HA_PROFILE_SESSIONS``) names one; yields that path, or None."""
    d = directory if directory is not None else Acceleration.from_environ().profile_sessions
    if not d:
        yield None
        return
    path = os.path.join(d, f"{instance}-{os.getpid()}-{session:05d}.pstats")
    prof = cProfile.Profile()
    prof.enable()
    try:
        yield path
    finally:
        prof.disable()
        os.makedirs(d, exist_ok=True)
        prof.dump_stats(path)
