"""A cold standby that wins the Lease schedules as vc-scheduler does: its informers list and sync,
then its first session runs at once and the next a period later (``Run()``: ``cache.Run``, then
``wait.Until(runOnce, period)``, which calls ``runOnce`` before its first wait) -- not at the next
tick of a session loop that has been ticking since the process started.

examples/seed000-current-vs-proposed.yaml on the sim engine with cold standbys, the leader killed at
12 s: the new leader's first decision comes within a small part of the period after the Lease's
acquireTime, and the failover is timed from that acquireTime (``failover_recovery_s``), not from the
measuring tick that read the Lease after those first binds."""
from __future__ import annotations

from pathlib import Path

import yaml
from typer.testing import CliRunner

from ha.cli import app
from ha.experiment.checkers import failover_recovery_s as frs
from ha.experiment.history import History

ROOT = Path(__file__).resolve().parents[2]


def test_new_leader_sessions_at_once_after_winning(tmp_path):
    data = yaml.safe_load((ROOT / "examples" / "seed000-current-vs-proposed.yaml").read_text())
    data["schedulers"]["standby"] = "cold"
    exp = tmp_path / "cold.yaml"
    exp.write_text(yaml.safe_dump(data))
    out = tmp_path / "run"
    r = CliRunner().invoke(app, ["run", str(exp), "--engine", "sim", "--seed", "1", "--profile", "v1.14",
                                 "--out", str(out)])
    assert r.exit_code == 0, r.output
    h = History(out)
    period = 1.0
    kill = next(x for x in h.lives() if x.get("event") == "kill")
    after = [(t, who) for t, who in frs.takeovers(h) if t >= kill["t"]]
    assert after, "nobody took over after the kill"
    t_won, who = after[0]
    first = min(float(d["t"]) for d in h.decisions() if d.get("instance") == who and float(d["t"]) >= t_won)
    # informers synced (a list in sim takes no virtual time to speak of) and the session ran at once
    assert first - t_won < 0.25 * period
    # the recovery counts from the win: the new leader's first bind at or after it
    first_bind = min(float(d["t"]) for d in h.decisions()
                     if d.get("instance") == who and d.get("op") == "bind" and d.get("ok") and float(d["t"]) >= t_won)
    assert frs.check(h) == round(first_bind - kill["t"], 3)
