"""api-conflict: with a probability per call, a covered write of the instance is not made and
fails with 409 Conflict (a write that lost a race); ``bind_many`` draws per binding.

Injector: :class:`chaos.injectors.api.ApiChaos` around the instance's API client.
"""
from __future__ import annotations

from typing import Optional

from pydantic import Field

from chaos.faults.base import Draw, HookFault
from chaos.faults.fields import WRITE_VERBS, FaultParams, For, Probability, Target, Verbs


class Params(FaultParams):
    probability: Probability
    target: Target = "all"
    for_: Optional[For] = Field(None, alias="for")
    verbs: Verbs = Field(list(WRITE_VERBS), description="the API verbs it acts on (default: the writes)")


class ApiConflict(HookFault):
    name = "api-conflict"
    doc = "the instance's writes fail with 409 Conflict with a probability"
    order = 90
    Params = Params
    default_target = "all"
    injector = "api"
    example = {"at": "5s", "for": "20s", "fault": "api-conflict", "probability": 0.2,
               "verbs": ["bind", "bind_many"]}
    draw = Draw("span", "api conflict", "slateblue")


FAULT = ApiConflict()
