"""crash-point: the instance crashes in the middle of one commit — between two of its writes —
the first time it reaches the named point while armed (Sieve's intermediate-state class):

* ``after-evictions``: the evictions were written (each a condition write and a graceful delete of
  the victim), the next write (the preemptor's nomination or condition) is not: the victims go, the
  reservation is never recorded;
* ``before-nomination-write``: Cache.Pipeline changed the instance's cache, its status write
  carrying ``nominatedNodeName`` is not sent: the reservation dies with the process (any status
  write that carries a nomination is taken for it);
* ``between-gang-binds``: of a batch of binds (a gang's tasks), the first is written and the rest
  are not: a partly bound gang.

The crash is a SIGKILL-like exit of the instance's process (its lease is not released), taken
inside the write path, so nothing after the point runs. Armed from ``at`` for ``for`` (default: to
the end of the run); one crash per life.

Injector: :class:`chaos.injectors.api.ApiChaos` around the instance's API client (the point is
recognised from the writes themselves), which calls the environment's ``crash``.
"""
from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field

from chaos.faults.base import Draw, HookFault
from chaos.faults.fields import FaultParams, For, Target

POINTS = ("after-evictions", "before-nomination-write", "between-gang-binds")


class Params(FaultParams):
    target: Target
    for_: Optional[For] = Field(None, alias="for")
    point: Literal["after-evictions", "before-nomination-write", "between-gang-binds"] = Field(
        description="where in a commit the instance crashes: after-evictions, "
                    "before-nomination-write, between-gang-binds")


class CrashPoint(HookFault):
    name = "crash-point"
    doc = "the instance crashes between two writes of one commit (an intermediate state)"
    order = 200
    Params = Params
    targets = ("instance", "leader")
    injector = "api"
    example = {"at": "5s", "for": "20s", "fault": "crash-point", "target": "leader",
               "point": "before-nomination-write"}
    draw = Draw("span", "crash point armed", "darkred")


FAULT = CrashPoint()
