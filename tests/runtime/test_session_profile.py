"""HA_PROFILE_SESSIONS: one cProfile file a session, of the session's own work; nothing without it."""
from __future__ import annotations

import os
import pstats

from ha.runtime.session_profile import ENV, session_profile
from ha.scheduler.scheduler import run_session

from tests.scheduler.fw_helpers import GANG_ALL, PREDICATES, conf, make_cache, node, pod, podgroup


def _session() -> None:
    cache = make_cache("v1.14", nodes=[node("n1", 4000)], podgroups=[podgroup("pg", 1)],
                       pods=[pod("p1", "pg", 1000)])[0]
    assert run_session(cache, conf(["allocate"], [[GANG_ALL, PREDICATES]]), seed=1).binds == {"ns/p1": "n1"}


def test_each_session_gets_its_profile_file(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV, str(tmp_path / "prof"))
    for n in (3, 4):
        with session_profile("scheduler-1", n) as path:
            _session()
        assert path == str(tmp_path / "prof" / f"scheduler-1-{os.getpid()}-{n:05d}.pstats")
    files = sorted(os.listdir(tmp_path / "prof"))
    assert files == [f"scheduler-1-{os.getpid()}-00003.pstats", f"scheduler-1-{os.getpid()}-00004.pstats"]
    st = pstats.Stats(str(tmp_path / "prof" / files[0]))
    funcs = {f"{os.path.basename(fn)}:{name}" for fn, _, name in st.stats}
    assert "scheduler.py:run_session" in funcs and "allocate.py:execute" in funcs


def test_no_profile_without_the_variable(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    with session_profile("scheduler-1", 1) as path:
        _session()
    assert path is None
    with session_profile("scheduler-1", 1, directory=str(tmp_path)) as path:
        pass
    assert os.listdir(tmp_path) == [os.path.basename(path)]
